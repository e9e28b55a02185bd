/* The router's small data structures against naive twins: the name table against a flat
 * array, the duplicate-id cache against a FIFO list, under long random operation mixes. */
#include "dupcache.h"
#include "table.h"
#include "testutil.h"

#define KEYS 600

typedef struct {
  int pad; /* the key is not at offset 0, as in a queue */
  mqr_str_t key;
  char text[16];
} item_t;

static void test_table_against_array(void **state) {
  (void)state;
  static item_t items[KEYS];
  static bool present[KEYS];
  memset(present, 0, sizeof present);
  for (int i = 0; i < KEYS; i++) {
    int n = snprintf(items[i].text, sizeof items[i].text, "k%d", i);
    items[i].key = mqr_str_n(items[i].text, (size_t)n);
  }
  mqr__table_t t;
  mqr__table_init(&t, offsetof(item_t, key), offsetof(item_t, text));
  uint32_t count = 0;
  for (int step = 0; step < 200000; step++) {
    int k = (int)rnd(KEYS);
    mqr_str_t key = items[k].key;
    /* a weak hash for some keys forces long probe runs and wrap-around */
    uint64_t h = k % 3 == 0 ? (uint64_t)(k % 7) : mqr__hash(key.ptr, key.len);
    void *found = mqr__table_find(&t, h, key.ptr, key.len);
    assert_true((found != NULL) == present[k]);
    if (found) assert_ptr_equal(found, &items[k]);
    if (rnd(2) && !present[k]) {
      assert_int_equal(mqr__table_reserve(&t), 0);
      mqr__table_insert(&t, h, &items[k]);
      present[k] = true;
      count++;
    } else if (present[k]) {
      assert_ptr_equal(mqr__table_remove(&t, h, key.ptr, key.len), &items[k]);
      present[k] = false;
      count--;
    } else {
      assert_null(mqr__table_remove(&t, h, key.ptr, key.len));
    }
    assert_int_equal(t.count, count);
    if (step % 5000 == 0) /* full check */
      for (int i = 0; i < KEYS; i++) {
        mqr_str_t ki = items[i].key;
        uint64_t hi = i % 3 == 0 ? (uint64_t)(i % 7) : mqr__hash(ki.ptr, ki.len);
        assert_true((mqr__table_find(&t, hi, ki.ptr, ki.len) != NULL) == present[i]);
      }
  }
  mqr__table_free(&t);
}

/* The hash reads every byte: names that differ in one byte, at any position and for
 * every length up to 40, hash apart; and its ':' detection is exact. */
static void test_hash_sees_every_byte(void **state) {
  (void)state;
  char a[48], b[48];
  for (size_t n = 1; n <= 40; n++) {
    for (size_t i = 0; i < n; i++) {
      memset(a, 'x', n);
      memcpy(b, a, n);
      b[i] = 'y';
      assert_true(mqr__hash(a, n) != mqr__hash(b, n));
      bool ca, cb;
      mqr__hash_scan(a, n, &ca);
      b[i] = ':';
      mqr__hash_scan(b, n, &cb);
      assert_false(ca);
      assert_true(cb);
      assert_true(mqr__key_eq(a, a, n));
      assert_false(mqr__key_eq(a, b, n));
    }
    assert_true(mqr__hash(a, n) != mqr__hash(a, n - 1)); /* length matters */
  }
}

static void test_dupcache_against_fifo(void **state) {
  (void)state;
  for (uint32_t cap = 1; cap <= 65; cap += 16) {
    mqr__dupcache_t *c = mqr__dupcache_create(cap);
    assert_non_null(c);
    int fifo[128], n = 0; /* the last cap ids, oldest first */
    for (int step = 0; step < 20000; step++) {
      int id = (int)rnd(cap * 3 + 2);
      char buf[100];
      /* some ids longer than the inline bytes, differing only at the end */
      int len = id % 5 == 0 ? snprintf(buf, sizeof buf, "%080d", id) : snprintf(buf, sizeof buf, "id%d", id);
      bool want = false;
      for (int i = 0; i < n; i++) want |= fifo[i] == id;
      bool got = mqr__dupcache_check_add(c, mqr_str_n(buf, (size_t)len));
      assert_int_equal(got, want);
      if (!want) {
        if ((uint32_t)n == cap) memmove(fifo, fifo + 1, (size_t)--n * sizeof *fifo);
        fifo[n++] = id;
      }
    }
    mqr__dupcache_destroy(c);
  }
  assert_null(mqr__dupcache_create(0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_against_array),
      cmocka_unit_test(test_hash_sees_every_byte),
      cmocka_unit_test(test_dupcache_against_fifo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
