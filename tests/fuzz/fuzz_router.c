/* libFuzzer: a router driven by a script of operations (add and remove addresses, queues
 * and routing types; sends, plain and to address::queue), with allocations failing where
 * the script says. After every step, against what the router said before it:
 *   - a refused operation changed nothing: every address and queue is where it was, with
 *     the same routing types and bindings;
 *   - one that succeeded did what it says (an address added has exactly its types, one
 *     removed is gone with its queues, a queue added is bound to its address, ...);
 *   - every concrete address's binding arrays hold its own queues of the type and those
 *     of every wildcard address that matches it, and no others; a wildcard address's
 *     are empty;
 *   - the inline lookup, its exported half and mqr_router_find_address agree, with the
 *     types the address holds; the counts are right; both tables keep their invariants.
 * Names come from a fixed set: 40 addresses of 1 to 92 bytes (crossing the pool cell's
 * 39 bytes and the inline lookup's 16), 10 dotted ones of which 6 are wildcard patterns,
 * and 16 queues, so a script meets existing names often. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "mqr/routing.h"
#include "router_int.h" /* the lookup's probe half */

/* Addresses (N_PLAIN letters, then dotted names), queues, then queues named as addresses:
 * an ANYCAST send auto-creates a queue named as its address. */
enum { N_PLAIN = 40, N_ADDR = N_PLAIN + 10, N_QUEUE = 16, N_NAMES = N_ADDR + N_QUEUE + N_ADDR };
static const char *const dotted[N_ADDR - N_PLAIN] = {"n.x", "n.x.y", "n.y",   "m.x",   "n.#",
                                                     "n.*", "#",     "n.*.y", "n.x.#", "*.x"};

static char names[N_NAMES][100];
static size_t lens[N_NAMES];

static void make_names(void) {
  static const char A[] = "abcdefghijklmnopqrstuvwxyz";
  for (int i = 0; i < N_PLAIN; i++) { /* lengths 1..30, then 40..94; first and last byte say which */
    size_t len = i < 30 ? (size_t)(1 + i) : (size_t)(40 + (i - 30) * 6);
    for (size_t j = 0; j < len; j++) names[i][j] = A[(i * 7 + (int)j * 3) % 26];
    names[i][0] = A[i % 26];
    names[i][len - 1] = (char)('A' + i / 26);
    lens[i] = len;
  }
  for (int i = N_PLAIN; i < N_ADDR; i++) lens[i] = (size_t)snprintf(names[i], 100, "%s", dotted[i - N_PLAIN]);
  for (int i = 0; i < N_QUEUE; i++)
    lens[N_ADDR + i] =
        (size_t)snprintf(names[N_ADDR + i], 100, "queue.%d.%.*s", i, i * 5,
                         "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp");
  for (int i = 0; i < N_ADDR; i++) {
    memcpy(names[N_ADDR + N_QUEUE + i], names[i], lens[i]);
    lens[N_ADDR + N_QUEUE + i] = lens[i];
  }
}

static mqr_str_t name(int i) { return mqr_str_n(names[i], lens[i]); }

/* What the router says of every name. */
typedef struct {
  bool addr[N_ADDR];
  uint8_t types[N_ADDR];
  uint32_t nq[N_ADDR];
  uint32_t bound[N_ADDR][2]; /* binding counts, MULTICAST and ANYCAST */
  int queue_addr[N_NAMES];   /* a queue's address, -1 when there is no such queue */
  int queue_type[N_NAMES];
} view_t;

static int addr_index(const mqr_address_t *a) {
  mqr_str_t n = mqr_address_name(a);
  for (int i = 0; i < N_ADDR; i++)
    if (n.len == lens[i] && memcmp(n.ptr, names[i], n.len) == 0) return i;
  return -2;
}

/* Address i's binding arrays: for a concrete address, its own queues of each type and
 * those of every wildcard address matching it, each once; for a wildcard one, none. */
