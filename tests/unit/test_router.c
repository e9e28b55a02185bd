/* The router: one test per rule of ROUTING-SEMANTICS.md, named after it. */
#include "router_int.h" /* the lookup's probe half */
#include "testutil.h"

#define S(x) MQR_STR(x)

static mqr_routing_set_t ANY_SET, MULTI_SET, BOTH_SET;

static int setup(void **state) {
  ANY_SET = mqr_routing_set_of(MQR_ANYCAST);
  MULTI_SET = mqr_routing_set_of(MQR_MULTICAST);
  BOTH_SET = mqr_routing_set_union(ANY_SET, MULTI_SET);
  mqr_router_t *r = malloc(sizeof *r);
  assert_int_equal(mqr_router_init(r, NULL), 0);
  *state = r;
  return 0;
}

static int teardown(void **state) {
  mqr_router_close(*state);
  free(*state);
  return 0;
}

static void addr(mqr_router_t *r, const char *name, mqr_routing_set_t types) {
  mqr_error_t e;
  int rc = mqr_router_add_address(r, mqr_str(name), types, 0, NULL, &e);
  if (rc) fail_msg("add address %s: %s", name, e.message);
}

static mqr_queue_t *queue(mqr_router_t *r, const char *name, const char *address, mqr_routing_type_t t) {
  mqr_queue_config_t cfg;
  mqr_queue_t *q = NULL;
  mqr_error_t e;
  mqr_queue_config_init(&cfg, mqr_str(name), mqr_str(address), t);
  int rc = mqr_router_add_queue(r, &cfg, &q, &e);
  if (rc) fail_msg("add queue %s: %s", name, e.message);
  return q;
}

static int try_queue(mqr_router_t *r, const char *name, const char *address, mqr_routing_type_t t, bool auto_create) {
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, mqr_str(name), mqr_str(address), t);
  cfg.auto_create_address = auto_create;
  return mqr_router_add_queue(r, &cfg, NULL, NULL);
}

static void settings(mqr_router_t *r, const char *match, uint32_t set, bool aca, bool acq) {
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  s.set = set;
  s.auto_create_addresses = aca;
  s.auto_create_queues = acq;
  assert_int_equal(mqr_router_add_address_settings(r, mqr_str(match), &s, NULL), 0);
}

static void no_auto_create(mqr_router_t *r) {
  settings(r, "#", MQR_SET_AUTO_CREATE_ADDRESSES | MQR_SET_AUTO_CREATE_QUEUES, false, false);
}

#define ROUTE(r, a, t) route_names((r), (a), (t), NULL, got, sizeof got)

/* ---- Routing types ------------------------------------------------------------------ */

static void test_address_default_routing_type_is_lowest_of_set(void **state) {
  mqr_router_t *r = *state;
  mqr_address_t *a;
  assert_int_equal(mqr_router_add_address(r, S("both"), BOTH_SET, 0, &a, NULL), 0);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_MULTICAST);
  assert_int_equal(mqr_router_add_address(r, S("empty"), mqr_routing_set_empty(), 0, &a, NULL), 0);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ROUTING_NONE);
  /* adding a type to an empty set makes it the default; later additions do not change it */
  assert_int_equal(mqr_router_add_routing_type(r, S("empty"), MQR_ANYCAST, NULL), 0);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ANYCAST);
  assert_int_equal(mqr_router_add_routing_type(r, S("empty"), MQR_MULTICAST, NULL), 0);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ANYCAST);
  assert_int_equal(mqr_router_add_routing_type(r, S("nope"), MQR_MULTICAST, NULL), MQR_ENOADDR);
  assert_int_equal(mqr_router_add_routing_type(r, S("empty"), 5, NULL), MQR_EINVAL);
}

/* ---- Addresses and queues ------------------------------------------------------------ */

static void test_queue_type_not_supported_by_address_is_refused(void **state) {
  mqr_router_t *r = *state;
  no_auto_create(r);
  addr(r, "orders", ANY_SET);
  assert_int_equal(try_queue(r, "q", "orders", MQR_MULTICAST, false), MQR_ETYPENOTSUPPORTED);
  assert_int_equal(try_queue(r, "q", "orders", MQR_MULTICAST, true), MQR_ETYPENOTSUPPORTED); /* settings say no */
  assert_int_equal(try_queue(r, "q", "missing", MQR_MULTICAST, true), MQR_ENOADDR);
  assert_int_equal(mqr_router_queue_count(r), 0);
}

static void test_queue_type_added_when_auto_create_may_add_it(void **state) {
  mqr_router_t *r = *state;
  addr(r, "orders", ANY_SET);
  assert_int_equal(try_queue(r, "q", "orders", MQR_MULTICAST, false), MQR_ETYPENOTSUPPORTED);
  assert_int_equal(try_queue(r, "q", "orders", MQR_MULTICAST, true), 0);
  mqr_address_t *a = mqr_router_find_address(r, S("orders"));
  assert_int_equal(mqr_address_routing_types(a).bits, BOTH_SET.bits);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ANYCAST); /* set first, unchanged */
  assert_int_equal(try_queue(r, "q2", "fresh", MQR_ANYCAST, true), 0);
  a = mqr_router_find_address(r, S("fresh"));
  assert_non_null(a);
  assert_true(mqr_address_flags(a) & MQR_ADDRESS_AUTO_CREATED);
}

static void test_removing_routing_type_with_queues_is_refused(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", BOTH_SET);
  queue(r, "qa", "a", MQR_ANYCAST);
  mqr_error_t e;
  assert_int_equal(mqr_router_remove_routing_type(r, S("a"), MQR_ANYCAST, &e), MQR_ETYPEINUSE);
  assert_non_null(strstr(e.message, "qa"));
  assert_int_equal(mqr_router_remove_routing_type(r, S("a"), MQR_MULTICAST, NULL), 0);
  mqr_address_t *a = mqr_router_find_address(r, S("a"));
  assert_int_equal(mqr_address_routing_types(a).bits, ANY_SET.bits);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ANYCAST);
  assert_int_equal(mqr_router_remove_queue(r, S("qa"), NULL), 0);
  assert_int_equal(mqr_router_remove_routing_type(r, S("a"), MQR_ANYCAST, NULL), 0);
  assert_int_equal(mqr_address_default_routing_type(a), MQR_ROUTING_NONE);
}

static void test_queue_name_is_unique_across_router(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", ANY_SET);
  addr(r, "b", MULTI_SET);
  queue(r, "q", "a", MQR_ANYCAST);
  mqr_queue_config_t cfg;
  mqr_error_t e;
  mqr_queue_config_init(&cfg, S("q"), S("b"), MQR_MULTICAST);
  assert_int_equal(mqr_router_add_queue(r, &cfg, NULL, &e), MQR_EQUEUEEXISTS);
  assert_non_null(strstr(e.message, "address 'a'"));
  assert_int_equal(mqr_router_queue_count(r), 1);
  assert_int_equal(mqr_router_add_address(r, S("a"), ANY_SET, 0, NULL, NULL), MQR_EADDREXISTS);
}

static void test_empty_address_or_queue_name_is_refused(void **state) {
  mqr_router_t *r = *state;
  assert_int_equal(mqr_router_add_address(r, S(""), ANY_SET, 0, NULL, NULL), MQR_EEMPTYADDR);
  addr(r, "a", ANY_SET);
  assert_int_equal(try_queue(r, "", "a", MQR_ANYCAST, false), MQR_EEMPTYQUEUE);
  assert_int_equal(try_queue(r, "q", "", MQR_ANYCAST, false), MQR_EEMPTYADDR);
  assert_int_equal(route_names(r, "", MQR_ROUTING_NONE, NULL, NULL, 0), MQR_EEMPTYADDR);
  assert_int_equal(route_names(r, "a::", MQR_ROUTING_NONE, NULL, NULL, 0), MQR_EEMPTYQUEUE);
}

