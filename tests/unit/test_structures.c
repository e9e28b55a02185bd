/* The router's small data structures against naive twins: the name table against a flat
 * array, the duplicate-id cache against a FIFO list, under long random operation mixes. */
#include "dupcache.h"
#include "table.h"
#include "testutil.h"

#define KEYS 600

typedef struct {
  int pad; /* the key is not at offset 0, as in a queue */
  mqr_str_t key;
  char text[40];
} item_t;

static void test_table_against_array(void **state) {
  (void)state;
  static item_t items[KEYS];
  static bool present[KEYS];
  memset(present, 0, sizeof present);
  /* Short keys, whose digest is the key, and long ones that share their last 16 bytes,
   * so that only the full comparison tells them apart. */
  for (int i = 0; i < KEYS; i++) {
    int n = i % 2 ? snprintf(items[i].text, sizeof items[i].text, "k%d", i)
                  : snprintf(items[i].text, sizeof items[i].text, "%d/the-same-16-bytes", i);
    items[i].key = mqr_str_n(items[i].text, (size_t)n);
  }
  mqr__table_t t;
  mqr__table_init(&t, offsetof(item_t, key), offsetof(item_t, text));
  uint32_t count = 0;
  for (int step = 0; step < 200000; step++) {
    int k = (int)rnd(KEYS);
    mqr_str_t key = items[k].key;
    /* weak hashes force long probe runs, equal hashes, and runs that start at the last
     * slots and wrap round */
    mqr__key_t dk = mqr__key(key.ptr, key.len);
    if (k % 3 == 0) dk.hash = (uint64_t)(k % 7);
    if (k % 3 == 1 && k % 4 == 1) dk.hash = UINT32_MAX - (uint64_t)(k % 5);
    void *found = mqr__table_find(&t, &dk);
    assert_true((found != NULL) == present[k]);
    if (found) {
      assert_ptr_equal(found, &items[k]);
      const mqr__slot_t *sl = mqr__table_slot(&t, &dk);
      assert_int_equal(sl->aux[0], (uint8_t)k); /* the owner's bytes travel with the entry */
      assert_int_equal(sl->aux[1], (uint8_t)(k >> 8));
    }
    if (rnd(2) && !present[k]) {
      assert_int_equal(mqr__table_reserve(&t), 0);
      mqr__table_insert(&t, &dk, &items[k], (uint8_t)k, (uint8_t)(k >> 8));
      present[k] = true;
      count++;
    } else if (present[k]) {
      assert_ptr_equal(mqr__table_remove(&t, &dk), &items[k]);
      present[k] = false;
      count--;
    } else {
      assert_null(mqr__table_remove(&t, &dk));
    }
    assert_int_equal(t.count, count);
    if (step % 5000 == 0) /* full check */
      assert_true(mqr__table_check(&t));
    if (step % 5000 == 0)
      for (int i = 0; i < KEYS; i++) {
        mqr_str_t ki = items[i].key;
        mqr__key_t di = mqr__key(ki.ptr, ki.len);
        if (i % 3 == 0) di.hash = (uint64_t)(i % 7);
        if (i % 3 == 1 && i % 4 == 1) di.hash = UINT32_MAX - (uint64_t)(i % 5);
        assert_true((mqr__table_find(&t, &di) != NULL) == present[i]);
      }
  }
  mqr__table_free(&t);
}

/* Names as brokers see them (numbered, dotted, padded, long) spread over the home slots
 * and the tags as a random function would: the chi-square of the counts per degree of
 * freedom stays near 1 (a sum of 16 zero bits, or a tag taken from a badly mixed byte,
 * gives hundreds). A tag is 7 bits of the hash with the high bit set (never 0, an empty
 * slot's): 128 values, 0x80 to 0xff, and no other. Names of one to five digits give
 * about 2.3 for the tags (the hash of a name under 4 bytes is one multiply), a filter's
 * harmless unevenness; hence the looser bound there. */
