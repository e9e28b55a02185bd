/* Diverts in the router, as Artemis's DivertTest and BindingsImpl have them: a
 * non-exclusive divert takes a copy and the address's queues still get the message; an
 * exclusive one whose filter matches takes it from them (and from the non-exclusive
 * diverts); non-exclusive diverts sharing a routing name take turns; an address::queue
 * send meets only the exclusive ones; a divert on a wildcard pattern applies to the
 * addresses it matches, made before or after it; bad diverts are refused with the router
 * unchanged, and every allocation failure leaves it so. */
#include "testutil.h"

static int setup(void **state) {
  talloc_install();
  mqr_router_t *r = malloc(sizeof *r);
  assert_int_equal(mqr_router_init(r, NULL), 0);
  *state = r;
  return 0;
}

static int teardown(void **state) {
  mqr_router_t *r = *state;
  mqr_router_close(r);
  free(r);
  assert_int_equal(talloc.live, 0);
  talloc_uninstall();
  return 0;
}

static void queue(mqr_router_t *r, const char *name, const char *address, mqr_routing_type_t t, const char *filter) {
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, mqr_str(name), mqr_str(address), t);
  cfg.auto_create_address = true;
  cfg.filter = mqr_str(filter);
  mqr_error_t e;
  if (mqr_router_add_queue(r, &cfg, NULL, &e) != 0) fail_msg("queue %s: %s", name, e.message);
}

static int divert(mqr_router_t *r, const char *name, const char *address, const char *fwd, bool exclusive,
                  const char *filter, const char *routing_name, mqr_error_t *e) {
  mqr_divert_config_t dc;
  mqr_divert_config_init(&dc, mqr_str(name), mqr_str(address), mqr_str(fwd));
  dc.exclusive = exclusive;
  dc.filter = mqr_str(filter);
  dc.routing_name = mqr_str(routing_name);
  return mqr_router_add_divert(r, &dc, NULL, e);
}

/* The message's one property `office`, for filters. */
static const char *office;
static void fill(void *ctx, mqr_filter_vocab_t *v) {
  (void)ctx;
  if (office) mqr_filter_vocab_set(v, MQR_STR("office"), mqr_value_string(mqr_str(office)));
}

/* One send: "<queues> | <diverts>" into out, the status returned. */
static int route(mqr_router_t *r, const char *address, int type, const char *off, char *out, size_t cap) {
  mqr_queue_t *q[16];
  mqr_divert_t *d[16];
  office = off;
  mqr_route_request_t req = {mqr_str(address), type, {0}, NULL, fill, NULL};
  mqr_route_result_t res = {q, 16, 0, 0, 0, 0, NULL, d, 16, 0, 0};
  int rc = mqr_router_route(r, &req, &res, NULL);
  if (rc) return rc;
  size_t n = 0;
  out[0] = 0;
  for (uint32_t i = 0; i < res.count; i++) {
    mqr_str_t s = mqr_queue_name(res.queues[i]);
    n += (size_t)snprintf(out + n, cap - n, "%s%.*s", i ? " " : "", (int)s.len, s.ptr);
  }
  n += (size_t)snprintf(out + n, cap - n, " |");
  for (uint32_t i = 0; i < res.divert_count; i++) {
    mqr_str_t s = mqr_divert_name(res.diverts[i]);
    n += (size_t)snprintf(out + n, cap - n, " %.*s", (int)s.len, s.ptr);
  }
  return (int)res.status;
}

static void test_non_exclusive_copies_and_the_queues_still_get_it(void **state) {
  mqr_router_t *r = *state;
  queue(r, "orders", "orders", MQR_ANYCAST, "");
  assert_int_equal(divert(r, "spy", "orders", "spyTopic", false, "", "", NULL), 0);
  char out[128];
  assert_int_equal(route(r, "orders", MQR_ANYCAST, NULL, out, sizeof out), MQR_ROUTE_OK);
  assert_string_equal(out, "orders | spy");
  assert_int_equal(mqr_divert_diverted(mqr_router_find_divert(r, MQR_STR("spy"))), 1);
  mqr_address_t *a = mqr_router_find_address(r, MQR_STR("orders"));
  assert_int_equal(mqr_address_divert_count(a), 1);
  assert_ptr_equal(mqr_address_divert(a, 0), mqr_router_find_divert(r, MQR_STR("spy")));
}

