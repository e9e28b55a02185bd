/* The broker in-process (no sockets): doSend and in-process consumers, re-entrant calls
 * from a delivery callback (ack, credit, unsubscribe, the last consumer of a temporary
 * queue included), the three address-full policies, reload, and allocation: none per
 * send once warm, and none left at close. */
#include "mqr/broker.h"
#include "mqr/client.h"
#include "testutil.h"

static const char yaml[] = "address-settings:\n"
                           "  '#': {auto-create-addresses: true, auto-create-queues: true}\n"
                           "  'full.#': {max-size-bytes: 200, address-full-policy: FAIL}\n"
                           "  'drop.#': {max-size-bytes: 200, address-full-policy: DROP}\n"
                           "  'block.#': {max-size-bytes: 200, address-full-policy: BLOCK}\n"
                           "addresses:\n"
                           "  q: {anycast: [q]}\n"
                           "  t: {multicast: [t.keep]}\n"
                           "  full.a: {anycast: [full.a]}\n"
                           "  drop.a: {anycast: [drop.a]}\n"
                           "  block.a: {anycast: [block.a]}\n"
                           "  dv.out: {multicast: [dv.out]}\n"
                           "diverts:\n"
                           "  dv: {address: dv, forwarding-address: dv.out}\n";

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static void fx_open(fx_t *f) {
  uv_loop_init(&f->loop);
  assert_int_equal(mqr_config_load_string("t.yaml", yaml, sizeof yaml - 1, &f->cfg, NULL), 0);
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

/* The same under the counting allocator (testutil.h), which may be told to fail; close
 * checks that nothing is left allocated. */
static void fx_open_counted(fx_t *f) {
  talloc_install();
  fx_open(f);
}

static void fx_close_counted(fx_t *f) {
  fx_close(f);
  assert_int_equal(talloc.live, 0);
  talloc_uninstall();
}

static int send_body(mqr_broker_t *b, const char *address, int rt, const char *body, mqr_broker_receipt_t *r) {
  mqr_broker_message_t m = {mqr_str(address), rt,   false, MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0,
                            {"", 0},          NULL, NULL,  0,           mqr_str(body)};
  return mqr_broker_send(b, &m, r, NULL);
}

typedef struct {
  char seen[16][16];
  int n;
  int32_t counts[16];
  bool ack, unsubscribe_at_2, credit_each;
} sink_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  sink_t *s = arg;
  if (s->n < 16) { /* the first 16 are kept */
    snprintf(s->seen[s->n], sizeof s->seen[0], "%.*s", (int)m->body.len, m->body.ptr);
    s->counts[s->n] = m->delivery_count;
  }
  s->n++;
  if (s->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
  if (s->credit_each) mqr_broker_credit(c, 1);
  if (s->unsubscribe_at_2 && s->n == 2) mqr_broker_unsubscribe(c);
}

static void test_send_and_consume(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  sink_t s = {.ack = false};
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 2, on_msg, &s,
                                        &c, NULL, NULL),
                   0);
  mqr_broker_receipt_t r;
  for (int i = 0; i < 4; i++) {
    char body[8];
    snprintf(body, sizeof body, "m%d", i);
    assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, body, &r), 0);
    assert_int_equal(r.status, MQR_ROUTE_OK);
  }
  assert_int_equal(s.n, 2); /* credit 2 */
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.depth, 2);
  assert_int_equal(st.in_flight, 2);
  /* Cumulative ack of the second releases both; more credit gets the rest. */
  assert_int_equal(mqr_broker_ack(c, 2, true), 0);
  assert_int_equal(mqr_broker_ack(c, 2, false), MQR_ENOTFOUND);
  mqr_broker_credit(c, 10);
  assert_int_equal(s.n, 4);
  assert_string_equal(s.seen[3], "m3");
  /* Unsubscribed with two unacknowledged: back to the queue, in order, for the next. */
  mqr_broker_unsubscribe(c);
  sink_t s2 = {.ack = true};
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, &s2,
                                        &c, NULL, NULL),
                   0);
  assert_int_equal(s2.n, 2);
  assert_string_equal(s2.seen[0], "m2");
  assert_string_equal(s2.seen[1], "m3");
  assert_int_equal(s2.counts[0], 2);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.depth + st.in_flight, 0);
  assert_int_equal(st.acknowledged, 4);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

