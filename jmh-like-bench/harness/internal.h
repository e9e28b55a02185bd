/* Private to the harness. */
#ifndef MQR_BENCH_INTERNAL_H
#define MQR_BENCH_INTERNAL_H

#include <stdio.h>

#include "bench.h"

#define MQR__MAX_PARAMS 8
#define MQR__MAX_AUX 16
#define MQR__MAX_FORKS 32
#define MQR__N_PCT 9

typedef struct {
  int n;
  char keys[MQR__MAX_PARAMS][64];
  char vals[MQR__MAX_PARAMS][64];
} mqr__combo_t;

struct mqr_bench_ctx_s {
  const mqr_bench_def_t *def;
  mqr__combo_t combo;
  void *state;
  bool failed;
  char why[512];
  int n_aux;
  struct {
    char name[64], unit[16];
    double value;
  } aux[MQR__MAX_AUX];
};

struct mqr_bench_result_s {
  char name[128];
  int mode;
  mqr__combo_t combo;
  int forks, warmup_iterations, iterations;
  char unit[16];
  double *samples; /* measurement iterations (per-call times in sample mode), all forks */
  int *fork_of;    /* the fork of each sample */
  size_t n_samples, cap_samples;
  double *alloc; /* B/op per measurement iteration */
  size_t n_alloc, cap_alloc;
  bool alloc_unavailable;
  int n_aux;
  struct {
    char name[64], unit[16];
    double by_fork[MQR__MAX_FORKS];
  } aux[MQR__MAX_AUX];
  bool failed;
  char why[512];
  mqr_bench_stats_t stats, alloc_stats;
  double pct[MQR__N_PCT]; /* sample mode: p0, p50, p90, p95, p99, p99.9, p99.99, p99.999, p100 */
};

size_t mqr__bench_registry(const mqr_bench_def_t ***out);
const char *mqr__bench_mode_name(int m);
int mqr__bench_parse_modes(const char *text);
void mqr__bench_unit(int mode, int tu, char *out, size_t cap);
int mqr__bench_cmp_double(const void *a, const void *b);
void mqr__bench_add_sample(mqr_bench_result_t *r, int fork, double v);
void mqr__bench_add_alloc(mqr_bench_result_t *r, double bytes_per_op);
void mqr__bench_add_aux(mqr_bench_result_t *r, int fork, const char *name, const char *unit, double v);
size_t mqr__bench_run(const mqr_bench_def_t *def, const mqr_bench_options_t *opt, mqr_bench_result_t **arr, size_t n,
                      bool progress);
void mqr__bench_print_table(FILE *f, const mqr_bench_result_t *r, size_t n);
int mqr__bench_write_json(const char *path, const mqr_bench_options_t *opt, const mqr_bench_result_t *r, size_t n);

#endif
