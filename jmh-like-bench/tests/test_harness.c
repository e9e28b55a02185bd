/* The harness's own tests: statistics against published and hand-computed values, the
 * allocation counter on bodies of known allocation, forks that are really separate
 * processes, a failing body reported as a failure and never as a score. */
#include <jemalloc/jemalloc.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench.h"
#include "mqr/common.h"

static void assert_close(double got, double want, double rel) {
  if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("got %.10g, want %.10g", got, want);
}

/* Two-sided 99.9% critical values (the one-sided 0.9995 quantile), as printed in
 * standard t tables, and two more quantiles. */
static void test_t_quantiles_match_published_tables(void **state) {
  (void)state;
  static const struct {
    double p, df, t;
  } table[] = {
      {0.9995, 1, 636.619}, {0.9995, 2, 31.599},  {0.9995, 3, 12.924}, {0.9995, 4, 8.610},  {0.9995, 5, 6.869},
      {0.9995, 9, 4.781},   {0.9995, 10, 4.587},  {0.9995, 19, 3.883}, {0.9995, 29, 3.659}, {0.9995, 30, 3.646},
      {0.9995, 60, 3.460},  {0.9995, 120, 3.373}, {0.975, 10, 2.228},  {0.95, 1, 6.314},    {0.99, 20, 2.528},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    assert_close(mqr_bench_t_quantile(table[i].p, table[i].df), table[i].t, 5e-4);
  /* large df approaches the normal quantile 3.2905 */
  assert_close(mqr_bench_t_quantile(0.9995, 1e7), 3.29053, 1e-4);
  /* symmetric, and the CDF inverts it */
  assert_close(mqr_bench_t_quantile(0.0005, 9), -4.781, 5e-4);
  assert_true(mqr_bench_t_quantile(0.5, 7) == 0.0);
  for (double df = 1; df < 50; df += 3.5)
    for (double p = 0.6; p < 1; p += 0.05) assert_close(mqr_bench_t_cdf(mqr_bench_t_quantile(p, df), df), p, 1e-9);
  /* df = 1 is Cauchy: closed form */
  assert_close(mqr_bench_t_quantile(0.9, 1), tan(M_PI * 0.4), 1e-9);
  assert_true(isnan(mqr_bench_t_quantile(1.0, 3)));
  assert_true(isnan(mqr_bench_t_quantile(0.9, 0)));
}

static void test_stats_of_a_fixed_sample(void **state) {
  (void)state;
  /* By hand: the mean is 50 / 10 = 5. */
  double x[10] = {2, 4, 4, 4, 5, 5, 7, 9, 5, 5};
  mqr_bench_stats_t st;
  mqr_bench_stats(x, 10, &st);
  assert_int_equal(st.n, 10);
  assert_close(st.mean, 5.0, 1e-15);
  /* sum of squares 9+1+1+1+0+0+4+16+0+0 = 32, s = sqrt(32/9) */
  assert_close(st.stddev, sqrt(32.0 / 9.0), 1e-12);
  assert_close(st.error, 4.781 * sqrt(32.0 / 9.0) / sqrt(10.0), 1e-3);
  assert_close(st.min, 2, 0);
  assert_close(st.max, 9, 0);
  /* N <= 2: no error */
  mqr_bench_stats(x, 2, &st);
  assert_true(isnan(st.error));
  assert_close(st.mean, 3, 1e-15);
  mqr_bench_stats(x, 1, &st);
  assert_true(isnan(st.stddev));
  /* percentiles, Commons Math's estimator: pos = p(n+1)/100 */
  double s[5] = {1, 2, 3, 4, 5};
  assert_close(mqr_bench_percentile(s, 5, 50), 3, 1e-15);
  assert_close(mqr_bench_percentile(s, 5, 25), 1.5, 1e-15);
  assert_close(mqr_bench_percentile(s, 5, 90), 5, 1e-15); /* pos 5.4 >= n: the max */
  assert_close(mqr_bench_percentile(s, 5, 10), 1, 1e-15); /* pos 0.6 < 1: the min */
}

/* ---- benchmarks under test ------------------------------------------------------- */

static void *(*volatile alloc_fn)(size_t) = malloc; /* opaque: gcc cannot drop the pair */
static void (*volatile free_fn)(void *) = free;

static int run_alloc100(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)c;
  for (uint64_t i = 0; i < ops; i++) {
    void *p = alloc_fn(100);
    mqr_bench_sink_ptr(p);
    free_fn(p);
  }
  return 0;
}