static void test_reentrant_callbacks(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  /* A temporary MULTICAST subscription whose consumer unsubscribes from its callback: the
   * queue goes with it, in the middle of a dispatch. */
  sink_t s = {.ack = true, .unsubscribe_at_2 = true};
  mqr_broker_consumer_t *c;
  mqr_str_t qname;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("t"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 100, on_msg, &s, &c,
                                        &qname, NULL),
                   0);
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)qname.len, qname.ptr);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, mqr_str(name), &st), 0);
  /* Fill it while no credit can be used, then let it go at once. */
  for (int i = 0; i < 5; i++) assert_int_equal(send_body(f.b, "t", MQR_MULTICAST, "x", NULL), 0);
  assert_int_equal(s.n, 2);
  assert_int_equal(mqr_broker_queue_stats(f.b, mqr_str(name), &st), MQR_ENOQUEUE);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("t.keep"), &st), 0);
  assert_int_equal(st.depth, 5);
  /* Credit granted from the callback: one at a time, everything arrives. */
  sink_t one = {.ack = true, .credit_each = true};
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("t.keep"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_msg,
                                        &one, &c, NULL, NULL),
                   0);
  assert_int_equal(one.n, 5);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* A delivery callback that deletes queues the send still holds: the send's own queues
 * after the one delivering (a temporary queue whose consumer goes, a queue deleted by
 * management), and, from a diverted copy's delivery, the queues the original was about
 * to be enqueued on. The send skips them; ASan sees any read of a freed one. */
typedef struct {
  mqr_broker_t *b;
  mqr_broker_consumer_t *victim;
  const char *delete_queue;
  int n;
} deleter_t;

static void on_msg_delete(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  deleter_t *d = arg;
  d->n++;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
  if (d->victim) mqr_broker_unsubscribe(d->victim), d->victim = NULL;
  if (d->delete_queue) assert_int_equal(mqr_broker_delete_queue(d->b, mqr_str(d->delete_queue), NULL), 0);
  d->delete_queue = NULL;
}

static void test_a_callback_deletes_queues_the_send_holds(void **state) {
  (void)state;
  fx_t f;
  fx_open_counted(&f);
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, MQR_STR("t.late"), MQR_STR("t"), MQR_MULTICAST);
  assert_int_equal(mqr_broker_create_queue(f.b, &qc, NULL), 0);
  /* t's queues in the route: t.keep, t.late, then the two subscriptions' (made later). */
  deleter_t first = {f.b, NULL, NULL, 0}, second = {f.b, NULL, NULL, 0};
  mqr_broker_consumer_t *c1, *c2;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("t"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 10, on_msg_delete,
                                        &first, &c1, NULL, NULL),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("t"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 10, on_msg_delete,
                                        &second, &c2, NULL, NULL),
                   0);
  first.victim = c2; /* the second subscription's queue goes while the send holds it */
  first.delete_queue = "t.keep";
  uint32_t before = mqr_router_queue_count(mqr_broker_router(f.b));
  mqr_broker_receipt_t r;
  assert_int_equal(send_body(f.b, "t", MQR_MULTICAST, "x", &r), 0);
  assert_int_equal(r.queues, 4);
  assert_int_equal(first.n, 1);
  assert_int_equal(second.n, 0);
  assert_int_equal(mqr_router_queue_count(mqr_broker_router(f.b)), before - 2);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("t.keep"), &st), MQR_ENOQUEUE);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("t.late"), &st), 0);
  assert_int_equal(st.depth, 1);
  mqr_broker_unsubscribe(c1);

  /* dv's copy goes first, to dv.out: its consumer's callback takes dv's own subscription
   * and deletes dv.out's configured queue before the original is enqueued. */
  deleter_t orig = {f.b, NULL, NULL, 0}, spy = {f.b, NULL, "dv.out", 0};
  mqr_broker_consumer_t *co, *cs;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("dv"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 10, on_msg_delete,
                                        &orig, &co, NULL, NULL),
                   0);
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("dv.out"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 10,
                                        on_msg_delete, &spy, &cs, NULL, NULL),
                   0);
  spy.victim = co;
  assert_int_equal(send_body(f.b, "dv", MQR_MULTICAST, "y", &r), 0);
  assert_int_equal(spy.n, 1);
  assert_int_equal(orig.n, 0); /* its queue went before the original reached it */
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("dv.out"), &st), MQR_ENOQUEUE);
  /* The broker works on: a send to dv.out reaches the spy's subscription alone. */
  assert_int_equal(send_body(f.b, "dv.out", MQR_MULTICAST, "z", &r), 0);
  assert_int_equal(r.queues, 1);
  assert_int_equal(spy.n, 2);
  mqr_broker_unsubscribe(cs);
  fx_close_counted(&f);
}

