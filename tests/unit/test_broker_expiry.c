/* Expiry, as Artemis's ExpiryAddressTest and ExpiryDelay tests have it: an expired
 * message never reaches a consumer; it goes to the expiry address with
 * _AMQ_ORIG_ADDRESS, _AMQ_ORIG_QUEUE and _AMQ_ACTUAL_EXPIRY set and no expiration, or is
 * dropped without one; the address and an EXP.<address> queue are made when
 * auto-create-expiry-resources says so; expiry-delay gives a message an expiration,
 * min/max-expiry-delay clamp one; the periodic scan finds expired messages no consumer
 * asks for. */
#include <time.h>

#include "mqr/broker.h"
#include "testutil.h"

static const char yaml[] = "address-settings:\n"
                           "  'e.#': {expiry-address: EXPIRED}\n"
                           "  'auto.#': {expiry-address: AUTOEXP, auto-create-expiry-resources: true}\n"
                           "  'delay.#': {expiry-delay: 60000}\n"
                           "  'clamp.#': {min-expiry-delay: 10000, max-expiry-delay: 20000}\n"
                           "addresses:\n"
                           "  EXPIRED: {anycast: [expired]}\n"
                           "  e.a: {anycast: [e.a]}\n"
                           "  auto.a: {anycast: [auto.a]}\n"
                           "  none.a: {anycast: [none.a]}\n"
                           "  delay.a: {anycast: [delay.a]}\n"
                           "  clamp.a: {anycast: [clamp.a]}\n";

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

/* scan_ms the option's; extra a line before the config (a top-level key). */
static void fx_open_with(fx_t *f, uint32_t scan_ms, const char *extra) {
  uv_loop_init(&f->loop);
  char text[2048];
  int n = snprintf(text, sizeof text, "%s%s", extra, yaml);
  if (mqr_config_load_string("e.yaml", text, (size_t)n, &f->cfg, NULL) != 0) fail_msg("config");
  mqr_broker_options_t opt = {.config = f->cfg, .expiry_scan_ms = scan_ms};
  mqr_error_t err;
  if (mqr_broker_create(&f->loop, &opt, &f->b, &err) != 0) fail_msg("%s", err.message);
}

static void fx_open(fx_t *f, uint32_t scan_ms) { fx_open_with(f, scan_ms, ""); }

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

static void send_exp(fx_t *f, const char *address, const char *body, int64_t expiration) {
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = MQR_ANYCAST,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .expiration = expiration,
                            .body = mqr_str(body)};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

typedef struct {
  int n;
  char body[32], orig_address[32], orig_queue[32];
  int64_t expiration, actual_expiry;
} rx_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  rx->n++;
  snprintf(rx->body, sizeof rx->body, "%.*s", (int)m->body.len, m->body.ptr);
  rx->expiration = m->expiration;
  rx->actual_expiry = 0;
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++) {
    mqr_str_t k = m->properties.keys[i];
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_ADDRESS")))
      snprintf(rx->orig_address, 32, "%.*s", (int)v[i].u.s.len, v[i].u.s.ptr);
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_QUEUE")))
      snprintf(rx->orig_queue, 32, "%.*s", (int)v[i].u.s.len, v[i].u.s.ptr);
    if (mqr_str_eq(k, MQR_STR("_AMQ_ACTUAL_EXPIRY")) && v[i].type == MQR_VALUE_LONG) rx->actual_expiry = v[i].u.l;
  }
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void take(fx_t *f, const char *q, rx_t *rx) {
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, rx,
                                        &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
}

static mqr_broker_queue_stats_t stats(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(q), &st), 0);
  assert_true(st.enqueued ==
              st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  return st;
}

/* An expired message is not delivered: the consumer gets the live one behind it, and the
 * expired one is on the expiry address with its origin and when it expired. */
static void test_expired_message_goes_to_the_expiry_address(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  int64_t now = wall_ms();
  send_exp(&f, "e.a", "old", now - 1);
  send_exp(&f, "e.a", "live", now + 600000);
  rx_t rx = {0};
  take(&f, "e.a", &rx);
  assert_int_equal(rx.n, 1);
  assert_string_equal(rx.body, "live");
  assert_int_equal(rx.expiration, now + 600000);
  mqr_broker_queue_stats_t st = stats(&f, "e.a");
  assert_int_equal(st.expired, 1);
  rx_t ex = {0};
  take(&f, "expired", &ex);
  assert_int_equal(ex.n, 1);
  assert_string_equal(ex.body, "old");
  assert_string_equal(ex.orig_address, "e.a");
  assert_string_equal(ex.orig_queue, "e.a");
  assert_int_equal(ex.expiration, 0);
  assert_true(ex.actual_expiry >= now && ex.actual_expiry < now + 60000);
  fx_close(&f);
}