static void test_hash_spreads_names(void **state) {
  (void)state;
  const char *fmts[] = {"address.%u", "q%u",         "news.europe.%u",
                        "%u",         "orders/%08u", "a.very.long.address.name.number.%u"};
  enum { NB = 1 << 16, N = 40000 };
  static uint32_t cnt[NB];
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    uint32_t tags[256] = {0};
    memset(cnt, 0, sizeof cnt);
    char buf[64];
    for (uint32_t i = 0; i < N; i++) {
      int len = snprintf(buf, sizeof buf, fmts[f], i);
      mqr__key_t k = mqr__key(buf, (size_t)len);
      cnt[k.hash & (NB - 1)]++;
      tags[mqr__tag(k.hash)]++;
    }
    double chi = 0, e = (double)N / NB, chit = 0, et = (double)N / 128;
    for (uint32_t b = 0; b < NB; b++) chi += (cnt[b] - e) * (cnt[b] - e) / e;
    for (int t = 0; t < 0x80; t++) assert_int_equal(tags[t], 0);
    for (int t = 0x80; t < 256; t++) chit += (tags[t] - et) * (tags[t] - et) / et;
    if (chi / (NB - 1) > 1.3 || chit / 127 > 3)
      fail_msg("%s: chi-square per degree %.2f (slots), %.2f (tags)", fmts[f], chi / (NB - 1), chit / 127);
  }
}

/* The hash reads every byte: names that differ in one byte, at any position and for
 * every length up to 40, hash apart; its ':' detection is exact; and up to 16 bytes the
 * digest's words differ too (a slot decides equality by them). */
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
      mqr__key_t ka = mqr__key_scan(a, n, &ca), kb = mqr__key(b, n);
      if (n <= 16) assert_true(ka.a != kb.a || ka.b != kb.b);
      b[i] = ':';
      mqr__key_scan(b, n, &cb);
      assert_false(ca);
      assert_true(cb);
    }
    assert_true(mqr__hash(a, n) != mqr__hash(a, n - 1)); /* length matters */
  }
}

/* The cache against a FIFO of the last ids: it grows from 16 ids to its max while the
 * budget allows, and a cache the budget stops keeps the newest ids it has room for. */
static void test_dupcache_against_fifo(void **state) {
  (void)state;
  static const uint32_t maxes[] = {1, 17, 33, 49, 65, 200};
  size_t room32 = sizeof(mqr__dupcache_t) + 32 * sizeof(uint32_t) + 32 * sizeof(mqr__dup_entry_t) + 8;
  for (int limited = 0; limited < 2; limited++)
    for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
      uint32_t max = maxes[m];
      mqr__dupbudget_t budget = {0, limited ? room32 : SIZE_MAX};
      uint32_t cap = limited && max > 32 ? 32 : max; /* what the model keeps */
      mqr__dupcache_t *c = NULL;
      assert_int_equal(mqr__dupcache_create(max, &budget, &c), 0);
      int fifo[256], n = 0; /* the last cap ids, oldest first */
      for (int step = 0; step < 20000; step++) {
        int id = (int)rnd(cap * 3 + 2);
        char buf[100];
        /* some ids longer than the inline bytes, differing only at the end */
        int len = id % 5 == 0 ? snprintf(buf, sizeof buf, "%080d", id) : snprintf(buf, sizeof buf, "id%d", id);
        bool want = false;
        for (int i = 0; i < n; i++) want |= fifo[i] == id;
        bool got = mqr__dupcache_check_add(c, mqr_str_n(buf, (size_t)len), &budget);
        assert_int_equal(got, want);
        if (!want) {
          if ((uint32_t)n == cap) memmove(fifo, fifo + 1, (size_t)--n * sizeof *fifo);
          fifo[n++] = id;
        }
        assert_true(budget.used <= budget.limit);
      }
      assert_int_equal(c->cap, cap);
      assert_int_equal(budget.used, c->bytes);
      mqr__dupcache_destroy(c, &budget);
      assert_int_equal(budget.used, 0);
    }
  mqr__dupbudget_t none = {0, 10};
  mqr__dupcache_t *c = NULL;
  assert_int_equal(mqr__dupcache_create(0, &none, &c), MQR_EINVAL);
  assert_int_equal(mqr__dupcache_create(100, &none, &c), MQR_ELIMIT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_against_array),
      cmocka_unit_test(test_hash_sees_every_byte),
      cmocka_unit_test(test_hash_spreads_names),
      cmocka_unit_test(test_dupcache_against_fifo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
