/* Management in the broker, as Artemis's AddressControlTest and QueueControlTest have it:
 * addresses and queues made and deleted at run time (a durable queue kept across a
 * restart, an address with queues refused unless forced, a queue with consumers
 * refused); a paused queue takes messages and delivers none until resumed, and a pause
 * recorded (persist) survives a restart, for a queue of the config too, while one not
 * recorded does not; browse sees what waits without taking it; moveMessages moves what a
 * filter matches to another queue alone, stamped with its origin, leaving what is in
 * flight; listConsumers tells each consumer's credit and what it holds. */
#include "broker_fx.h"

static const char yaml_fmt[] = "%s"
                               "addresses:\n"
                               "  cfg: {anycast: [cfg]}\n"
                               "  other: {multicast: [other.a, other.b]}\n";

static void fx_open(fx_t *f, bool durable) { fx_open_yaml(f, yaml_fmt, durable); }

static void send_one(fx_t *f, const char *address, const char *body, const char *color, bool durable) {
  mqr_str_t keys[1] = {MQR_STR("color")};
  mqr_value_t values[1] = {mqr_value_string(mqr_str(color ? color : ""))};
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = MQR_ANYCAST,
                            .durable = durable,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .property_keys = keys,
                            .property_values = values,
                            .n_properties = color ? 1 : 0,
                            .body = mqr_str(body)};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

static mqr_broker_queue_stats_t stats(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  if (mqr_broker_queue_stats(f->b, mqr_str(q), &st) != 0) fail_msg("no queue %s", q);
  assert_true(st.enqueued ==
              st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  return st;
}

typedef struct {
  int n;
  char bodies[256];
  char orig_queue[32];
} seen_t;

static void on_browse(void *arg, const mqr_frame_message_t *m) {
  seen_t *s = arg;
  s->n++;
  size_t l = strlen(s->bodies);
  snprintf(s->bodies + l, sizeof s->bodies - l, "%s%.*s", l ? " " : "", (int)m->body.len, m->body.ptr);
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++)
    if (mqr_str_eq(m->properties.keys[i], MQR_STR("_AMQ_ORIG_QUEUE")))
      snprintf(s->orig_queue, sizeof s->orig_queue, "%.*s", (int)v[i].u.s.len, v[i].u.s.ptr);
}

static int delivered;
static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)c, (void)m, (void)arg;
  delivered++;
}

static void test_addresses_and_queues_made_and_deleted(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  mqr_error_t err;
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("orders"), mqr_routing_set_of(MQR_ANYCAST), &err), 0);
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("orders"), mqr_routing_set_of(MQR_ANYCAST), &err),
                   MQR_EADDREXISTS);
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("orders.q"), MQR_STR("orders"), MQR_ANYCAST);
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, &err), 0);
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, &err), MQR_EQUEUEEXISTS);
  send_one(&f, "orders", "o1", NULL, true);
  settle(&f);
  /* An address with queues is refused unless forced. */
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("orders"), false, &err), MQR_EADDRHASQUEUES);
  fx_close(&f);
  fx_open(&f, true); /* the queue, and so its address, came back with its message */
  assert_int_equal(stats(&f, "orders.q").depth, 1);
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("orders.q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 0, on_msg,
                                        NULL, &c, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("orders"), true, &err), MQR_EQUEUEINUSE);
  mqr_broker_unsubscribe(c);
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("orders"), true, &err), 0);
  assert_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("orders")));
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("orders"), true, &err), MQR_ENOADDR);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true); /* and they stay deleted */
  assert_null(mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("orders.q")));
  assert_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("orders")));
  /* A bare address made by management comes back after a restart, not auto-created (so
   * no auto-delete takes it), until it is deleted. */
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("bare"), mqr_routing_set_of(MQR_MULTICAST), &err), 0);
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("gone"), mqr_routing_set_of(MQR_ANYCAST), &err), 0);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  mqr_address_t *bare = mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("bare"));
  assert_non_null(bare);
  assert_int_equal(mqr_address_routing_types(bare).bits, mqr_routing_set_of(MQR_MULTICAST).bits);
  assert_false(mqr_address_flags(bare) & MQR_ADDRESS_AUTO_CREATED);
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("gone"), false, &err), 0);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  assert_non_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("bare")));
  assert_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("gone")));
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("x"), (mqr_routing_set_t){0}, &err), MQR_EINVAL);
  fx_close(&f);
}

