/* The routing-type set against a naive reference (a bool per type), over all 256 bit
 * patterns and all 65,536 pairs; the text forms; address info's default routing type. */
#include "testutil.h"

typedef struct {
  bool has[8];
} naive_t;

static naive_t naive_of_bits(unsigned bits) {
  naive_t n;
  for (int t = 0; t < 8; t++) n.has[t] = (bits >> t) & 1u;
  return n;
}

static mqr_routing_set_t set_from_naive(const naive_t *n) {
  mqr_routing_set_t s = mqr_routing_set_empty();
  for (int t = 0; t < 8; t++)
    if (n->has[t]) s = mqr_routing_set_add(s, t);
  return s;
}

static void assert_same(mqr_routing_set_t s, const naive_t *n) {
  for (int t = 0; t < 8; t++) assert_int_equal(mqr_routing_set_contains(s, t), n->has[t]);
}

static void test_values_match_artemis(void **state) {
  (void)state;
  assert_int_equal(MQR_MULTICAST, 0);
  assert_int_equal(MQR_ANYCAST, 1);
  assert_int_equal(sizeof(mqr_routing_set_t), 1);
  assert_string_equal(mqr_routing_type_name(MQR_ANYCAST), "ANYCAST");
  assert_string_equal(mqr_routing_type_name(MQR_MULTICAST), "MULTICAST");
  assert_null(mqr_routing_type_name(2));
  assert_null(mqr_routing_type_name(-1));
}

static void test_every_pattern_against_naive(void **state) {
  (void)state;
  for (unsigned bits = 0; bits < 256; bits++) {
    naive_t n = naive_of_bits(bits);
    mqr_routing_set_t s = set_from_naive(&n);
    assert_int_equal(s.bits, bits);
    assert_same(s, &n);
    int count = 0, lowest = MQR_ROUTING_NONE;
    for (int t = 7; t >= 0; t--)
      if (n.has[t]) count++, lowest = t;
    assert_int_equal(mqr_routing_set_count(s), count);
    assert_int_equal(mqr_routing_set_lowest(s), lowest);
    assert_int_equal(mqr_routing_set_is_empty(s), count == 0);
    /* the bit-scan for visits exactly the members, ascending */
    int prev = -1, visited = 0;
    MQR_ROUTING_SET_FOREACH(t, s) {
      assert_true(t > prev);
      assert_true(n.has[t]);
      prev = t;
      visited++;
    }
    assert_int_equal(visited, count);
    for (int t = -1; t <= 8; t++) {
      naive_t a = n, r = n;
      if (t >= 0 && t < 8) a.has[t] = true, r.has[t] = false;
      assert_same(mqr_routing_set_add(s, t), &a);
      assert_same(mqr_routing_set_remove(s, t), &r);
      assert_int_equal(mqr_routing_set_contains(s, t), t >= 0 && t < 8 && n.has[t]);
      assert_int_equal(mqr_routing_set_of(t).bits, t >= 0 && t < 8 ? 1u << t : 0u);
    }
    /* text round trip */
    char buf[64];
    int len = mqr_routing_set_format(s, buf, sizeof buf);
    assert_true(len >= 0);
    assert_int_equal((size_t)len, strlen(buf));
    mqr_routing_set_t back;
    assert_int_equal(mqr_routing_set_parse(mqr_str(buf), &back, NULL), 0);
    assert_int_equal(back.bits, bits);
  }
}

static void test_every_pair_against_naive(void **state) {
  (void)state;
  for (unsigned x = 0; x < 256; x++) {
    for (unsigned y = 0; y < 256; y++) {
      naive_t a = naive_of_bits(x), b = naive_of_bits(y), u, i;
      for (int t = 0; t < 8; t++) u.has[t] = a.has[t] || b.has[t], i.has[t] = a.has[t] && b.has[t];
      mqr_routing_set_t sa = set_from_naive(&a), sb = set_from_naive(&b);
      assert_same(mqr_routing_set_union(sa, sb), &u);
      assert_same(mqr_routing_set_intersection(sa, sb), &i);
      assert_int_equal(mqr_routing_set_equal(sa, sb), x == y);
    }
  }
}

