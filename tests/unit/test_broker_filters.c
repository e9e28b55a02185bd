/* Filters in the broker, as Artemis applies them: queue filters decide where a send is
 * routed (MULTICAST: every queue that matches; ANYCAST: the next one that matches), on
 * typed properties and on the AMQ headers; consumer selectors take only what they
 * match and leave the rest in the queue for others, in order. The route reads a
 * message's values only when it meets a filter, and a warm send to filtered queues
 * allocates nothing. */
#include "mqr/broker.h"
#include "mqr/filter.h"
#include "testutil.h"

static const char yaml[] = "addresses:\n"
                           "  paint:\n"
                           "    multicast:\n"
                           "      paint.red: {filter: \"color = 'red'\"}\n"
                           "      paint.heavy: {filter: \"weight > 2.5\"}\n"
                           "      paint.all: {}\n"
                           "  jobs:\n"
                           "    anycast:\n"
                           "      jobs.eu: {filter: \"region = 'eu'\"}\n"
                           "      jobs.us: {filter: \"region IN ('us', 'ca')\"}\n"
                           "  hdr:\n"
                           "    multicast:\n"
                           "      hdr.urgent: {filter: \"AMQPriority > 5\"}\n"
                           "      hdr.durable: {filter: \"AMQDurable = 'DURABLE'\"}\n"
                           "      hdr.address: {filter: \"AMQAddress = 'hdr'\"}\n"
                           "      hdr.user: {filter: \"AMQUserID = 'ID:7'\"}\n"
                           "      hdr.group: {filter: \"AMQGroupID = 'g1'\"}\n"
                           "      hdr.big: {filter: \"AMQSize > 200\"}\n"
                           "      hdr.expiring: {filter: \"AMQExpiration > 0 AND AMQTimestamp < AMQExpiration\"}\n"
                           "  ten:\n"
                           "    multicast:\n"
                           "      t0: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t1: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t2: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t3: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t4: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t5: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t6: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t7: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t8: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      t9: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "  work: {anycast: [work]}\n";

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static void fx_open(fx_t *f) {
  uv_loop_init(&f->loop);
  mqr_error_t err;
  if (mqr_config_load_string("f.yaml", yaml, sizeof yaml - 1, &f->cfg, NULL) != 0) fail_msg("config");
  mqr_broker_options_t opt = {.config = f->cfg};
  if (mqr_broker_create(&f->loop, &opt, &f->b, &err) != 0) fail_msg("%s", err.message);
}

static void fx_close(fx_t *f) {
  mqr_broker_close(f->b, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  mqr_config_destroy(f->cfg);
}

/* A message built up property by property. */
typedef struct {
  mqr_broker_message_t m;
  mqr_str_t keys[8];
  mqr_value_t values[8];
} msg_t;

static void msg_init(msg_t *x, const char *address, int rt, const char *body) {
  memset(x, 0, sizeof *x);
  x->m.address = mqr_str(address);
  x->m.routing_type = rt;
  x->m.priority = MQR_PRIORITY_DEFAULT;
  x->m.body = mqr_str(body);
  x->m.property_keys = x->keys;
  x->m.property_values = x->values;
}

static void prop(msg_t *x, const char *key, mqr_value_t v) {
  x->keys[x->m.n_properties] = mqr_str(key);
  x->values[x->m.n_properties++] = v;
}

/* Sends and says which queues took it, by name, space-separated, in route order. */
static const char *routed(fx_t *f, msg_t *x) {
  static char out[512];
  mqr_broker_receipt_t r;
  mqr_error_t err;
  if (mqr_broker_send(f->b, &x->m, &r, &err) != 0) fail_msg("send: %s", err.message);
  out[0] = 0;
  /* The queues that gained a message since the last look. */
  static uint64_t seen[16];
  size_t n = 0;
  static const char *const names[] = {"paint.red", "paint.heavy", "paint.all",   "jobs.eu",
                                      "jobs.us",   "hdr.urgent",  "hdr.durable", "hdr.address",
                                      "hdr.user",  "hdr.group",   "hdr.big",     "hdr.expiring"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    mqr_broker_queue_stats_t st;
    assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(names[k]), &st), 0);
    if (st.enqueued != seen[k]) {
      n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", n ? " " : "", names[k]);
      seen[k] = st.enqueued;
    }
  }
  if (r.queues == 0) assert_int_equal(n, 0);
  return out;
}

