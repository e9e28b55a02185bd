/* What comes back unacknowledged, as Artemis's DeadLetterAddressTest and
 * DeliveryOrderTest/RedeliveryTest have it: a message whose delivery count reaches
 * max-delivery-attempts goes to the dead-letter address with its origin stamped on it
 * (_AMQ_ORIG_ADDRESS, _AMQ_ORIG_QUEUE), or is dropped without one; the dead-letter
 * address and a queue per original address are made when
 * auto-create-dead-letter-resources says so; redelivery-delay holds a message back,
 * growing by its multiplier up to max-redelivery-delay; all of it kept across a restart
 * where the journal keeps the message. */
#include <time.h>

#include "broker_fx.h"

static const char yaml_fmt[] = "%s"
                               "address-settings:\n"
                               "  '#': {max-delivery-attempts: 3}\n"
                               "  'work': {dead-letter-address: DLA}\n"
                               "  'once.#': {max-delivery-attempts: 1, dead-letter-address: DLA}\n"
                               "  'nodla.#': {max-delivery-attempts: 1}\n"
                               "  'auto.#': {max-delivery-attempts: 1, dead-letter-address: AUTODLA,\n"
                               "             auto-create-dead-letter-resources: true, dead-letter-queue-suffix: .dlq}\n"
                               "  'later.#': {max-delivery-attempts: -1, redelivery-delay: 600}\n"
                               "  'slow.#': {max-delivery-attempts: -1, redelivery-delay: 100,\n"
                               "             redelivery-delay-multiplier: 2, max-redelivery-delay: 300}\n"
                               "addresses:\n"
                               "  DLA: {anycast: [dlq]}\n"
                               "  work: {anycast: [work]}\n"
                               "  once.a: {anycast: [once.a]}\n"
                               "  nodla.a: {anycast: [nodla.a]}\n"
                               "  auto.a: {anycast: [auto.a]}\n"
                               "  auto.b: {anycast: [auto.b]}\n"
                               "  slow.a: {anycast: [slow.a]}\n"
                               "  later.a: {anycast: [later.a]}\n";

static void fx_open(fx_t *f, bool durable) { fx_open_yaml(f, yaml_fmt, durable); }

static void send_one(fx_t *f, const char *address, const char *body, bool durable) {
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = MQR_ANYCAST,
                            .durable = durable,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = mqr_str(body)};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

typedef struct {
  int n;
  char body[32], orig_address[32], orig_queue[32];
  int32_t count;
  bool ack;
} rx_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  rx->n++;
  rx->count = m->delivery_count;
  snprintf(rx->body, sizeof rx->body, "%.*s", (int)m->body.len, m->body.ptr);
  rx->orig_address[0] = rx->orig_queue[0] = 0;
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++) {
    mqr_str_t k = m->properties.keys[i];
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_ADDRESS")) && v[i].type == MQR_VALUE_STRING)
      snprintf(rx->orig_address, 32, "%.*s", (int)v[i].u.s.len, v[i].u.s.ptr);
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_QUEUE")) && v[i].type == MQR_VALUE_STRING)
      snprintf(rx->orig_queue, 32, "%.*s", (int)v[i].u.s.len, v[i].u.s.ptr);
  }
  if (rx->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

/* Takes one delivery from queue q and goes without acknowledging it: a failed delivery. */
static void fail_once(fx_t *f, const char *q, rx_t *rx) {
  mqr_broker_consumer_t *c;
  rx->ack = false;
  int before = rx->n;
  assert_int_equal(
      mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_msg, rx, &c, NULL, NULL),
      0);
  assert_int_equal(rx->n, before + 1);
  mqr_broker_unsubscribe(c);
}

static mqr_broker_queue_stats_t stats(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(q), &st), 0);
  assert_true(st.enqueued ==
              st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  return st;
}

