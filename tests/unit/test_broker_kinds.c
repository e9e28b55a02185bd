/* Queue kinds, as Artemis's ExclusiveTest, RingQueueTest and LVQTest have them: an
 * exclusive queue gives every message to its first consumer, then to the next when it
 * goes; a ring keeps its newest ring-size messages; a last-value queue keeps the newest
 * message of each key, in the place of the one it replaced, and drops an older value
 * coming back from a consumer; MessageGroupingTest: a group's messages go to one
 * consumer, a busy group's wait while others go, a consumer going frees its groups;
 * consumers-before-dispatch holds dispatch for a count, or a delay; consumer priority
 * serves the highest consumers first; a steady last-value load allocates
 * nothing; a queue made at run time keeps its kind across a restart. */
#include "broker_fx.h"

static const char yaml_fmt[] =
    "%s"
    "address-settings:\n"
    "  'made.#': {default-last-value-queue: true, default-exclusive-queue: true,\n"
    "             default-ring-size: 5, default-group-buckets: 4, default-group-first-key: gf}\n"
    "addresses:\n"
    "  ex: {anycast: {ex: {exclusive: true}}}\n"
    "  ring: {anycast: {ring: {ring-size: 3}}}\n"
    "  lv: {anycast: {lv: {last-value-key: sym}}}\n"
    "  lvd: {anycast: {lvd: {last-value: true}}}\n"
    "  grp: {anycast: [grp]}\n"
    "  nogrp: {anycast: {nogrp: {group-buckets: 0}}}\n"
    "  rebal: {anycast: {rebal: {group-rebalance: true}}}\n"
    "  two: {anycast: {two: {consumers-before-dispatch: 2}}}\n"
    "  late: {anycast: {late: {consumers-before-dispatch: 3, delay-before-dispatch: 150}}}\n"
    "  gfk: {anycast: {gfk: {group-first-key: JMSXGroupFirstForConsumer}}}\n"
    "  nd: {anycast: {nd: {non-destructive: true}}}\n"
    "  ndlv: {anycast: {ndlv: {non-destructive: true, last-value-key: sym}}}\n";

static void fx_open(fx_t *f, bool durable) { fx_open_yaml(f, yaml_fmt, durable); }

static void send_kv(fx_t *f, const char *address, const char *key_name, const char *key, const char *body) {
  mqr_str_t k = mqr_str(key_name ? key_name : "");
  mqr_value_t v = mqr_value_string(mqr_str(key ? key : ""));
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = MQR_ANYCAST,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .property_keys = &k,
                            .property_values = &v,
                            .n_properties = key ? 1 : 0,
                            .body = mqr_str(body)};
  mqr_error_t err;
  if (mqr_broker_send(f->b, &m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

typedef struct {
  int n;
  char got[16][16];
  bool ack;
} rx_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  if (rx->n < 16) snprintf(rx->got[rx->n], 16, "%.*s", (int)m->body.len, m->body.ptr);
  rx->n++;
  if (rx->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static mqr_broker_consumer_t *consume(fx_t *f, const char *q, rx_t *rx, uint32_t credit) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  if (mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), credit, on_msg, rx, &c, NULL,
                           &err) != 0)
    fail_msg("subscribe: %s", err.message);
  return c;
}

static mqr_broker_queue_stats_t stats(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(q), &st), 0);
  assert_true(st.enqueued ==
              st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  return st;
}

/* ExclusiveTest: every message to the first consumer; when it goes, what it had not
 * acknowledged and what follows go to the next. */
static void test_exclusive_queue_has_one_consumer_at_a_time(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  rx_t a = {.ack = false}, b = {.ack = true};
  mqr_broker_consumer_t *ca = consume(&f, "ex", &a, 100), *cb = consume(&f, "ex", &b, 100);
  for (int i = 0; i < 6; i++) send_kv(&f, "ex", NULL, NULL, "m");
  assert_int_equal(a.n, 6);
  assert_int_equal(b.n, 0);
  mqr_broker_unsubscribe(ca);
  assert_int_equal(b.n, 6); /* its six, back, to the next */
  send_kv(&f, "ex", NULL, NULL, "after");
  assert_int_equal(b.n, 7);
  mqr_broker_unsubscribe(cb);
  fx_close(&f);
}