static void reset_seen(fx_t *f) {
  msg_t x;
  msg_init(&x, "nowhere.at.all", MQR_ANYCAST, "");
  (void)routed(f, &x); /* takes the counters as they are */
}

/* Artemis: a queue with a filter takes what matches; without one, everything. Properties
 * a filter compares are typed: a double compares with a double literal, and a string
 * compared with a number is UNKNOWN, which does not match. */
static void test_multicast_queues_take_what_their_filters_match(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  reset_seen(&f);
  msg_t x;
  msg_init(&x, "paint", MQR_MULTICAST, "1");
  prop(&x, "color", mqr_value_string(MQR_STR("red")));
  prop(&x, "weight", mqr_value_double(3.0));
  assert_string_equal(routed(&f, &x), "paint.red paint.heavy paint.all");
  msg_init(&x, "paint", MQR_MULTICAST, "2");
  prop(&x, "color", mqr_value_string(MQR_STR("blue")));
  prop(&x, "weight", mqr_value_int(2));
  assert_string_equal(routed(&f, &x), "paint.all");
  msg_init(&x, "paint", MQR_MULTICAST, "3"); /* no properties: every comparison is UNKNOWN */
  assert_string_equal(routed(&f, &x), "paint.all");
  msg_init(&x, "paint", MQR_MULTICAST, "4");
  prop(&x, "weight", mqr_value_long(1LL << 40));      /* a long promoted to compare with 2.5 */
  prop(&x, "color", mqr_value_bytes(MQR_STR("red"))); /* bytes equal nothing */
  assert_string_equal(routed(&f, &x), "paint.heavy paint.all");
  msg_init(&x, "paint", MQR_MULTICAST, "5");
  prop(&x, "weight", mqr_value_string(MQR_STR("3.0"))); /* a string is not a number */
  prop(&x, "color", mqr_value_null());
  assert_string_equal(routed(&f, &x), "paint.all");
  fx_close(&f);
}

/* An ANYCAST send goes to one queue whose filter matches; a message no queue matches is
 * not routed (NO_BINDINGS), whatever the round-robin cursor says. */
static void test_anycast_picks_a_matching_queue(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  reset_seen(&f);
  const char *regions[] = {"eu", "us", "eu", "ca", "eu", "eu"};
  const char *want[] = {"jobs.eu", "jobs.us", "jobs.eu", "jobs.us", "jobs.eu", "jobs.eu"};
  for (int i = 0; i < 6; i++) {
    msg_t x;
    msg_init(&x, "jobs", MQR_ANYCAST, "j");
    prop(&x, "region", mqr_value_string(mqr_str(regions[i])));
    assert_string_equal(routed(&f, &x), want[i]);
  }
  msg_t x;
  msg_init(&x, "jobs", MQR_ANYCAST, "j");
  prop(&x, "region", mqr_value_string(MQR_STR("apac")));
  mqr_broker_receipt_t r;
  assert_int_equal(mqr_broker_send(f.b, &x.m, &r, NULL), 0);
  assert_int_equal(r.status, MQR_ROUTE_NO_BINDINGS);
  assert_int_equal(r.queues, 0);
  fx_close(&f);
}

/* The headers Artemis's filters name (FilterImpl.getHeaderFieldValue): AMQPriority,
 * AMQDurable ('DURABLE' / 'NON_DURABLE'), AMQAddress, AMQUserID, AMQGroupID (the
 * _AMQ_GROUP_ID property), AMQSize, AMQTimestamp, AMQExpiration. */
static void test_filters_read_the_headers(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  reset_seen(&f);
  msg_t x;
  msg_init(&x, "hdr", MQR_MULTICAST, "plain");
  assert_string_equal(routed(&f, &x), "hdr.address");
  x.m.priority = 6;
  assert_string_equal(routed(&f, &x), "hdr.urgent hdr.address");
  x.m.priority = 5;
  x.m.durable = true;
  assert_string_equal(routed(&f, &x), "hdr.durable hdr.address");
  x.m.durable = false;
  x.m.user_id = MQR_STR("ID:7");
  assert_string_equal(routed(&f, &x), "hdr.address hdr.user");
  x.m.user_id = MQR_STR("");
  prop(&x, "_AMQ_GROUP_ID", mqr_value_string(MQR_STR("g1")));
  assert_string_equal(routed(&f, &x), "hdr.address hdr.group");
  msg_init(&x, "hdr", MQR_MULTICAST, "");
  static char big[300];
  memset(big, 'b', sizeof big);
  x.m.body = mqr_str_n(big, sizeof big);
  assert_string_equal(routed(&f, &x), "hdr.address hdr.big");
  msg_init(&x, "hdr", MQR_MULTICAST, "");
  x.m.timestamp = 1000;
  x.m.expiration = 2000;
  assert_string_equal(routed(&f, &x), "hdr.address hdr.expiring");
  x.m.timestamp = 3000; /* expires before it was sent: AMQTimestamp < AMQExpiration is false */
  assert_string_equal(routed(&f, &x), "hdr.address");
  fx_close(&f);
}

