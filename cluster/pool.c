/* The cluster's memory: size classes and per-thread kept blocks (pool.h).
 *
 * Classes grow by a quarter within each power of two (80, 96, 112, 128, 160, ... up to
 * 128 MiB), so a block of its own class wastes at most a fifth of itself (one of a class up
 * to twice as large, taken when its own has none kept, at most half). Every block has a 16-byte
 * header before what it gives: the length asked for (what a realloc copies), its class
 * (NONE: past the largest, freed at once) and how far before it the allocator's block
 * starts. Blocks come from mqr_malloc (mqr_set_allocator's hook, as every allocation of
 * mqr's), aligned by hand. Blocks aligned to 4096 bytes (libraft's disk writes ask for
 * the file system's block size) are kept apart from the others; other alignments are
 * not kept. Under AddressSanitizer nothing is kept, so that a use after free is still
 * seen. */
#include "pool.h"

#include <pthread.h>
#include <raft.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mqr/common.h"

#define CLASSES 84 /* (8 << 24: 128 MiB, the largest) */
#define NONE 0xff
#define PAGE 4096
#define UP 4 /* classes above the one asked for that a block may come from (twice the size) */

#if defined(__SANITIZE_ADDRESS__)
#define KEEP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP 0
#endif
#endif
#ifndef KEEP
#define KEEP MQR__RPOOL_KEEP
#endif

typedef struct {
  size_t len;      /* asked for */
  uint32_t offset; /* from the system's block to what was given */
  uint8_t cls;     /* or NONE */
  uint8_t aligned; /* to PAGE */
  uint16_t unused;
} head_t;

_Static_assert(sizeof(head_t) == 16, "a block's header keeps what follows it 16-byte aligned");

typedef struct {
  void *free[2][CLASSES]; /* [aligned][class]: linked through their first bytes */
  uint32_t n[2][CLASSES]; /* how many */
  /* the fewest of each class kept since the last trim: that many went unused since (a
   * class drawn on in every interval keeps its blocks, whatever their size) */
  uint32_t low[2][CLASSES];
  size_t kept;
} cache_t;

static __thread cache_t *tc;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static size_t class_size(unsigned c) { return (size_t)(5 + c % 4) << (c / 4 + 4); }

static unsigned class_of(size_t n) {
  if (n <= 80) return 0;
  unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
  size_t step = (size_t)1 << (k - 2);
  return 4 * (k - 6) + (unsigned)((n + step - 1) / step) - 5;
}

static head_t *head_of(void *p) { return (head_t *)p - 1; }

/* A new block of size bytes (n of them asked for), aligned to align (a power of two, at
 * least 16), with its header. */
static void *fresh(size_t size, size_t align, size_t n, uint8_t cls, bool aligned) {
  if (align > UINT32_MAX / 2 || size > SIZE_MAX - sizeof(head_t) - align) return NULL;
  char *raw = mqr_malloc(sizeof(head_t) + align - 1 + size);
  if (raw == NULL) return NULL;
  uintptr_t at = ((uintptr_t)raw + sizeof(head_t) + align - 1) & ~(uintptr_t)(align - 1);
  void *p = (void *)at;
  *head_of(p) = (head_t){.len = n, .offset = (uint32_t)(at - (uintptr_t)raw), .cls = cls, .aligned = aligned};
  return p;
}

static void release(void *p) {
  head_t *h = head_of(p);
  mqr_free((char *)p - h->offset);
}

static void drop_cache(void *arg) {
  cache_t *c = arg;
  for (int a = 0; a < 2; a++)
    for (unsigned k = 0; k < CLASSES; k++)
      for (void *p = c->free[a][k], *next; p; p = next) {
        memcpy(&next, p, sizeof next);
        release(p);
      }
  mqr_free(c);
}

static void make_key(void) { (void)pthread_key_create(&key, drop_cache); }

void mqr__rpool_keep(void) {
  if (tc != NULL || KEEP == 0) return;
  pthread_once(&key_once, make_key);
  if ((tc = mqr_calloc(1, sizeof *tc)) != NULL) pthread_setspecific(key, tc);
}