static int run_nothing(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)c;
  uint64_t x = 0;
  for (uint64_t i = 0; i < ops; i++) mqr_bench_sink_u64(x += i);
  return 0;
}

static int setup_pid(mqr_bench_ctx_t *c) {
  mqr_bench_aux(c, "pid", (double)getpid(), "pid");
  return 0;
}

static int run_fails(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)ops;
  return mqr_bench_fail(c, "the body is broken");
}

static int run_crashes(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)c;
  (void)ops;
  abort();
}

/* A setup that starts a process (as a benchmark starts a broker) and fails before its
 * teardown could stop it. */
static int setup_leaves_a_process(mqr_bench_ctx_t *c) {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "60", (char *)NULL);
    _exit(127);
  }
  FILE *f = fopen("/tmp/mqr-harness-left.pid", "w");
  if (f) fprintf(f, "%d\n", (int)pid), fclose(f);
  return mqr_bench_fail(c, "setup failed after starting a process");
}

static int setup_param(mqr_bench_ctx_t *c) {
  mqr_bench_aux(c, "size", (double)mqr_bench_param_long(c, "size"), "x");
  return 0;
}

static mqr_bench_options_t quick(int forks) {
  mqr_bench_options_t o;
  mqr_bench_options_defaults(&o);
  o.warmup_iterations = 1;
  o.iterations = 3;
  o.warmup_time_s = 0.02;
  o.iteration_time_s = 0.02;
  o.forks = forks;
  o.quiet = true;
  return o;
}

static void test_alloc_counter_reports_the_size_class(void **state) {
  (void)state;
  assert_true(mqr_bench_allocated_bytes() >= 0);
  mqr_bench_def_t d = {"t.alloc100", NULL, "avgt", NULL, NULL, NULL, NULL, run_alloc100, NULL};
  mqr_bench_options_t o = quick(0);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  assert_int_equal(n, 1);
  assert_false(mqr_bench_result_failed(r, 0, NULL));
  assert_close(mqr_bench_result_alloc(r, 0), (double)nallocx(100, 0), 1e-9); /* 112 on jemalloc 5 */
  mqr_bench_results_free(r, n);
  mqr_bench_def_t z = {"t.nothing", NULL, "avgt,thrpt", NULL, NULL, NULL, NULL, run_nothing, NULL};
  r = mqr_bench_run_def(&z, &o, &n);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; i++) {
    assert_false(mqr_bench_result_failed(r, i, NULL));
    assert_true(mqr_bench_result_alloc(r, i) == 0.0);
    assert_true(mqr_bench_result_score(r, i) > 0);
    assert_int_equal(mqr_bench_result_count(r, i), 3);
  }
  mqr_bench_results_free(r, n);
}

static void test_forks_are_separate_processes(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.pid", NULL, "avgt", setup_pid, NULL, NULL, NULL, run_nothing, NULL};
  mqr_bench_options_t o = quick(3);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  assert_false(mqr_bench_result_failed(r, 0, NULL));
  double p0 = mqr_bench_result_aux_fork(r, 0, "pid", 0), p1 = mqr_bench_result_aux_fork(r, 0, "pid", 1),
         p2 = mqr_bench_result_aux_fork(r, 0, "pid", 2);
  assert_false(isnan(p0) || isnan(p1) || isnan(p2));
  assert_true(p0 != p1 && p1 != p2 && p0 != p2);
  assert_true(p0 != getpid() && p1 != getpid() && p2 != getpid());
  assert_int_equal(mqr_bench_result_count(r, 0), 9); /* 3 forks x 3 iterations, one sample */
  mqr_bench_results_free(r, n);
  o.forks = 0; /* -f 0: in this process */
  r = mqr_bench_run_def(&d, &o, &n);
  assert_true(mqr_bench_result_aux_fork(r, 0, "pid", 0) == getpid());
  mqr_bench_results_free(r, n);
}