/* RingQueueTest: past ring-size the oldest waiting message goes (acknowledged); one in
 * flight counts and stays. */
static void test_ring_keeps_its_newest(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  const char *bodies[] = {"1", "2", "3", "4", "5"};
  for (int i = 0; i < 5; i++) send_kv(&f, "ring", NULL, NULL, bodies[i]);
  mqr_broker_queue_stats_t st = stats(&f, "ring");
  assert_int_equal(st.depth, 3);
  assert_int_equal(st.acknowledged, 2);
  rx_t rx = {.ack = false};
  mqr_broker_consumer_t *c = consume(&f, "ring", &rx, 1); /* 3 in flight, 4 and 5 waiting */
  assert_string_equal(rx.got[0], "3");
  send_kv(&f, "ring", NULL, NULL, "6"); /* 3 + 4 5 6 is four: 4 goes */
  st = stats(&f, "ring");
  assert_int_equal(st.in_flight, 1);
  assert_int_equal(st.depth, 2);
  mqr_broker_unsubscribe(c);
  rx_t all = {.ack = true};
  c = consume(&f, "ring", &all, 10);
  assert_int_equal(all.n, 3);
  assert_string_equal(all.got[0], "3");
  assert_string_equal(all.got[1], "5");
  assert_string_equal(all.got[2], "6");
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* LVQTest: the newest value of each key, in the place of the one it replaced; a message
 * without the key is an ordinary one; last-value: true keys on _AMQ_LVQ_NAME. */
static void test_last_value_keeps_the_newest_of_each_key(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_kv(&f, "lv", "sym", "x", "x1");
  send_kv(&f, "lv", "sym", "y", "y1");
  send_kv(&f, "lv", NULL, NULL, "plain");
  send_kv(&f, "lv", "sym", "x", "x2");
  send_kv(&f, "lv", "other", "x", "o1"); /* not the key: an ordinary message */
  send_kv(&f, "lv", "sym", "x", "x3");
  mqr_broker_queue_stats_t st = stats(&f, "lv");
  assert_int_equal(st.depth, 4);
  assert_int_equal(st.acknowledged, 2);
  rx_t rx = {.ack = true};
  mqr_broker_consumer_t *c = consume(&f, "lv", &rx, 10);
  assert_int_equal(rx.n, 4);
  assert_string_equal(rx.got[0], "x3"); /* in x1's place */
  assert_string_equal(rx.got[1], "y1");
  assert_string_equal(rx.got[2], "plain");
  assert_string_equal(rx.got[3], "o1");
  mqr_broker_unsubscribe(c);
  send_kv(&f, "lvd", MQR_PROP_LAST_VALUE, "k", "k1");
  send_kv(&f, "lvd", MQR_PROP_LAST_VALUE, "k", "k2");
  assert_int_equal(stats(&f, "lvd").depth, 1);
  fx_close(&f);
}

/* A value that comes back from a consumer while a newer one waits is done with; one
 * that comes back alone holds its key again. */
static void test_last_value_returned_while_newer_waits(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_kv(&f, "lv", "sym", "x", "x1");
  rx_t rx = {.ack = false};
  mqr_broker_consumer_t *c = consume(&f, "lv", &rx, 1);
  assert_string_equal(rx.got[0], "x1");
  send_kv(&f, "lv", "sym", "x", "x2"); /* waits: x1 is in flight, not replaced */
  assert_int_equal(stats(&f, "lv").depth, 1);
  mqr_broker_unsubscribe(c); /* x1 back: x2 is newer */
  mqr_broker_queue_stats_t st = stats(&f, "lv");
  assert_int_equal(st.depth, 1);
  assert_int_equal(st.acknowledged, 1);
  rx_t r2 = {.ack = false};
  c = consume(&f, "lv", &r2, 1);
  assert_string_equal(r2.got[0], "x2");
  mqr_broker_unsubscribe(c);           /* x2 back alone: it holds x again */
  send_kv(&f, "lv", "sym", "x", "x3"); /* and is replaced by x3 */
  st = stats(&f, "lv");
  assert_int_equal(st.depth, 1);
  rx_t r3 = {.ack = true};
  c = consume(&f, "lv", &r3, 10);
  assert_int_equal(r3.n, 1);
  assert_string_equal(r3.got[0], "x3");
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A steady load over a fixed set of keys allocates nothing once warm. */
static void test_last_value_sends_allocate_nothing(void **state) {
  (void)state;
  talloc_install();
  fx_t f;
  fx_open(&f, false);
  char key[8], body[8];
  for (int i = 0; i < 200; i++) {
    snprintf(key, sizeof key, "k%d", i % 10);
    snprintf(body, sizeof body, "%d", i);
    send_kv(&f, "lv", "sym", key, body);
  }
  uint64_t calls = talloc.calls;
  for (int i = 0; i < 2000; i++) {
    snprintf(key, sizeof key, "k%d", i % 10);
    send_kv(&f, "lv", "sym", key, "v");
  }
  assert_int_equal(talloc.calls, calls);
  assert_int_equal(stats(&f, "lv").depth, 10);
  fx_close(&f);
  assert_int_equal(talloc.live, 0);
  talloc_uninstall();
}

/* A queue made at run time keeps its kind in the journal. */
static void test_kind_survives_a_restart(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("made"), MQR_STR("made"), MQR_ANYCAST);
  qc.auto_create_address = true;
  qc.exclusive = true;
  qc.ring_size = 7;
  qc.last_value_key = MQR_STR("sym");
  qc.group_first_key = MQR_STR("first");
  assert_int_equal(mqr_router_add_queue(mqr_broker_router(f.b), &qc, NULL, NULL), 0);
  mqr_broker_message_t m = {.address = MQR_STR("made"),
                            .routing_type = MQR_ANYCAST,
                            .durable = true,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("x")};
  assert_int_equal(mqr_broker_send(f.b, &m, NULL, NULL), 0);
  for (int i = 0; i < 50; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(1000);
  fx_close(&f);
  fx_open(&f, true);
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("made"));
  assert_non_null(q);
  assert_true(mqr_queue_exclusive(q));
  assert_int_equal(mqr_queue_ring_size(q), 7);
  assert_true(mqr_str_eq(mqr_queue_last_value_key(q), MQR_STR("sym")));
  assert_true(mqr_str_eq(mqr_queue_group_first_key(q), MQR_STR("first")));
  fx_close(&f);
}

/* Per consumer, the groups it got (bit per group a, b, c). */
typedef struct {
  int n, groups;
  bool ack;
} grx_t;

static void on_group(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  grx_t *rx = arg;
  rx->n++;
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++)
    if (mqr_str_eq(m->properties.keys[i], MQR_STR(MQR_PROP_GROUP))) rx->groups |= 1 << (v[i].u.s.ptr[0] - 'a');
  if (rx->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static mqr_broker_consumer_t *gconsume(fx_t *f, const char *q, grx_t *rx, uint32_t credit) {
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), credit, on_group,
                                        rx, &c, NULL, NULL),
                   0);
  return c;
}