/* Artemis's prices-divert: only office = 'New York' goes, and only there. */
static void test_exclusive_with_a_filter_takes_what_matches(void **state) {
  mqr_router_t *r = *state;
  queue(r, "priceUpdates", "priceUpdates", MQR_MULTICAST, "");
  assert_int_equal(divert(r, "prices", "priceUpdates", "priceForwarding", true, "office='New York'", "", NULL), 0);
  assert_int_equal(divert(r, "copy", "priceUpdates", "audit", false, "", "", NULL), 0);
  char out[128];
  assert_int_equal(route(r, "priceUpdates", MQR_MULTICAST, "New York", out, sizeof out), MQR_ROUTE_NO_BINDINGS);
  assert_string_equal(out, " | prices"); /* no queue of its own, no other divert */
  assert_int_equal(route(r, "priceUpdates", MQR_MULTICAST, "London", out, sizeof out), MQR_ROUTE_OK);
  assert_string_equal(out, "priceUpdates | copy");
  assert_int_equal(route(r, "priceUpdates", MQR_MULTICAST, NULL, out, sizeof out), MQR_ROUTE_OK); /* NULL office */
  assert_string_equal(out, "priceUpdates | copy");
  /* Two exclusive diverts that match both take it. */
  assert_int_equal(divert(r, "all", "priceUpdates", "x", true, "", "", NULL), 0);
  assert_int_equal(route(r, "priceUpdates", MQR_MULTICAST, "New York", out, sizeof out), MQR_ROUTE_NO_BINDINGS);
  assert_string_equal(out, " | prices all");
}

static void test_a_routing_name_shares_turns(void **state) {
  mqr_router_t *r = *state;
  queue(r, "q", "a", MQR_ANYCAST, "");
  assert_int_equal(divert(r, "d1", "a", "x1", false, "", "g", NULL), 0);
  assert_int_equal(divert(r, "d2", "a", "x2", false, "", "g", NULL), 0);
  assert_int_equal(divert(r, "d3", "a", "x3", false, "", "", NULL), 0);
  assert_int_equal(divert(r, "d4", "a", "x4", false, "office = 'b'", "g", NULL), 0);
  char out[128];
  route(r, "a", MQR_ANYCAST, "z", out, sizeof out);
  assert_string_equal(out, "q | d1 d3");
  route(r, "a", MQR_ANYCAST, "z", out, sizeof out);
  assert_string_equal(out, "q | d2 d3");
  route(r, "a", MQR_ANYCAST, "z", out, sizeof out); /* d4's filter does not match: d1 again */
  assert_string_equal(out, "q | d1 d3");
  route(r, "a", MQR_ANYCAST, "b", out, sizeof out);
  assert_string_equal(out, "q | d2 d3");
  route(r, "a", MQR_ANYCAST, "b", out, sizeof out);
  assert_string_equal(out, "q | d4 d3");
  /* Removing one keeps the group going. */
  assert_int_equal(mqr_router_remove_divert(r, MQR_STR("d2"), NULL), 0);
  route(r, "a", MQR_ANYCAST, "b", out, sizeof out);
  assert_string_equal(out, "q | d1 d3");
  assert_int_equal(mqr_router_remove_divert(r, MQR_STR("d2"), NULL), MQR_ENODIVERT);
}

static void test_address_queue_sends_meet_only_exclusive_diverts(void **state) {
  mqr_router_t *r = *state;
  queue(r, "q1", "a", MQR_ANYCAST, "");
  assert_int_equal(divert(r, "n", "a", "x", false, "", "", NULL), 0);
  char out[128];
  assert_int_equal(route(r, "a::q1", MQR_ANYCAST, NULL, out, sizeof out), MQR_ROUTE_OK);
  assert_string_equal(out, "q1 |");
  assert_int_equal(divert(r, "e", "a", "y", true, "", "", NULL), 0);
  assert_int_equal(route(r, "a::q1", MQR_ANYCAST, NULL, out, sizeof out), MQR_ROUTE_NO_BINDINGS);
  assert_string_equal(out, " | e");
}

