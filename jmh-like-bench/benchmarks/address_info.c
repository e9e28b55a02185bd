/* address_info: the ARTEMIS-1606 result in C. Artemis measured its send hot path,
 * "create an AddressInfo, then ask its routing type", with a HashSet of routing types
 * against an EnumSet: 22.8 M vs 198.6 M ops/s, 208 vs 72 bytes per object.
 *
 * Three designs of the same address info (name, id, removal timestamp, flags, routing
 * types) behind the same API, and what mqr's send really does:
 *   bitmask_stack  mqr_address_info_t in the struct, on caller storage
 *   bitmask_heap   the same struct created and destroyed through the allocator, as the
 *                  Java object is
 *   hashset        the straightforward port of HashSet<RoutingType>: a HashMap-style
 *                  table of 16 buckets allocated on first add, a node per element, and
 *                  the routing type found by iterating, as Java's iterator().next() does
 *   lookup         find an existing address by name in a router of N addresses, test
 *                  its routing type: mqr_router_find_address_types, the check a send
 *                  makes (the router keeps the types in the table's slot)
 * Each run alternates ANYCAST and MULTICAST. The struct's address escapes through an
 * empty asm with a memory clobber, so its stores and loads really happen. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "mqr/routing.h"

static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static const int types[2] = {MQR_ANYCAST, MQR_MULTICAST};

/* ---- the bitmask design --------------------------------------------------------- */

typedef struct {
  mqr_str_t name;
  int64_t id;
  int64_t removed_at;
  mqr_address_info_t info;
  uint8_t flags;
} ai_bitmask_t;

static inline void ai_bitmask_init(ai_bitmask_t *ai, mqr_str_t name, int64_t id) {
  ai->name = name;
  ai->id = id;
  ai->removed_at = -1;
  ai->flags = 0;
  mqr_address_info_init(&ai->info);
}

/* ---- the hash-set design: HashSet<RoutingType> ported as it is ------------------ */

typedef struct hs_node {
  uint32_t hash;
  int key;
  struct hs_node *next;
} hs_node_t;

typedef struct {
  hs_node_t **table; /* allocated on first add, 16 buckets (HashMap's default) */
  uint32_t capacity, size;
} hashset_t;

typedef struct {
  mqr_str_t name;
  int64_t id;
  int64_t removed_at;
  hashset_t *types;
  uint8_t flags;
} ai_hashset_t;

static inline uint32_t hs_hash(int key) {
  uint32_t h = (uint32_t)key * 0x9E3779B9u; /* an identity-style hash of the enum constant */
  return h ^ (h >> 16);                     /* HashMap.hash()'s spread */
}

static hashset_t *hs_create(void) {
  hashset_t *s = mqr_malloc(sizeof *s);
  if (s) s->table = NULL, s->capacity = 0, s->size = 0;
  return s;
}

static int hs_add(hashset_t *s, int key) {
  if (s->table == NULL) {
    if ((s->table = mqr_calloc(16, sizeof *s->table)) == NULL) return -1;
    s->capacity = 16;
  }
  uint32_t h = hs_hash(key), i = h & (s->capacity - 1);
  for (hs_node_t *n = s->table[i]; n; n = n->next)
    if (n->hash == h && n->key == key) return 0;
  hs_node_t *n = mqr_malloc(sizeof *n);
  if (n == NULL) return -1;
  n->hash = h;
  n->key = key;
  n->next = s->table[i];
  s->table[i] = n;
  s->size++;
  return 0;
}

/* iterator().next(): the first element in bucket order, or -1. */
static int hs_first(const hashset_t *s) {
  for (uint32_t i = 0; i < s->capacity; i++)
    if (s->table[i]) return s->table[i]->key;
  return -1;
}

static void hs_destroy(hashset_t *s) {
  for (uint32_t i = 0; i < s->capacity; i++)
    for (hs_node_t *n = s->table[i], *next; n; n = next) {
      next = n->next;
      mqr_free(n);
    }
  mqr_free(s->table);
  mqr_free(s);
}

