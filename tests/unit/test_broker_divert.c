/* Diverts in the broker, as Artemis's DivertTest and its divert example have them: a
 * non-exclusive divert forwards a copy (a new message id, its origin in _AMQ_ORIG_ADDRESS,
 * _AMQ_ORIG_MESSAGE_ID and _AMQ_ORIG_QUEUE) and the address still gets the message; an
 * exclusive one with a filter takes what matches; the copy's routing type is stripped,
 * passed or set; a divert forwards to each of its addresses; a copy is diverted again at
 * its address, keeping the first origin, and a loop is cut; a transformer changes or
 * drops the copy; a durable send is answered once its durable copy is durable, and the
 * copy survives a restart; a reload removes, changes and adds diverts. */
#include "broker_fx.h"

static const char yaml_fmt[] =
    "%s"
    "addresses:\n"
    "  orders: {anycast: [orders]}\n"
    "  spy: {multicast: [spy]}\n"
    "  prices: {multicast: [prices]}\n"
    "  forwarded: {multicast: [forwarded]}\n"
    "  both: {anycast: [both.any], multicast: [both.multi]}\n"
    "  fan: {multicast: [fan]}\n"
    "  c1: {multicast: [c1]}\n"
    "  c2: {multicast: [c2]}\n"
    "  c3: {multicast: [c3]}\n"
    "  loop.a: {multicast: [la]}\n"
    "  loop.b: {multicast: [lb]}\n"
    "  t.out: {multicast: [tout]}\n"
    "diverts:\n"
    "  order-divert: {address: orders, forwarding-address: spy}\n"
    "  prices-divert: {address: prices, forwarding-address: forwarded, filter: \"office='New York'\",\n"
    "                  exclusive: true}\n"
    "  strip: {address: rt.strip, forwarding-address: both}\n"
    "  pass: {address: rt.pass, forwarding-address: both, routing-type: PASS}\n"
    "  any: {address: rt.any, forwarding-address: both, routing-type: anycast}\n"
    "  multi: {address: rt.multi, forwarding-address: both, routing-type: MULTICAST}\n"
    "  fan-out: {address: fan, forwarding-address: [c1, c2]}\n"
    "  chain: {address: c1, forwarding-address: c3}\n"
    "  la: {address: loop.a, forwarding-address: loop.b}\n"
    "  lb: {address: loop.b, forwarding-address: loop.a}\n"
    "  tr: {address: t.in, forwarding-address: t.out, exclusive: true}\n";

static void fx_open(fx_t *f, bool durable) { fx_open_yaml(f, yaml_fmt, durable); }

/* Sends body to address with property office (NULL: none); the receipt's message id. */
static int64_t send_one(fx_t *f, const char *address, int rt, const char *body, const char *office, bool durable) {
  mqr_str_t keys[1] = {MQR_STR("office")};
  mqr_value_t values[1] = {mqr_value_string(mqr_str(office ? office : ""))};
  mqr_broker_message_t m = {.address = mqr_str(address),
                            .routing_type = rt,
                            .durable = durable,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .property_keys = keys,
                            .property_values = values,
                            .n_properties = office ? 1 : 0,
                            .body = mqr_str(body)};
  mqr_error_t err;
  mqr_broker_receipt_t r;
  if (mqr_broker_send(f->b, &m, &r, &err) != 0) fail_msg("send: %s", err.message);
  return r.message_id;
}

static uint64_t depth(fx_t *f, const char *q) {
  mqr_broker_queue_stats_t st;
  if (mqr_broker_queue_stats(f->b, mqr_str(q), &st) != 0) fail_msg("no queue %s", q);
  return st.depth;
}

typedef struct {
  int n;
  int64_t id, orig_id;
  char body[32], orig_address[32], orig_queue[32], stamp[16];
  int32_t routing_type;
} rx_t;