static void test_a_pattern_divert_applies_to_matching_addresses(void **state) {
  mqr_router_t *r = *state;
  queue(r, "eu", "orders.eu", MQR_MULTICAST, "");
  queue(r, "x", "other", MQR_MULTICAST, "");
  assert_int_equal(divert(r, "all-orders", "orders.#", "audit", false, "", "", NULL), 0);
  char out[128];
  route(r, "orders.eu", MQR_MULTICAST, NULL, out, sizeof out);
  assert_string_equal(out, "eu | all-orders");
  route(r, "other", MQR_MULTICAST, NULL, out, sizeof out);
  assert_string_equal(out, "x |");
  /* An address made later (here by the send) picks it up. */
  assert_int_equal(route(r, "orders.us", MQR_MULTICAST, NULL, out, sizeof out), MQR_ROUTE_NO_BINDINGS);
  assert_string_equal(out, " | all-orders");
  /* A concrete divert on an address that does not exist yet. */
  assert_int_equal(divert(r, "later", "fresh", "audit", false, "", "", NULL), 0);
  route(r, "fresh", MQR_MULTICAST, NULL, out, sizeof out);
  assert_string_equal(out, " | later");
  assert_int_equal(mqr_router_remove_divert(r, MQR_STR("all-orders"), NULL), 0);
  route(r, "orders.eu", MQR_MULTICAST, NULL, out, sizeof out);
  assert_string_equal(out, "eu |");
  assert_int_equal(mqr_router_divert_count(r), 1);
}

static void test_bad_diverts_are_refused(void **state) {
  mqr_router_t *r = *state;
  mqr_error_t e;
  assert_int_equal(divert(r, "", "a", "b", false, "", "", &e), MQR_EINVAL);
  assert_int_equal(divert(r, "d", "", "b", false, "", "", &e), MQR_EINVAL);
  assert_int_equal(divert(r, "d", "a", "", false, "", "", &e), MQR_EINVAL);
  assert_int_equal(divert(r, "d", "a", "a", false, "", "", &e), MQR_EINVAL);
  assert_non_null(strstr(e.message, "diverts from"));
  assert_int_equal(divert(r, "d", "a", "b,,c", false, "", "", &e), MQR_EINVAL);
  assert_int_equal(divert(r, "d", "a", "b.#", false, "", "", &e), MQR_EINVAL);
  assert_non_null(strstr(e.message, "wildcard"));
  assert_int_equal(divert(r, "d", "a", "b", false, "x = ", "", &e), MQR_ESYNTAX);
  assert_non_null(strstr(e.message, "column"));
  assert_int_equal(mqr_router_divert_count(r), 0);
  assert_int_equal(divert(r, "d", "a", " b , c ", false, "", "", &e), 0);
  mqr_divert_t *d = mqr_router_find_divert(r, MQR_STR("d"));
  assert_int_equal(mqr_divert_forward_count(d), 2);
  assert_true(mqr_str_eq(mqr_divert_forward(d, 0), MQR_STR("b")));
  assert_true(mqr_str_eq(mqr_divert_forward(d, 1), MQR_STR("c")));
  assert_true(mqr_str_eq(mqr_divert_routing_name(d), MQR_STR("d"))); /* its name by default */
  assert_int_equal(mqr_divert_routing_type(d), MQR_DIVERT_STRIP);
  assert_int_equal(divert(r, "d", "z", "b", false, "", "", &e), MQR_EDIVERTEXISTS);
  mqr_divert_routing_t t;
  assert_int_equal(mqr_divert_routing_type_parse(MQR_STR("multicast"), &t), 0);
  assert_int_equal(t, MQR_DIVERT_MULTICAST);
  assert_int_equal(mqr_divert_routing_type_parse(MQR_STR("BOTH"), &t), MQR_EINVAL);
  assert_string_equal(mqr_divert_routing_type_name(MQR_DIVERT_PASS), "PASS");
}