static void test_a_group_goes_to_one_consumer(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  grx_t x = {.ack = true}, y = {.ack = true};
  mqr_broker_consumer_t *cx = gconsume(&f, "grp", &x, 100), *cy = gconsume(&f, "grp", &y, 100);
  const char *groups[] = {"a", "b", "a", "b", "a", "c", "b", "a"};
  for (int i = 0; i < 8; i++) send_kv(&f, "grp", MQR_PROP_GROUP, groups[i], "m");
  assert_int_equal(x.n + y.n, 8);
  assert_int_equal(x.groups & y.groups, 0); /* no group at both */
  assert_int_equal(x.groups | y.groups, 7);
  /* The consumer of a goes: a's messages go to the other from now on. */
  bool a_at_x = x.groups & 1;
  mqr_broker_unsubscribe(a_at_x ? cx : cy);
  grx_t *other = a_at_x ? &y : &x;
  int before = other->n;
  send_kv(&f, "grp", MQR_PROP_GROUP, "a", "m");
  assert_int_equal(other->n, before + 1);
  assert_true(other->groups & 1);
  mqr_broker_unsubscribe(a_at_x ? cy : cx);
  fx_close(&f);
}

/* A group whose consumer has no credit waits; the next group's message still goes. */
static void test_a_busy_group_waits_alone(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  grx_t x = {.ack = false}, y = {.ack = true};
  mqr_broker_consumer_t *cx = gconsume(&f, "grp", &x, 1);
  send_kv(&f, "grp", MQR_PROP_GROUP, "a", "a1"); /* a -> x, which is now full */
  mqr_broker_consumer_t *cy = gconsume(&f, "grp", &y, 100);
  send_kv(&f, "grp", MQR_PROP_GROUP, "a", "a2"); /* waits for x */
  send_kv(&f, "grp", MQR_PROP_GROUP, "b", "b1"); /* goes past it, to y */
  assert_int_equal(x.n, 1);
  assert_int_equal(y.n, 1);
  assert_int_equal(y.groups, 2);
  assert_int_equal(stats(&f, "grp").depth, 1);
  mqr_broker_unsubscribe(cx); /* a1 back; a is y's now: a1 then a2 */
  assert_int_equal(y.n, 3);
  assert_int_equal(y.groups, 3);
  mqr_broker_unsubscribe(cy);
  fx_close(&f);
}