static int setup_clock(mqr_bench_ctx_t *c) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  mqr_bench_aux(c, "start", (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec, "ns");
  return 0;
}

/* The forks of a benchmark's parameter combinations take turns: fork 1 of each, then
 * fork 2 of each. */
static void test_forks_of_combinations_interleave(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.order", "side=a,b", "avgt", setup_clock, NULL, NULL, NULL, run_nothing, NULL};
  mqr_bench_options_t o = quick(2);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  assert_int_equal(n, 2);
  double a0 = mqr_bench_result_aux_fork(r, 0, "start", 0), b0 = mqr_bench_result_aux_fork(r, 1, "start", 0),
         a1 = mqr_bench_result_aux_fork(r, 0, "start", 1), b1 = mqr_bench_result_aux_fork(r, 1, "start", 1);
  assert_true(a0 < b0 && b0 < a1 && a1 < b1);
  assert_int_equal(mqr_bench_result_count(r, 0), 6);
  assert_int_equal(mqr_bench_result_count(r, 1), 6);
  mqr_bench_results_free(r, n);
}

static void test_failing_body_is_a_failure_not_a_score(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.fails", NULL, "avgt", NULL, NULL, NULL, NULL, run_fails, NULL};
  for (int forks = 0; forks <= 1; forks++) {
    mqr_bench_options_t o = quick(forks);
    size_t n;
    mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
    const char *why;
    assert_true(mqr_bench_result_failed(r, 0, &why));
    assert_non_null(strstr(why, "the body is broken"));
    assert_true(isnan(mqr_bench_result_score(r, 0)));
    mqr_bench_results_free(r, n);
  }
  mqr_bench_def_t crash = {"t.crash", NULL, "avgt", NULL, NULL, NULL, NULL, run_crashes, NULL};
  mqr_bench_options_t o = quick(1);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&crash, &o, &n);
  const char *why;
  assert_true(mqr_bench_result_failed(r, 0, &why));
  assert_non_null(strstr(why, "signal"));
  mqr_bench_results_free(r, n);
}