static void test_removing_address_with_queues_refused_unless_forced(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", ANY_SET);
  queue(r, "q1", "a", MQR_ANYCAST);
  queue(r, "q2", "a", MQR_ANYCAST);
  assert_int_equal(mqr_router_remove_address(r, S("a"), false, NULL), MQR_EADDRHASQUEUES);
  assert_non_null(mqr_router_find_address(r, S("a")));
  assert_int_equal(mqr_router_remove_address(r, S("a"), true, NULL), 0);
  assert_null(mqr_router_find_address(r, S("a")));
  assert_null(mqr_router_find_queue(r, S("q1")));
  assert_int_equal(mqr_router_queue_count(r), 0);
  assert_int_equal(mqr_router_remove_address(r, S("a"), true, NULL), MQR_ENOADDR);
  assert_int_equal(mqr_router_remove_queue(r, S("q1"), NULL), MQR_ENOQUEUE);
}

static void test_max_consumers_below_minus_one_is_refused(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", ANY_SET);
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, S("q"), S("a"), MQR_ANYCAST);
  cfg.max_consumers = -2;
  assert_int_equal(mqr_router_add_queue(r, &cfg, NULL, NULL), MQR_EMAXCONSUMERS);
  cfg.max_consumers = 1;
  mqr_queue_t *q;
  assert_int_equal(mqr_router_add_queue(r, &cfg, &q, NULL), 0);
  assert_int_equal(mqr_queue_add_consumer(q), 0);
  assert_int_equal(mqr_queue_add_consumer(q), MQR_ECONSUMERLIMIT);
  assert_int_equal(mqr_queue_consumer_count(q), 1);
  mqr_queue_remove_consumer(q);
  mqr_queue_remove_consumer(q);
  assert_int_equal(mqr_queue_consumer_count(q), 0);
}

static void test_queue_keeps_every_attribute(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", MULTI_SET);
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, S("q"), S("a"), MQR_MULTICAST);
  cfg.durable = false;
  cfg.purge_on_no_consumers = true;
  cfg.enabled = false;
  cfg.max_consumers = 7;
  cfg.filter = S("color = 'red'");
  mqr_queue_t *q;
  assert_int_equal(mqr_router_add_queue(r, &cfg, &q, NULL), 0);
  assert_false(mqr_queue_durable(q));
  assert_true(mqr_queue_purge_on_no_consumers(q));
  assert_false(mqr_queue_enabled(q));
  assert_int_equal(mqr_queue_max_consumers(q), 7);
  assert_true(mqr_str_eq(mqr_queue_filter(q), S("color = 'red'")));
  assert_true(mqr_queue_address(q) == mqr_router_find_address(r, S("a")));
  assert_int_equal(mqr_queue_routing_type(q), MQR_MULTICAST);
  int token;
  mqr_queue_set_data(q, &token);
  assert_ptr_equal(mqr_queue_data(q), &token);
}

/* ---- Sending ---------------------------------------------------------------------- */

static void test_prefix_is_stripped_and_sets_routing_type(void **state) {
  mqr_router_t *r = *state;
  addr(r, "x", BOTH_SET);
  queue(r, "x.any", "x", MQR_ANYCAST);
  queue(r, "x.multi", "x", MQR_MULTICAST);
  mqr_prefixes_t px = {2, {{S("anycast://"), MQR_ANYCAST}, {S("multicast://"), MQR_MULTICAST}}};
  mqr_queue_t *t[8];
  mqr_route_result_t res = {t, 8, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  /* the prefix overrides the message's routing type */
  mqr_route_request_t req = {S("anycast://x"), MQR_MULTICAST, {0}, &px, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.count, 1);
  assert_true(mqr_str_eq(mqr_queue_name(t[0]), S("x.any")));
  req.address = S("multicast://x");
  req.routing_type = MQR_ROUTING_NONE;
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.count, 1);
  assert_true(mqr_str_eq(mqr_queue_name(t[0]), S("x.multi")));
  /* no prefixes configured: the name is taken as it is */
  req.prefixes = NULL;
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_true(mqr_str_eq(mqr_address_name(res.address), S("multicast://x")));
}

static void test_fully_qualified_queue_name_routes_to_that_queue(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "news", MULTI_SET);
  queue(r, "n1", "news", MQR_MULTICAST);
  queue(r, "n2", "news", MQR_MULTICAST);
  addr(r, "other", ANY_SET);
  queue(r, "o1", "other", MQR_ANYCAST);
  assert_int_equal(ROUTE(r, "news::n2", MQR_ROUTING_NONE), MQR_ROUTE_OK);
  assert_string_equal(got, "n2");
  assert_int_equal(ROUTE(r, "news::o1", MQR_ROUTING_NONE), MQR_EQUEUEADDR);
  /* a missing queue is auto-created with the address's only routing type */
  assert_int_equal(ROUTE(r, "news::n3", MQR_ROUTING_NONE), MQR_ROUTE_OK);
  assert_string_equal(got, "n3");
  assert_int_equal(mqr_queue_routing_type(mqr_router_find_queue(r, S("n3"))), MQR_MULTICAST);
  assert_true(mqr_queue_auto_created(mqr_router_find_queue(r, S("n3"))));
  no_auto_create(r);
  assert_int_equal(ROUTE(r, "news::n4", MQR_ROUTING_NONE), MQR_ENOQUEUE);
}

static void test_no_routing_type_reaches_every_queue_with_one_anycast_copy(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "mix", BOTH_SET);
  queue(r, "a1", "mix", MQR_ANYCAST);
  queue(r, "a2", "mix", MQR_ANYCAST);
  queue(r, "m1", "mix", MQR_MULTICAST);
  queue(r, "m2", "mix", MQR_MULTICAST);
  assert_int_equal(ROUTE(r, "mix", MQR_ROUTING_NONE), MQR_ROUTE_OK);
  assert_string_equal(got, "m1 m2 a1");
  assert_int_equal(ROUTE(r, "mix", MQR_ROUTING_NONE), MQR_ROUTE_OK);
  assert_string_equal(got, "m1 m2 a2");
  assert_int_equal(ROUTE(r, "mix", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "m1 m2");
  assert_int_equal(ROUTE(r, "mix", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "a1");
}

static void test_missing_address_is_auto_created_when_settings_allow(void **state) {
  mqr_router_t *r = *state;
  mqr_queue_t *t[4];
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("fresh"), MQR_ROUTING_NONE, {0}, NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS);
  assert_true(res.flags & MQR_ROUTE_CREATED_ADDRESS);
  mqr_address_t *a = mqr_router_find_address(r, S("fresh"));
  assert_non_null(a);
  assert_int_equal(mqr_address_routing_types(a).bits, MULTI_SET.bits); /* default-address-routing-type */
  assert_true(mqr_address_flags(a) & MQR_ADDRESS_AUTO_CREATED);
  assert_int_equal(mqr_address_unrouted(a), 1);
}

static void test_missing_address_fails_when_auto_create_is_off(void **state) {
  mqr_router_t *r = *state;
  no_auto_create(r);
  mqr_error_t e;
  mqr_queue_t *t[4];
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("ghost"), MQR_ANYCAST, {0}, NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, &e), MQR_ENOADDR);
  assert_non_null(strstr(e.message, "'ghost' does not exist"));
  assert_null(mqr_router_find_address(r, S("ghost")));
}

/* ARTEMIS-4212: an address present but lacking the routing type gets it when auto-create
 * allows, else the send fails: never a silent drop. */
static void test_missing_routing_type_is_added_or_the_send_fails(void **state) {
  mqr_router_t *r = *state;
  addr(r, "open", ANY_SET);
  settings(r, "closed", MQR_SET_AUTO_CREATE_ADDRESSES, false, false);
  addr(r, "closed", ANY_SET);
  mqr_queue_t *t[4];
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("open"), MQR_MULTICAST, {0}, NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_true(res.flags & MQR_ROUTE_ADDED_TYPE);
  assert_true(mqr_routing_set_contains(mqr_address_routing_types(res.address), MQR_MULTICAST));
  req.address = S("closed");
  mqr_error_t e;
  assert_int_equal(mqr_router_route(r, &req, &res, &e), MQR_ENOADDR);
  assert_non_null(strstr(e.message, "MULTICAST"));
  assert_false(
      mqr_routing_set_contains(mqr_address_routing_types(mqr_router_find_address(r, S("closed"))), MQR_MULTICAST));
}