static void check_bindings(const mqr_router_t *r, view_t *v) {
  mqr_wildcard_t wc = mqr_wildcard_default();
  int wilds[N_ADDR], n_wild = 0;
  for (int j = N_PLAIN; j < N_ADDR; j++) {
    const mqr_address_t *w = mqr_router_find_address(r, name(j));
    bool pattern = mqr_wildcard_is_pattern(&wc, name(j));
    if (w != NULL) FUZZ_CHECK(((mqr_address_flags(w) & MQR_ADDRESS_WILDCARD) != 0) == pattern);
    if (w != NULL && pattern) wilds[n_wild++] = j;
  }
  for (int i = 0; i < N_ADDR; i++) {
    const mqr_address_t *a = mqr_router_find_address(r, name(i));
    v->bound[i][0] = v->bound[i][1] = 0;
    if (a == NULL) continue;
    bool wild = (mqr_address_flags(a) & MQR_ADDRESS_WILDCARD) != 0;
    for (int t = 0; t < 2; t++) {
      uint32_t n = mqr_address_binding_count(a, (mqr_routing_type_t)t), want = 0;
      v->bound[i][t] = n;
      if (wild) {
        FUZZ_CHECK(n == 0);
        continue;
      }
      for (int k = -1; k < n_wild; k++) { /* the address itself, and each wildcard matching it */
        const mqr_address_t *w = k < 0 ? a : mqr_router_find_address(r, name(wilds[k]));
        if (k >= 0 && !mqr_wildcard_match(&wc, name(wilds[k]), name(i))) continue;
        for (uint32_t m = 0; m < mqr_address_queue_count(w); m++) {
          mqr_queue_t *q = mqr_address_queue(w, m);
          if ((int)mqr_queue_routing_type(q) != t) continue;
          want++;
          uint32_t seen = 0;
          for (uint32_t b = 0; b < n; b++) seen += mqr_address_binding(a, (mqr_routing_type_t)t, b) == q;
          FUZZ_CHECK(seen == 1);
        }
      }
      FUZZ_CHECK(n == want);
    }
  }
}

static void look(const mqr_router_t *r, view_t *v) {
  uint32_t na = 0, nq = 0;
  for (int i = 0; i < N_ADDR; i++) {
    mqr_routing_set_t inl = {0xff}, any = {0xff};
    mqr_address_t *a = mqr_router_find_address_types(r, name(i), &inl);
    FUZZ_CHECK(a == mqr__router_find_types_any(r, name(i), &any) && a == mqr_router_find_address(r, name(i)));
    FUZZ_CHECK(inl.bits == any.bits && inl.bits == (a ? mqr_address_routing_types(a).bits : 0));
    v->addr[i] = a != NULL;
    v->types[i] = inl.bits;
    v->nq[i] = a ? mqr_address_queue_count(a) : 0;
    na += a != NULL;
  }
  for (int i = N_ADDR; i < N_NAMES; i++) {
    mqr_queue_t *q = mqr_router_find_queue(r, name(i));
    v->queue_addr[i] = q ? addr_index(mqr_queue_address(q)) : -1;
    v->queue_type[i] = q ? (int)mqr_queue_routing_type(q) : -1;
    if (q) FUZZ_CHECK(v->queue_addr[i] >= 0 && v->addr[v->queue_addr[i]]);
    if (q) FUZZ_CHECK(mqr_routing_set_contains(mqr_address_routing_types(mqr_queue_address(q)), v->queue_type[i]));
    nq += q != NULL;
  }
  FUZZ_CHECK(mqr_router_address_count(r) == na && mqr_router_queue_count(r) == nq);
  FUZZ_CHECK(mqr__table_check(&RT(r)->addresses) && mqr__table_check(&RT(r)->queues));
  check_bindings(r, v);
}

/* The allocator: fails the allocation the script names, counting from the step's start. */
static long alloc_left = -1;
static bool may_alloc(void) { return alloc_left < 0 || alloc_left-- > 0; }
static void *f_malloc(size_t n) { return may_alloc() ? malloc(n) : NULL; }
static void *f_realloc(void *p, size_t n) { return may_alloc() ? realloc(p, n) : NULL; }
static void *f_calloc(size_t c, size_t n) { return may_alloc() ? calloc(c, n) : NULL; }