/* A delivery callback that sends to another queue whose consumer takes the message at
 * once: that delivery runs inside this one. Each sees its own message whole, before and
 * after the nested one, and neither allocates, whatever the size. */
typedef struct {
  mqr_broker_t *b;
  int depth, max_depth, n;
  size_t big;
  bool bad;
} nest_t;

static bool props_are(const mqr_frame_message_t *m, const char *k, const char *v) {
  return m->properties.count == 1 && mqr_str_eq(m->properties.keys[0], mqr_str(k)) &&
         mqr_str_eq(((const mqr_value_t *)m->properties.values)[0].u.s, mqr_str(v));
}

static void on_nest(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  nest_t *s = arg;
  char want[32];
  snprintf(want, sizeof want, "v%d", s->depth);
  s->n++;
  if (!props_are(m, "k", want) || m->body.len != s->big + (size_t)s->depth) s->bad = true;
  if (s->depth < s->max_depth) {
    char addr[32], val[32];
    snprintf(addr, sizeof addr, "nest.%d", s->depth + 1);
    snprintf(val, sizeof val, "v%d", s->depth + 1);
    static char body[4096];
    memset(body, 'a' + s->depth, sizeof body);
    mqr_str_t k = MQR_STR("k");
    mqr_value_t v = mqr_value_string(mqr_str(val));
    mqr_broker_message_t out = {mqr_str(addr),
                                MQR_ANYCAST,
                                false,
                                MQR_STR(""),
                                MQR_PRIORITY_DEFAULT,
                                0,
                                0,
                                {"", 0},
                                &k,
                                &v,
                                1,
                                mqr_str_n(body, s->big + (size_t)s->depth + 1)};
    s->depth++;
    if (mqr_broker_send(s->b, &out, NULL, NULL) != 0) s->bad = true;
    s->depth--;
  }
  /* After the nested delivery: still this message's properties and body. */
  if (!props_are(m, "k", want) || m->body.len != s->big + (size_t)s->depth) s->bad = true;
  for (size_t i = 0; i < m->body.len; i++)
    if (m->body.ptr[i] != 'a' + s->depth - 1 && s->depth > 0) {
      s->bad = true;
      break;
    }
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void test_nested_deliveries_keep_their_views(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  /* Body sizes on both sides of a small frame, 5 levels (each with its own buffers) and
   * 11 (the last ones past the kept depth: they allocate, and must still be right). */
  const size_t bigs[] = {10, 600, 3000, 600};
  const int depths[] = {4, 4, 4, 10};
  for (int r = 0; r < 4; r++) {
    int top = depths[r];
    nest_t s = {f.b, 0, top, 0, bigs[r], false};
    mqr_broker_consumer_t *cs[11];
    for (int d = 0; d <= top; d++) {
      char addr[32];
      snprintf(addr, sizeof addr, "nest.%d", d);
      assert_int_equal(mqr_broker_subscribe(f.b, mqr_str(addr), MQR_ANYCAST, MQR_STR(""), MQR_STR(""), 100, on_nest, &s,
                                            &cs[d], NULL, NULL),
                       0);
    }
    static char body0[4096];
    memset(body0, '-', sizeof body0);
    mqr_str_t k = MQR_STR("k");
    mqr_value_t v = mqr_value_string(MQR_STR("v0"));
    mqr_broker_message_t m = {MQR_STR("nest.0"), MQR_ANYCAST, false, MQR_STR(""), MQR_PRIORITY_DEFAULT,     0, 0,
                              {"", 0},           &k,          &v,    1,           mqr_str_n(body0, bigs[r])};
    for (int i = 0; i < 3; i++) assert_int_equal(mqr_broker_send(f.b, &m, NULL, NULL), 0); /* warm */
    if (top < 8) talloc_install();
    for (int i = 0; i < 20; i++) assert_int_equal(mqr_broker_send(f.b, &m, NULL, NULL), 0);
    if (top < 8) {
      talloc_uninstall();
      assert_int_equal(talloc.calls, 0);
    }
    assert_int_equal(s.n, 23 * (top + 1));
    assert_false(s.bad);
    for (int d = 0; d <= top; d++) mqr_broker_unsubscribe(cs[d]);
  }
  fx_close(&f);
}

static void test_full_policies(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  char body[101];
  memset(body, 'b', 100);
  body[100] = '\0';
  mqr_broker_receipt_t r;
  int ok = 0, rc;
  while ((rc = send_body(f.b, "full.a", MQR_ANYCAST, body, &r)) == 0) ok++;
  assert_int_equal(rc, MQR_EFULL);
  assert_true(ok >= 1 && mqr_broker_address_size(f.b, MQR_STR("full.a")) <= 200 + 150);
  int dropped = 0;
  for (int i = 0; i < 10; i++) {
    assert_int_equal(send_body(f.b, "drop.a", MQR_ANYCAST, body, &r), 0);
    dropped += r.status == MQR_RECEIPT_DROPPED;
  }
  assert_true(dropped >= 7);
  mqr_broker_stats_t st;
  mqr_broker_stats(f.b, &st);
  assert_int_equal(st.dropped, (uint64_t)dropped);
  /* BLOCK cannot pause an in-process producer: it is told to wait. */
  while ((rc = send_body(f.b, "block.a", MQR_ANYCAST, body, &r)) == 0) {
  }
  assert_int_equal(rc, MQR_EFULL);
  /* Draining makes room again. */
  sink_t s = {.ack = true};
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("block.a"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100,
                                        on_msg, &s, &c, NULL, NULL),
                   0);
  assert_int_equal(mqr_broker_address_size(f.b, MQR_STR("block.a")), 0);
  assert_int_equal(send_body(f.b, "block.a", MQR_ANYCAST, body, &r), 0);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

static void test_no_allocation_per_send(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  sink_t s = {.ack = true};
  for (int i = 0; i < 100; i++) { /* warm: a queue's state, messages, entries */
    assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "warm", NULL), 0);
  }
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000, on_msg, &s,
                                        &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.depth, 0);
  /* Send 100, still warm: no allocation at all (no consumer: they wait in the queue). */
  talloc_install();
  for (int i = 0; i < 100; i++) assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "steady", NULL), 0);
  talloc_uninstall();
  assert_int_equal(talloc.calls, 0);
  fx_close(&f);
}