static void test_anycast_exactly_one_queue_round_robin(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "jobs", ANY_SET);
  queue(r, "w1", "jobs", MQR_ANYCAST);
  queue(r, "w2", "jobs", MQR_ANYCAST);
  queue(r, "w3", "jobs", MQR_ANYCAST);
  const char *expect[] = {"w1", "w2", "w3", "w1", "w2", "w3", "w1"};
  for (int i = 0; i < 7; i++) {
    assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
    assert_string_equal(got, expect[i]);
  }
  assert_int_equal(mqr_queue_routed(mqr_router_find_queue(r, S("w1"))), 3);
  /* removing a queue keeps the rotation going over the rest */
  assert_int_equal(mqr_router_remove_queue(r, S("w2"), NULL), 0);
  assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
  char second[256];
  strcpy(second, got);
  assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_not_equal(got, second);
}

static void test_anycast_prefers_queue_with_consumer(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "jobs", ANY_SET);
  queue(r, "idle1", "jobs", MQR_ANYCAST);
  mqr_queue_t *busy = queue(r, "busy", "jobs", MQR_ANYCAST);
  queue(r, "idle2", "jobs", MQR_ANYCAST);
  assert_int_equal(mqr_queue_add_consumer(busy), 0);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
    assert_string_equal(got, "busy");
  }
  /* no consumers anywhere: plain round-robin again */
  mqr_queue_remove_consumer(busy);
  assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "idle2");
  assert_int_equal(ROUTE(r, "jobs", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "idle1");
}

static void test_anycast_send_auto_creates_queue_named_after_address(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  assert_int_equal(ROUTE(r, "tasks", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "tasks");
  mqr_queue_t *q = mqr_router_find_queue(r, S("tasks"));
  assert_non_null(q);
  assert_true(mqr_queue_auto_created(q));
  assert_int_equal(mqr_queue_routing_type(q), MQR_ANYCAST);
  /* a MULTICAST send creates no subscription queue */
  assert_int_equal(ROUTE(r, "events", MQR_MULTICAST), MQR_ROUTE_NO_BINDINGS);
  assert_int_equal(mqr_router_queue_count(r), 1);
}

static void test_multicast_every_queue_gets_a_copy(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "news", MULTI_SET);
  for (int i = 0; i < 10; i++) {
    char name[16];
    snprintf(name, sizeof name, "sub%d", i);
    queue(r, name, "news", MQR_MULTICAST);
  }
  assert_int_equal(ROUTE(r, "news", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "sub0 sub1 sub2 sub3 sub4 sub5 sub6 sub7 sub8 sub9");
  assert_int_equal(mqr_address_routed(mqr_router_find_address(r, S("news"))), 1);
}

static void test_disabled_and_purge_on_no_consumers_queues_are_skipped(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "n", BOTH_SET);
  mqr_queue_t *off = queue(r, "off", "n", MQR_MULTICAST);
  queue(r, "on", "n", MQR_MULTICAST);
  mqr_queue_config_t cfg;
  mqr_queue_t *purge;
  mqr_queue_config_init(&cfg, S("purge"), S("n"), MQR_MULTICAST);
  cfg.purge_on_no_consumers = true;
  assert_int_equal(mqr_router_add_queue(r, &cfg, &purge, NULL), 0);
  mqr_queue_config_init(&cfg, S("apurge"), S("n"), MQR_ANYCAST);
  cfg.purge_on_no_consumers = true;
  assert_int_equal(mqr_router_add_queue(r, &cfg, NULL, NULL), 0);
  queue(r, "a", "n", MQR_ANYCAST);
  mqr_queue_set_enabled(off, false);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ROUTE(r, "n", MQR_ROUTING_NONE), MQR_ROUTE_OK);
    assert_string_equal(got, "on a");
  }
  assert_int_equal(mqr_queue_add_consumer(purge), 0);
  mqr_queue_set_enabled(off, true);
  assert_int_equal(ROUTE(r, "n", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "off on purge");
}

static void test_no_bindings_counts_unrouted(void **state) {
  mqr_router_t *r = *state;
  addr(r, "lonely", MULTI_SET);
  addr(r, "q-only", ANY_SET);
  mqr_queue_t *q = queue(r, "q", "q-only", MQR_ANYCAST);
  mqr_queue_set_enabled(q, false);
  for (int i = 0; i < 3; i++)
    assert_int_equal(route_names(r, "lonely", MQR_ROUTING_NONE, NULL, NULL, 0), MQR_ROUTE_NO_BINDINGS);
  assert_int_equal(route_names(r, "q-only", MQR_ANYCAST, NULL, NULL, 0), MQR_ROUTE_NO_BINDINGS);
  assert_int_equal(mqr_address_unrouted(mqr_router_find_address(r, S("lonely"))), 3);
  assert_int_equal(mqr_address_routed(mqr_router_find_address(r, S("lonely"))), 0);
  assert_int_equal(mqr_address_unrouted(mqr_router_find_address(r, S("q-only"))), 1);
}

static void test_no_route_goes_to_dead_letter_address_once(void **state) {
  mqr_router_t *r = *state;
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  s.set = MQR_SET_DEAD_LETTER_ADDRESS | MQR_SET_SEND_TO_DLA_ON_NO_ROUTE;
  s.dead_letter_address = S("DLA");
  s.send_to_dla_on_no_route = true;
  assert_int_equal(mqr_router_add_address_settings(r, S("#"), &s, NULL), 0);
  addr(r, "DLA", ANY_SET);
  queue(r, "dlq1", "DLA", MQR_ANYCAST);
  queue(r, "dlq2", "DLA", MQR_ANYCAST);
  addr(r, "orders", MULTI_SET);
  mqr_queue_t *t[4];
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("orders"), MQR_ROUTING_NONE, {0}, NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS_DLA);
  assert_int_equal(res.count, 1); /* once: one anycast queue of the DLA */
  assert_true(mqr_str_eq(mqr_address_name(res.address), S("DLA")));
  assert_int_equal(mqr_address_unrouted(mqr_router_find_address(r, S("orders"))), 1);
  assert_int_equal(mqr_address_routed(mqr_router_find_address(r, S("DLA"))), 1);
  /* The DLA with nothing to take it: still NO_BINDINGS_DLA, as Artemis's
   * PostOfficeImpl.maybeSendToDLA says whenever a DLA is configured; it counts the
   * message unrouted, and there is no loop. */
  assert_int_equal(mqr_router_remove_queue(r, S("dlq1"), NULL), 0);
  assert_int_equal(mqr_router_remove_queue(r, S("dlq2"), NULL), 0);
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS_DLA);
  assert_int_equal(res.count, 0);
  assert_int_equal(mqr_address_unrouted(mqr_router_find_address(r, S("DLA"))), 1);
  /* A DLA that does not exist: the same status, and it is not created. */
  assert_int_equal(mqr_router_remove_address(r, S("DLA"), true, NULL), 0);
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS_DLA);
  assert_null(mqr_router_find_address(r, S("DLA")));
  addr(r, "DLA", ANY_SET);
  /* send-to-dla-on-no-route off: NO_BINDINGS */
  queue(r, "dlq1", "DLA", MQR_ANYCAST);
  s.set = MQR_SET_SEND_TO_DLA_ON_NO_ROUTE;
  s.send_to_dla_on_no_route = false;
  assert_int_equal(mqr_router_add_address_settings(r, S("orders"), &s, NULL), 0);
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS);
  /* and on again for an existing address when those settings go */
  assert_int_equal(mqr_router_remove_address_settings(r, S("orders")), 0);
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  assert_int_equal(res.status, MQR_ROUTE_NO_BINDINGS_DLA);
}

