/* Auto-delete, as Artemis's AutoDeleteAddressTest and auto-delete-queues have it: a queue
 * the broker made goes once it has had a consumer and has none, holding no more than
 * auto-delete-queues-message-count messages (-1: any), after auto-delete-queues-delay; a
 * consumer coming back within the delay keeps it; its address goes after
 * auto-delete-addresses-delay; queues of the config, queues that never had a consumer and
 * addresses under auto-delete-* false stay; a durable one stays deleted after a restart. */
#include "broker_fx.h"

static const char yaml_fmt[] = "%s"
                               "address-settings:\n"
                               "  'keep.#': {auto-delete-queues: false}\n"
                               "  'any.#': {auto-delete-queues-message-count: -1}\n"
                               "  'slow.#': {auto-delete-queues-delay: 150, auto-delete-addresses-delay: 150}\n"
                               "addresses:\n"
                               "  cfg: {anycast: [cfg]}\n";

static void fx_open(fx_t *f, bool durable) { fx_open_yaml(f, yaml_fmt, durable); }

static void send1(fx_t *f, const char *address, bool durable) {
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = MQR_ANYCAST,
                            .durable = durable,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("m")};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
  for (int i = 0; durable && i < 30; i++) uv_run(&f->loop, UV_RUN_NOWAIT), usleep(1000); /* its fdatasync */
}

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  bool ack = arg != NULL;
  if (ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

/* A consumer comes (taking what the queue holds when ack) and goes. */
static void visit(fx_t *f, const char *q, bool ack) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  if (mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), ack ? 100 : 0, on_msg,
                           ack ? (void *)1 : NULL, &c, NULL, &err) != 0)
    fail_msg("subscribe %s: %s", q, err.message);
  mqr_broker_unsubscribe(c);
}

static bool has_queue(fx_t *f, const char *q) { return mqr_router_find_queue(mqr_broker_router(f->b), mqr_str(q)); }
static bool has_address(fx_t *f, const char *a) {
  return mqr_router_find_address(mqr_broker_router(f->b), mqr_str(a)) != NULL;
}

static void test_made_queues_go_when_unused(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send1(&f, "a", false);
  assert_true(has_queue(&f, "a")); /* never had a consumer: stays */
  visit(&f, "a", false);           /* its message is still there: stays */
  assert_true(has_queue(&f, "a"));
  visit(&f, "a", true); /* taken: it goes, and its address */
  assert_false(has_queue(&f, "a"));
  assert_false(has_address(&f, "a"));
  send1(&f, "any.a", false);
  visit(&f, "any.a", false); /* message-count -1: goes with its message */
  assert_false(has_queue(&f, "any.a"));
  send1(&f, "keep.a", false);
  visit(&f, "keep.a", true); /* auto-delete-queues false */
  assert_true(has_queue(&f, "keep.a"));
  send1(&f, "cfg", false);
  visit(&f, "cfg", true); /* the config's */
  assert_true(has_queue(&f, "cfg"));
  fx_close(&f);
}

static void guard_cb(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs the loop for about ms. */
static void run_for(fx_t *f, uint64_t ms) {
  uv_timer_t guard;
  bool fired = false;
  uv_timer_init(&f->loop, &guard);
  guard.data = &fired;
  uv_timer_start(&guard, guard_cb, ms, 0);
  while (!fired) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void test_delays(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send1(&f, "slow.a", false);
  visit(&f, "slow.a", true);
  assert_true(has_queue(&f, "slow.a")); /* within its delay */
  run_for(&f, 50);
  visit(&f, "slow.a", true); /* a consumer came back: the delay starts again */
  run_for(&f, 100);
  assert_true(has_queue(&f, "slow.a"));
  run_for(&f, 400);
  assert_false(has_queue(&f, "slow.a")); /* the queue went; the address waits its own delay */
  run_for(&f, 400);
  assert_false(has_address(&f, "slow.a"));
  fx_close(&f);
}

static void test_durable_stays_deleted(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  send1(&f, "d.a", true);
  visit(&f, "d.a", true);
  assert_false(has_queue(&f, "d.a"));
  send1(&f, "d.b", true); /* kept: never had a consumer */
  fx_close(&f);
  fx_open(&f, true);
  assert_false(has_queue(&f, "d.a"));
  assert_true(has_queue(&f, "d.b"));
  fx_close(&f);
}

/* Temporary subscriptions to addresses the broker made for them: each address goes with
 * its subscription's queue; one of the config, and one made by management, stay. Named
 * MULTICAST subscription queues (durable subscriptions) stay after their consumer. */
static void test_temporary_subscriptions_take_their_addresses(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_error_t err;
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("made"), mqr_routing_set_of(MQR_MULTICAST), &err), 0);
  for (int i = 0; i < 500; i++) {
    char name[32];
    snprintf(name, sizeof name, i == 0 ? "made" : i == 1 ? "cfg" : "tmp.%d", i);
    mqr_broker_consumer_t *c;
    if (mqr_broker_subscribe(f.b, mqr_str(name), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 10, on_msg, NULL, &c, NULL,
                             &err) != 0)
      fail_msg("subscribe %s: %s", name, err.message);
    mqr_broker_unsubscribe(c);
    if (i > 1) assert_false(has_address(&f, name));
  }
  assert_true(has_address(&f, "made"));
  assert_true(has_address(&f, "cfg"));
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("topic.d"), MQR_MULTICAST, MQR_STR("cid.sub"), MQR_STR(""), 10,
                                        on_msg, NULL, &c, NULL, &err),
                   0);
  mqr_broker_unsubscribe(c);
  assert_true(has_queue(&f, "cid.sub"));
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("cid.sub"), &err), 0);
  assert_false(has_address(&f, "topic.d")); /* the broker made it: it goes with its last queue */
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_made_queues_go_when_unused),
      cmocka_unit_test(test_temporary_subscriptions_take_their_addresses),
      cmocka_unit_test(test_delays),
      cmocka_unit_test(test_durable_stays_deleted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