static void test_reload(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  static const char more[] = "address-settings:\n"
                             "  '#': {auto-create-addresses: false}\n"
                             "addresses:\n"
                             "  q: {anycast: [q, q2]}\n"
                             "  fresh: {multicast: [fresh.q]}\n";
  mqr_config_t *cfg2;
  assert_int_equal(mqr_config_load_string("t2.yaml", more, sizeof more - 1, &cfg2, NULL), 0);
  uint32_t skipped = 0;
  assert_int_equal(mqr_broker_reload(f.b, cfg2, &skipped, NULL), 0);
  assert_true(skipped >= 4); /* t, full.a, drop.a, block.a and their queues stay */
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q2"), &st), 0);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("fresh.q"), &st), 0);
  /* The new settings rule: no auto-create. */
  mqr_error_t err;
  mqr_broker_message_t m = {
      MQR_STR("nowhere"), MQR_ANYCAST, false, MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0,
      MQR_STR("x")};
  assert_int_equal(mqr_broker_send(f.b, &m, NULL, &err), MQR_ENOADDR);
  fx_close(&f);
  mqr_config_destroy(cfg2);
}

/* An embedded broker that listens, and a network client on the same loop: the listener's
 * ephemeral port, a send in over TCP, delivered to an in-process consumer. */
