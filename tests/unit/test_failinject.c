/* Failure injection: an allocator that fails the Nth call, for every N over a
 * representative build-up of a router (settings, concrete and wildcard addresses, queues
 * on both, auto-creating sends, duplicate ids, removals, table growth). The operation
 * that meets the failure must return MQR_ENOMEM and leave the router exactly as it was
 * (its whole visible state, dumped before and after); closing it must free everything. */
#include "testutil.h"

#define S(x) MQR_STR(x)

typedef int (*op_fn)(mqr_router_t *r);

static int settings_root(mqr_router_t *r) {
  mqr_address_settings_t s = {0};
  s.set = MQR_SET_DEAD_LETTER_ADDRESS | MQR_SET_SEND_TO_DLA_ON_NO_ROUTE;
  s.dead_letter_address = S("DLA");
  s.send_to_dla_on_no_route = true;
  return mqr_router_add_address_settings(r, S("#"), &s, NULL);
}
static int settings_orders(mqr_router_t *r) {
  mqr_address_settings_t s = {0};
  s.set = MQR_SET_ID_CACHE_SIZE;
  s.id_cache_size = 5;
  return mqr_router_add_address_settings(r, S("orders.#"), &s, NULL);
}
static int settings_replace(mqr_router_t *r) {
  mqr_address_settings_t s = {0};
  s.set = MQR_SET_ID_CACHE_SIZE | MQR_SET_DEAD_LETTER_ADDRESS;
  s.id_cache_size = 7;
  s.dead_letter_address = S("DLA2");
  return mqr_router_add_address_settings(r, S("#"), &s, NULL);
}
static int add_addr(mqr_router_t *r, const char *name, int type) {
  return mqr_router_add_address(r, mqr_str(name), mqr_routing_set_of(type), 0, NULL, NULL);
}
static int add_q(mqr_router_t *r, const char *name, const char *address, int type, bool auto_create) {
  mqr_queue_config_t c;
  mqr_queue_config_init(&c, mqr_str(name), mqr_str(address), (mqr_routing_type_t)type);
  c.auto_create_address = auto_create;
  c.filter = S("x > 1");
  return mqr_router_add_queue(r, &c, NULL, NULL);
}
static int send(mqr_router_t *r, const char *address, int type, const char *dup) {
  int rc = route_names(r, address, type, dup, NULL, 0);
  return rc < 0 ? rc : 0;
}

static int op1(mqr_router_t *r) { return settings_root(r); }
static int op2(mqr_router_t *r) { return settings_orders(r); }
static int op3(mqr_router_t *r) { return add_addr(r, "DLA", MQR_ANYCAST); }
static int op4(mqr_router_t *r) { return add_q(r, "DLA", "DLA", MQR_ANYCAST, false); }
static int op5(mqr_router_t *r) { return add_addr(r, "orders", MQR_ANYCAST); }
static int op6(mqr_router_t *r) { return add_q(r, "orders", "orders", MQR_ANYCAST, false); }
static int op7(mqr_router_t *r) { return add_q(r, "orders.b", "orders", MQR_ANYCAST, false); }
static int op8(mqr_router_t *r) { return add_addr(r, "news.#", MQR_MULTICAST); }
static int op9(mqr_router_t *r) { return add_q(r, "news.all", "news.#", MQR_MULTICAST, false); }
static int op10(mqr_router_t *r) { return add_addr(r, "news.europe", MQR_MULTICAST); }
static int op11(mqr_router_t *r) { return add_q(r, "news.europe.r", "news.europe", MQR_MULTICAST, false); }
static int op12(mqr_router_t *r) { return add_addr(r, "news.usa", MQR_MULTICAST); }
static int op13(mqr_router_t *r) { return add_addr(r, "sport.tennis", MQR_MULTICAST); }
static int op14(mqr_router_t *r) { return add_q(r, "sport.tap", "sport.#", MQR_MULTICAST, true); }
static int op15(mqr_router_t *r) { return add_q(r, "sport.any", "sport.#", MQR_ANYCAST, true); }
static int op16(mqr_router_t *r) { return send(r, "fresh", MQR_ANYCAST, NULL); }
static int op17(mqr_router_t *r) { return send(r, "orders", MQR_ANYCAST, "id-1"); }
static int op18(mqr_router_t *r) { return send(r, "news.europe", MQR_MULTICAST, NULL); }
static int op19(mqr_router_t *r) { return send(r, "news.asia", MQR_MULTICAST, "id-2"); }
static int op20(mqr_router_t *r) { return add_q(r, "orders.m", "orders", MQR_MULTICAST, true); }
static int op21(mqr_router_t *r) { return send(r, "orders::orders.c", MQR_ROUTING_NONE, NULL); }
static int op22(mqr_router_t *r) { return send(r, "brand.new::q", MQR_MULTICAST, NULL); }
static int op23(mqr_router_t *r) { return mqr_router_remove_queue(r, S("news.all"), NULL); }
static int op24(mqr_router_t *r) { return settings_replace(r); }
static int op25(mqr_router_t *r) { return mqr_router_remove_address(r, S("news.europe"), true, NULL); }
static int op26(mqr_router_t *r) { return mqr_router_remove_address(r, S("sport.#"), true, NULL); }
static int op27(mqr_router_t *r) {
  for (int i = 0; i < 40; i++) { /* table growth, in steps the failure can land in */
    char name[32];
    snprintf(name, sizeof name, "bulk.%d", i);
    int rc = add_addr(r, name, MQR_MULTICAST);
    if (rc) return rc;
  }
  return 0;
}
static int op28(mqr_router_t *r) { return add_q(r, "bulk.tap", "bulk.*", MQR_MULTICAST, true); }
static int op29(mqr_router_t *r) { return mqr_router_remove_queue(r, S("bulk.tap"), NULL); }
static int op30(mqr_router_t *r) { return send(r, "orders", MQR_MULTICAST, NULL); }