static void test_a_paused_queue_takes_and_does_not_deliver(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_error_t err;
  mqr_broker_consumer_t *c;
  delivered = 0;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("cfg"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg,
                                        NULL, &c, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("cfg"), true, false, &err), 0);
  assert_true(stats(&f, "cfg").paused);
  send_one(&f, "cfg", "a", NULL, false);
  send_one(&f, "cfg", "b", NULL, false);
  assert_int_equal(delivered, 0);
  assert_int_equal(stats(&f, "cfg").depth, 2);
  assert_int_equal(stats(&f, "cfg").consumers, 1);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("cfg"), false, false, &err), 0);
  assert_int_equal(delivered, 2);
  assert_false(stats(&f, "cfg").paused);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("nope"), true, false, &err), MQR_ENOQUEUE);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A recorded pause survives a restart (a queue of the config and one made at run time);
 * one not recorded does not; resuming a recorded one records that too. */
static void test_a_recorded_pause_survives_a_restart(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  mqr_error_t err;
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("made"), MQR_STR("made"), MQR_ANYCAST);
  qc.auto_create_address = true;
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, &err), 0);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("cfg"), true, true, &err), 0);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("made"), true, true, &err), 0);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("other.a"), true, false, &err), 0);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  assert_true(stats(&f, "cfg").paused);
  assert_true(stats(&f, "made").paused);
  assert_false(stats(&f, "other.a").paused);
  assert_int_equal(mqr_broker_pause_queue(f.b, MQR_STR("cfg"), false, false, &err), 0); /* recorded: stays lifted */
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  assert_false(stats(&f, "cfg").paused);
  assert_true(stats(&f, "made").paused);
  fx_close(&f);
}

static void test_browse_sees_without_taking(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "cfg", "m1", NULL, false);
  send_one(&f, "cfg", "m2", NULL, false);
  send_one(&f, "cfg", "m3", NULL, false);
  seen_t s = {0};
  mqr_error_t err;
  assert_int_equal(mqr_broker_browse(f.b, MQR_STR("cfg"), 0, on_browse, &s, &err), 3);
  assert_string_equal(s.bodies, "m1 m2 m3");
  assert_int_equal(stats(&f, "cfg").depth, 3);
  seen_t two = {0};
  assert_int_equal(mqr_broker_browse(f.b, MQR_STR("cfg"), 2, on_browse, &two, &err), 2);
  assert_string_equal(two.bodies, "m1 m2");
  assert_int_equal(mqr_broker_browse(f.b, MQR_STR("nope"), 0, on_browse, &two, &err), MQR_ENOQUEUE);
  /* without a cluster, every queue's messages are this broker's to show */
  assert_int_equal(mqr_broker_queue_served(f.b, MQR_STR("cfg"), &err), 0);
  assert_int_equal(mqr_broker_queue_served(f.b, MQR_STR("nope"), &err), MQR_ENOQUEUE);
  fx_close(&f);
}

static void test_move_messages_by_filter(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "cfg", "r1", "red", false);
  send_one(&f, "cfg", "b1", "blue", false);
  send_one(&f, "cfg", "r2", "red", false);
  send_one(&f, "cfg", "inflight", "red", false);
  /* One in flight (the first, r1): it stays. */
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  delivered = 0;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("cfg"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_msg,
                                        NULL, &c, NULL, &err),
                   0);
  assert_int_equal(delivered, 1);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR("color = 'red'"), MQR_STR("other.b"), &err),
                   2);
  mqr_broker_queue_stats_t st = stats(&f, "cfg");
  assert_int_equal(st.depth, 1);
  assert_int_equal(st.in_flight, 1);
  assert_int_equal(stats(&f, "other.b").depth, 2); /* to that queue alone */
  assert_int_equal(stats(&f, "other.a").depth, 0);
  seen_t s = {0};
  assert_int_equal(mqr_broker_browse(f.b, MQR_STR("other.b"), 0, on_browse, &s, &err), 2);
  assert_string_equal(s.bodies, "r2 inflight");
  assert_string_equal(s.orig_queue, "cfg");
  /* Everything else, no filter. */
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("other.a"), &err), 1);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("cfg"), &err), MQR_EINVAL);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR("x ="), MQR_STR("other.a"), &err),
                   MQR_ESYNTAX);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("none"), &err), MQR_ENOQUEUE);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A move whose copies' consumer deletes the queue moved from: the move stops using it,
 * and it goes once the move is done (ASan sees a read of it freed). */
static mqr_broker_t *deleting_broker;
static void on_msg_delete_cfg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)m, (void)arg;
  delivered++;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
  if (delivered == 1) assert_int_equal(mqr_broker_delete_queue(deleting_broker, MQR_STR("cfg"), NULL), 0);
}

static void test_a_move_whose_copy_deletes_its_queue(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  for (int i = 0; i < 3; i++) send_one(&f, "cfg", "m", NULL, false);
  mqr_broker_consumer_t *c;
  delivered = 0;
  deleting_broker = f.b;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("other.a"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10,
                                        on_msg_delete_cfg, NULL, &c, NULL, NULL),
                   0);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("other.a"), NULL), 3);
  assert_int_equal(delivered, 3);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("cfg"), &st), MQR_ENOQUEUE);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