static void test_route_status_names(void **state) {
  (void)state;
  assert_string_equal(mqr_route_status_name(MQR_ROUTE_OK), "OK");
  assert_string_equal(mqr_route_status_name(MQR_ROUTE_NO_BINDINGS), "NO_BINDINGS");
  assert_string_equal(mqr_route_status_name(MQR_ROUTE_NO_BINDINGS_DLA), "NO_BINDINGS_DLA");
  assert_string_equal(mqr_route_status_name(MQR_ROUTE_DUPLICATE_ID), "DUPLICATE_ID");
}

static void test_result_too_small_changes_nothing(void **state) {
  mqr_router_t *r = *state;
  addr(r, "news", BOTH_SET);
  queue(r, "m1", "news", MQR_MULTICAST);
  queue(r, "m2", "news", MQR_MULTICAST);
  queue(r, "a1", "news", MQR_ANYCAST);
  char *before = router_dump(r);
  mqr_queue_t *t[2];
  mqr_route_result_t res = {t, 2, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("news"), MQR_ROUTING_NONE, S("id-1"), NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), MQR_ENOSPC);
  assert_int_equal(res.needed, 3);
  char *after = router_dump(r);
  assert_string_equal(before, after);
  /* the duplicate id was not recorded either */
  mqr_queue_t *t3[3];
  mqr_route_result_t ok = {t3, 3, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  assert_int_equal(mqr_router_route(r, &req, &ok, NULL), 0);
  assert_int_equal(ok.status, MQR_ROUTE_OK);
  free(before);
  free(after);
}

/* The lookup table keeps each address's routing types beside its name: every change of
 * the types (added, removed, added by a queue or a send, undone by a refused send) shows
 * in mqr_router_find_address_types as in the address, for short and long names. */
static void expect_types(mqr_router_t *r, const char *name, mqr_routing_set_t want) {
  mqr_routing_set_t got;
  mqr_address_t *a = mqr_router_find_address_types(r, mqr_str(name), &got);
  assert_non_null(a);
  assert_ptr_equal(a, mqr_router_find_address(r, mqr_str(name)));
  assert_int_equal(got.bits, want.bits);
  assert_int_equal(mqr_address_routing_types(a).bits, want.bits);
}

static void test_lookup_types_follow_every_change(void **state) {
  mqr_router_t *r = *state;
  const char *names[] = {"a", "sixteen-bytes-16", "a-name-longer-than-sixteen-bytes"};
  for (int i = 0; i < 3; i++) {
    const char *n = names[i];
    char q[64];
    addr(r, n, ANY_SET);
    expect_types(r, n, ANY_SET);
    assert_int_equal(mqr_router_add_routing_type(r, mqr_str(n), MQR_MULTICAST, NULL), 0);
    expect_types(r, n, BOTH_SET);
    assert_int_equal(mqr_router_remove_routing_type(r, mqr_str(n), MQR_ANYCAST, NULL), 0);
    expect_types(r, n, MULTI_SET);
    snprintf(q, sizeof q, "%s.q", n); /* a queue of a missing type adds it */
    assert_int_equal(try_queue(r, q, n, MQR_ANYCAST, true), 0);
    expect_types(r, n, BOTH_SET);
    assert_int_equal(mqr_router_remove_queue(r, mqr_str(q), NULL), 0);
    assert_int_equal(mqr_router_remove_routing_type(r, mqr_str(n), MQR_ANYCAST, NULL), 0);
    expect_types(r, n, MULTI_SET);
    /* a send refused after adding its type (result too small) takes the type back */
    memcpy(q, n, strlen(n)); /* (snprintf here draws a false -Wformat-truncation from gcc 12) */
    memcpy(q + strlen(n), ".m", 3);
    queue(r, q, n, MQR_MULTICAST);
    mqr_queue_t *none[1];
    mqr_route_result_t small = {none, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    mqr_route_request_t req = {mqr_str(n), MQR_ANYCAST, {0}, NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(r, &req, &small, NULL), MQR_ENOSPC);
    expect_types(r, n, MULTI_SET);
    /* and a send that succeeds keeps it */
    mqr_queue_t *t[4];
    mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
    assert_true(res.flags & MQR_ROUTE_ADDED_TYPE);
    expect_types(r, n, BOTH_SET);
    /* removed and made again: the slot is the new address's */
    assert_int_equal(mqr_router_remove_address(r, mqr_str(n), true, NULL), 0);
    mqr_routing_set_t got;
    assert_null(mqr_router_find_address_types(r, mqr_str(n), &got));
    assert_true(mqr_routing_set_is_empty(got));
    addr(r, n, MULTI_SET);
    expect_types(r, n, MULTI_SET);
  }
  /* an address auto-created by a send */
  mqr_queue_t *t[4];
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  mqr_route_request_t req = {S("made.by.a.send.to.a.long.name"), MQR_ANYCAST, {0}, NULL, NULL, NULL};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  expect_types(r, "made.by.a.send.to.a.long.name", ANY_SET);
  /* many addresses: growth moves slots, and each keeps its types */
  char nm[32];
  for (int i = 0; i < 3000; i++) {
    snprintf(nm, sizeof nm, i % 2 ? "grow.%d" : "grow.longer.than.sixteen.%d", i);
    addr(r, nm, i % 3 ? ANY_SET : MULTI_SET);
  }
  for (int i = 0; i < 3000; i++) {
    snprintf(nm, sizeof nm, i % 2 ? "grow.%d" : "grow.longer.than.sixteen.%d", i);
    expect_types(r, nm, i % 3 ? ANY_SET : MULTI_SET);
  }
}

/* An address whose name does not fit a pool cell (over 39 bytes) has a block of its own,
 * which holds the address: removing it, with or without queues, frees everything and
 * reads nothing freed (ASan), and one left in place is freed by close (teardown). */
static void test_address_with_long_name_is_removed_and_freed(void **state) {
  mqr_router_t *r = *state;
  char nm[1100];
  for (size_t len = 38; len <= 1024; len = len < 42 ? len + 1 : len * 2) {
    memset(nm, 'x', len);
    nm[len] = '\0';
    for (int round = 0; round < 2; round++) {
      addr(r, nm, ANY_SET);
      char q[1200];
      snprintf(q, sizeof q, "%s.q", nm);
      queue(r, q, nm, MQR_ANYCAST);
      assert_int_equal(mqr_router_remove_address(r, mqr_str(nm), false, NULL), MQR_EADDRHASQUEUES);
      assert_int_equal(mqr_router_remove_address(r, mqr_str(nm), round == 0, NULL),
                       round == 0 ? 0 : MQR_EADDRHASQUEUES);
      assert_true((mqr_router_find_address(r, mqr_str(nm)) == NULL) == (round == 0));
      assert_true((mqr_router_find_queue(r, mqr_str(q)) == NULL) == (round == 0));
    }
  }
}

/* The lookup's inline half (mqr/routing.h) answers as its exported half and as
 * mqr_router_find_address do: names of every length from 1 to 40 present, and names
 * absent that share a present one's first and last 8 bytes (8 and 16 bytes: the same two
 * words, told apart by the length alone), differ in one byte, or are present with a
 * different length; through growth, which moves slots, and after removals, which shift
 * them back. The name bytes sit at the end of a guarded buffer, so an inline read past a
 * name is a fault under ASan. */
static void expect_lookup(const mqr_router_t *r, const char *name, size_t len, bool present) {
  char *copy = malloc(len ? len : 1);
  memcpy(copy, name, len);
  mqr_str_t n = mqr_str_n(copy, len);
  mqr_routing_set_t inl = {0xff}, any = {0xff};
  mqr_address_t *a = mqr_router_find_address_types(r, n, &inl);
  mqr_address_t *b = mqr__router_find_types_any(r, n, &any);
  if (a != b || a != mqr_router_find_address(r, n) || inl.bits != any.bits || (a != NULL) != present)
    fail_msg("lookup of %.*s (%zu bytes): inline %p types %x, exported %p types %x, present %d", (int)len, name, len,
             (void *)a, inl.bits, (void *)b, any.bits, present);
  if (a != NULL && inl.bits != mqr_address_routing_types(a).bits) fail_msg("%.*s: types differ", (int)len, name);
  if (a == NULL && inl.bits != 0) fail_msg("%.*s: absent, yet types %x", (int)len, name, inl.bits);
  free(copy);
}

/* Name i of the test below: 1 + i % 40 bytes, the same length every 40; its first and
 * last byte say which of those 50 it is, so no two are alike. */
static size_t lookup_name(int i, char *out) {
  static const char A[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  size_t len = 1 + (size_t)(i % 40);
  int k = i / 40;
  for (size_t j = 0; j < len; j++) out[j] = A[(k * 7 + (int)j * 13) % 62];
  out[0] = out[len - 1] = A[k];
  return len;
}

static void test_lookup_inline_half_answers_as_exported_half(void **state) {
  mqr_router_t *r = *state;
  char nm[64];
  expect_lookup(r, "abcdefgh", 8, false); /* an empty table */
  addr(r, "abcdefgh", ANY_SET);
  expect_lookup(r, "abcdefgh", 8, true);
  expect_lookup(r, "abcdefghabcdefgh", 16, false); /* the same (a, b), 16 bytes */
  addr(r, "abcdefghabcdefgh", MULTI_SET);
  expect_lookup(r, "abcdefghabcdefgh", 16, true);
  assert_int_equal(mqr_router_remove_address(r, S("abcdefgh"), false, NULL), 0);
  expect_lookup(r, "abcdefgh", 8, false);
  expect_lookup(r, "abcdefghabcdefgh", 16, true);
  enum { N = 2000 };
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      size_t len = lookup_name(i, nm);
      mqr_str_t n = mqr_str_n(nm, len);
      /* round 0 adds all (growth moves slots), round 1 removes every third (backward
       * shifts move the rest), round 2 adds them again */
      if (round == 0 || (round == 2 && i % 3 == 0)) {
        mqr_error_t e;
        if (mqr_router_add_address(r, n, i % 2 ? ANY_SET : BOTH_SET, 0, NULL, &e) != 0) fail_msg("%s", e.message);
      }
      if (round == 1 && i % 3 == 0) assert_int_equal(mqr_router_remove_address(r, n, false, NULL), 0);
    }
    for (int i = 0; i < N; i++) {
      size_t len = lookup_name(i, nm);
      expect_lookup(r, nm, len, round != 1 || i % 3 != 0);
      char c0 = nm[0];
      nm[0] = '#'; /* not in the names' alphabet: absent */
      expect_lookup(r, nm, len, false);
      nm[0] = c0;
      nm[len / 2] = '#'; /* a middle byte: past 16 bytes, outside both words */
      expect_lookup(r, nm, len, false);
    }
  }
}