static const op_fn ops[] = {op1,  op2,  op3,  op4,  op5,  op6,  op7,  op8,  op9,  op10, op11, op12, op13, op14, op15,
                            op16, op17, op18, op19, op20, op21, op22, op23, op24, op25, op26, op27, op28, op29, op30};
#define N_OPS (sizeof ops / sizeof ops[0])

/* Dumps with the injection paused and its calls not counted. */
static char *dump_quietly(const mqr_router_t *r) {
  long fail_at = talloc.fail_at, calls = talloc.calls;
  talloc.fail_at = 0;
  char *d = router_dump(r);
  talloc.fail_at = fail_at;
  talloc.calls = calls;
  return d;
}

static void test_every_allocation_failure_is_clean(void **state) {
  (void)state;
  long tried = 0;
  for (long n = 1;; n++) {
    talloc_install();
    mqr_router_t r;
    assert_int_equal(mqr_router_init(&r, NULL), 0);
    talloc.fail_at = n;
    bool hit = false;
    for (size_t i = 0; i < N_OPS && !hit; i++) {
      char *before = dump_quietly(&r);
      long failed = talloc.failed;
      int rc = ops[i](&r);
      if (talloc.failed != failed) {
        hit = true;
        if (rc != MQR_ENOMEM) fail_msg("N=%ld: op %zu met the failure but returned %d", n, i + 1, rc);
        if (i + 1 != 27) { /* op 27 is 40 separate adds: the earlier ones stand */
          char *after = dump_quietly(&r);
          if (strcmp(before, after) != 0)
            fail_msg("N=%ld: op %zu changed the router on ENOMEM\nbefore:\n%s\nafter:\n%s", n, i + 1, before, after);
          free(after);
        }
      } else if (rc != 0) {
        fail_msg("N=%ld: op %zu failed with %s without an injected failure", n, i + 1, mqr_err_name(rc));
      }
      free(before);
    }
    mqr_router_close(&r);
    if (talloc.live != 0) fail_msg("N=%ld: %ld blocks leaked", n, talloc.live);
    talloc_uninstall();
    if (!hit) break; /* the whole build-up ran: every allocation has been failed once */
    tried++;
  }
  assert_true(tried > 60); /* the build-up makes that many allocations */
  printf("injected %ld failures\n", tried);
}

/* Within op 27, each add is atomic on its own: check it directly. */
static void test_table_growth_failure_is_clean(void **state) {
  (void)state;
  for (long n = 1; n < 200; n++) {
    talloc_install();
    mqr_router_t r;
    assert_int_equal(mqr_router_init(&r, NULL), 0);
    talloc.fail_at = n;
    for (int i = 0; i < 60; i++) {
      char name[32];
      snprintf(name, sizeof name, "a.%d", i);
      uint32_t count = mqr_router_address_count(&r);
      int rc = add_addr(&r, name, MQR_ANYCAST);
      if (rc) {
        assert_int_equal(rc, MQR_ENOMEM);
        assert_int_equal(mqr_router_address_count(&r), count);
        assert_null(mqr_router_find_address(&r, mqr_str(name)));
        for (int k = 0; k < i; k++) {
          snprintf(name, sizeof name, "a.%d", k);
          assert_non_null(mqr_router_find_address(&r, mqr_str(name)));
        }
        break;
      }
    }
    mqr_router_close(&r);
    assert_int_equal(talloc.live, 0);
    talloc_uninstall();
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_allocation_failure_is_clean),
      cmocka_unit_test(test_table_growth_failure_is_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
