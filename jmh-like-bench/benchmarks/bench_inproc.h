/* A broker in the benchmark's own process, on a loop of its own, from a YAML text (no
 * listeners): opened in a setup hook, closed in a teardown. Header-only. */
#ifndef MQR_BENCH_INPROC_H
#define MQR_BENCH_INPROC_H

#include <string.h>

#include "bench.h"
#include "mqr/broker.h"

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
} bench_inproc_t;

/* 0, or the benchmark failed (mqr_bench_fail) with why; max_credit 0: the default. */
static inline int bench_inproc_open(mqr_bench_ctx_t *c, bench_inproc_t *x, const char *yaml, uint32_t max_credit) {
  uv_loop_init(&x->loop);
  mqr_error_t err;
  if (mqr_config_load_string("bench.yaml", yaml, strlen(yaml), &x->cfg, NULL) != 0) return mqr_bench_fail(c, "config");
  mqr_broker_options_t opt = {.config = x->cfg, .max_credit = max_credit};
  if (mqr_broker_create(&x->loop, &opt, &x->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  return 0;
}

/* Closes what bench_inproc_open opened (a part of it too). */
static inline void bench_inproc_close(bench_inproc_t *x) {
  if (x->b) mqr_broker_close(x->b, NULL, NULL);
  uv_run(&x->loop, UV_RUN_DEFAULT);
  uv_loop_close(&x->loop);
  mqr_config_destroy(x->cfg);
}

#endif