/* Takes what queue q holds now (at most one message) into rx, acknowledged. */
static void drain(fx_t *f, const char *q, rx_t *rx) {
  mqr_broker_consumer_t *c;
  rx->ack = true;
  assert_int_equal(mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, rx,
                                        &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
}

/* max-delivery-attempts 3: delivered three times (counts 1, 2, 3), then to the DLA, with
 * its origin stamped; the queue counts it killed. */
static void test_third_failure_goes_to_the_dead_letter_address(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "work", "w1", false);
  rx_t rx = {0};
  for (int i = 1; i <= 3; i++) {
    fail_once(&f, "work", &rx);
    assert_int_equal(rx.count, i);
  }
  mqr_broker_queue_stats_t st = stats(&f, "work");
  assert_int_equal(st.depth, 0);
  assert_int_equal(st.killed, 1);
  rx_t dl = {0};
  drain(&f, "dlq", &dl);
  assert_int_equal(dl.n, 1);
  assert_string_equal(dl.body, "w1");
  assert_int_equal(dl.count, 1); /* a new message there */
  assert_string_equal(dl.orig_address, "work");
  assert_string_equal(dl.orig_queue, "work");
  fx_close(&f);
}

/* max-delivery-attempts 1 without a dead-letter address: dropped (Artemis logs and
 * acknowledges it). */
static void test_without_a_dead_letter_address_it_is_dropped(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "nodla.a", "x", false);
  rx_t rx = {0};
  fail_once(&f, "nodla.a", &rx);
  mqr_broker_queue_stats_t st = stats(&f, "nodla.a");
  assert_int_equal(st.depth, 0);
  assert_int_equal(st.killed, 1);
  assert_int_equal(stats(&f, "dlq").depth, 0);
  fx_close(&f);
}

/* auto-create-dead-letter-resources: the DLA is made, MULTICAST, with a queue per
 * original address (prefix DLQ., suffix .dlq here) filtered on _AMQ_ORIG_ADDRESS, so
 * each address's dead letters stay apart. */
static void test_dead_letter_resources_are_made(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_router_t *r = mqr_broker_router(f.b);
  assert_null(mqr_router_find_address(r, MQR_STR("AUTODLA")));
  send_one(&f, "auto.a", "a1", false);
  send_one(&f, "auto.b", "b1", false);
  rx_t rx = {0};
  fail_once(&f, "auto.a", &rx);
  fail_once(&f, "auto.b", &rx);
  mqr_address_t *dla = mqr_router_find_address(r, MQR_STR("AUTODLA"));
  assert_non_null(dla);
  assert_true(mqr_routing_set_contains(mqr_address_routing_types(dla), MQR_MULTICAST));
  mqr_queue_t *qa = mqr_router_find_queue(r, MQR_STR("DLQ.auto.a.dlq"));
  assert_non_null(qa);
  assert_true(mqr_str_eq(mqr_queue_filter(qa), MQR_STR("_AMQ_ORIG_ADDRESS = 'auto.a'")));
  assert_true(mqr_queue_auto_created(qa));
  assert_int_equal(stats(&f, "DLQ.auto.a.dlq").depth, 1);
  assert_int_equal(stats(&f, "DLQ.auto.b.dlq").depth, 1);
  rx_t dl = {0};
  drain(&f, "DLQ.auto.b.dlq", &dl);
  assert_string_equal(dl.body, "b1");
  assert_string_equal(dl.orig_address, "auto.b");
  fx_close(&f);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs the loop until queue q has a message waiting (at most 5 s); returns the ms it took. */
static uint64_t wait_back(fx_t *f, const char *q) {
  uint64_t t0 = now_ms();
  while (stats(f, q).depth == 0 && now_ms() - t0 < 5000) uv_run(&f->loop, UV_RUN_ONCE);
  return now_ms() - t0;
}

/* redelivery-delay 100 ms, multiplier 2, at most 300: a failed message is held out of
 * the queue (held, not waiting) for 100, then 200, then 300 ms (capped), then comes back
 * to the head; a purge takes a held message too. */
static void test_redelivery_delay_grows_to_its_maximum(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "slow.a", "s", false);
  rx_t rx = {0};
  const uint64_t want[] = {100, 200, 300, 300};
  for (int i = 0; i < 4; i++) {
    fail_once(&f, "slow.a", &rx);
    mqr_broker_queue_stats_t st = stats(&f, "slow.a");
    assert_int_equal(st.held, 1);
    assert_int_equal(st.depth, 0);
    uint64_t took = wait_back(&f, "slow.a");
    if (took + 5 < want[i]) /* never sooner; later only as the machine is slow */
      fail_msg("delay %d: back after %llu ms, before %llu", i, (unsigned long long)took, (unsigned long long)want[i]);
    assert_int_equal(stats(&f, "slow.a").held, 0);
  }
  fail_once(&f, "slow.a", &rx);
  assert_int_equal(rx.count, 5);
  assert_int_equal(mqr_broker_purge(f.b, mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("slow.a"))), 1);
  mqr_broker_queue_stats_t st = stats(&f, "slow.a");
  assert_int_equal(st.held, 0);
  assert_int_equal(st.depth, 0);
  fx_close(&f); /* nothing left held: LeakSanitizer would say */
}