static void str_prop(const mqr_value_t *v, char *out) {
  if (v->type == MQR_VALUE_STRING) snprintf(out, 32, "%.*s", (int)v->u.s.len, v->u.s.ptr);
}

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  rx_t *rx = arg;
  rx->n++;
  rx->id = m->message_id;
  rx->routing_type = m->routing_type;
  snprintf(rx->body, sizeof rx->body, "%.*s", (int)m->body.len, m->body.ptr);
  rx->orig_address[0] = rx->orig_queue[0] = rx->stamp[0] = 0;
  rx->orig_id = 0;
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++) {
    mqr_str_t k = m->properties.keys[i];
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_ADDRESS"))) str_prop(&v[i], rx->orig_address);
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_QUEUE"))) str_prop(&v[i], rx->orig_queue);
    if (mqr_str_eq(k, MQR_STR("stamp"))) str_prop(&v[i], rx->stamp);
    if (mqr_str_eq(k, MQR_STR("_AMQ_ORIG_MESSAGE_ID")) && v[i].type == MQR_VALUE_LONG) rx->orig_id = v[i].u.l;
  }
  assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

/* Takes what queue q holds (acknowledged) into rx. */
static void drain(fx_t *f, const char *q, rx_t *rx) {
  mqr_broker_consumer_t *c;
  assert_int_equal(mqr_broker_subscribe(f->b, mqr_str(q), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, on_msg, rx,
                                        &c, NULL, NULL),
                   0);
  mqr_broker_unsubscribe(c);
}

static void test_a_copy_goes_and_the_original_stays(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  int64_t id = send_one(&f, "orders", MQR_ANYCAST, "order 1", NULL, false);
  assert_int_equal(depth(&f, "orders"), 1);
  assert_int_equal(depth(&f, "spy"), 1);
  rx_t rx = {0};
  drain(&f, "spy", &rx);
  assert_string_equal(rx.body, "order 1");
  assert_string_equal(rx.orig_address, "orders");
  assert_string_equal(rx.orig_queue, "order-divert");
  assert_int_equal(rx.orig_id, id);
  assert_true(rx.id != id); /* a new message */
  rx_t o = {0};
  drain(&f, "orders", &o);
  assert_int_equal(o.id, id);
  assert_string_equal(o.orig_address, ""); /* the original is unchanged */
  fx_close(&f);
}

static void test_an_exclusive_divert_takes_what_its_filter_matches(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "prices", MQR_MULTICAST, "ny", "New York", false);
  send_one(&f, "prices", MQR_MULTICAST, "ldn", "London", false);
  send_one(&f, "prices", MQR_MULTICAST, "none", NULL, false);
  assert_int_equal(depth(&f, "forwarded"), 1);
  assert_int_equal(depth(&f, "prices"), 2);
  rx_t rx = {0};
  drain(&f, "forwarded", &rx);
  assert_string_equal(rx.body, "ny");
  fx_close(&f);
}

/* both has an ANYCAST and a MULTICAST queue: the copy's routing type picks. */
static void test_the_copy_routing_type(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  send_one(&f, "rt.strip", MQR_ANYCAST, "s", NULL, false); /* no type: both queues */
  assert_int_equal(depth(&f, "both.any"), 1);
  assert_int_equal(depth(&f, "both.multi"), 1);
  send_one(&f, "rt.any", MQR_MULTICAST, "a", NULL, false);
  assert_int_equal(depth(&f, "both.any"), 2);
  assert_int_equal(depth(&f, "both.multi"), 1);
  send_one(&f, "rt.multi", MQR_ANYCAST, "m", NULL, false);
  assert_int_equal(depth(&f, "both.any"), 2);
  assert_int_equal(depth(&f, "both.multi"), 2);
  send_one(&f, "rt.pass", MQR_ANYCAST, "p", NULL, false); /* the send's own: ANYCAST */
  assert_int_equal(depth(&f, "both.any"), 3);
  assert_int_equal(depth(&f, "both.multi"), 2);
  send_one(&f, "rt.pass", MQR_MULTICAST, "p2", NULL, false);
  assert_int_equal(depth(&f, "both.any"), 3);
  assert_int_equal(depth(&f, "both.multi"), 3);
  fx_close(&f);
}

/* fan forwards to c1 and c2; c1's divert forwards the copy on to c3, which keeps the
 * first origin. A loop between loop.a and loop.b is cut after ten copies. */