/* ---- Wildcards ---------------------------------------------------------------------- */

static void test_wildcard_queues_get_copies_of_matching_sends(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "news.#", MULTI_SET);
  queue(r, "all", "news.#", MQR_MULTICAST);
  addr(r, "news.europe.#", MULTI_SET);
  queue(r, "europe", "news.europe.#", MQR_MULTICAST);
  addr(r, "news.*", MULTI_SET);
  queue(r, "one-level", "news.*", MQR_MULTICAST);
  addr(r, "news.europe", MULTI_SET);
  queue(r, "direct", "news.europe", MQR_MULTICAST);
  assert_int_equal(ROUTE(r, "news.europe", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "direct all europe one-level");
  /* an auto-created concrete address picks up the wildcard bindings too */
  assert_int_equal(ROUTE(r, "news.europe.sport", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "all europe");
  assert_int_equal(ROUTE(r, "news", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "all");
  assert_int_equal(ROUTE(r, "weather", MQR_MULTICAST), MQR_ROUTE_NO_BINDINGS);
}

static void test_sending_to_a_wildcard_address_is_refused(void **state) {
  mqr_router_t *r = *state;
  addr(r, "news.#", MULTI_SET);
  assert_int_equal(route_names(r, "news.#", MQR_MULTICAST, NULL, NULL, 0), MQR_EWILDCARDSEND);
  assert_int_equal(route_names(r, "sport.*", MQR_MULTICAST, NULL, NULL, 0), MQR_EWILDCARDSEND);
  assert_null(mqr_router_find_address(r, S("sport.*"))); /* not auto-created */
  /* address::queue names one queue of it: that queue alone (a wildcard subscription's,
   * given a message of its own); a queue it does not have is still refused. */
  queue(r, "all", "news.#", MQR_MULTICAST);
  queue(r, "other", "news.#", MQR_MULTICAST);
  char got[64];
  assert_int_equal(route_names(r, "news.#::all", MQR_ROUTING_NONE, NULL, got, sizeof got), MQR_ROUTE_OK);
  assert_string_equal(got, "all");
  assert_int_equal(route_names(r, "news.#::nope", MQR_ROUTING_NONE, NULL, NULL, 0), MQR_EWILDCARDSEND);
  assert_true(mqr_address_flags(mqr_router_find_address(r, S("news.#"))) & MQR_ADDRESS_WILDCARD);
}

static void test_wildcard_bindings_are_recomputed_when_bindings_change(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a.b.c", MULTI_SET);
  addr(r, "a.x.y.c", MULTI_SET);
  addr(r, "a.c", MULTI_SET);
  addr(r, "b.c", MULTI_SET);
  mqr_address_t *abc = mqr_router_find_address(r, S("a.b.c"));
  addr(r, "a.#.c", MULTI_SET); /* # in the middle */
  assert_int_equal(mqr_address_binding_count(abc, MQR_MULTICAST), 0);
  queue(r, "w", "a.#.c", MQR_MULTICAST);
  assert_int_equal(mqr_address_binding_count(abc, MQR_MULTICAST), 1);
  assert_int_equal(mqr_address_binding_count(mqr_router_find_address(r, S("a.x.y.c")), MQR_MULTICAST), 1);
  assert_int_equal(mqr_address_binding_count(mqr_router_find_address(r, S("a.c")), MQR_MULTICAST), 1);
  assert_int_equal(mqr_address_binding_count(mqr_router_find_address(r, S("b.c")), MQR_MULTICAST), 0);
  /* an anycast wildcard queue joins the anycast rotation of matching addresses */
  assert_int_equal(try_queue(r, "wa", "a.#.c", MQR_ANYCAST, true), 0);
  assert_int_equal(mqr_address_binding_count(abc, MQR_ANYCAST), 1);
  assert_int_equal(mqr_router_remove_queue(r, S("w"), NULL), 0);
  assert_int_equal(mqr_address_binding_count(abc, MQR_MULTICAST), 0);
  assert_int_equal(mqr_router_remove_address(r, S("a.#.c"), true, NULL), 0);
  assert_int_equal(mqr_address_binding_count(abc, MQR_ANYCAST), 0);
  assert_null(mqr_router_find_queue(r, S("wa")));
}

static void test_configurable_delimiter_and_wildcards(void **state) {
  (void)state;
  mqr_wildcard_t wc = {'/', '>', '+', '%'};
  mqr_router_t r;
  char got[256];
  assert_int_equal(mqr_router_init(&r, &wc), 0);
  addr(&r, "sport/>", MULTI_SET);
  queue(&r, "all", "sport/>", MQR_MULTICAST);
  addr(&r, "sport/+/scores", MULTI_SET);
  queue(&r, "scores", "sport/+/scores", MQR_MULTICAST);
  assert_int_equal(ROUTE(&r, "sport/tennis/scores", MQR_MULTICAST), MQR_ROUTE_OK);
  assert_string_equal(got, "all scores");
  assert_int_equal(ROUTE(&r, "sport/%>", MQR_MULTICAST), MQR_ROUTE_OK); /* escaped: a literal '>' */
  assert_string_equal(got, "all");
  assert_int_equal(ROUTE(&r, "sport/+", MQR_MULTICAST), MQR_EWILDCARDSEND);
  mqr_router_close(&r);
}

/* ---- Address settings ------------------------------------------------------------- */

static void test_settings_any_words_allowed_only_at_end(void **state) {
  mqr_router_t *r = *state;
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  mqr_error_t e;
  assert_int_equal(mqr_router_add_address_settings(r, S("a.#.b"), &s, &e), MQR_EBADPATTERN);
  assert_int_equal(mqr_router_add_address_settings(r, S(""), &s, NULL), MQR_EBADPATTERN);
  s.set = MQR_SET_ID_CACHE_SIZE;
  s.id_cache_size = -1;
  assert_int_equal(mqr_router_add_address_settings(r, S("a"), &s, NULL), MQR_EINVAL);
  assert_int_equal(mqr_router_remove_address_settings(r, S("nothing")), MQR_EINVAL);
}

static void test_settings_most_specific_match_wins_and_unset_fields_inherit(void **state) {
  mqr_router_t *r = *state;
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  s.set = MQR_SET_ID_CACHE_SIZE | MQR_SET_MAX_SIZE_BYTES | MQR_SET_AUTO_CREATE_QUEUES;
  s.id_cache_size = 1;
  s.max_size_bytes = 100;
  s.auto_create_queues = false;
  assert_int_equal(mqr_router_add_address_settings(r, S("#"), &s, NULL), 0);
  s.set = MQR_SET_ID_CACHE_SIZE | MQR_SET_MAX_SIZE_BYTES;
  s.id_cache_size = 2;
  s.max_size_bytes = 200;
  assert_int_equal(mqr_router_add_address_settings(r, S("a.#"), &s, NULL), 0);
  s.set = MQR_SET_ID_CACHE_SIZE;
  s.id_cache_size = 3;
  assert_int_equal(mqr_router_add_address_settings(r, S("a.b"), &s, NULL), 0);
  s.id_cache_size = 4;
  assert_int_equal(mqr_router_add_address_settings(r, S("a.*"), &s, NULL), 0);
  mqr_address_settings_t out;
  mqr_router_resolve_settings(r, S("a.b"), &out);
  assert_int_equal(out.id_cache_size, 3);    /* exact */
  assert_int_equal(out.max_size_bytes, 200); /* from a.# (a.* and a.b do not set it) */
  assert_false(out.auto_create_queues);      /* from # */
  assert_true(out.auto_create_addresses);    /* nobody sets it: the default */
  assert_int_equal(out.default_queue_routing_type, MQR_MULTICAST);
  mqr_router_resolve_settings(r, S("a.c"), &out);
  assert_int_equal(out.id_cache_size, 4); /* a.* beats a.# */
  mqr_router_resolve_settings(r, S("a.c.d"), &out);
  assert_int_equal(out.id_cache_size, 2);
  mqr_router_resolve_settings(r, S("z"), &out);
  assert_int_equal(out.id_cache_size, 1);
  /* an address's merged settings follow later changes */
  addr(r, "a.b", ANY_SET);
  assert_int_equal(mqr_address_settings(mqr_router_find_address(r, S("a.b")))->id_cache_size, 3);
  assert_int_equal(mqr_router_remove_address_settings(r, S("a.b")), 0);
  assert_int_equal(mqr_address_settings(mqr_router_find_address(r, S("a.b")))->id_cache_size, 4);
  s.id_cache_size = 9; /* replacing a match keeps one entry */
  assert_int_equal(mqr_router_add_address_settings(r, S("a.*"), &s, NULL), 0);
  assert_int_equal(mqr_address_settings(mqr_router_find_address(r, S("a.b")))->id_cache_size, 9);
}

/* ---- Duplicate detection ---------------------------------------------------------- */

static void test_duplicate_id_is_not_routed(void **state) {
  mqr_router_t *r = *state;
  addr(r, "orders", ANY_SET);
  mqr_queue_t *q = queue(r, "orders", "orders", MQR_ANYCAST);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "id-1", NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "id-1", NULL, 0), MQR_ROUTE_DUPLICATE_ID);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "id-2", NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, NULL, NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, NULL, NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(mqr_queue_routed(q), 4);
  /* the cache is per address */
  addr(r, "other", ANY_SET);
  queue(r, "other", "other", MQR_ANYCAST);
  assert_int_equal(route_names(r, "other", MQR_ANYCAST, "id-1", NULL, 0), MQR_ROUTE_OK);
  /* long ids (past the inline bytes) are told apart by their tails too */
  char a[200], b[200];
  memset(a, 'x', sizeof a - 1);
  a[sizeof a - 1] = '\0';
  strcpy(b, a);
  b[150] = 'y';
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, a, NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, b, NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, a, NULL, 0), MQR_ROUTE_DUPLICATE_ID);
}

