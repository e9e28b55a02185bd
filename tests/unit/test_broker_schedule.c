/* Scheduled delivery, as Artemis's ScheduledMessageTest has it: a message whose
 * _AMQ_SCHED_DELIVERY (ms since the epoch) is later than now waits out of its queue
 * (counted scheduled) and is delivered once its time comes, while messages sent after
 * it go first; a time already past is no wait; a durable scheduled message waits again
 * after a restart; a purge takes a waiting one too. */
#include <time.h>

#include "mqr/broker.h"
#include "test_dir.h"

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static void fx_open(fx_t *f) {
  char yaml[512];
  int n = snprintf(yaml, sizeof yaml, "persistence:\n  directory: %s\naddresses:\n  s: {anycast: [s]}\n", dir);
  uv_loop_init(&f->loop);
  if (mqr_config_load_string("s.yaml", yaml, (size_t)n, &f->cfg, NULL) != 0) fail_msg("config");
  mqr_broker_options_t opt = {.config = f->cfg};
  mqr_error_t err;
  if (mqr_broker_create(&f->loop, &opt, &f->b, &err) != 0) fail_msg("%s", err.message);
}

static void fx_close(fx_t *f) {
  mqr_broker_close(f->b, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  mqr_config_destroy(f->cfg);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_at(fx_t *f, const char *body, int64_t at, bool durable) {
  mqr_str_t k = MQR_STR(MQR_PROP_SCHEDULED);
  mqr_value_t v = mqr_value_long(at);
  mqr_broker_message_t m = {.address = MQR_STR("s"),
                            .routing_type = MQR_ANYCAST,
                            .durable = durable,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .property_keys = &k,
                            .property_values = &v,
                            .n_properties = at ? 1 : 0,
                            .body = mqr_str(body)};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

typedef struct {
  int n;
  char got[8][16];
} rx_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  if (rx->n < 8) snprintf(rx->got[rx->n], 16, "%.*s", (int)m->body.len, m->body.ptr);
  rx->n++;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static mqr_broker_queue_stats_t stats(fx_t *f) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, MQR_STR("s"), &st), 0);
  assert_true(st.enqueued ==
              st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  return st;
}

static void guard_cb(uv_timer_t *t) { (void)t; }

/* Runs the loop until rx has n messages or 5 s pass. */
static void wait_for(fx_t *f, rx_t *rx, int n) {
  uv_timer_t guard;
  uv_timer_init(&f->loop, &guard);
  uv_timer_start(&guard, guard_cb, 5000, 0);
  int64_t t0 = wall_ms();
  while (rx->n < n && wall_ms() - t0 < 5000) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void test_scheduled_message_waits_for_its_time(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  rx_t rx = {0};
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("s"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, &rx,
                                        &c, NULL, NULL),
                   0);
  int64_t now = wall_ms();
  send_at(&f, "later", now + 300, false);
  send_at(&f, "past", now - 1000, false); /* a time already past: no wait */
  send_at(&f, "now", 0, false);
  assert_int_equal(rx.n, 2);
  assert_string_equal(rx.got[0], "past");
  assert_string_equal(rx.got[1], "now");
  assert_int_equal(stats(&f).scheduled, 1);
  wait_for(&f, &rx, 3);
  assert_int_equal(rx.n, 3);
  assert_string_equal(rx.got[2], "later");
  if (wall_ms() < now + 300) fail_msg("delivered %lld ms early", (long long)(now + 300 - wall_ms()));
  assert_int_equal(stats(&f).scheduled, 0);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A durable scheduled message survives a restart and still waits; a purge takes it. */
static void test_scheduled_message_survives_a_restart(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  int64_t at = wall_ms() + 600;
  send_at(&f, "durable", at, true);
  send_at(&f, "purged", wall_ms() + 60000, true);
  for (int i = 0; i < 50 && stats(&f).scheduled < 2; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(1000);
  assert_int_equal(stats(&f).scheduled, 2);
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(stats(&f).scheduled, 2);
  assert_int_equal(stats(&f).depth, 0);
  rx_t rx = {0};
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("s"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, &rx,
                                        &c, NULL, NULL),
                   0);
  assert_int_equal(rx.n, 0);
  wait_for(&f, &rx, 1);
  assert_int_equal(rx.n, 1);
  assert_string_equal(rx.got[0], "durable");
  if (wall_ms() < at) fail_msg("delivered %lld ms early", (long long)(at - wall_ms()));
  assert_int_equal(mqr_broker_purge(f.b, mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("s"))), 1);
  assert_int_equal(stats(&f).scheduled, 0);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
  fx_open(&f); /* the purge was journaled */
  assert_int_equal(stats(&f).scheduled, 0);
  assert_int_equal(stats(&f).depth, 0);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scheduled_message_waits_for_its_time),
      cmocka_unit_test(test_scheduled_message_survives_a_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