static void test_parse_and_format(void **state) {
  (void)state;
  mqr_routing_set_t s;
  mqr_error_t e;
  assert_int_equal(mqr_routing_set_parse(MQR_STR("ANYCAST,MULTICAST"), &s, &e), 0);
  assert_int_equal(s.bits, 3);
  assert_int_equal(mqr_routing_set_parse(MQR_STR(" anycast , Multicast "), &s, &e), 0);
  assert_int_equal(s.bits, 3);
  assert_int_equal(mqr_routing_set_parse(MQR_STR(""), &s, &e), 0);
  assert_int_equal(s.bits, 0);
  assert_int_equal(mqr_routing_set_parse(MQR_STR("ANYCAST,ANYCAST"), &s, &e), 0);
  assert_int_equal(s.bits, 2);
  s.bits = 0x55;
  assert_int_equal(mqr_routing_set_parse(MQR_STR("ANYCAST,BROADCAST"), &s, &e), MQR_EBADROUTINGTYPE);
  assert_int_equal(s.bits, 0x55); /* untouched on error */
  assert_non_null(strstr(e.message, "'BROADCAST'"));
  assert_int_equal(e.column, 9);
  assert_int_equal(mqr_routing_set_parse(MQR_STR("ANYCAST,"), &s, &e), MQR_EBADROUTINGTYPE);
  assert_int_equal(mqr_routing_set_parse(MQR_STR("ANYCAST,,MULTICAST"), &s, &e), MQR_EBADROUTINGTYPE);
  assert_non_null(strstr(e.message, "empty routing type"));
  char buf[64];
  assert_int_equal(mqr_routing_set_format(mqr_routing_set_of(MQR_ANYCAST), buf, sizeof buf), 7);
  assert_string_equal(buf, "ANYCAST");
  mqr_routing_set_t both = mqr_routing_set_add(mqr_routing_set_of(MQR_ANYCAST), MQR_MULTICAST);
  assert_int_equal(mqr_routing_set_format(both, buf, sizeof buf), 17);
  assert_string_equal(buf, "MULTICAST,ANYCAST");
  assert_int_equal(mqr_routing_set_format(both, buf, 10), MQR_ENOSPC);
  assert_int_equal(mqr_routing_set_format(mqr_routing_set_empty(), buf, 1), 0);
  assert_string_equal(buf, "");
  mqr_routing_set_t all = {0xff};
  assert_true(mqr_routing_set_format(all, buf, 64) > 0); /* 64 bytes always suffice */
  mqr_routing_type_t t;
  assert_int_equal(mqr_routing_type_parse(MQR_STR("multicast"), &t), 0);
  assert_int_equal(t, MQR_MULTICAST);
  assert_int_equal(mqr_routing_type_parse(MQR_STR("TYPE5"), &t), MQR_EBADROUTINGTYPE);
}

/* Artemis AddressInfo.getRoutingType(): set -> lowest; add to empty -> that type;
 * later adds do not change it; empty -> none. */
static void test_default_routing_type(void **state) {
  (void)state;
  mqr_address_info_t ai;
  mqr_address_info_init(&ai);
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_ROUTING_NONE);
  mqr_address_info_set_types(&ai, mqr_routing_set_add(mqr_routing_set_of(MQR_ANYCAST), MQR_MULTICAST));
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_MULTICAST);
  mqr_address_info_init(&ai);
  mqr_address_info_add_type(&ai, MQR_ANYCAST);
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_ANYCAST);
  mqr_address_info_add_type(&ai, MQR_MULTICAST); /* a later, lower type does not change it */
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_ANYCAST);
  mqr_address_info_remove_type(&ai, MQR_ANYCAST);
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_MULTICAST);
  mqr_address_info_remove_type(&ai, MQR_MULTICAST);
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_ROUTING_NONE);
  mqr_address_info_set_types(&ai, mqr_routing_set_empty());
  assert_int_equal(mqr_address_info_routing_type(&ai), MQR_ROUTING_NONE);
  mqr_address_info_add_type(&ai, 9); /* not a type: ignored */
  assert_true(mqr_routing_set_is_empty(ai.types));
  /* Every pattern: set_types gives the lowest. */
  for (unsigned bits = 0; bits < 256; bits++) {
    mqr_routing_set_t s = {(uint8_t)bits};
    mqr_address_info_set_types(&ai, s);
    assert_int_equal(mqr_address_info_routing_type(&ai), bits ? __builtin_ctz(bits) : MQR_ROUTING_NONE);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_match_artemis),     cmocka_unit_test(test_every_pattern_against_naive),
      cmocka_unit_test(test_every_pair_against_naive), cmocka_unit_test(test_parse_and_format),
      cmocka_unit_test(test_default_routing_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