/* ---- consumer selectors ------------------------------------------------------------------ */

typedef struct {
  char got[16][16];
  int n;
  bool ack;
} rx_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  if (rx->n < 16) snprintf(rx->got[rx->n++], 16, "%.*s", (int)m->body.len, m->body.ptr);
  if (rx->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void send_colored(fx_t *f, const char *color, const char *body) {
  msg_t x;
  msg_init(&x, "work", MQR_ANYCAST, body);
  prop(&x, "color", mqr_value_string(mqr_str(color)));
  mqr_error_t err;
  if (mqr_broker_send(f->b, &x.m, NULL, &err) != 0) fail_msg("send: %s", err.message);
}

static uint64_t depth(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(q), &st), 0);
  return st.depth;
}

/* Artemis's consumer filters: each consumer gets only what it matches; a message no
 * consumer matches stays in the queue (the ones behind it still go), and a consumer that
 * comes later and matches it gets it, in order. */
static void test_selectors_share_a_queue(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  rx_t red = {.ack = true}, blue = {.ack = true}, any = {.ack = true};
  mqr_broker_consumer_t *cr, *cb, *ca;
  mqr_error_t err;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color = 'red'"),
                                        100, on_msg, &red, &cr, NULL, &err),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color = 'blue'"),
                                        100, on_msg, &blue, &cb, NULL, &err),
                   0);
  send_colored(&f, "red", "r1");
  send_colored(&f, "green", "g1");
  send_colored(&f, "blue", "b1");
  send_colored(&f, "red", "r2");
  send_colored(&f, "green", "g2");
  send_colored(&f, "blue", "b2");
  assert_int_equal(red.n, 2);
  assert_string_equal(red.got[0], "r1");
  assert_string_equal(red.got[1], "r2");
  assert_int_equal(blue.n, 2);
  assert_string_equal(blue.got[0], "b1");
  assert_string_equal(blue.got[1], "b2");
  assert_int_equal(depth(&f, "work"), 2); /* the greens wait */
  /* A consumer without a selector takes them, in order. */
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg,
                                        &any, &ca, NULL, &err),
                   0);
  assert_int_equal(any.n, 2);
  assert_string_equal(any.got[0], "g1");
  assert_string_equal(any.got[1], "g2");
  assert_int_equal(depth(&f, "work"), 0);
  mqr_broker_unsubscribe(ca);
  mqr_broker_unsubscribe(cb);
  /* With the blue consumer gone, blues wait; red still flows past them. */
  send_colored(&f, "blue", "b3");
  send_colored(&f, "red", "r3");
  assert_int_equal(red.n, 3);
  assert_string_equal(red.got[2], "r3");
  assert_int_equal(depth(&f, "work"), 1);
  mqr_broker_unsubscribe(cr);
  fx_close(&f);
}

/* A selector consumer out of credit holds back only what it matches: another consumer
 * still gets what is after. Unacknowledged messages go back to the queue's head when a
 * selector consumer leaves, and the next match takes them in order. */
static void test_selector_credit_and_redelivery(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  rx_t red = {.ack = false}, blue = {.ack = true};
  mqr_broker_consumer_t *cr, *cb;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color = 'red'"),
                                        1, on_msg, &red, &cr, NULL, NULL),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color <> 'red'"),
                                        100, on_msg, &blue, &cb, NULL, NULL),
                   0);
  send_colored(&f, "red", "r1");
  send_colored(&f, "red", "r2");
  send_colored(&f, "blue", "b1");
  assert_int_equal(red.n, 1);
  assert_int_equal(blue.n, 1);
  assert_string_equal(blue.got[0], "b1");
  assert_int_equal(depth(&f, "work"), 1); /* r2, for red when it has credit */
  mqr_broker_unsubscribe(cr);             /* r1 back to the head, before r2 */
  rx_t red2 = {.ack = true};
  mqr_broker_consumer_t *cr2;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("color = 'red'"),
                                        10, on_msg, &red2, &cr2, NULL, NULL),
                   0);
  assert_int_equal(red2.n, 2);
  assert_string_equal(red2.got[0], "r1");
  assert_string_equal(red2.got[1], "r2");
  mqr_broker_unsubscribe(cr2);
  mqr_broker_unsubscribe(cb);
  fx_close(&f);
}

