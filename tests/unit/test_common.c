/* Common ground: the error table, error details, views, the allocator hook. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_table_is_consistent),
      cmocka_unit_test(test_error_details),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_allocator_hook),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