/* A result without room for the address's diverts is refused, saying how much. */
static void test_room_for_diverts(void **state) {
  mqr_router_t *r = *state;
  queue(r, "q", "a", MQR_ANYCAST, "");
  assert_int_equal(divert(r, "d1", "a", "x", false, "", "", NULL), 0);
  assert_int_equal(divert(r, "d2", "a", "y", false, "", "", NULL), 0);
  mqr_queue_t *q[4];
  mqr_divert_t *d[1];
  mqr_route_request_t req = {MQR_STR("a"), MQR_ANYCAST, {0}, NULL, NULL, NULL};
  mqr_route_result_t res = {q, 4, 0, 0, 0, 0, NULL, d, 1, 0, 0};
  assert_int_equal(mqr_router_route(r, &req, &res, NULL), MQR_ENOSPC);
  assert_int_equal(res.divert_needed, 2);
  assert_int_equal(mqr_queue_routed(mqr_router_find_queue(r, MQR_STR("q"))), 0); /* nothing happened */
}

/* Every allocation of adding a divert (and an address that picks diverts up) failed in
 * turn: refused whole, nothing leaked, and it works once allocations succeed. */
static void test_allocation_failures_change_nothing(void **state) {
  mqr_router_t *r = *state;
  queue(r, "q", "p.a", MQR_MULTICAST, "");
  queue(r, "q2", "p.b", MQR_MULTICAST, "");
  assert_int_equal(divert(r, "first", "p.#", "x", false, "", "", NULL), 0);
  for (long fail = 1;; fail++) {
    talloc.calls = 0;
    talloc.fail_at = fail;
    int rc = divert(r, "second", "p.#", "y", true, "office = 'a'", "", NULL);
    talloc.fail_at = 0;
    if (rc == 0) break;
    assert_int_equal(rc, MQR_ENOMEM);
    assert_null(mqr_router_find_divert(r, MQR_STR("second")));
    assert_int_equal(mqr_address_divert_count(mqr_router_find_address(r, MQR_STR("p.a"))), 1);
  }
  for (long fail = 1;; fail++) {
    talloc.calls = 0;
    talloc.fail_at = fail;
    int rc = mqr_router_add_address(r, MQR_STR("p.c"), mqr_routing_set_of(MQR_MULTICAST), 0, NULL, NULL);
    talloc.fail_at = 0;
    if (rc == 0) break;
    assert_int_equal(rc, MQR_ENOMEM);
    assert_null(mqr_router_find_address(r, MQR_STR("p.c")));
  }
  assert_int_equal(mqr_address_divert_count(mqr_router_find_address(r, MQR_STR("p.c"))), 2);
  for (long fail = 1;; fail++) {
    talloc.calls = 0;
    talloc.fail_at = fail;
    int rc = mqr_router_remove_divert(r, MQR_STR("first"), NULL);
    talloc.fail_at = 0;
    if (rc == 0) break;
    assert_int_equal(rc, MQR_ENOMEM);
    assert_int_equal(mqr_address_divert_count(mqr_router_find_address(r, MQR_STR("p.b"))), 2);
  }
  assert_int_equal(mqr_address_divert_count(mqr_router_find_address(r, MQR_STR("p.b"))), 1);
  char out[128];
  assert_int_equal(route(r, "p.c", MQR_MULTICAST, "a", out, sizeof out), MQR_ROUTE_NO_BINDINGS);
  assert_string_equal(out, " | second");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_non_exclusive_copies_and_the_queues_still_get_it),
      T(test_exclusive_with_a_filter_takes_what_matches),
      T(test_a_routing_name_shares_turns),
      T(test_address_queue_sends_meet_only_exclusive_diverts),
      T(test_a_pattern_divert_applies_to_matching_addresses),
      T(test_bad_diverts_are_refused),
      T(test_room_for_diverts),
      T(test_allocation_failures_change_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