/* group-buckets 0: no groups, round-robin; group-rebalance: a new consumer frees every
 * group. */
static void test_groups_off_and_rebalanced(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  grx_t x = {.ack = true}, y = {.ack = true};
  mqr_broker_consumer_t *cx = gconsume(&f, "nogrp", &x, 100), *cy = gconsume(&f, "nogrp", &y, 100);
  for (int i = 0; i < 4; i++) send_kv(&f, "nogrp", MQR_PROP_GROUP, "a", "m");
  assert_int_equal(x.n, 2);
  assert_int_equal(y.n, 2);
  mqr_broker_unsubscribe(cx);
  mqr_broker_unsubscribe(cy);
  /* a -> c1, which is then full. Without rebalance a new consumer leaves a with c1 (its
   * next message waits); with it, a is free and goes to the consumer that can take it. */
  grx_t r1 = {.ack = false}, r2 = {.ack = true};
  mqr_broker_consumer_t *c1 = gconsume(&f, "rebal", &r1, 1);
  send_kv(&f, "rebal", MQR_PROP_GROUP, "a", "m");
  mqr_broker_consumer_t *c2 = gconsume(&f, "rebal", &r2, 100);
  send_kv(&f, "rebal", MQR_PROP_GROUP, "a", "m");
  assert_int_equal(r1.n, 1);
  assert_int_equal(r2.n, 1);
  grx_t s1 = {.ack = false}, s2 = {.ack = true};
  mqr_broker_consumer_t *d1 = gconsume(&f, "grp", &s1, 1);
  send_kv(&f, "grp", MQR_PROP_GROUP, "a", "m");
  mqr_broker_consumer_t *d2 = gconsume(&f, "grp", &s2, 100);
  send_kv(&f, "grp", MQR_PROP_GROUP, "a", "m");
  assert_int_equal(s2.n, 0);
  assert_int_equal(stats(&f, "grp").depth, 1);
  mqr_broker_unsubscribe(d2);
  mqr_broker_unsubscribe(d1);
  mqr_broker_unsubscribe(c1);
  mqr_broker_unsubscribe(c2);
  fx_close(&f);
}

/* consumers-before-dispatch: nothing goes until the second consumer is there, then the
 * two share; with delay-before-dispatch, the delay after the first opens it too. */