static void test_fan_out_chains_and_loops(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  int64_t id = send_one(&f, "fan", MQR_MULTICAST, "f", NULL, false);
  assert_int_equal(depth(&f, "fan"), 1);
  assert_int_equal(depth(&f, "c1"), 1);
  assert_int_equal(depth(&f, "c2"), 1);
  assert_int_equal(depth(&f, "c3"), 1);
  rx_t rx = {0};
  drain(&f, "c3", &rx);
  assert_string_equal(rx.orig_address, "fan");
  assert_string_equal(rx.orig_queue, "fan-out");
  assert_int_equal(rx.orig_id, id);
  send_one(&f, "loop.a", MQR_MULTICAST, "l", NULL, false);
  assert_int_equal(depth(&f, "la") + depth(&f, "lb"), 11);
  send_one(&f, "loop.a", MQR_MULTICAST, "l", NULL, false); /* and again: the broker is fine */
  assert_int_equal(depth(&f, "la") + depth(&f, "lb"), 22);
  fx_close(&f);
}

static int transform(void *arg, mqr_str_t divert, mqr_broker_message_t *m) {
  int *calls = arg;
  (*calls)++;
  assert_true(mqr_str_eq(divert, MQR_STR("tr")));
  assert_true(mqr_str_eq(m->address, MQR_STR("t.out")));
  if (mqr_str_eq(m->body, MQR_STR("drop"))) return 1;
  static mqr_str_t keys[8];
  static mqr_value_t values[8];
  assert_true(m->n_properties < 8);
  for (size_t i = 0; i < m->n_properties; i++) keys[i] = m->property_keys[i], values[i] = m->property_values[i];
  keys[m->n_properties] = MQR_STR("stamp");
  values[m->n_properties] = mqr_value_string(MQR_STR("yes"));
  m->property_keys = keys;
  m->property_values = values;
  m->n_properties++;
  m->body = MQR_STR("transformed");
  return 0;
}

static void test_a_transformer_changes_or_drops_the_copy(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  int calls = 0;
  assert_int_equal(mqr_broker_set_transformer(f.b, MQR_STR("tr"), transform, &calls), 0);
  send_one(&f, "t.in", MQR_MULTICAST, "keep", NULL, false);
  send_one(&f, "t.in", MQR_MULTICAST, "drop", NULL, false);
  assert_int_equal(calls, 2);
  assert_int_equal(depth(&f, "tout"), 1);
  rx_t rx = {0};
  drain(&f, "tout", &rx);
  assert_string_equal(rx.body, "transformed");
  assert_string_equal(rx.stamp, "yes");
  assert_string_equal(rx.orig_address, "t.in");
  /* Removed: copies go as they are. */
  assert_int_equal(mqr_broker_set_transformer(f.b, MQR_STR("tr"), NULL, NULL), 0);
  send_one(&f, "t.in", MQR_MULTICAST, "plain", NULL, false);
  assert_int_equal(calls, 2);
  drain(&f, "tout", &rx);
  assert_string_equal(rx.body, "plain");
  fx_close(&f);
}

typedef struct {
  fx_t *f;
  int answers;
  uint64_t spy_at_answer;
} ans_t;

static void answered(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r, (void)err;
  ans_t *a = arg;
  assert_int_equal(status, 0);
  a->answers++;
  a->spy_at_answer = depth(a->f, "spy");
}

/* A durable send is answered once its durable copy is durable (enqueued), and both
 * survive a restart. */
static void test_durable_copies_are_answered_for_and_survive(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f, true);
  ans_t a = {&f, 0, 0};
  mqr_broker_message_t m = {.address = MQR_STR("orders"),
                            .routing_type = MQR_ANYCAST,
                            .durable = true,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("durable order")};
  mqr_broker_send_async(f.b, &m, answered, &a);
  for (int i = 0; i < 200 && a.answers == 0; i++) uv_run(&f.loop, UV_RUN_NOWAIT), usleep(1000);
  assert_int_equal(a.answers, 1);
  assert_int_equal(a.spy_at_answer, 1);
  settle(&f);
  fx_close(&f);
  fx_open(&f, true);
  assert_int_equal(depth(&f, "orders"), 1);
  assert_int_equal(depth(&f, "spy"), 1);
  rx_t rx = {0};
  drain(&f, "spy", &rx);
  assert_string_equal(rx.body, "durable order");
  assert_string_equal(rx.orig_queue, "order-divert");
  settle(&f);
  fx_close(&f);
}

/* A reload removes a divert gone from the config, changes one whose filter changed, and
 * adds a new one. */