static void *take(size_t n, bool aligned) {
  unsigned want = n <= class_size(CLASSES - 1) ? class_of(n) : NONE, cls = want;
  cache_t *c = want != NONE ? tc : NULL;
  void *p = NULL;
  /* its class, else the least of the next UP classes (at most twice as large) that has a
   * block: a buffer grown in steps of varying size (libraft's write buffer of a log
   * segment) finds a block kept from an earlier one */
  for (; c && cls < CLASSES && cls <= want + UP && (p = c->free[aligned][cls]) == NULL; cls++) {
  }
  if (p) {
    memcpy(&c->free[aligned][cls], p, sizeof p);
    c->kept -= class_size(cls);
    if (--c->n[aligned][cls] < c->low[aligned][cls]) c->low[aligned][cls] = c->n[aligned][cls];
    head_of(p)->len = n;
    return p;
  }
  return fresh(want != NONE ? class_size(want) : n, aligned ? PAGE : 16, n, (uint8_t)want, aligned);
}

void *mqr__rpool_malloc(size_t n) { return take(n, false); }

void *mqr__rpool_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = take(n * size, false);
  return p ? memset(p, 0, n * size) : NULL;
}

void *mqr__rpool_aligned(size_t align, size_t n) {
  if (align <= 16) return take(n, false);
  return align == PAGE ? take(n, true) : fresh(n, align, n, NONE, false); /* (other alignments: not kept) */
}

void mqr__rpool_free(void *p) {
  if (p == NULL) return;
  head_t *h = head_of(p);
  cache_t *c = h->cls != NONE ? tc : NULL;
  if (c == NULL || c->kept + class_size(h->cls) > KEEP) {
    release(p);
    return;
  }
  memcpy(p, &c->free[h->aligned][h->cls], sizeof p);
  c->free[h->aligned][h->cls] = p;
  c->n[h->aligned][h->cls]++;
  c->kept += class_size(h->cls);
}

void *mqr__rpool_realloc(void *p, size_t n) {
  if (p == NULL) return mqr__rpool_malloc(n);
  head_t *h = head_of(p);
  if (h->cls != NONE && !h->aligned && n <= class_size(h->cls)) {
    h->len = n;
    return p;
  }
  void *q = h->aligned ? mqr__rpool_aligned(PAGE, n) : mqr__rpool_malloc(n);
  if (q == NULL) return NULL;
  memcpy(q, p, h->len < n ? h->len : n);
  mqr__rpool_free(p);
  return q;
}

void mqr__rpool_trim(void) {
  cache_t *c = tc;
  if (c == NULL) return;
  for (int a = 0; a < 2; a++)
    for (unsigned k = 0; k < CLASSES; k++) {
      for (; c->low[a][k] > 0; c->low[a][k]--) {
        void *p = c->free[a][k];
        memcpy(&c->free[a][k], p, sizeof p);
        release(p);
        c->n[a][k]--;
        c->kept -= class_size(k);
      }
      c->low[a][k] = c->n[a][k];
    }
}

size_t mqr__rpool_kept(void) { return tc ? tc->kept : 0; }

/* ---- libraft's heap ------------------------------------------------------------------------- */

static void *raft_pool_malloc(void *data, size_t n) { return (void)data, mqr__rpool_malloc(n); }
static void raft_pool_free(void *data, void *p) { (void)data, mqr__rpool_free(p); }
static void *raft_pool_calloc(void *data, size_t n, size_t size) { return (void)data, mqr__rpool_calloc(n, size); }
static void *raft_pool_realloc(void *data, void *p, size_t n) { return (void)data, mqr__rpool_realloc(p, n); }
static void *raft_pool_aligned(void *data, size_t align, size_t n) { return (void)data, mqr__rpool_aligned(align, n); }
static void raft_pool_aligned_free(void *data, size_t align, void *p) { (void)data, (void)align, mqr__rpool_free(p); }

static struct raft_heap raft_pool = {NULL,
                                     raft_pool_malloc,
                                     raft_pool_free,
                                     raft_pool_calloc,
                                     raft_pool_realloc,
                                     raft_pool_aligned,
                                     raft_pool_aligned_free};

/* Before main, so that no block libraft hands back was made by its default heap (a
 * program that makes Raft objects of its own before linking this in has none either). */
static void set_heap(void) { raft_heap_set(&raft_pool); }

__attribute__((constructor)) void mqr__rpool_for_raft(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, set_heap);
}