static void test_consumers_before_dispatch(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  for (int i = 0; i < 4; i++) send_kv(&f, "two", NULL, NULL, "m");
  rx_t a = {.ack = true}, b = {.ack = true};
  mqr_broker_consumer_t *ca = consume(&f, "two", &a, 10);
  assert_int_equal(a.n, 0);
  mqr_broker_consumer_t *cb = consume(&f, "two", &b, 10);
  assert_int_equal(a.n + b.n, 4);
  assert_true(a.n > 0 && b.n > 0);
  mqr_broker_unsubscribe(ca);
  mqr_broker_unsubscribe(cb);
  send_kv(&f, "late", NULL, NULL, "m");
  rx_t c = {.ack = true};
  mqr_broker_consumer_t *cc = consume(&f, "late", &c, 10);
  assert_int_equal(c.n, 0);
  for (int i = 0; i < 5000 && c.n == 0; i++) uv_run(&f.loop, UV_RUN_ONCE); /* the delay's timer holds the loop */
  assert_int_equal(c.n, 1);
  mqr_broker_unsubscribe(cc);
  fx_close(&f);
}

/* A queue the broker makes takes its kind from the address settings' defaults. */
static void test_made_queues_take_the_default_kind(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_kv(&f, "made.a", MQR_PROP_LAST_VALUE, "k", "k1"); /* makes made.a, ANYCAST */
  send_kv(&f, "made.a", MQR_PROP_LAST_VALUE, "k", "k2");
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("made.a"));
  assert_non_null(q);
  assert_true(mqr_queue_exclusive(q));
  assert_true(mqr_str_eq(mqr_queue_last_value_key(q), MQR_STR(MQR_PROP_LAST_VALUE)));
  assert_int_equal(mqr_queue_ring_size(q), 5);
  assert_int_equal(mqr_queue_group_buckets(q), 4);
  assert_true(mqr_str_eq(mqr_queue_group_first_key(q), MQR_STR("gf")));
  assert_int_equal(stats(&f, "made.a").depth, 1); /* k2 replaced k1 */
  fx_close(&f);
}

/* ConsumerPriorityTest: messages go to the highest-priority consumers while they have
 * credit and accept them (round-robin among equals); a lower one gets what they cannot
 * take, or decline by selector. The priority is the target's consumer-priority
 * parameter, as in Artemis ("queue?consumer-priority=50"). */
static void test_consumer_priority(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  mqr_broker_consumer_t *hi, *hi2, *lo;
  rx_t rhi = {.ack = false}, rhi2 = {.ack = false}, rlo = {.ack = false};
  mqr_error_t err;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp?consumer-priority=-5"), MQR_ROUTING_NONE, MQR_STR(""),
                                        MQR_STR(""), 100, on_msg, &rlo, &lo, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp?consumer-priority=10"), MQR_ROUTING_NONE, MQR_STR(""),
                                        MQR_STR(""), 2, on_msg, &rhi, &hi, NULL, &err),
                   0);
  for (int i = 0; i < 5; i++) send_kv(&f, "grp", NULL, NULL, "m");
  assert_int_equal(rhi.n, 2); /* until its credit ran out */
  assert_int_equal(rlo.n, 3);
  mqr_broker_credit(hi, 3);
  for (int i = 0; i < 3; i++) send_kv(&f, "grp", NULL, NULL, "m");
  assert_int_equal(rhi.n, 5);
  assert_int_equal(rlo.n, 3);
  /* A second at the same priority: the two take turns. */
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp?consumer-priority=10"), MQR_ROUTING_NONE, MQR_STR(""),
                                        MQR_STR(""), 100, on_msg, &rhi2, &hi2, NULL, &err),
                   0);
  mqr_broker_credit(hi, 100);
  for (int i = 0; i < 4; i++) send_kv(&f, "grp", NULL, NULL, "m");
  assert_int_equal(rhi.n + rhi2.n, 9);
  assert_int_equal(rhi2.n, 2);
  assert_int_equal(rlo.n, 3);
  mqr_broker_unsubscribe(hi);
  mqr_broker_unsubscribe(hi2);
  mqr_broker_unsubscribe(lo);
  /* A selector the higher one declines: the lower one takes it. */
  rx_t red = {.ack = true}, any = {.ack = true};
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("nogrp?consumer-priority=1"), MQR_ROUTING_NONE, MQR_STR(""),
                                        MQR_STR("k = 'red'"), 100, on_msg, &red, &hi, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("nogrp"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg,
                                        &any, &lo, NULL, &err),
                   0);
  send_kv(&f, "nogrp", "k", "red", "r1");
  send_kv(&f, "nogrp", "k", "blue", "b1");
  send_kv(&f, "nogrp", "k", "red", "r2");
  assert_int_equal(red.n, 2);
  assert_int_equal(any.n, 1);
  assert_string_equal(any.got[0], "b1");
  mqr_broker_unsubscribe(hi);
  mqr_broker_unsubscribe(lo);
  /* Bad parameters are refused. */
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp?consumer-priority=x"), MQR_ROUTING_NONE, MQR_STR(""),
                                        MQR_STR(""), 1, on_msg, &rlo, &lo, NULL, &err),
                   MQR_EINVAL);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp?colour=red"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1,
                                        on_msg, &rlo, &lo, NULL, &err),
                   MQR_EINVAL);
  assert_non_null(strstr(err.message, "colour"));
  fx_close(&f);
}

