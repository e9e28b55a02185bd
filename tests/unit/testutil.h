/* Test helpers: an allocator that counts live blocks and can fail the Nth call, and a
 * deterministic text dump of a router's whole visible state. Header-only: each test is
 * one executable. */
#ifndef MQR_TESTUTIL_H
#define MQR_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "mqr/mqr.h"

/* ---- counting, failing allocator ----------------------------------------------------- */

static struct {
  long live;    /* blocks allocated and not freed */
  long calls;   /* allocation calls (malloc, calloc, realloc) since reset */
  long fail_at; /* fail the call with this number (1-based), 0: never */
  long failed;  /* how many calls were failed */
} talloc;

#define THDR 16

static void *t_malloc(size_t n) {
  talloc.calls++;
  if (talloc.fail_at && talloc.calls == talloc.fail_at) {
    talloc.failed++;
    return NULL;
  }
  char *p = malloc(n + THDR);
  if (p == NULL) return NULL;
  talloc.live++;
  return p + THDR;
}

static void *t_calloc(size_t c, size_t n) {
  void *p = t_malloc(c * n);
  if (p) memset(p, 0, c * n);
  return p;
}

static void *t_realloc(void *old, size_t n) {
  if (old == NULL) return t_malloc(n);
  talloc.calls++;
  if (talloc.fail_at && talloc.calls == talloc.fail_at) {
    talloc.failed++;
    return NULL;
  }
  char *p = realloc((char *)old - THDR, n + THDR);
  return p ? p + THDR : NULL;
}

static void t_free(void *p) {
  if (p == NULL) return;
  talloc.live--;
  free((char *)p - THDR);
}

static inline void talloc_install(void) {
  memset(&talloc, 0, sizeof talloc);
  assert_int_equal(mqr_set_allocator(t_malloc, t_realloc, t_calloc, t_free), 0);
}

static inline void talloc_uninstall(void) { assert_int_equal(mqr_set_allocator(NULL, NULL, NULL, NULL), 0); }

/* ---- a small deterministic PRNG (xorshift64) ------------------------------------- */

static uint64_t test_rng_state = 0x9e3779b97f4a7c15ull;

/* A pseudo-random number in [0, n). */
__attribute__((unused)) static uint32_t rnd(uint32_t n) {
  test_rng_state ^= test_rng_state << 13;
  test_rng_state ^= test_rng_state >> 7;
  test_rng_state ^= test_rng_state << 17;
  return (uint32_t)(test_rng_state % n);
}

/* ---- router dump ------------------------------------------------------------------- */

static int dump_address(mqr_address_t *a, void *arg) {
  FILE *f = arg;
  mqr_str_t n = mqr_address_name(a);
  char types[64];
  mqr_routing_set_format(mqr_address_routing_types(a), types, sizeof types);
  fprintf(f, "A %.*s [%s] def=%d flags=%u routed=%llu unrouted=%llu\n", (int)n.len, n.ptr, types,
          mqr_address_default_routing_type(a), mqr_address_flags(a), (unsigned long long)mqr_address_routed(a),
          (unsigned long long)mqr_address_unrouted(a));
  for (uint32_t i = 0; i < mqr_address_queue_count(a); i++) {
    const mqr_queue_t *q = mqr_address_queue(a, i);
    mqr_str_t qn = mqr_queue_name(q), ft = mqr_queue_filter(q);
    fprintf(f, "  Q %.*s t=%d d=%d p=%d e=%d mc=%d c=%u r=%llu f=%.*s\n", (int)qn.len, qn.ptr,
            mqr_queue_routing_type(q), mqr_queue_durable(q), mqr_queue_purge_on_no_consumers(q), mqr_queue_enabled(q),
            mqr_queue_max_consumers(q), mqr_queue_consumer_count(q), (unsigned long long)mqr_queue_routed(q),
            (int)ft.len, ft.ptr);
  }
  for (int t = 0; t < 2; t++) {
    fprintf(f, "  B%d:", t);
    for (uint32_t i = 0; i < mqr_address_binding_count(a, (mqr_routing_type_t)t); i++) {
      mqr_str_t qn = mqr_queue_name(mqr_address_binding(a, (mqr_routing_type_t)t, i));
      fprintf(f, " %.*s", (int)qn.len, qn.ptr);
    }
    fputc('\n', f);
  }
  const mqr_address_settings_t *s = mqr_address_settings(a);
  fprintf(f, "  S set=%llx aca=%d acq=%d dla=%.*s dlanr=%d ics=%d msb=%lld pol=%d dart=%d dqrt=%d\n",
          (unsigned long long)s->set, s->auto_create_addresses, s->auto_create_queues, (int)s->dead_letter_address.len,
          s->dead_letter_address.ptr ? s->dead_letter_address.ptr : "", s->send_to_dla_on_no_route, s->id_cache_size,
          (long long)s->max_size_bytes, s->address_full_policy, s->default_address_routing_type,
          s->default_queue_routing_type);
  return 0;
}

/* The dump as a malloc'd string (C allocator, not the hook: call with failures off). */
__attribute__((noinline, unused)) static char *router_dump(const mqr_router_t *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fprintf(f, "addresses=%u queues=%u\n", mqr_router_address_count(r), mqr_router_queue_count(r));
  int rc = mqr_router_foreach_address(r, dump_address, f);
  fclose(f);
  assert_int_equal(rc, 0);
  return buf;
}

/* Route helper: one send, returning the status or a negative error, with the queue names
 * joined by spaces in out (when not NULL). */
static inline int route_names(mqr_router_t *r, const char *address, int type, const char *dup, char *out, size_t cap) {
  mqr_queue_t *targets[256];
  mqr_route_request_t req = {mqr_str(address), type, mqr_str(dup), NULL, NULL, NULL};
  mqr_route_result_t res = {targets, 256, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  int rc = mqr_router_route(r, &req, &res, NULL);
  if (out) {
    out[0] = '\0';
    size_t n = 0;
    for (uint32_t i = 0; rc == 0 && i < res.count; i++) {
      mqr_str_t q = mqr_queue_name(res.queues[i]);
      n += (size_t)snprintf(out + n, cap - n, "%s%.*s", i ? " " : "", (int)q.len, q.ptr);
    }
  }
  return rc ? rc : (int)res.status;
}

#endif