static void test_duplicate_cache_keeps_the_last_id_cache_size_ids(void **state) {
  mqr_router_t *r = *state;
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  s.set = MQR_SET_ID_CACHE_SIZE;
  s.id_cache_size = 3;
  assert_int_equal(mqr_router_add_address_settings(r, S("orders"), &s, NULL), 0);
  s.id_cache_size = 0; /* disabled */
  assert_int_equal(mqr_router_add_address_settings(r, S("nodup"), &s, NULL), 0);
  addr(r, "orders", ANY_SET);
  queue(r, "orders", "orders", MQR_ANYCAST);
  const char *ids[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++) assert_int_equal(route_names(r, "orders", MQR_ANYCAST, ids[i], NULL, 0), MQR_ROUTE_OK);
  /* "a" was evicted by "d"; b, c, d are remembered */
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "b", NULL, 0), MQR_ROUTE_DUPLICATE_ID);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "d", NULL, 0), MQR_ROUTE_DUPLICATE_ID);
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "a", NULL, 0), MQR_ROUTE_OK); /* evicts b */
  assert_int_equal(route_names(r, "orders", MQR_ANYCAST, "b", NULL, 0), MQR_ROUTE_OK);
  addr(r, "nodup", ANY_SET);
  queue(r, "nodup", "nodup", MQR_ANYCAST);
  assert_int_equal(route_names(r, "nodup", MQR_ANYCAST, "a", NULL, 0), MQR_ROUTE_OK);
  assert_int_equal(route_names(r, "nodup", MQR_ANYCAST, "a", NULL, 0), MQR_ROUTE_OK);
}

/* ---- Allocation ------------------------------------------------------------------- */

