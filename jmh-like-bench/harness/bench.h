/* jmh-like-bench: a benchmark harness in the manner of JMH.
 *
 * A benchmark is a definition registered at load time (MQR_BENCH_REGISTER). Its run hook
 * performs `ops` operations per call, so the harness's timer and call overhead are paid
 * once per batch, not per operation. The harness calibrates the batch, runs warmup and
 * measurement iterations in forked children, and reports score and error as JMH does
 * (docs/benchmarks.md describes the method). */
#ifndef MQR_BENCH_H
#define MQR_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MQR_BM_THRPT = 0,  /* operations per time unit */
  MQR_BM_AVGT = 1,   /* time per operation */
  MQR_BM_SAMPLE = 2, /* per-call times, with percentiles */
  MQR_BM_SS = 3,     /* one call per iteration, cold */
  MQR_BM_COUNT = 4,
} mqr_bench_mode_t;

/* What a hook sees: the parameter values of this trial, user state, and where to report. */
typedef struct mqr_bench_ctx_s mqr_bench_ctx_t;

typedef struct {
  const char *name;   /* "group.benchmark" */
  const char *params; /* defaults, JMH @Param style: "size=10,200;kind=a,b" (NULL: none) */
  const char *modes;  /* default modes, "avgt,thrpt" (NULL: avgt); -bm overrides */
  /* Hooks outside the timed region; each returns 0, or fails the trial through
   * mqr_bench_fail. setup_trial runs once per fork and parameter combination. */
  int (*setup_trial)(mqr_bench_ctx_t *c);
  void (*teardown_trial)(mqr_bench_ctx_t *c);
  int (*setup_iteration)(mqr_bench_ctx_t *c);
  void (*teardown_iteration)(mqr_bench_ctx_t *c);
  /* The measured body: performs `ops` operations. Returns 0, or non-zero after
   * mqr_bench_fail to report the benchmark as failed (it then has no score). */
  int (*run)(mqr_bench_ctx_t *c, uint64_t ops);
  /* Optional, timed: completes what run started and did not wait for (messages still in
   * flight, say), so that a pipeline is not drained after every batch. Called at the
   * end of each timed iteration (and after each run in sample and ss modes, and once
   * after calibration's runs), inside the timed region. Returns as run does. */
  int (*finish)(mqr_bench_ctx_t *c);
} mqr_bench_def_t;

/* Registers a definition (normally through MQR_BENCH_REGISTER). */
void mqr_bench_register(const mqr_bench_def_t *def);

#define MQR_BENCH_REGISTER(def)                                                                                        \
  __attribute__((constructor)) static void mqr_bench_register_##def(void) { mqr_bench_register(&def); }

/* Optional, for a registered definition: why a parameter combination does not apply
 * (a peer without the feature, say; read through mqr_bench_param, with no state yet), or
 * NULL when it does. A combination that does not apply is not run and makes no result,
 * failed or not. */
typedef const char *(*mqr_bench_skip_fn)(const mqr_bench_ctx_t *c);
void mqr_bench_register_skip(const mqr_bench_def_t *def, mqr_bench_skip_fn skip);

/* The value of parameter `key` in this trial (NULL if the benchmark has none). */
const char *mqr_bench_param(const mqr_bench_ctx_t *c, const char *key);
/* The same, as an integer (0 if absent or not a number). */
long mqr_bench_param_long(const mqr_bench_ctx_t *c, const char *key);

/* Per-trial user state. */
void mqr_bench_set_state(mqr_bench_ctx_t *c, void *state);
void *mqr_bench_state(const mqr_bench_ctx_t *c);