static void on_ready(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c, (void)f;
  *(int *)arg = status ? status : 1;
}

static void test_listening_embedded(void **state) {
  (void)state;
  static const char net[] = "security: {allow-anonymous: true}\nlisteners:\n  - {name: here, host: 127.0.0.1, port: 0}\naddresses:\n  q: {anycast: [q]}\n";
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_string("net.yaml", net, sizeof net - 1, &cfg, NULL), 0);
  mqr_broker_options_t opt = {.config = cfg, .listen = true};
  mqr_broker_t *b;
  mqr_error_t err;
  if (mqr_broker_create(&loop, &opt, &b, &err) != 0) fail_msg("%s", err.message);
  int port = mqr_broker_listener_port(b, 0);
  assert_true(port > 0);
  assert_int_equal(mqr_broker_listener_port(b, 1), -1);
  sink_t s = {.ack = true};
  mqr_broker_consumer_t *k;
  assert_int_equal(
      mqr_broker_subscribe(b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_msg, &s, &k, NULL, NULL),
      0);
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  mqr_client_t *c;
  int up = 0, receipt = 0;
  assert_int_equal(mqr_client_create(&loop, NULL, &c), 0);
  assert_int_equal(mqr_client_connect(c, url, on_ready, &up, NULL), 0);
  while (up == 0) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(up, 1);
  mqr_client_message_t m = {MQR_STR("q"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0,
                            {"", 0},      NULL,        NULL,  0,       MQR_STR("over tcp")};
  assert_int_equal(mqr_client_send(c, &m, on_ready, &receipt, NULL), 0);
  while (receipt == 0) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(receipt, 1);
  assert_int_equal(s.n, 1);
  assert_string_equal(s.seen[0], "over tcp");
  mqr_broker_stats_t st;
  mqr_broker_stats(b, &st);
  assert_int_equal(st.connections, 1);
  mqr_client_close(c, NULL, NULL);
  mqr_broker_unsubscribe(k);
  mqr_broker_close(b, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  mqr_config_destroy(cfg);
}

/* Out of memory at each allocation of a send that an in-process consumer is waiting for:
 * the send fails whole, or it is stored and reaches the consumer, now or at the next
 * dispatch; never counted in flight without the consumer being told. */
static void test_out_of_memory_in_a_send_to_a_waiting_consumer(void **state) {
  (void)state;
  for (unsigned k = 1; k <= 30; k++) {
    fx_t f;
    fx_open_counted(&f);
    sink_t s = {.ack = false};
    mqr_broker_consumer_t *c;
    assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg,
                                          &s, &c, NULL, NULL),
                     0);
    talloc.fail_at = talloc.calls + k;
    int rc1 = send_body(f.b, "q", MQR_ANYCAST, "m1", NULL);
    talloc.fail_at = 0;
    assert_true(rc1 == 0 || rc1 == MQR_ENOMEM);
    assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "m2", NULL), 0);
    assert_int_equal(s.n, rc1 == 0 ? 2 : 1);
    assert_string_equal(s.seen[0], rc1 == 0 ? "m1" : "m2");
    mqr_broker_queue_stats_t st;
    assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.in_flight, (uint64_t)s.n);
    mqr_broker_unsubscribe(c);
    fx_close_counted(&f);
  }
}

/* Out of memory at each allocation of a subscription: refused with nothing left behind (a
 * made-up subscription queue goes with its state), and the queue's other consumers keep
 * getting messages when its consumer array could not grow. */