static void test_route_to_existing_concrete_address_allocates_nothing(void **state) {
  (void)state;
  talloc_install();
  mqr_router_t r;
  assert_int_equal(mqr_router_init(&r, NULL), 0);
  assert_int_equal(talloc.calls, 0); /* init allocates nothing */
  addr(&r, "one", ANY_SET);
  queue(&r, "one", "one", MQR_ANYCAST);
  addr(&r, "ten", MULTI_SET);
  for (int i = 0; i < 10; i++) {
    char name[16];
    snprintf(name, sizeof name, "ten.%d", i);
    queue(&r, name, "ten", MQR_MULTICAST);
  }
  addr(&r, "ten.#", MULTI_SET);
  queue(&r, "tap", "ten.#", MQR_MULTICAST);
  addr(&r, "rr", ANY_SET);
  queue(&r, "rr1", "rr", MQR_ANYCAST);
  queue(&r, "rr2", "rr", MQR_ANYCAST);
  mqr_prefixes_t px = {1, {{S("anycast://"), MQR_ANYCAST}}};
  /* the first duplicate id of an address creates its cache, which doubles as ids fill it
   * (16, 32, ... 4,096): warm up past what the loop adds */
  for (int i = 0; i < 3000; i++) {
    char id[16];
    snprintf(id, sizeof id, "warm-%d", i);
    assert_int_equal(route_names(&r, "one", MQR_ANYCAST, id, NULL, 0), MQR_ROUTE_OK);
  }
  long before = talloc.calls;
  mqr_queue_t *t[32];
  for (int i = 0; i < 1000; i++) {
    char id[16];
    snprintf(id, sizeof id, "id-%d", i);
    mqr_route_result_t res = {t, 32, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    mqr_route_request_t req = {S("one"), MQR_ANYCAST, mqr_str(id), NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.count, 1);
    req = (mqr_route_request_t){S("ten"), MQR_MULTICAST, {0}, NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.count, 11);
    req = (mqr_route_request_t){S("anycast://rr"), MQR_ROUTING_NONE, {0}, &px, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.count, 1);
    req = (mqr_route_request_t){S("rr::rr2"), MQR_ROUTING_NONE, {0}, NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.count, 1);
  }
  assert_int_equal(talloc.calls - before, 0);
  mqr_router_close(&r);
  assert_int_equal(talloc.live, 0);
  talloc_uninstall();
}

/* A duplicate-id cache grows with use, and all of them together are bounded: 1,000
 * sends with a duplicate id, each to a new auto-created address, took ~133 MiB when each
 * cache was made whole (id-cache-size 20,000) on its first id. */
static void test_duplicate_caches_grow_with_use_and_are_bounded(void **state) {
  (void)state;
  mqr_router_t r;
  assert_int_equal(mqr_router_init(&r, NULL), 0);
  mqr_queue_t *t[4];
  for (int i = 0; i < 1000; i++) {
    char name[32];
    snprintf(name, sizeof name, "auto.%d", i);
    mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    mqr_route_request_t req = {mqr_str(name), MQR_ANYCAST, S("dup-1"), NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.status, MQR_ROUTE_OK);
  }
  size_t per = mqr_router_id_cache_bytes(&r) / 1000;
  printf("# %zu bytes per address with one duplicate id\n", per);
  assert_true(per < 4096);
  /* A budget: caches stop growing at it, and a new address's first id past it is
   * refused (ELIMIT) rather than routed unchecked. */
  size_t limit = mqr_router_id_cache_bytes(&r) + 8192;
  mqr_router_set_id_cache_limit(&r, limit);
  int refused = 0;
  for (int i = 0; i < 200; i++) {
    char name[32];
    snprintf(name, sizeof name, "more.%d", i);
    mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    mqr_route_request_t req = {mqr_str(name), MQR_ANYCAST, S("dup-1"), NULL, NULL, NULL};
    mqr_error_t err;
    int rc = mqr_router_route(&r, &req, &res, &err);
    if (rc == MQR_ELIMIT) {
      refused++;
      assert_non_null(strstr(err.message, "duplicate-id caches hold their limit"));
    } else {
      assert_int_equal(rc, 0);
    }
    assert_true(mqr_router_id_cache_bytes(&r) <= limit);
  }
  assert_true(refused > 0);
  /* One address's cache, held at its size by the budget, still catches recent ids. */
  for (int i = 0; i < 5000; i++) {
    char id[16];
    snprintf(id, sizeof id, "x-%d", i);
    mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    mqr_route_request_t req = {S("auto.0"), MQR_ANYCAST, mqr_str(id), NULL, NULL, NULL};
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.status, MQR_ROUTE_OK);
    assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
    assert_int_equal(res.status, MQR_ROUTE_DUPLICATE_ID);
  }
  assert_true(mqr_router_id_cache_bytes(&r) <= limit);
  mqr_router_close(&r);
}

static void test_listing_is_in_creation_order(void **state) {
  mqr_router_t *r = *state;
  addr(r, "c", ANY_SET);
  addr(r, "a", ANY_SET);
  addr(r, "b", ANY_SET);
  char *d = router_dump(r);
  char *pc = strstr(d, "A c "), *pa = strstr(d, "A a "), *pb = strstr(d, "A b ");
  assert_true(pc && pa && pb && pc < pa && pa < pb);
  free(d);
}

/* ---- queue filters ----------------------------------------------------------------------- */

typedef struct {
  int calls;
  const char *color;
} fill_t;

static void fill_color(void *ctx, mqr_filter_vocab_t *v) {
  fill_t *f = ctx;
  f->calls++;
  mqr_filter_vocab_set_header(v, MQR_HDR_PRIORITY, mqr_value_int(4));
  if (f->color) mqr_filter_vocab_set(v, MQR_STR("color"), mqr_value_string(mqr_str(f->color)));
}

static int route_fill(mqr_router_t *r, const char *address, int t, fill_t *f) {
  mqr_queue_t *targets[16];
  mqr_route_request_t req = {mqr_str(address), t, {0}, NULL, fill_color, f};
  mqr_route_result_t res = {targets, 16, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), 0);
  return (int)res.count;
}

static mqr_queue_t *filtered(mqr_router_t *r, const char *name, const char *address, mqr_routing_type_t t,
                             const char *filter) {
  mqr_queue_config_t cfg;
  mqr_queue_t *q = NULL;
  mqr_error_t e;
  mqr_queue_config_init(&cfg, mqr_str(name), mqr_str(address), t);
  cfg.filter = mqr_str(filter);
  if (mqr_router_add_queue(r, &cfg, &q, &e) != 0) fail_msg("add queue %s: %s", name, e.message);
  return q;
}

/* A route asks for the message's values once, and only when it meets a filtered queue;
 * they are cleared when it returns, so the next send starts from nothing. */
static void test_filters_read_values_once_and_only_when_needed(void **state) {
  mqr_router_t *r = *state;
  addr(r, "plain", MULTI_SET);
  queue(r, "plain.1", "plain", MQR_MULTICAST);
  addr(r, "paint", MULTI_SET);
  for (int i = 0; i < 5; i++) {
    char name[16];
    snprintf(name, sizeof name, "paint.%d", i);
    filtered(r, name, "paint", MQR_MULTICAST, i % 2 ? "color = 'red'" : "color <> 'red'");
  }
  fill_t f = {0, "red"};
  assert_int_equal(route_fill(r, "plain", MQR_MULTICAST, &f), 1);
  assert_int_equal(f.calls, 0);
  assert_int_equal(route_fill(r, "paint", MQR_MULTICAST, &f), 2);
  assert_int_equal(f.calls, 1);
  f.color = NULL; /* nothing set this time: the last message's color is gone */
  assert_int_equal(route_fill(r, "paint", MQR_MULTICAST, &f), 0);
  assert_int_equal(f.calls, 2);
  uint32_t n;
  const mqr_value_t *v = mqr_filter_vocab_values(mqr_router_filter_vocab(r), &n);
  for (uint32_t i = 0; i < n; i++) assert_int_equal(v[i].type, MQR_VALUE_NULL);
  f.color = "blue";
  assert_int_equal(route_fill(r, "paint", MQR_MULTICAST, &f), 3);
  /* Without a fill, filters read NULL: only IS NULL style filters match. */
  filtered(r, "paint.none", "paint", MQR_MULTICAST, "color IS NULL");
  assert_int_equal(route_names(r, "paint", MQR_MULTICAST, "", NULL, 0), MQR_ROUTE_OK);
  char out[256];
  route_names(r, "paint", MQR_MULTICAST, "", out, sizeof out);
  assert_string_equal(out, "paint.none");
}

/* A queue's filter is compiled when it is made: a bad one is refused with its column and
 * leaves the router as it was; a blank one is no filter. */
static void test_bad_queue_filter_is_refused(void **state) {
  mqr_router_t *r = *state;
  addr(r, "a", MULTI_SET);
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, MQR_STR("q"), MQR_STR("a"), MQR_MULTICAST);
  cfg.filter = MQR_STR("x BETWEEN 1");
  mqr_error_t e;
  assert_int_equal(mqr_router_add_queue(r, &cfg, NULL, &e), MQR_ESYNTAX);
  assert_non_null(strstr(e.message, "queue 'q': filter: "));
  assert_non_null(strstr(e.message, "column"));
  assert_null(mqr_router_find_queue(r, MQR_STR("q")));
  assert_int_equal(mqr_address_queue_count(mqr_router_find_address(r, MQR_STR("a"))), 0);
  cfg.filter = MQR_STR(" \t ");
  mqr_queue_t *q;
  assert_int_equal(mqr_router_add_queue(r, &cfg, &q, NULL), 0);
  assert_null(mqr_queue_compiled_filter(q));
}

/* ---- Artemis's routing groups and auto-create corners ---------------------------------- */