/* A message held at close goes with the broker cleanly; a consumer that goes because the
 * broker closes is no failed delivery. */
static void test_close_with_held_messages(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "slow.a", "held", false);
  send_one(&f, "once.a", "o", false);
  rx_t rx = {0};
  fail_once(&f, "slow.a", &rx);
  assert_int_equal(stats(&f, "slow.a").held, 1);
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("once.a"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_msg,
                                        &rx, &c, NULL, NULL),
                   0);
  uint64_t dlq_before = stats(&f, "dlq").enqueued;
  mqr_broker_close(f.b, NULL, NULL); /* its consumer goes with it: no dead letter */
  assert_int_equal(stats(&f, "dlq").enqueued, dlq_before);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  mqr_config_destroy(f.cfg);
}

/* With persistence: the dead letter is journaled on the DLA's queue and gone from its
 * own, across a restart. */
static void test_dead_letter_survives_a_restart(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  send_one(&f, "once.a", "durable", true);
  settle(&f);
  rx_t rx = {0};
  fail_once(&f, "once.a", &rx);
  settle(&f);
  assert_int_equal(stats(&f, "dlq").depth, 1);
  fx_close(&f);
  fx_open(&f, true);
  assert_int_equal(stats(&f, "once.a").depth, 0);
  assert_int_equal(stats(&f, "dlq").depth, 1);
  rx_t dl = {0};
  drain(&f, "dlq", &dl);
  assert_string_equal(dl.body, "durable");
  assert_string_equal(dl.orig_queue, "once.a");
  settle(&f);
  fx_close(&f);
}

/* A durable message waiting out its redelivery delay when the broker stops waits out the
 * rest of it after the restart (Artemis keeps a redelivered message's scheduled time). */
static void test_redelivery_delay_survives_a_restart(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  send_one(&f, "later.a", "held", true);
  settle(&f);
  rx_t rx = {0};
  fail_once(&f, "later.a", &rx);
  assert_int_equal(stats(&f, "later.a").held, 1);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  mqr_broker_queue_stats_t st = stats(&f, "later.a");
  assert_int_equal(st.held, 1);
  assert_int_equal(st.depth, 0);
  for (int i = 0; i < 200 && stats(&f, "later.a").held; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(5000);
  st = stats(&f, "later.a");
  assert_int_equal(st.held, 0);
  assert_int_equal(st.depth, 1);
  rx_t got = {0};
  drain(&f, "later.a", &got);
  assert_string_equal(got.body, "held");
  assert_int_equal(got.count, 2); /* its second delivery */
  settle(&f);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_third_failure_goes_to_the_dead_letter_address),
      cmocka_unit_test(test_without_a_dead_letter_address_it_is_dropped),
      cmocka_unit_test(test_dead_letter_resources_are_made),
      cmocka_unit_test(test_redelivery_delay_grows_to_its_maximum),
      cmocka_unit_test(test_close_with_held_messages),
      cmocka_unit_test(test_dead_letter_survives_a_restart),
      cmocka_unit_test(test_redelivery_delay_survives_a_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