static void test_out_of_memory_in_a_subscription(void **state) {
  (void)state;
  for (unsigned k = 1; k <= 12; k++) {
    fx_t f;
    fx_open_counted(&f);
    mqr_router_t *r = mqr_broker_router(f.b);
    sink_t s[4] = {{.ack = true}, {.ack = true}, {.ack = true}, {.ack = true}}, extra = {.ack = true};
    mqr_broker_consumer_t *c[5] = {NULL}, *ct = NULL;
    for (int i = 0; i < 4; i++) /* the consumer array's first size */
      assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg,
                                            &s[i], &c[i], NULL, NULL),
                       0);
    uint32_t queues = mqr_router_queue_count(r);
    talloc.fail_at = talloc.calls + k;
    int rc = mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg, &extra,
                                  &c[4], NULL, NULL);
    talloc.fail_at = talloc.calls + k;
    int rct = mqr_broker_subscribe(f.b, MQR_STR("t"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 100, on_msg, &extra, &ct,
                                   NULL, NULL);
    talloc.fail_at = 0;
    assert_true((rc == 0 || rc == MQR_ENOMEM) && (rct == 0 || rct == MQR_ENOMEM));
    assert_int_equal(mqr_router_queue_count(r), queues + (rct == 0));
    for (int i = 0; i < 10; i++) assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "x", NULL), 0);
    int got = extra.n;
    for (int i = 0; i < 4; i++) got += s[i].n;
    assert_int_equal(got, 10);
    for (int i = 0; i < 5; i++)
      if (c[i]) mqr_broker_unsubscribe(c[i]);
    if (ct) mqr_broker_unsubscribe(ct);
    fx_close_counted(&f);
  }
}

/* A message with more properties than the delivery arena holds (2,000: 64 KB decoded)
 * reaches an in-process consumer whole. */
static int n_props_seen;
static void on_props(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)arg;
  n_props_seen = (int)m->properties.count;
  const mqr_value_t *v = m->properties.values;
  if (n_props_seen != 2000 || !mqr_str_eq(m->properties.keys[1999], MQR_STR("k1999")) ||
      !mqr_str_eq(v[1999].u.s, MQR_STR("v1999")))
    n_props_seen = -1;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void test_many_properties_reach_an_in_process_consumer(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  enum { N = 2000 };
  static char text[N][2][8];
  static mqr_str_t keys[N];
  static mqr_value_t values[N];
  for (int i = 0; i < N; i++) {
    keys[i] = mqr_str_n(text[i][0], (size_t)snprintf(text[i][0], 8, "k%d", i));
    values[i] = mqr_value_string(mqr_str_n(text[i][1], (size_t)snprintf(text[i][1], 8, "v%d", i)));
  }
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_props,
                                        NULL, &c, NULL, NULL),
                   0);
  mqr_broker_message_t m = {MQR_STR("q"), MQR_ANYCAST, false,  MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0,
                            {"", 0},      keys,        values, N,           MQR_STR("body")};
  assert_int_equal(mqr_broker_send(f.b, &m, NULL, NULL), 0);
  assert_int_equal(n_props_seen, N);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.acknowledged, 1);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* Out of memory at each allocation of in-process sends to a network consumer: a message
 * is refused, or it reaches the consumer over TCP, in order, now or with a later send;
 * never counted in flight without being written. */
typedef struct {
  char seen[64][16];
  int n;
} net_sink_t;

static void on_net_msg(mqr_client_sub_t *sub, const mqr_frame_message_t *m, void *arg) {
  net_sink_t *s = arg;
  if (s->n < 64) snprintf(s->seen[s->n], sizeof s->seen[0], "%.*s", (int)m->body.len, m->body.ptr);
  s->n++;
  assert_int_equal(mqr_client_ack(sub, m->delivery, false), 0);
}