/* Fails the trial with a message; returns -1 for `return mqr_bench_fail(...)`. */
int mqr_bench_fail(mqr_bench_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports a secondary figure of this trial (JMH @AuxCounters), e.g. ("size.one_type",
 * 72, "B"). Reported once per fork; the forks' values form its sample. Set again in the
 * same fork, a figure keeps its last value. */
void mqr_bench_aux(mqr_bench_ctx_t *c, const char *name, double value, const char *unit);

/* fn runs when the process that runs the trials ends: a fork when it has run its trial
 * (forks end with _exit, which runs no atexit handler), else at exit. At most 8. */
void mqr_bench_at_exit(void (*fn)(void));

/* Bytes this thread has allocated so far through jemalloc, or -1 when the counter is
 * unavailable (not linked with jemalloc, or built without stats). */
int64_t mqr_bench_allocated_bytes(void);

/* Consumes a value so that the compiler cannot remove the work that made it. */
static inline void mqr_bench_sink_u64(uint64_t v) { __asm__ volatile("" : : "r"(v) : "memory"); }
static inline void mqr_bench_sink_ptr(const void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* ---- the runner ------------------------------------------------------------------ */

typedef struct {
  const char *filter;              /* regex on names, NULL: all */
  int modes;                       /* bit mask of 1 << mode; 0: each benchmark's defaults */
  int warmup_iterations;           /* -wi */
  int iterations;                  /* -i */
  double warmup_time_s;            /* -w */
  double iteration_time_s;         /* -r */
  int forks;                       /* -f; 0 runs in this process */
  int time_unit;                   /* -tu: 0 default (ns for time modes, s for thrpt), else 1 ns, 2 us, 3 ms, 4 s */
  const char *param_overrides[16]; /* -p key=v1,v2 */
  int n_param_overrides;
  const char *json_path; /* --json FILE */
  bool quiet;            /* no progress on stderr */
  const char *command;   /* the command line, for the reports */
} mqr_bench_options_t;

void mqr_bench_options_defaults(mqr_bench_options_t *o);

/* One result: a benchmark, a mode, a parameter combination. */
typedef struct mqr_bench_result_s mqr_bench_result_t;

/* Runs every registered benchmark that matches o->filter, printing the JMH table to
 * stdout and writing JSON when asked. Returns the number of failed results (0: all ran),
 * or -1 for bad options. */
int mqr_bench_main(const mqr_bench_options_t *o);

/* For tests: run one definition with options, without printing; returns the results
 * (free with mqr_bench_results_free) and their count in *n. */
mqr_bench_result_t *mqr_bench_run_def(const mqr_bench_def_t *def, const mqr_bench_options_t *o, size_t *n);
void mqr_bench_results_free(mqr_bench_result_t *r, size_t n);

/* Reading a result. */
bool mqr_bench_result_failed(const mqr_bench_result_t *r, size_t i, const char **why);
double mqr_bench_result_score(const mqr_bench_result_t *r, size_t i);
double mqr_bench_result_error(const mqr_bench_result_t *r, size_t i); /* NaN for N <= 2 */
size_t mqr_bench_result_count(const mqr_bench_result_t *r, size_t i); /* N */
/* B/op, or NaN when the allocation counter is unavailable. */
double mqr_bench_result_alloc(const mqr_bench_result_t *r, size_t i);
/* An aux figure's mean over forks, NaN if not reported. */
double mqr_bench_result_aux(const mqr_bench_result_t *r, size_t i, const char *name);
/* The aux figure's value in fork f, NaN if none. */
double mqr_bench_result_aux_fork(const mqr_bench_result_t *r, size_t i, const char *name, int f);

/* ---- statistics (stats.c) --------------------------------------------------------- */

/* Student's t quantile: the x with P(T <= x) = p for T of df degrees of freedom. */
double mqr_bench_t_quantile(double p, double df);
/* Student's t CDF. */
double mqr_bench_t_cdf(double x, double df);

typedef struct {
  size_t n;
  double mean, stddev, error, min, max;
} mqr_bench_stats_t;

/* JMH's statistics of a sample: mean, sample standard deviation (n - 1), and error =
 * t(0.9995, n - 1) * s / sqrt(n), the half-width of the 99.9% interval; NaN for n <= 2. */
void mqr_bench_stats(const double *x, size_t n, mqr_bench_stats_t *out);
/* Percentile p in [0, 100] of sorted x, interpolated linearly between closest ranks. */
double mqr_bench_percentile(const double *sorted, size_t n, double p);

#ifdef __cplusplus
}
#endif
#endif