/* group-first-key (ARTEMIS-2306): the first message of a group a consumer is given
 * carries the key, true; the next ones of that group do not; when its consumer goes, the
 * group's next message, to another consumer, is a first again. Without the key, nothing
 * is added. */
typedef struct {
  int n;
  char got[16][24];
} firsts_t;

static void on_first(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  firsts_t *x = arg;
  bool first = false;
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++)
    if (mqr_str_eq(m->properties.keys[i], MQR_STR("JMSXGroupFirstForConsumer")))
      first = v[i].type == MQR_VALUE_BOOL && v[i].u.b;
  if (x->n < 16) snprintf(x->got[x->n], sizeof x->got[0], "%.*s%s", (int)m->body.len, m->body.ptr, first ? "*" : "");
  x->n++;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void test_group_first_key(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  firsts_t x1 = {0}, x2 = {0};
  mqr_broker_consumer_t *c1, *c2;
  mqr_error_t err;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("gfk"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_first,
                                        &x1, &c1, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("gfk"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_first,
                                        &x2, &c2, NULL, &err),
                   0);
  send_kv(&f, "gfk", MQR_PROP_GROUP, "A", "a1");
  send_kv(&f, "gfk", MQR_PROP_GROUP, "B", "b1");
  send_kv(&f, "gfk", MQR_PROP_GROUP, "A", "a2");
  send_kv(&f, "gfk", MQR_PROP_GROUP, "B", "b2");
  assert_int_equal(x1.n, 2);
  assert_int_equal(x2.n, 2);
  assert_string_equal(x1.got[0], "a1*");
  assert_string_equal(x1.got[1], "a2");
  assert_string_equal(x2.got[0], "b1*");
  assert_string_equal(x2.got[1], "b2");
  mqr_broker_unsubscribe(c1); /* A is free: its next message is a first for c2 */
  send_kv(&f, "gfk", MQR_PROP_GROUP, "A", "a3");
  send_kv(&f, "gfk", MQR_PROP_GROUP, "A", "a4");
  assert_int_equal(x2.n, 4);
  assert_string_equal(x2.got[2], "a3*");
  assert_string_equal(x2.got[3], "a4");
  mqr_broker_unsubscribe(c2);
  /* A grouped queue without the key adds nothing. */
  firsts_t y = {0};
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("grp"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_first,
                                        &y, &c1, NULL, &err),
                   0);
  send_kv(&f, "grp", MQR_PROP_GROUP, "A", "g1");
  assert_string_equal(y.got[0], "g1");
  mqr_broker_unsubscribe(c1);
  fx_close(&f);
}

/* Non-destructive queues (Artemis's NonDestructiveTest): every consumer is given every
 * message, those there before it came too, and an acknowledgement leaves it in the
 * queue; it goes by purge; with a last-value key, a newer value replaces the older and
 * goes to the tail, so that a consumer that had the older one is given it; durable
 * messages are all there after a restart. */