/* Each address a queue is bound to is its own round-robin group
 * (LocalQueueBinding.getRoutingName, BindingsImpl): an ANYCAST send to orders.eu goes to
 * one of its own queues and to one queue of each matching wildcard address, each group
 * taking its own turns. */
static void test_each_bound_address_is_its_own_anycast_group(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  addr(r, "orders.eu", ANY_SET);
  queue(r, "q1", "orders.eu", MQR_ANYCAST);
  queue(r, "q2", "orders.eu", MQR_ANYCAST);
  addr(r, "orders.#", ANY_SET);
  queue(r, "w1", "orders.#", MQR_ANYCAST);
  queue(r, "w2", "orders.#", MQR_ANYCAST);
  addr(r, "*.eu", ANY_SET);
  queue(r, "x1", "*.eu", MQR_ANYCAST);
  const char *want[] = {"q1 w1 x1", "q2 w2 x1", "q1 w1 x1", "q2 w2 x1"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(ROUTE(r, "orders.eu", MQR_ANYCAST), MQR_ROUTE_OK);
    assert_string_equal(got, want[i]);
  }
  /* A group whose queues are all disabled gives nothing; the others go on. */
  mqr_queue_set_enabled(mqr_router_find_queue(r, S("w1")), false);
  mqr_queue_set_enabled(mqr_router_find_queue(r, S("w2")), false);
  assert_int_equal(ROUTE(r, "orders.eu", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "q1 x1");
  /* An address matched by wildcards only: a group per wildcard address. */
  assert_int_equal(ROUTE(r, "orders.us", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "orders.us"); /* made for it: the wildcard groups are disabled */
  mqr_queue_set_enabled(mqr_router_find_queue(r, S("w1")), true);
  assert_int_equal(ROUTE(r, "orders.us", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "orders.us w1");
  /* The groups follow topology changes. */
  assert_int_equal(mqr_router_remove_address(r, S("*.eu"), true, NULL), 0);
  assert_int_equal(ROUTE(r, "orders.eu", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "q2 w1");
  assert_int_equal(mqr_router_remove_address(r, S("orders.#"), true, NULL), 0);
  assert_int_equal(ROUTE(r, "orders.eu", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "q1");
}

/* ServerSessionImpl.checkAutoCreate: a send with no routing type to an address created
 * under default-address-routing-type ANYCAST makes its queue too. */
static void test_implicit_send_under_anycast_default_makes_the_queue(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  mqr_address_settings_t s;
  memset(&s, 0, sizeof s);
  s.set = MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE;
  s.default_address_routing_type = MQR_ANYCAST;
  assert_int_equal(mqr_router_add_address_settings(r, S("jobs.#"), &s, NULL), 0);
  assert_int_equal(ROUTE(r, "jobs.new", MQR_ROUTING_NONE), MQR_ROUTE_OK);
  assert_string_equal(got, "jobs.new");
  mqr_queue_t *q = mqr_router_find_queue(r, S("jobs.new"));
  assert_non_null(q);
  assert_int_equal(mqr_queue_routing_type(q), MQR_ANYCAST);
  /* Under the MULTICAST default nothing is made. */
  assert_int_equal(ROUTE(r, "news.new", MQR_ROUTING_NONE), MQR_ROUTE_NO_BINDINGS);
  assert_null(mqr_router_find_queue(r, S("news.new")));
}

/* ARTEMIS-2238: with auto-create-queues off, an ANYCAST send to an address with no queue
 * of its own is refused, and leaves nothing behind; ARTEMIS-5337: a wildcard address's
 * queue is not the address's own. An address with a queue of its own of either type
 * takes the send as it is. */
static void test_anycast_send_needs_a_queue_of_its_own(void **state) {
  mqr_router_t *r = *state;
  char got[256];
  settings(r, "strict.#", MQR_SET_AUTO_CREATE_QUEUES, false, false);
  addr(r, "strict.a", ANY_SET);
  mqr_error_t e;
  assert_int_equal(route_names(r, "strict.a", MQR_ANYCAST, "", NULL, 0), MQR_ENOADDR);
  mqr_queue_t *t[4];
  mqr_route_request_t req = {S("strict.b"), MQR_ANYCAST, {0}, NULL, NULL, NULL};
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  assert_int_equal(mqr_router_route(r, &req, &res, &e), MQR_ENOADDR);
  assert_non_null(strstr(e.message, "auto-create-queues is off"));
  assert_null(mqr_router_find_address(r, S("strict.b"))); /* the address it made is gone */
  /* A wildcard address's queue does not count: still refused. */
  addr(r, "strict.*", ANY_SET);
  queue(r, "w", "strict.*", MQR_ANYCAST);
  assert_int_equal(route_names(r, "strict.a", MQR_ANYCAST, "", NULL, 0), MQR_ENOADDR);
  /* A queue of its own, even MULTICAST: the send goes on, to what ANYCAST has. */
  addr(r, "strict.c", BOTH_SET);
  queue(r, "strict.c.m", "strict.c", MQR_MULTICAST);
  assert_int_equal(ROUTE(r, "strict.c", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "w");
  /* With auto-create-queues on, the wildcard's queue does not stop the queue being made. */
  addr(r, "loose.a", ANY_SET);
  addr(r, "loose.*", ANY_SET);
  queue(r, "lw", "loose.*", MQR_ANYCAST);
  assert_int_equal(ROUTE(r, "loose.a", MQR_ANYCAST), MQR_ROUTE_OK);
  assert_string_equal(got, "loose.a lw");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_address_default_routing_type_is_lowest_of_set),
      T(test_queue_type_not_supported_by_address_is_refused),
      T(test_queue_type_added_when_auto_create_may_add_it),
      T(test_removing_routing_type_with_queues_is_refused),
      T(test_queue_name_is_unique_across_router),
      T(test_empty_address_or_queue_name_is_refused),
      T(test_removing_address_with_queues_refused_unless_forced),
      T(test_max_consumers_below_minus_one_is_refused),
      T(test_queue_keeps_every_attribute),
      T(test_prefix_is_stripped_and_sets_routing_type),
      T(test_fully_qualified_queue_name_routes_to_that_queue),
      T(test_no_routing_type_reaches_every_queue_with_one_anycast_copy),
      T(test_missing_address_is_auto_created_when_settings_allow),
      T(test_missing_address_fails_when_auto_create_is_off),
      T(test_missing_routing_type_is_added_or_the_send_fails),
      T(test_anycast_exactly_one_queue_round_robin),
      T(test_anycast_prefers_queue_with_consumer),
      T(test_anycast_send_auto_creates_queue_named_after_address),
      T(test_multicast_every_queue_gets_a_copy),
      T(test_disabled_and_purge_on_no_consumers_queues_are_skipped),
      T(test_no_bindings_counts_unrouted),
      T(test_no_route_goes_to_dead_letter_address_once),
      T(test_route_status_names),
      T(test_result_too_small_changes_nothing),
      T(test_lookup_types_follow_every_change),
      T(test_lookup_inline_half_answers_as_exported_half),
      T(test_address_with_long_name_is_removed_and_freed),
      T(test_wildcard_queues_get_copies_of_matching_sends),
      T(test_sending_to_a_wildcard_address_is_refused),
      T(test_wildcard_bindings_are_recomputed_when_bindings_change),
      T(test_configurable_delimiter_and_wildcards),
      T(test_settings_any_words_allowed_only_at_end),
      T(test_settings_most_specific_match_wins_and_unset_fields_inherit),
      T(test_duplicate_id_is_not_routed),
      T(test_duplicate_cache_keeps_the_last_id_cache_size_ids),
      T(test_route_to_existing_concrete_address_allocates_nothing),
      T(test_duplicate_caches_grow_with_use_and_are_bounded),
      T(test_listing_is_in_creation_order),
      T(test_filters_read_values_once_and_only_when_needed),
      T(test_bad_queue_filter_is_refused),
      T(test_each_bound_address_is_its_own_anycast_group),
      T(test_implicit_send_under_anycast_default_makes_the_queue),
      T(test_anycast_send_needs_a_queue_of_its_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