/* What a refused step changed, for the report. */
static void say_diff(int op, int x, int y, int rc, const mqr_error_t *err, const view_t *b, const view_t *a) {
  fprintf(stderr, "step %d %d %d refused (%s: %s), yet:\n", op, x, y, mqr_err_name(rc), err->message);
  for (int i = 0; i < N_ADDR; i++)
    if (b->addr[i] != a->addr[i] || b->types[i] != a->types[i] || b->nq[i] != a->nq[i] ||
        memcmp(b->bound[i], a->bound[i], sizeof b->bound[i]) != 0)
      fprintf(stderr, "  address %.*s: present %d->%d, types %x->%x, queues %u->%u, bound %u,%u->%u,%u\n", (int)lens[i],
              names[i], b->addr[i], a->addr[i], b->types[i], a->types[i], b->nq[i], a->nq[i], b->bound[i][0],
              b->bound[i][1], a->bound[i][0], a->bound[i][1]);
  for (int i = N_ADDR; i < N_NAMES; i++)
    if (b->queue_addr[i] != a->queue_addr[i] || b->queue_type[i] != a->queue_type[i])
      fprintf(stderr, "  queue %.*s: address %d->%d, type %d->%d\n", (int)lens[i], names[i], b->queue_addr[i],
              a->queue_addr[i], b->queue_type[i], a->queue_type[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (lens[0] == 0) {
    make_names();
    mqr_set_allocator(f_malloc, f_realloc, f_calloc, free);
  }
  mqr_router_t r;
  FUZZ_CHECK(mqr_router_init(&r, NULL) == 0);
  mqr_queue_t *targets[N_NAMES + 2];
  view_t before = {0}, after = {0}; /* queue_addr and queue_type from N_ADDR only */
  look(&r, &before);
  for (size_t p = 0; p + 3 <= size; p += 3) {
    uint8_t op = data[p], x = data[p + 1], y = data[p + 2];
    int a = x % N_ADDR, q = N_ADDR + y % N_QUEUE, t = (x >> 6) & 1;
    mqr_routing_set_t set = {(uint8_t)(y >> 4 & 3)};
    alloc_left = op & 0x80 ? (long)(y & 7) : -1; /* this step's allocation y & 7 fails */
    mqr_error_t err;
    int rc = 0;
    mqr_queue_config_t cfg;
    switch (op & 7) {
    case 0: rc = mqr_router_add_address(&r, name(a), set, 0, NULL, &err); break;
    case 1: rc = mqr_router_remove_address(&r, name(a), y & 1, &err); break;
    case 2:
    case 3:
      mqr_queue_config_init(&cfg, name(q), name(a), (mqr_routing_type_t)t);
      cfg.auto_create_address = op & 8;
      rc = mqr_router_add_queue(&r, &cfg, NULL, &err);
      break;
    case 4: rc = mqr_router_remove_queue(&r, name(op & 8 ? N_ADDR + N_QUEUE + a : q), &err); break;
    case 5:
      if (op & 0x20) { /* a divert (of four names) added, from a to the next address, or removed */
        char dn[8];
        snprintf(dn, sizeof dn, "dv%d", y & 3);
        uint32_t had = mqr_router_divert_count(&r);
        if (op & 0x40) {
          rc = mqr_router_remove_divert(&r, mqr_str(dn), &err);
        } else {
          mqr_divert_config_t dc;
          mqr_divert_config_init(&dc, mqr_str(dn), name(a), name((a + 1) % N_ADDR));
          dc.exclusive = op & 8;
          dc.routing_name = y & 4 ? MQR_STR("shared") : MQR_STR("");
          rc = mqr_router_add_divert(&r, &dc, NULL, &err);
        }
        FUZZ_CHECK(mqr_router_divert_count(&r) == (rc ? had : op & 0x40 ? had - 1 : had + 1));
        break;
      }
      rc = (op & 8 ? mqr_router_remove_routing_type : mqr_router_add_routing_type)(&r, name(a), t, &err);
      break;
    default: {
      char fq[256]; /* op & 0x10: to address::queue */
      mqr_str_t to = name(a);
      if (op & 0x10) to = mqr_str_n(fq, (size_t)snprintf(fq, sizeof fq, "%s::%s", names[a], names[q]));
      mqr_route_request_t req = {to, op & 8 ? MQR_ROUTING_NONE : t, {0}, NULL, NULL, NULL};
      mqr_divert_t *diverts[4];
      mqr_route_result_t res = {targets, N_NAMES + 2, 0, 0, 0, 0, NULL, diverts, 4, 0, 0};
      rc = mqr_router_route(&r, &req, &res, &err);
      for (uint32_t i = 0; rc == 0 && i < res.divert_count; i++) { /* each divert applies to the address */
        uint32_t seen = 0;
        for (uint32_t k = 0; k < mqr_address_divert_count(res.address); k++)
          seen += mqr_address_divert(res.address, k) == diverts[i];
        FUZZ_CHECK(seen == 1);
        if (mqr_divert_exclusive(diverts[i])) FUZZ_CHECK(res.count == 0);
      }
      if (rc != 0 || res.status != MQR_ROUTE_OK) break;
      FUZZ_CHECK(res.address == mqr_router_find_address(&r, name(a)) && res.count >= 1 && res.count <= N_NAMES);
      FUZZ_CHECK(before.addr[a] == !(res.flags & MQR_ROUTE_CREATED_ADDRESS));
      if (op & 0x10) FUZZ_CHECK(res.count == 1 && res.queues[0] == mqr_router_find_queue(&r, name(q)));
      for (uint32_t i = 0; i < res.count; i++) { /* each target is bound to the address */
        if ((op & 0x10) && mqr_address_flags(res.address) & MQR_ADDRESS_WILDCARD) {
          FUZZ_CHECK(mqr_queue_address(res.queues[i]) == res.address); /* its own queue (docs/routing.md) */
          continue;
        }
        uint32_t seen = 0;
        for (int bt = 0; bt < 2; bt++)
          for (uint32_t b = 0; b < mqr_address_binding_count(res.address, (mqr_routing_type_t)bt); b++)
            seen += mqr_address_binding(res.address, (mqr_routing_type_t)bt, b) == res.queues[i];
        FUZZ_CHECK(seen == 1);
      }
      break;
    }
    }
    alloc_left = -1;
    look(&r, &after);
    if (rc != 0) {
      if (memcmp(&before, &after, sizeof before) != 0) say_diff(op, x, y, rc, &err, &before, &after);
      FUZZ_CHECK(memcmp(&before, &after, sizeof before) == 0); /* refused: nothing changed */
      continue;
    }
    switch (op & 7) {
    case 0: FUZZ_CHECK(!before.addr[a] && after.addr[a] && after.types[a] == set.bits && after.nq[a] == 0); break;
    case 1:
      FUZZ_CHECK(before.addr[a] && !after.addr[a]);
      for (int i = N_ADDR; i < N_NAMES; i++) FUZZ_CHECK(after.queue_addr[i] != a);
      break;
    case 2:
    case 3:
      FUZZ_CHECK(before.queue_addr[q] < 0 && after.queue_addr[q] == a && after.queue_type[q] == t);
      FUZZ_CHECK(after.nq[a] == before.nq[a] + 1 && (before.addr[a] || (op & 8)));
      break;
    case 4: FUZZ_CHECK(after.queue_addr[op & 8 ? N_ADDR + N_QUEUE + a : q] < 0); break;
    case 5:
      if (!(op & 0x20)) FUZZ_CHECK(after.addr[a] && (after.types[a] >> t & 1) == !(op & 8));
      break;
    default: FUZZ_CHECK(after.addr[a]); break;
    }
    before = after;
  }
  mqr_router_close(&r);
  return 0;
}