/* Without an expiry address: dropped. With auto-create-expiry-resources: the address and
 * EXP.<address> are made. */
static void test_without_an_address_dropped_or_made(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  int64_t now = wall_ms();
  send_exp(&f, "none.a", "x", now - 1);
  rx_t rx = {0};
  take(&f, "none.a", &rx);
  assert_int_equal(rx.n, 0);
  assert_int_equal(stats(&f, "none.a").expired, 1);
  send_exp(&f, "auto.a", "y", now - 1);
  take(&f, "auto.a", &rx);
  assert_int_equal(rx.n, 0);
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("EXP.auto.a"));
  assert_non_null(q);
  assert_true(mqr_str_eq(mqr_queue_filter(q), MQR_STR("_AMQ_ORIG_ADDRESS = 'auto.a'")));
  take(&f, "EXP.auto.a", &rx);
  assert_int_equal(rx.n, 1);
  assert_string_equal(rx.body, "y");
  fx_close(&f);
}

/* PostOfficeImpl.applyExpiryDelay: expiry-delay gives a message without an expiration
 * one and leaves one that has it; max-expiry-delay caps, min-expiry-delay raises. */
static void test_expiry_delays_at_the_send(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0);
  int64_t now = wall_ms();
  rx_t rx = {0};
  send_exp(&f, "delay.a", "none", 0);
  take(&f, "delay.a", &rx);
  assert_true(rx.expiration >= now + 60000 - 50 && rx.expiration <= wall_ms() + 60000);
  send_exp(&f, "delay.a", "own", now + 5000);
  take(&f, "delay.a", &rx);
  assert_int_equal(rx.expiration, now + 5000);
  send_exp(&f, "clamp.a", "soon", now + 1000); /* raised to now + 10 s */
  take(&f, "clamp.a", &rx);
  assert_true(rx.expiration >= now + 10000 - 50 && rx.expiration <= wall_ms() + 10000);
  send_exp(&f, "clamp.a", "late", now + 3600000); /* capped at now + 20 s */
  take(&f, "clamp.a", &rx);
  assert_true(rx.expiration >= now + 20000 - 50 && rx.expiration <= wall_ms() + 20000);
  send_exp(&f, "clamp.a", "never", 0); /* given the cap */
  take(&f, "clamp.a", &rx);
  assert_true(rx.expiration >= now + 20000 - 50 && rx.expiration <= wall_ms() + 20000);
  fx_close(&f);
}

static void guard_cb(uv_timer_t *t) { (void)t; }

/* The scan (every 50 ms here) moves a message that expires while nobody asks for it. */
/* The scan's period from the broker's option, or from the config's
 * message-expiry-scan-period. */
static void test_the_scan_finds_expired_messages(void **state) {
  (void)state;
  for (int from_config = 0; from_config < 2; from_config++) {
    fx_t f;
    if (from_config)
      fx_open_with(&f, 0, "message-expiry-scan-period: 50ms\n");
    else
      fx_open(&f, 50);
    send_exp(&f, "e.a", "waits", wall_ms() + 100);
    assert_int_equal(stats(&f, "e.a").depth, 1);
    int64_t t0 = wall_ms();
    /* The scan's timer does not hold the loop: a guard timer keeps it turning. */
    uv_timer_t guard;
    uv_timer_init(&f.loop, &guard);
    uv_timer_start(&guard, guard_cb, 5000, 0);
    while (stats(&f, "expired").depth == 0 && wall_ms() - t0 < 5000) uv_run(&f.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    assert_int_equal(stats(&f, "expired").depth, 1);
    assert_int_equal(stats(&f, "e.a").depth, 0);
    assert_int_equal(stats(&f, "e.a").expired, 1);
    assert_true(wall_ms() - t0 >= 90);
    fx_close(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expired_message_goes_to_the_expiry_address),
      cmocka_unit_test(test_without_an_address_dropped_or_made),
      cmocka_unit_test(test_expiry_delays_at_the_send),
      cmocka_unit_test(test_the_scan_finds_expired_messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