static void test_out_of_memory_delivering_to_a_network_consumer(void **state) {
  (void)state;
  static const char net[] = "security: {allow-anonymous: true}\nlisteners:\n  - {name: here, host: 127.0.0.1, port: 0}\naddresses:\n  q: {anycast: [q]}\n";
  /* A fresh broker and client each time, and a burst of 20 with no loop pass between: the
   * connection's first write request grows while they wait, so its allocations are among
   * the sends' too. */
  for (unsigned k = 1; k <= 40; k++) {
    talloc_install();
    uv_loop_t loop;
    uv_loop_init(&loop);
    mqr_config_t *cfg;
    assert_int_equal(mqr_config_load_string("net.yaml", net, sizeof net - 1, &cfg, NULL), 0);
    mqr_broker_options_t opt = {.config = cfg, .listen = true};
    mqr_broker_t *b;
    assert_int_equal(mqr_broker_create(&loop, &opt, &b, NULL), 0);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", mqr_broker_listener_port(b, 0));
    mqr_client_t *c;
    int up = 0;
    assert_int_equal(mqr_client_create(&loop, NULL, &c), 0);
    assert_int_equal(mqr_client_connect(c, url, on_ready, &up, NULL), 0);
    while (up == 0) uv_run(&loop, UV_RUN_ONCE);
    net_sink_t s = {.n = 0};
    mqr_client_sub_t *sub;
    assert_int_equal(mqr_client_subscribe(c, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000, on_net_msg,
                                          NULL, &s, &sub, NULL),
                     0);
    mqr_broker_queue_stats_t st = {0};
    while (st.consumers == 0) { /* until the broker has the consumer */
      uv_run(&loop, UV_RUN_ONCE);
      if (mqr_broker_queue_stats(b, MQR_STR("q"), &st) != 0) st.consumers = 0;
    }
    int want = 0;
    char expect[24][16];
    talloc.fail_at = talloc.calls + k;
    for (int i = 0; i <= 20; i++) {
      char body[16];
      snprintf(body, sizeof body, "%u.%d", k, i);
      if (i == 20) talloc.fail_at = 0; /* the last one goes, and dispatches what waits */
      int rc = send_body(b, "q", MQR_ANYCAST, body, NULL);
      assert_true(rc == 0 || (rc == MQR_ENOMEM && i < 20));
      if (rc == 0) snprintf(expect[want++], 16, "%s", body);
    }
    for (int spin = 0; spin < 2000 && s.n < want; spin++) {
      uv_run(&loop, UV_RUN_NOWAIT);
      if (s.n < want) uv_sleep(1);
    }
    assert_int_equal(s.n, want);
    for (int i = 0; i < want; i++) assert_string_equal(s.seen[i], expect[i]);
    mqr_client_close(c, NULL, NULL);
    mqr_broker_close(b, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    mqr_config_destroy(cfg);
    assert_int_equal(talloc.live, 0);
    talloc_uninstall();
  }
}

/* ---- acknowledgement cost ---------------------------------------------------------------- */

static void on_count(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)c;
  (void)m;
  (*(int *)arg)++;
}

enum { ACK_N = 65536 };

/* Acks ACK_N in-flight deliveries in the given order (0: oldest first, 1: newest first,
 * 2: ACK_N acks for deliveries never made while ACK_N are in flight, 3: the same with one
 * in flight): each answered as it should be, and what stays in flight counted. */
static void acks(int order) {
  fx_t f;
  fx_open(&f);
  int got = 0;
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), ACK_N, on_count,
                                        &got, &c, NULL, NULL),
                   0);
  int n = order == 3 ? 1 : ACK_N;
  for (int i = 0; i < n; i++) assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "a", NULL), 0);
  assert_int_equal(got, n);
  for (int i = 0; i < ACK_N; i++) {
    if (order == 0) assert_int_equal(mqr_broker_ack(c, i + 1, false), 0);
    if (order == 1) assert_int_equal(mqr_broker_ack(c, ACK_N - i, false), 0);
    if (order >= 2) assert_int_equal(mqr_broker_ack(c, 1000000 + i, false), MQR_ENOTFOUND);
  }
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.in_flight, order >= 2 ? (uint64_t)n : 0);
  assert_int_equal(st.acknowledged, order >= 2 ? 0 : (uint64_t)n);
  mqr_broker_unsubscribe(c);
  fx_close(&f);
}

/* Acks in any order, and acks for deliveries never made, with 65,536 unacknowledged.
 * That each costs the same whatever is in flight is the benchmark ack.inflight's to show
 * (a ratio within one run), not a timed assertion here. */
static void test_acks_in_any_order(void **state) {
  (void)state;
  for (int order = 0; order < 4; order++) acks(order);
}

