/* cluster/pool.c: blocks keep what was written into them through realloc, aligned blocks
 * are aligned, a thread that keeps blocks gives the same block back for its class (or one
 * of a class at most twice as large when its own has none), the
 * bound on what it keeps holds, trimming gives back what went unused, libraft's heap is
 * the pool (a block from raft_malloc is the pool's), and its blocks come through
 * mqr_set_allocator's hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <raft.h>

#include "mqr/common.h"
#include "pool.h"

/* The allocator hook: the C library's, counted. */
static size_t hooked;
static void *count_malloc(size_t n) { return hooked++, malloc(n); }
static void *count_realloc(void *p, size_t n) { return hooked++, realloc(p, n); }
static void *count_calloc(size_t n, size_t size) { return hooked++, calloc(n, size); }

static void sizes_and_contents(void **state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 15, 16, 79, 80, 81, 96, 127, 128, 129, 4095, 4096, 4097, 100000, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    uint8_t *p = mqr__rpool_malloc(sizes[i]);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    memset(p, (int)i, sizes[i]);
    uint8_t *q = mqr__rpool_realloc(p, sizes[i] * 3 + 7); /* grows: what was written stays */
    assert_non_null(q);
    for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(q[k], (uint8_t)i);
    q = mqr__rpool_realloc(q, sizes[i] / 2); /* shrinks: the first half stays */
    for (size_t k = 0; k < sizes[i] / 2; k++) assert_int_equal(q[k], (uint8_t)i);
    mqr__rpool_free(q);
  }
  mqr__rpool_free(NULL);
}

static void aligned(void **state) {
  (void)state;
  static const size_t aligns[] = {8, 16, 512, 4096, 8192};
  for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
    uint8_t *p = mqr__rpool_aligned(aligns[i], 12345);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % aligns[i], 0);
    memset(p, 7, 12345);
    mqr__rpool_free(p);
  }
}

static void kept_and_reused(void **state) {
  (void)state;
  void *p = mqr__rpool_malloc(1000);
  mqr__rpool_free(p);
  assert_int_equal(mqr__rpool_kept(), 0); /* (this thread does not keep blocks yet) */
  mqr__rpool_keep();
  p = mqr__rpool_malloc(1000);
  mqr__rpool_free(p);
#ifndef MQR_POOL_KEEPS_NOTHING
  assert_true(mqr__rpool_kept() >= 1000);
  assert_ptr_equal(mqr__rpool_malloc(900), p); /* the same class: the same block */
  void *a = mqr__rpool_aligned(4096, 5000), *b = mqr__rpool_malloc(5000);
  mqr__rpool_free(a);
  mqr__rpool_free(b);
  assert_ptr_equal(mqr__rpool_aligned(4096, 5000), a); /* aligned blocks apart from the others */
  assert_ptr_equal(mqr__rpool_malloc(5000), b);
  mqr__rpool_free(a);
  mqr__rpool_free(b);
  mqr__rpool_free(p);
  /* a class with no block kept takes one of a class at most twice as large, which goes back
   * to its own class */
  void *big = mqr__rpool_malloc(100000); /* (the class of 112 KiB) */
  mqr__rpool_free(big);
  assert_ptr_equal(mqr__rpool_malloc(70000), big); /* (80 KiB's, two classes below) */
  mqr__rpool_free(big);
  assert_ptr_equal(mqr__rpool_malloc(110000), big);
  mqr__rpool_free(big);
  void *small = mqr__rpool_malloc(20000); /* (20 KiB's: more than twice as small) */
  assert_ptr_not_equal(small, big);
  mqr__rpool_free(small);
  /* the bound: blocks of 1 MiB freed past it go back to the system */
  size_t n = MQR__RPOOL_KEEP / (1 << 20) + 8;
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; i < n; i++) assert_non_null(blocks[i] = mqr__rpool_malloc(1 << 20));
  for (size_t i = 0; i < n; i++) mqr__rpool_free(blocks[i]);
  assert_true(mqr__rpool_kept() <= MQR__RPOOL_KEEP);
  assert_true(mqr__rpool_kept() >= MQR__RPOOL_KEEP - (2 << 20));
  /* trimming: what stayed unused between two trims goes */
  mqr__rpool_trim(); /* (the low mark since the start: 0, or what was kept before) */
  size_t before = mqr__rpool_kept();
  void *used = mqr__rpool_malloc(1 << 20); /* 1.25 MiB's class drawn once */
  mqr__rpool_free(used);
  mqr__rpool_trim();
  assert_true(mqr__rpool_kept() <= before - MQR__RPOOL_KEEP / 2);
  mqr__rpool_trim();
  mqr__rpool_trim();
  assert_int_equal(mqr__rpool_kept(), 0);
  free(blocks);
#else
  assert_int_equal(mqr__rpool_kept(), 0); /* (AddressSanitizer: nothing kept, every free seen) */
  mqr__rpool_free(mqr__rpool_malloc(10));
#endif
}

static void raft_heap_is_the_pool(void **state) {
  (void)state;
  mqr__rpool_keep();
  void *p = raft_malloc(3000);
  assert_non_null(p);
  raft_free(p);
#ifndef MQR_POOL_KEEPS_NOTHING
  assert_ptr_equal(mqr__rpool_malloc(3000), p); /* raft_free gave the block to the pool */
#else
  p = mqr__rpool_malloc(3000);
#endif
  p = raft_realloc(p, 70000);
  assert_non_null(p);
  mqr__rpool_free(p);
  void *a = raft_aligned_alloc(4096, 10000);
  assert_int_equal((uintptr_t)a % 4096, 0);
  raft_aligned_free(4096, a);
}

static void through_the_hook(void **state) {
  (void)state;
  size_t before = hooked;
  void *p = mqr__rpool_malloc(3 << 20), *a = raft_aligned_alloc(4096, 3 << 20), *b = mqr__rpool_aligned(512, 1000);
  assert_true(hooked >= before + 3);
  assert_int_equal((uintptr_t)a % 4096, 0);
  assert_int_equal((uintptr_t)b % 512, 0);
  mqr__rpool_free(p);
  raft_aligned_free(4096, a);
  mqr__rpool_free(b);
}

int main(void) {
  if (mqr_set_allocator(count_malloc, count_realloc, count_calloc, free) != 0) return 1; /* (before anything) */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes_and_contents),    cmocka_unit_test(aligned),          cmocka_unit_test(kept_and_reused),
      cmocka_unit_test(raft_heap_is_the_pool), cmocka_unit_test(through_the_hook),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