typedef struct {
  int n;
  mqr_broker_consumer_info_t last;
  char selector[64];
} cons_t;

static void on_consumer(void *arg, const mqr_broker_consumer_info_t *ci) {
  cons_t *s = arg;
  s->n++;
  s->last = *ci;
  snprintf(s->selector, sizeof s->selector, "%.*s", (int)ci->selector.len, ci->selector.ptr);
}

/* Deleting an address whose queues hold more than a slice of the graveyard releases
 * (broker/grave.c): its account goes only once its messages are released (ASan catches
 * a release that reads a freed account); a deleted queue's messages are all released by
 * the loop, a slice a pass. */
static void test_big_deletions_release_everything(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_error_t err;
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("big"), mqr_routing_set_of(MQR_ANYCAST), &err), 0);
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("big"), MQR_STR("big"), MQR_ANYCAST);
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, &err), 0);
  for (int i = 0; i < 10000; i++) send_one(&f, "big", "0123456789", NULL, false);
  assert_int_equal(mqr_broker_delete_address(f.b, MQR_STR("big"), true, &err), 0);
  mqr_broker_stats_t bs;
  mqr_broker_stats(f.b, &bs);
  assert_int_equal(bs.messages, 0); /* released before the account went */
  for (int i = 0; i < 10000; i++) send_one(&f, "cfg", "0123456789", NULL, false);
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("cfg"), &err), 0);
  mqr_broker_stats(f.b, &bs);
  assert_true(bs.messages > 0 && bs.messages < 10000); /* the first slice at once, the rest after */
  for (int i = 0; i < 100 && bs.messages; i++) {
    uv_run(&f.loop, UV_RUN_NOWAIT);
    mqr_broker_stats(f.b, &bs);
  }
  assert_int_equal(bs.messages, 0);
  fx_close(&f);
}

/* A move of more than a slice: the first 1,024 in the call, the rest over loop passes,
 * none lost, none twice. */
static void test_a_big_move_goes_in_slices(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_error_t err;
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("dest"), MQR_STR("dest"), MQR_ANYCAST);
  qc.auto_create_address = true;
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, &err), 0);
  for (int i = 0; i < 5000; i++) send_one(&f, "cfg", "m", NULL, false);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("dest"), &err), 5000);
  mqr_broker_queue_stats_t d;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("dest"), &d), 0);
  assert_int_equal(d.depth, 1024); /* the first slice */
  for (int i = 0; i < 100; i++) uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(stats(&f, "dest").depth, 5000);
  assert_int_equal(stats(&f, "cfg").depth, 0);
  assert_int_equal(stats(&f, "cfg").acknowledged, 5000);
  /* A move still under way when the broker closes: nothing leaks, nothing is read freed. */
  for (int i = 0; i < 5000; i++) send_one(&f, "cfg", "m", NULL, false);
  assert_int_equal(mqr_broker_move_messages(f.b, MQR_STR("cfg"), MQR_STR(""), MQR_STR("dest"), &err), 5000);
  fx_close(&f);
}

static void test_list_consumers(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "cfg", "a", "red", false);
  send_one(&f, "cfg", "b", "red", false);
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("cfg"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color = 'red'"), 5,
                                        on_msg, NULL, &c, NULL, &err),
                   0);
  cons_t s = {0};
  assert_int_equal(mqr_broker_list_consumers(f.b, MQR_STR("cfg"), on_consumer, &s, &err), 1);
  assert_int_equal(s.last.in_flight, 2);
  assert_int_equal(s.last.delivered, 2);
  assert_int_equal(s.last.credit, 3);
  assert_string_equal(s.selector, "color = 'red'");
  assert_int_equal(mqr_broker_list_consumers(f.b, MQR_STR("other.a"), on_consumer, &s, &err), 0);
  assert_int_equal(mqr_broker_list_consumers(f.b, MQR_STR("none"), on_consumer, &s, &err), MQR_ENOQUEUE);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_addresses_and_queues_made_and_deleted),
      cmocka_unit_test(test_a_paused_queue_takes_and_does_not_deliver),
      cmocka_unit_test(test_a_recorded_pause_survives_a_restart),
      cmocka_unit_test(test_browse_sees_without_taking),
      cmocka_unit_test(test_move_messages_by_filter),
      cmocka_unit_test(test_a_move_whose_copy_deletes_its_queue),
      cmocka_unit_test(test_list_consumers),
      cmocka_unit_test(test_big_deletions_release_everything),
      cmocka_unit_test(test_a_big_move_goes_in_slices),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  fresh_dir();
  return rc;
}
