/* filter.eval: a compiled selector (mqr/filter.h) evaluated on a message's values, against
 * a C predicate written by hand for the same condition, with the same type checks a
 * filter must make (a value of another type, or a missing one, does not match). An
 * operation is one evaluation; the messages rotate through a set of 16 so that neither
 * side is evaluated on a constant.
 *
 *   expr=and   color = 'red' AND weight > 2.5
 *   expr=in    region IN ('eu', 'us') AND NOT urgent
 *   expr=like  name LIKE 'ord%-eu'
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mqr/filter.h"

#define N_MSG 16

typedef struct {
  int expr;  /* 0 and, 1 in, 2 like */
  bool hand; /* the hand-written predicate */
  mqr_filter_t *f;
  mqr_value_t msg[N_MSG][2]; /* by slot */
  uint64_t at;
} st_t;

static const char *const selectors[] = {"color = 'red' AND weight > 2.5", "region IN ('eu', 'us') AND NOT urgent",
                                        "name LIKE 'ord%-eu'"};

static mqr_value_t str(const char *s) { return (mqr_value_t){MQR_VALUE_STRING, {.s = {s, strlen(s)}}}; }

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  const char *e = mqr_bench_param(c, "expr");
  s->expr = strcmp(e, "and") == 0 ? 0 : strcmp(e, "in") == 0 ? 1 : 2;
  s->hand = strcmp(mqr_bench_param(c, "impl"), "c") == 0;
  mqr_error_t err;
  if (mqr_filter_compile(mqr_str(selectors[s->expr]), NULL, NULL, &s->f, &err) != 0)
    return mqr_bench_fail(c, "%s", err.message);
  static const char *const colors[] = {"red", "blue", "green", "red"};
  static const char *const regions[] = {"eu", "us", "apac", "eu"};
  static const char *const names[] = {"order-17-eu", "order-17-us", "ord-eu", "invoice-eu"};
  for (int i = 0; i < N_MSG; i++) {
    switch (s->expr) {
    case 0:
      s->msg[i][0] = str(colors[i % 4]);
      s->msg[i][1] =
          i % 3 ? (mqr_value_t){MQR_VALUE_DOUBLE, {.d = 1.0 + i * 0.25}} : (mqr_value_t){MQR_VALUE_INT, {.i = i}};
      break;
    case 1:
      s->msg[i][0] = str(regions[i % 4]);
      s->msg[i][1] = (mqr_value_t){MQR_VALUE_BOOL, {.b = (i / 4) % 2}};
      break;
    default: s->msg[i][0] = str(names[i % 4]); break;
    }
  }
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  mqr_filter_free(s->f);
  free(s);
}

/* The hand-written predicates: what a programmer writes for the same condition, checking
 * types as the filter must. */
static bool is_str(const mqr_value_t *v, const char *lit, size_t n) {
  return v->type == MQR_VALUE_STRING && v->u.s.len == n && memcmp(v->u.s.ptr, lit, n) == 0;
}

static double num(const mqr_value_t *v, bool *ok) {
  *ok = true;
  switch (v->type) {
  case MQR_VALUE_INT: return v->u.i;
  case MQR_VALUE_LONG: return (double)v->u.l;
  case MQR_VALUE_FLOAT: return v->u.f;
  case MQR_VALUE_DOUBLE: return v->u.d;
  default: *ok = false; return 0;
  }
}

__attribute__((noinline)) static bool hand(int expr, const mqr_value_t *v) {
  switch (expr) {
  case 0: {
    bool ok;
    double w = num(&v[1], &ok);
    return is_str(&v[0], "red", 3) && ok && w > 2.5;
  }
  case 1: return (is_str(&v[0], "eu", 2) || is_str(&v[0], "us", 2)) && v[1].type == MQR_VALUE_BOOL && !v[1].u.b;
  default: {
    if (v[0].type != MQR_VALUE_STRING || v[0].u.s.len < 6) return false;
    const char *p = v[0].u.s.ptr;
    size_t n = v[0].u.s.len;
    return memcmp(p, "ord", 3) == 0 && memcmp(p + n - 3, "-eu", 3) == 0;
  }
  }
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  uint64_t matched = 0, at = s->at;
  if (s->hand)
    for (uint64_t i = 0; i < ops; i++) matched += hand(s->expr, s->msg[at++ % N_MSG]);
  else
    for (uint64_t i = 0; i < ops; i++) matched += mqr_filter_eval(s->f, s->msg[at++ % N_MSG], 2) == MQR_FILTER_TRUE;
  s->at = at;
  mqr_bench_sink_u64(matched);
  return 0;
}

static const mqr_bench_def_t eval = {
    "filter.eval", "expr=and,in,like;impl=mqr,c", "avgt", setup, teardown, NULL, NULL, run, NULL};
MQR_BENCH_REGISTER(eval)