/* Whether pid runs (a zombie, killed and not yet reaped by whoever adopted it, does not). */
static bool running(int pid) {
  char path[64], stat[256] = "";
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = 0;
  const char *close = strrchr(stat, ')');
  return close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

/* The fork's failure is reported at once, and what its trial started is stopped: a
 * broker holding the fork's pipe once hung the whole run. */
static void test_a_failed_fork_leaves_nothing_running(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.leaves", NULL, "ss", setup_leaves_a_process, NULL, NULL, NULL, run_nothing, NULL};
  mqr_bench_options_t o = quick(1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const char *why;
  assert_true(mqr_bench_result_failed(r, 0, &why));
  assert_non_null(strstr(why, "setup failed after starting a process"));
  assert_true(t1.tv_sec - t0.tv_sec < 30); /* (not the sleep's 60 s) */
  mqr_bench_results_free(r, n);
  FILE *f = fopen("/tmp/mqr-harness-left.pid", "r");
  assert_non_null(f);
  int pid = 0;
  assert_int_equal(fscanf(f, "%d", &pid), 1);
  fclose(f);
  remove("/tmp/mqr-harness-left.pid");
  /* killed: gone within moments (SIGKILL is delivered asynchronously; a loaded machine
   * may run it a little longer) */
  for (int i = 0; i < 200 && running(pid); i++) usleep(10000);
  assert_false(running(pid));
}

static void test_modes_and_params(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.param", "size=10,200;kind=a", "sample,ss", setup_param, NULL, NULL, NULL, run_nothing, NULL};
  mqr_bench_options_t o = quick(0);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  assert_int_equal(n, 4); /* 2 modes x 2 sizes */
  assert_true(mqr_bench_result_aux(r, 0, "size") == 10);
  assert_true(mqr_bench_result_aux(r, 1, "size") == 200);
  assert_true(mqr_bench_result_count(r, 0) > 100);   /* sample: one figure per call */
  assert_int_equal(mqr_bench_result_count(r, 2), 3); /* ss: one call per iteration */
  mqr_bench_results_free(r, n);
  o.param_overrides[0] = "size=7";
  o.n_param_overrides = 1;
  o.modes = 1 << MQR_BM_THRPT;
  r = mqr_bench_run_def(&d, &o, &n);
  assert_int_equal(n, 1);
  assert_true(mqr_bench_result_aux(r, 0, "size") == 7);
  assert_true(mqr_bench_result_score(r, 0) > 1e6); /* ops/s of an empty body */
  mqr_bench_results_free(r, n);
}

static const char *skip_kind_b(const mqr_bench_ctx_t *c) {
  return strcmp(mqr_bench_param(c, "kind"), "b") == 0 ? "no b here" : NULL;
}

static void test_combinations_that_do_not_apply_are_skipped(void **state) {
  (void)state;
  static const mqr_bench_def_t d = {"t.skip", "size=10,200;kind=a,b", "ss", setup_param, NULL, NULL, NULL, run_nothing,
                                    NULL};
  mqr_bench_register_skip(&d, skip_kind_b);
  for (int forks = 0; forks <= 1; forks++) {
    mqr_bench_options_t o = quick(forks);
    size_t n;
    mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
    assert_int_equal(n, 2); /* kind=a at both sizes; kind=b neither run nor failed */
    for (size_t i = 0; i < n; i++) assert_false(mqr_bench_result_failed(r, i, NULL));
    assert_true(mqr_bench_result_aux(r, 0, "size") == 10);
    assert_true(mqr_bench_result_aux(r, 1, "size") == 200);
    mqr_bench_results_free(r, n);
  }
}

/* A body that leaves part of its work to finish, as a pipeline with a bounded number in
 * flight is drained once per iteration: the work's time is in the score. Each op costs
 * 2 us of work; run does it only for what is past 1,000 pending, finish does the rest. */
static uint64_t pending_ops;

static void spend(uint64_t ops) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double need = (double)ops * 2e3;
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((double)(t.tv_sec - t0.tv_sec) * 1e9 + (double)(t.tv_nsec - t0.tv_nsec) < need);
  pending_ops -= ops;
}

static int run_defer(mqr_bench_ctx_t *c, uint64_t ops) {
  (void)c;
  pending_ops += ops;
  if (pending_ops > 1000) spend(pending_ops - 1000);
  return 0;
}

static int finish_deferred(mqr_bench_ctx_t *c) {
  (void)c;
  spend(pending_ops);
  return 0;
}

static void test_finish_is_timed(void **state) {
  (void)state;
  mqr_bench_def_t d = {"t.defer", NULL, "avgt", NULL, NULL, NULL, NULL, run_defer, finish_deferred};
  mqr_bench_options_t o = quick(0);
  size_t n;
  mqr_bench_result_t *r = mqr_bench_run_def(&d, &o, &n);
  assert_false(mqr_bench_result_failed(r, 0, NULL));
  /* At least the 2,000 ns finish spends per op (more on a busy machine), never the
   * nanoseconds run alone takes. */
  assert_true(mqr_bench_result_score(r, 0) >= 1900);
  assert_int_equal(pending_ops, 0);
  mqr_bench_results_free(r, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_t_quantiles_match_published_tables),
      cmocka_unit_test(test_stats_of_a_fixed_sample),
      cmocka_unit_test(test_alloc_counter_reports_the_size_class),
      cmocka_unit_test(test_forks_are_separate_processes),
      cmocka_unit_test(test_forks_of_combinations_interleave),
      cmocka_unit_test(test_failing_body_is_a_failure_not_a_score),
      cmocka_unit_test(test_modes_and_params),
      cmocka_unit_test(test_combinations_that_do_not_apply_are_skipped),
      cmocka_unit_test(test_a_failed_fork_leaves_nothing_running),
      cmocka_unit_test(test_finish_is_timed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