static ai_hashset_t *ai_hashset_create(mqr_str_t name, int64_t id) {
  ai_hashset_t *ai = mqr_malloc(sizeof *ai);
  if (ai == NULL) return NULL;
  ai->name = name;
  ai->id = id;
  ai->removed_at = -1;
  ai->flags = 0;
  if ((ai->types = hs_create()) == NULL) {
    mqr_free(ai);
    return NULL;
  }
  return ai;
}

static void ai_hashset_destroy(ai_hashset_t *ai) {
  hs_destroy(ai->types);
  mqr_free(ai);
}

/* ---- sizes: what one address info occupies, with one and with two types --------- */

static void report_sizes(mqr_bench_ctx_t *c, int design) {
  if (design == 0) {
    mqr_bench_aux(c, "size.one_type", sizeof(ai_bitmask_t), "B");
    mqr_bench_aux(c, "size.two_types", sizeof(ai_bitmask_t), "B");
    return;
  }
  if (mqr_bench_allocated_bytes() < 0) return; /* no counter: no sizes, rather than 0 */
  for (int ntypes = 1; ntypes <= 2; ntypes++) {
    enum { K = 1000 };
    static void *keep[K];
    int64_t a0 = mqr_bench_allocated_bytes();
    for (int i = 0; i < K; i++) {
      if (design == 1) {
        ai_bitmask_t *ai = mqr_malloc(sizeof *ai);
        ai_bitmask_init(ai, MQR_STR("orders"), i);
        for (int t = 0; t < ntypes; t++) mqr_address_info_add_type(&ai->info, types[t]);
        keep[i] = ai;
      } else {
        ai_hashset_t *ai = ai_hashset_create(MQR_STR("orders"), i);
        for (int t = 0; t < ntypes; t++) hs_add(ai->types, types[t]);
        keep[i] = ai;
      }
    }
    int64_t a1 = mqr_bench_allocated_bytes();
    for (int i = 0; i < K; i++) design == 1 ? mqr_free(keep[i]) : ai_hashset_destroy(keep[i]);
    mqr_bench_aux(c, ntypes == 1 ? "size.one_type" : "size.two_types", (double)(a1 - a0) / K, "B");
  }
}

/* ---- the benchmarks ------------------------------------------------------------- */

static int setup_stack(mqr_bench_ctx_t *c) {
  report_sizes(c, 0);
  return 0;
}
static int setup_heap(mqr_bench_ctx_t *c) {
  report_sizes(c, 1);
  return 0;
}
static int setup_hashset(mqr_bench_ctx_t *c) {
  report_sizes(c, 2);
  return 0;
}

__attribute__((noinline)) static int run_bitmask_stack(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)c;
  for (uint64_t i = 0; i < ops; i++) {
    ai_bitmask_t ai;
    ai_bitmask_init(&ai, MQR_STR("orders"), (int64_t)i);
    escape(&ai);
    mqr_address_info_add_type(&ai.info, types[i & 1]);
    escape(&ai);
    mqr_bench_sink_u64((uint64_t)mqr_address_info_routing_type(&ai.info));
  }
  return 0;
}

__attribute__((noinline)) static int run_bitmask_heap(mqr_bench_ctx_t *c, uint64_t ops) {
  for (uint64_t i = 0; i < ops; i++) {
    ai_bitmask_t *ai = mqr_malloc(sizeof *ai);
    if (ai == NULL) return mqr_bench_fail(c, "out of memory");
    ai_bitmask_init(ai, MQR_STR("orders"), (int64_t)i);
    escape(ai);
    mqr_address_info_add_type(&ai->info, types[i & 1]);
    escape(ai);
    mqr_bench_sink_u64((uint64_t)mqr_address_info_routing_type(&ai->info));
    mqr_free(ai);
  }
  return 0;
}

__attribute__((noinline)) static int run_hashset(mqr_bench_ctx_t *c, uint64_t ops) {
  for (uint64_t i = 0; i < ops; i++) {
    ai_hashset_t *ai = ai_hashset_create(MQR_STR("orders"), (int64_t)i);
    if (ai == NULL || hs_add(ai->types, types[i & 1]) != 0) return mqr_bench_fail(c, "out of memory");
    escape(ai);
    mqr_bench_sink_u64((uint64_t)hs_first(ai->types));
    ai_hashset_destroy(ai);
  }
  return 0;
}

