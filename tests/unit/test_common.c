/* Common ground: the error table, error details, views, the allocator hook, UTF-8. */
#include "testutil.h"

static void test_error_table_is_consistent(void **state) {
  (void)state;
  int seen = 0;
  for (int code = -1; code > MQR_ERRNO_LAST; code--) {
    const char *name = mqr_err_name(code), *text = mqr_strerror(code);
    assert_string_not_equal(name, "UNKNOWN");
    assert_string_not_equal(text, "unknown error");
    assert_int_equal(name[0], 'E');
    for (int other = code + 1; other < 0; other++) {
      assert_string_not_equal(name, mqr_err_name(other));
      assert_string_not_equal(text, mqr_strerror(other));
    }
    seen++;
  }
  assert_int_equal(seen, -MQR_ERRNO_LAST - 1);
  assert_string_equal(mqr_err_name(MQR_ENOMEM), "ENOMEM");
  assert_string_equal(mqr_strerror(MQR_ENOADDR), "address does not exist");
  assert_string_equal(mqr_err_name(0), "OK");
  assert_string_equal(mqr_strerror(0), "success");
  assert_string_equal(mqr_err_name(MQR_ERRNO_LAST), "UNKNOWN");
  assert_string_equal(mqr_strerror(12345), "unknown error");
}

static void test_error_details(void **state) {
  (void)state;
  mqr_error_t e;
  char buf[128];
  assert_int_equal(mqr_error_set(&e, MQR_EINVAL, "bad %s", "thing"), MQR_EINVAL);
  assert_string_equal(mqr_error_format(&e, buf, sizeof buf), "bad thing");
  mqr_error_set_at(&e, MQR_ECONFIG, "a.yaml", 3, 7, "unknown key '%s'", "x");
  assert_string_equal(mqr_error_format(&e, buf, sizeof buf), "a.yaml:3:7: unknown key 'x'");
  assert_int_equal(e.line, 3);
  assert_int_equal(e.column, 7);
  mqr_error_clear(&e);
  assert_int_equal(e.code, 0);
  assert_int_equal(mqr_error_set(NULL, MQR_ENOMEM, "ignored"), MQR_ENOMEM);
  mqr_error_set(&e, MQR_ENOADDR, "%s", "");
  assert_string_equal(mqr_error_format(&e, buf, sizeof buf), "address does not exist");
  mqr_error_format(&e, buf, 4);
  assert_string_equal(buf, "add");
}

static void test_views(void **state) {
  (void)state;
  mqr_str_t a = MQR_STR("orders"), b = mqr_str("orders"), c = mqr_str_n("orders.eu", 6);
  assert_int_equal(a.len, 6);
  assert_true(mqr_str_eq(a, b));
  assert_true(mqr_str_eq(a, c));
  assert_false(mqr_str_eq(a, MQR_STR("order")));
  assert_int_equal(mqr_str(NULL).len, 0);
  assert_true(mqr_str_eq(mqr_str(NULL), mqr_str("")));
}

static void test_allocator_hook(void **state) {
  (void)state;
  assert_int_equal(mqr_set_allocator(t_malloc, NULL, NULL, NULL), MQR_EINVAL);
  talloc_install();
  void *p = mqr_malloc(10), *q = mqr_calloc(2, 8);
  p = mqr_realloc(p, 100);
  assert_int_equal(talloc.live, 2);
  assert_int_equal(talloc.calls, 3);
  mqr_free(p);
  mqr_free(q);
  mqr_free(NULL);
  assert_int_equal(talloc.live, 0);
  talloc.fail_at = talloc.calls + 1;
  assert_null(mqr_malloc(1));
  talloc_uninstall();
  p = mqr_malloc(1); /* the C allocator again */
  assert_non_null(p);
  mqr_free(p);
  assert_non_null(mqr_version());
}

/* The checker byte by byte, as RFC 3629 states it: what mqr_utf8_check must answer. */
static size_t utf8_reference(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = p[i];
    size_t k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
    if (k == 9 || n - i <= k) return k == 0 ? n : i;
    uint32_t cp = k == 0 ? c : c & (0x3Fu >> k);
    for (size_t j = 1; j <= k; j++) {
      if ((p[i + j] & 0xC0) != 0x80) return i;
      cp = cp << 6 | (p[i + j] & 0x3F);
    }
    static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
    i += k + 1;
  }
  return n;
}

static void test_utf8(void **state) {
  (void)state;
  static const struct {
    const char *s;
    size_t ok;
  } cases[] = {
      {"", 0},
      {"plain ascii, longer than eight", 30},
      {"caf\xc3\xa9", 5},
      {"\xe2\x82\xac euro", 8},
      {"\xf0\x9f\x98\x80", 4},
      {"\xc0\xaf", 0},            /* overlong / */
      {"abc\xe0\x80\xaf", 3},     /* overlong, three bytes */
      {"\xed\xa0\x80", 0},        /* a surrogate */
      {"\xf4\x90\x80\x80", 0},    /* past U+10FFFF */
      {"12345678\xff", 8},        /* a bad byte after a clean word */
      {"1234567\x80", 7},         /* a lone continuation in the last word */
      {"abcdefghijklmn\xc3", 14}, /* a sequence cut short */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_int_equal(mqr_utf8_check(cases[i].s, strlen(cases[i].s)), cases[i].ok);
  /* Against the reference: every length to 40, ASCII with one to three bytes from
   * anywhere in 0x80..0xFF (or a valid sequence) put at every position. */
  uint32_t x = 12345;
  uint8_t buf[48];
  long mismatched = 0, bad = 0;
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)(round % 41);
    for (size_t j = 0; j < n; j++) buf[j] = (uint8_t)(0x20 + (x = x * 1103515245u + 12345u) % 0x5F);
    int changes = 1 + (int)((x >> 8) % 3);
    for (int c = 0; c < changes && n; c++) {
      x = x * 1103515245u + 12345u;
      size_t at = (x >> 4) % n;
      if (x % 4 == 0 && at + 2 <= n)
        buf[at] = 0xC3, buf[at + 1] = 0xA9; /* a valid e-acute */
      else
        buf[at] = (uint8_t)(0x80 | (x >> 16));
    }
    size_t want = utf8_reference(buf, n), got = mqr_utf8_check(buf, n);
    mismatched += got != want;
    bad += want != n;
  }
  assert_int_equal(mismatched, 0);
  assert_true(bad > 5000); /* the bad bytes were there to find */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_table_is_consistent),
      cmocka_unit_test(test_error_details),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_allocator_hook),
      cmocka_unit_test(test_utf8),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