static void test_reload_applies_diverts(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  static const char next[] = "addresses:\n"
                             "  orders: {anycast: [orders]}\n"
                             "diverts:\n"
                             "  prices-divert: {address: prices, forwarding-address: forwarded, exclusive: true,\n"
                             "                  filter: \"office='London'\"}\n"
                             "  new-one: {address: fan, forwarding-address: c3, exclusive: true}\n";
  mqr_config_t *cfg2;
  assert_int_equal(mqr_config_load_string("dv2.yaml", next, sizeof next - 1, &cfg2, NULL), 0);
  assert_int_equal(mqr_broker_reload(f.b, cfg2, NULL, NULL), 0);
  send_one(&f, "orders", MQR_ANYCAST, "o", NULL, false);
  assert_int_equal(depth(&f, "spy"), 0);
  send_one(&f, "prices", MQR_MULTICAST, "ny", "New York", false);
  send_one(&f, "prices", MQR_MULTICAST, "ldn", "London", false);
  assert_int_equal(depth(&f, "forwarded"), 1);
  rx_t rx = {0};
  drain(&f, "forwarded", &rx);
  assert_string_equal(rx.body, "ldn");
  send_one(&f, "fan", MQR_MULTICAST, "f", NULL, false);
  assert_int_equal(depth(&f, "fan"), 0);
  assert_int_equal(depth(&f, "c1"), 0);
  assert_int_equal(depth(&f, "c3"), 1);
  fx_close(&f);
  mqr_config_destroy(cfg2);
}

/* A bad divert in a config is refused with its position. */
static void test_bad_divert_configs(void **state) {
  (void)state;
  static const char *const bad[] = {
      "diverts:\n  d: {address: a}\n",
      "diverts:\n  d: {forwarding-address: b}\n",
      "diverts:\n  d: {address: a, forwarding-address: b, routing-type: BOTH}\n",
      "diverts:\n  d: {address: a, forwarding-address: b, filter: 'x = '}\n",
      "diverts:\n  d: {address: a, forwarding-address: b, colour: red}\n",
      "diverts:\n  d: {address: a, forwarding-address: [b, {c: 1}]}\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mqr_config_t *cfg = NULL;
    mqr_error_t items[4];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 4);
    assert_int_equal(mqr_config_load_string("bad.yaml", bad[i], strlen(bad[i]), &cfg, &d), MQR_ECONFIG);
    assert_true(items[0].line >= 2);
  }
  /* Read, but refused by the router when the load checks the config: forwarding to
   * itself. */
  static const char self[] = "diverts:\n  d: {address: a, forwarding-address: a}\n";
  mqr_config_t *cfg = NULL;
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  assert_int_equal(mqr_config_load_string("self.yaml", self, sizeof self - 1, &cfg, &d), MQR_ECONFIG);
  assert_int_equal(items[0].line, 2);
  assert_non_null(strstr(items[0].message, "diverts from"));
}

/* A diverted send allocates nothing once warm: the copy is made in a buffer kept for it. */
static void test_a_warm_diverted_send_allocates_nothing(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, false);
  rx_t rx = {0};
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 100; i++) send_one(&f, "fan", MQR_MULTICAST, "warm", "x", false);
    drain(&f, "fan", &rx), drain(&f, "c1", &rx), drain(&f, "c2", &rx), drain(&f, "c3", &rx);
    assert_int_equal(depth(&f, "c3"), 0);
  }
  talloc_install();
  for (int i = 0; i < 100; i++) send_one(&f, "fan", MQR_MULTICAST, "steady", "x", false);
  talloc_uninstall();
  assert_int_equal(talloc.calls, 0);
  assert_int_equal(depth(&f, "c3"), 100);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_copy_goes_and_the_original_stays),
      cmocka_unit_test(test_an_exclusive_divert_takes_what_its_filter_matches),
      cmocka_unit_test(test_the_copy_routing_type),
      cmocka_unit_test(test_fan_out_chains_and_loops),
      cmocka_unit_test(test_a_transformer_changes_or_drops_the_copy),
      cmocka_unit_test(test_durable_copies_are_answered_for_and_survive),
      cmocka_unit_test(test_reload_applies_diverts),
      cmocka_unit_test(test_bad_divert_configs),
      cmocka_unit_test(test_a_warm_diverted_send_allocates_nothing),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  fresh_dir();
  return rc;
}