/* lookup: names in one buffer, in a shuffled order, walked in sequence. */
typedef struct {
  mqr_router_t router;
  mqr_str_t *names;
  char *text;
  uint32_t n, next;
} lookup_state_t;

static int setup_lookup(mqr_bench_ctx_t *c) {
  long n = mqr_bench_param_long(c, "addresses");
  if (n < 1 || n > 10000000) return mqr_bench_fail(c, "addresses=%ld is out of range", n);
  lookup_state_t *s = calloc(1, sizeof *s);
  s->n = (uint32_t)n;
  s->names = malloc(s->n * sizeof *s->names);
  s->text = malloc((size_t)s->n * 24);
  mqr_router_init(&s->router, NULL);
  int64_t a0 = mqr_bench_allocated_bytes();
  size_t off = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    char *name = s->text + off;
    int len = snprintf(name, 24, "address.%u", i);
    mqr_error_t e;
    if (mqr_router_add_address(&s->router, mqr_str_n(name, (size_t)len), mqr_routing_set_of(types[i & 1]), 0, NULL,
                               &e) != 0)
      return mqr_bench_fail(c, "%s", e.message);
    s->names[i] = mqr_str_n(name, (size_t)len);
    off += (size_t)len;
  }
  int64_t a1 = mqr_bench_allocated_bytes();
  if (a0 >= 0) mqr_bench_aux(c, "size.address", (double)(a1 - a0) / (double)s->n, "B");
  uint64_t x = 0x243F6A8885A308D3ull; /* Fisher-Yates with a fixed seed */
  for (uint32_t i = s->n - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t j = (uint32_t)(x % (i + 1));
    mqr_str_t t = s->names[i];
    s->names[i] = s->names[j];
    s->names[j] = t;
  }
  mqr_bench_set_state(c, s);
  return 0;
}

static void teardown_lookup(mqr_bench_ctx_t *c) {
  lookup_state_t *s = mqr_bench_state(c);
  if (s == NULL) return;
  mqr_router_close(&s->router);
  free(s->names);
  free(s->text);
  free(s);
}

__attribute__((noinline)) static int run_lookup(mqr_bench_ctx_t *c, uint64_t ops) {
  lookup_state_t *s = mqr_bench_state(c);
  uint32_t k = s->next, n = s->n;
  uint64_t hits = 0;
  for (uint64_t i = 0; i < ops; i++) {
    mqr_routing_set_t set;
    const mqr_address_t *a = mqr_router_find_address_types(&s->router, s->names[k], &set);
    hits += mqr_routing_set_contains(set, MQR_ANYCAST) + (a == NULL);
    if (++k == n) k = 0;
  }
  s->next = k;
  mqr_bench_sink_u64(hits);
  return 0;
}

static const mqr_bench_def_t bitmask_stack = {
    "address_info.bitmask_stack", NULL, "avgt,thrpt", setup_stack, NULL, NULL, NULL, run_bitmask_stack, NULL};
static const mqr_bench_def_t bitmask_heap = {
    "address_info.bitmask_heap", NULL, "avgt,thrpt", setup_heap, NULL, NULL, NULL, run_bitmask_heap, NULL};
static const mqr_bench_def_t hashset = {
    "address_info.hashset", NULL, "avgt,thrpt", setup_hashset, NULL, NULL, NULL, run_hashset, NULL};
static const mqr_bench_def_t lookup = {"address_info.lookup",
                                       "addresses=10,10000",
                                       "avgt,thrpt",
                                       setup_lookup,
                                       teardown_lookup,
                                       NULL,
                                       NULL,
                                       run_lookup,
                                       NULL};

MQR_BENCH_REGISTER(bitmask_stack)
MQR_BENCH_REGISTER(bitmask_heap)
MQR_BENCH_REGISTER(hashset)
MQR_BENCH_REGISTER(lookup)