/* A bad selector is refused with its column, and leaves nothing behind: no subscription
 * queue is made for it. */
static void test_bad_selector_is_refused_cleanly(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  rx_t rx = {0};
  uint32_t before = mqr_router_queue_count(mqr_broker_router(f.b));
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("news"), MQR_MULTICAST, MQR_STR(""), MQR_STR("color = 'red"), 10,
                                        on_msg, &rx, &c, NULL, &err),
                   MQR_ESYNTAX);
  assert_non_null(strstr(err.message, "column 9"));
  assert_int_equal(mqr_router_queue_count(mqr_broker_router(f.b)), before);
  assert_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("news")));
  /* A blank selector is none. */
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR("  "), 10, on_msg,
                                        &rx, &c, NULL, &err),
                   0);
  send_colored(&f, "any", "x");
  assert_int_equal(rx.n, 1);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A message's typed values reach an in-process consumer as they were sent; a priority out
 * of 0-9, a bad type, or a string that is not UTF-8 is refused. */
static void test_typed_properties_in_process(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  msg_t x;
  msg_init(&x, "work", MQR_ANYCAST, "typed");
  x.m.priority = 10;
  mqr_error_t err;
  assert_int_equal(mqr_broker_send(f.b, &x.m, NULL, &err), MQR_EINVAL);
  assert_non_null(strstr(err.message, "priority 10"));
  x.m.priority = 9;
  prop(&x, "k", (mqr_value_t){(mqr_value_type_t)8, {.l = 0}});
  assert_int_equal(mqr_broker_send(f.b, &x.m, NULL, &err), MQR_EINVAL);
  x.values[0] = mqr_value_string(MQR_STR("\xff"));
  assert_int_equal(mqr_broker_send(f.b, &x.m, NULL, &err), MQR_EINVAL);
  assert_int_equal(depth(&f, "work"), 0);
  fx_close(&f);
}

/* A warm send to ten queues, each with a filter the message matches (and one it does
 * not), allocates nothing: the values go in the vocabulary's own array. */
static void test_filtered_send_allocates_nothing(void **state) {
  (void)state;
  talloc_install();
  fx_t f;
  fx_open(&f);
  msg_t x;
  msg_init(&x, "ten", MQR_MULTICAST, "0123456789abcdef");
  prop(&x, "color", mqr_value_string(MQR_STR("red")));
  prop(&x, "weight", mqr_value_double(3.5));
  mqr_router_t *r = mqr_broker_router(f.b);
  mqr_queue_t *qs[10];
  for (int i = 0; i < 10; i++) {
    char name[4];
    snprintf(name, sizeof name, "t%d", i);
    assert_non_null(qs[i] = mqr_router_find_queue(r, mqr_str(name)));
  }
  mqr_broker_receipt_t rc;
  for (int i = 0; i < 100; i++) { /* warm */
    assert_int_equal(mqr_broker_send(f.b, &x.m, &rc, NULL), 0);
    for (int k = 0; k < 10; k++) mqr_broker_purge(f.b, qs[k]);
  }
  assert_int_equal(rc.queues, 10);
  uint64_t calls = talloc.calls;
  for (int i = 0; i < 1000; i++) {
    x.values[1] = mqr_value_double(i % 2 ? 3.5 : 1.0);
    assert_int_equal(mqr_broker_send(f.b, &x.m, &rc, NULL), 0);
    assert_int_equal(rc.queues, i % 2 ? 10 : 0);
    for (int k = 0; k < 10; k++) mqr_broker_purge(f.b, qs[k]);
  }
  assert_int_equal(talloc.calls, calls);
  fx_close(&f);
  assert_int_equal(talloc.live, 0);
  talloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_multicast_queues_take_what_their_filters_match),
      cmocka_unit_test(test_anycast_picks_a_matching_queue),
      cmocka_unit_test(test_filters_read_the_headers),
      cmocka_unit_test(test_selectors_share_a_queue),
      cmocka_unit_test(test_selector_credit_and_redelivery),
      cmocka_unit_test(test_bad_selector_is_refused_cleanly),
      cmocka_unit_test(test_typed_properties_in_process),
      cmocka_unit_test(test_filtered_send_allocates_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