/* Purge drops what waits in a queue and leaves what is in flight to its consumers. */
static void test_purge(void **state) {
  (void)state;
  fx_t f;
  fx_open_counted(&f);
  sink_t s = {.ack = false};
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_msg, &s,
                                        &c, NULL, NULL),
                   0);
  for (int i = 0; i < 3; i++) assert_int_equal(send_body(f.b, "q", MQR_ANYCAST, "x", NULL), 0);
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(f.b), MQR_STR("q"));
  assert_non_null(q);
  assert_int_equal(mqr_broker_purge(f.b, q), 2);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("q"), &st), 0);
  assert_int_equal(st.depth, 0);
  assert_int_equal(st.in_flight, 1);
  assert_int_equal(mqr_broker_purge(f.b, q), 0);
  assert_int_equal(mqr_broker_ack(c, 1, false), 0);
  mqr_broker_stats_t bs;
  mqr_broker_stats(f.b, &bs);
  assert_int_equal(bs.messages, 0); /* every message released */
  mqr_broker_unsubscribe(c);
  fx_close_counted(&f);
}

/* An ANYCAST consumer on a wildcard address gets a copy of every ANYCAST send to the
 * addresses it matches (its queue is a routing group of its own), while it is there:
 * the queue made for it goes with it, and takes nothing after. */
static int wild_seen;
static void on_wild(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)arg;
  wild_seen++;
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

static void test_anycast_wildcard_consumer_queue_goes_with_it(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  mqr_broker_consumer_t *c;
  mqr_str_t qn;
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("jobs.#"), MQR_ANYCAST, MQR_STR(""), MQR_STR(""), 10, on_wild,
                                        NULL, &c, &qn, NULL),
                   0);
  assert_true(mqr_str_eq(qn, MQR_STR("jobs.#")));
  mqr_broker_receipt_t r;
  assert_int_equal(send_body(f.b, "jobs.a", MQR_ANYCAST, "1", &r), 0);
  assert_int_equal(r.queues, 2); /* jobs.a's own queue, made by the send, and the consumer's */
  assert_int_equal(wild_seen, 1);
  mqr_broker_unsubscribe(c);
  mqr_router_t *rt = mqr_broker_router(f.b);
  assert_null(mqr_router_find_queue(rt, MQR_STR("jobs.#")));
  assert_int_equal(send_body(f.b, "jobs.a", MQR_ANYCAST, "2", &r), 0);
  assert_int_equal(r.queues, 1);
  assert_int_equal(wild_seen, 1);
  /* A queue of the config stays when its consumer goes; one the broker made (jobs.a, by
   * the send) goes once its consumer took what it held (auto-delete-queues, as Artemis),
   * and its address with it (auto-delete-addresses). */
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 10, on_wild,
                                        NULL, &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
  assert_non_null(mqr_router_find_queue(rt, MQR_STR("q")));
  assert_int_equal(mqr_broker_subscribe(f.b, MQR_STR("jobs.a"), MQR_ANYCAST, MQR_STR(""), MQR_STR(""), 10, on_wild,
                                        NULL, &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
  assert_null(mqr_router_find_queue(rt, MQR_STR("jobs.a")));
  assert_null(mqr_router_find_address(rt, MQR_STR("jobs.a")));
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_anycast_wildcard_consumer_queue_goes_with_it),
      cmocka_unit_test(test_send_and_consume),
      cmocka_unit_test(test_purge),
      cmocka_unit_test(test_reentrant_callbacks),
      cmocka_unit_test(test_a_callback_deletes_queues_the_send_holds),
      cmocka_unit_test(test_nested_deliveries_keep_their_views),
      cmocka_unit_test(test_full_policies),
      cmocka_unit_test(test_no_allocation_per_send),
      cmocka_unit_test(test_reload),
      cmocka_unit_test(test_out_of_memory_in_a_send_to_a_waiting_consumer),
      cmocka_unit_test(test_out_of_memory_in_a_subscription),
      cmocka_unit_test(test_many_properties_reach_an_in_process_consumer),
      cmocka_unit_test(test_out_of_memory_delivering_to_a_network_consumer),
      cmocka_unit_test(test_listening_embedded),
      cmocka_unit_test(test_acks_in_any_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