static void test_non_destructive(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  send_kv(&f, "nd", NULL, NULL, "m1");
  send_kv(&f, "nd", NULL, NULL, "m2");
  rx_t a = {.ack = true}, b = {.ack = true};
  mqr_broker_consumer_t *ca = consume(&f, "nd", &a, 100);
  assert_int_equal(a.n, 2);
  mqr_broker_consumer_t *cb = consume(&f, "nd", &b, 1); /* one at a time */
  assert_int_equal(b.n, 1);
  mqr_broker_credit(cb, 10);
  assert_int_equal(b.n, 2);
  assert_string_equal(b.got[1], "m2");
  send_kv(&f, "nd", NULL, NULL, "m3");
  assert_int_equal(a.n, 3);
  assert_int_equal(b.n, 3);
  assert_string_equal(a.got[2], "m3");
  mqr_broker_queue_stats_t st = stats(&f, "nd");
  assert_int_equal(st.depth, 3); /* acknowledged, still there */
  assert_int_equal(st.in_flight, 0);
  mqr_broker_unsubscribe(ca);
  mqr_broker_unsubscribe(cb);
  /* Purged: gone for good; what comes next goes to every consumer. */
  assert_int_equal(mqr_broker_purge(f.b, mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("nd"))), 3);
  rx_t c = {.ack = false};
  mqr_broker_consumer_t *cc = consume(&f, "nd", &c, 100);
  assert_int_equal(c.n, 0);
  send_kv(&f, "nd", NULL, NULL, "m4");
  assert_int_equal(c.n, 1);
  mqr_broker_unsubscribe(cc); /* not acknowledged: nothing comes back, it never left */
  assert_int_equal(stats(&f, "nd").depth, 1);
  /* A last value: the newer replaces the older, at the tail. */
  rx_t l = {.ack = true};
  send_kv(&f, "ndlv", "sym", "a", "a1");
  send_kv(&f, "ndlv", "sym", "b", "b1");
  mqr_broker_consumer_t *cl = consume(&f, "ndlv", &l, 100);
  assert_int_equal(l.n, 2);
  send_kv(&f, "ndlv", "sym", "a", "a2");
  assert_int_equal(l.n, 3);
  assert_string_equal(l.got[2], "a2");
  assert_int_equal(stats(&f, "ndlv").depth, 2);
  rx_t late = {.ack = true};
  mqr_broker_consumer_t *cz = consume(&f, "ndlv", &late, 100);
  assert_int_equal(late.n, 2);
  assert_string_equal(late.got[0], "b1");
  assert_string_equal(late.got[1], "a2");
  mqr_broker_unsubscribe(cl);
  mqr_broker_unsubscribe(cz);
  /* Durable: still there after a restart. */
  mqr_broker_message_t m = {.address = MQR_STR("nd"),
                            .routing_type = MQR_ANYCAST,
                            .durable = true,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("kept")};
  assert_int_equal(mqr_broker_send(f.b, &m, NULL, NULL), 0);
  for (int i = 0; i < 50; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(1000);
  rx_t d = {.ack = true};
  mqr_broker_unsubscribe(consume(&f, "nd", &d, 100)); /* given and acknowledged */
  assert_int_equal(d.n, 2);
  for (int i = 0; i < 50; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(1000);
  fx_close(&f);
  fx_open(&f, true);
  assert_true(mqr_queue_non_destructive(mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("nd"))));
  rx_t e = {.ack = true};
  mqr_broker_unsubscribe(consume(&f, "nd", &e, 100));
  assert_int_equal(e.n, 1);
  assert_string_equal(e.got[0], "kept");
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exclusive_queue_has_one_consumer_at_a_time),
      cmocka_unit_test(test_ring_keeps_its_newest),
      cmocka_unit_test(test_last_value_keeps_the_newest_of_each_key),
      cmocka_unit_test(test_last_value_returned_while_newer_waits),
      cmocka_unit_test(test_last_value_sends_allocate_nothing),
      cmocka_unit_test(test_kind_survives_a_restart),
      cmocka_unit_test(test_a_group_goes_to_one_consumer),
      cmocka_unit_test(test_a_busy_group_waits_alone),
      cmocka_unit_test(test_groups_off_and_rebalanced),
      cmocka_unit_test(test_consumers_before_dispatch),
      cmocka_unit_test(test_made_queues_take_the_default_kind),
      cmocka_unit_test(test_consumer_priority),
      cmocka_unit_test(test_group_first_key),
      cmocka_unit_test(test_non_destructive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
