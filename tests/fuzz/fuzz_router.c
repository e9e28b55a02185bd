/* libFuzzer: a router driven by a script of operations (add and remove addresses, queues
 * and routing types; sends), with allocations failing where the script says. After every
 * step, against what the router said before it:
 *   - a refused operation changed nothing: every address and queue is where it was, with
 *     the same routing types and bindings;
 *   - one that succeeded did what it says (an address added has exactly its types, one
 *     removed is gone with its queues, a queue added is bound to its address, ...);
 *   - the inline lookup, its exported half and mqr_router_find_address agree, with the
 *     types the address holds; the counts are right; both tables keep their invariants.
 * Names come from a fixed set of 40 addresses and 16 queues, 1 to 92 bytes, so a script
 * meets existing names often and crosses the pool cell's 39 bytes and the 16 bytes of
 * the inline lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "mqr/routing.h"
#include "table.h"

enum { N_ADDR = 40, N_QUEUE = 16, N_NAMES = N_ADDR + N_QUEUE + N_ADDR }; /* queues, then queues named as addresses */

static char names[N_NAMES][100];
static size_t lens[N_NAMES];

static void make_names(void) {
  static const char A[] = "abcdefghijklmnopqrstuvwxyz";
  for (int i = 0; i < N_ADDR; i++) { /* lengths 1..40 and past 40; first and last byte say which */
    size_t len = i < 30 ? (size_t)(1 + i) : (size_t)(40 + (i - 30) * 6);
    for (size_t j = 0; j < len; j++) names[i][j] = A[(i * 7 + (int)j * 3) % 26];
    names[i][0] = A[i % 26];
    names[i][len - 1] = (char)('A' + i / 26);
    lens[i] = len;
  }
  for (int i = 0; i < N_QUEUE; i++)
    lens[N_ADDR + i] =
        (size_t)snprintf(names[N_ADDR + i], 100, "queue.%d.%.*s", i, i * 5,
                         "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp");
  for (int i = 0; i < N_ADDR; i++) { /* an ANYCAST send auto-creates a queue named as its address */
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
  int queue_addr[N_NAMES]; /* a queue's address, -1 when there is no such queue */
  int queue_type[N_NAMES];
} view_t;

static int addr_index(const mqr_address_t *a) {
  mqr_str_t n = mqr_address_name(a);
  for (int i = 0; i < N_ADDR; i++)
    if (n.len == lens[i] && memcmp(n.ptr, names[i], n.len) == 0) return i;
  return -2;
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
  FUZZ_CHECK(mqr__table_check(&r->addresses) && mqr__table_check(&r->queues));
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
    if (b->addr[i] != a->addr[i] || b->types[i] != a->types[i] || b->nq[i] != a->nq[i])
      fprintf(stderr, "  address %.*s: present %d->%d, types %x->%x, queues %u->%u\n", (int)lens[i], names[i],
              b->addr[i], a->addr[i], b->types[i], a->types[i], b->nq[i], a->nq[i]);
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
    case 5: rc = (op & 8 ? mqr_router_remove_routing_type : mqr_router_add_routing_type)(&r, name(a), t, &err); break;
    default: {
      mqr_route_request_t req = {name(a), op & 8 ? MQR_ROUTING_NONE : t, {0}, NULL, NULL};
      mqr_route_result_t res = {targets, N_NAMES + 2, 0, 0, 0, 0, NULL};
      rc = mqr_router_route(&r, &req, &res, &err);
      if (rc == 0) FUZZ_CHECK(res.count <= N_NAMES && before.addr[a] == !(res.flags & MQR_ROUTE_CREATED_ADDRESS));
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
    case 5: FUZZ_CHECK(after.addr[a] && (after.types[a] >> t & 1) == !(op & 8)); break;
    default: FUZZ_CHECK(after.addr[a]); break;
    }
    before = after;
  }
  mqr_router_close(&r);
  return 0;
}
