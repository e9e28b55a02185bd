/* The runner: registry, parameter combinations, calibration, warmup and measurement
 * iterations, forks. A fork is a fork()ed child that runs one trial and reports its
 * samples to the parent over a pipe, one text line each; a child that dies or says
 * nothing is a failed result, never a score. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- registry ------------------------------------------------------------------- */

static const mqr_bench_def_t *registry[256];
static size_t n_registry;

void mqr_bench_register(const mqr_bench_def_t *def) {
  if (n_registry < sizeof registry / sizeof registry[0]) registry[n_registry++] = def;
}

static struct {
  const mqr_bench_def_t *def;
  mqr_bench_skip_fn skip;
} skips[64];
static size_t n_skips;

void mqr_bench_register_skip(const mqr_bench_def_t *def, mqr_bench_skip_fn skip) {
  if (n_skips < sizeof skips / sizeof skips[0]) skips[n_skips].def = def, skips[n_skips++].skip = skip;
}

static mqr_bench_skip_fn skip_of(const mqr_bench_def_t *def) {
  for (size_t i = 0; i < n_skips; i++)
    if (skips[i].def == def) return skips[i].skip;
  return NULL;
}

size_t mqr__bench_registry(const mqr_bench_def_t ***out) {
  *out = registry;
  return n_registry;
}

/* ---- context -------------------------------------------------------------------- */

const char *mqr_bench_param(const mqr_bench_ctx_t *c, const char *key) {
  for (int i = 0; i < c->combo.n; i++)
    if (strcmp(c->combo.keys[i], key) == 0) return c->combo.vals[i];
  return NULL;
}

long mqr_bench_param_long(const mqr_bench_ctx_t *c, const char *key) {
  const char *v = mqr_bench_param(c, key);
  return v ? strtol(v, NULL, 10) : 0;
}

void mqr_bench_set_state(mqr_bench_ctx_t *c, void *state) { c->state = state; }
void *mqr_bench_state(const mqr_bench_ctx_t *c) { return c->state; }

int mqr_bench_fail(mqr_bench_ctx_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  c->failed = true;
  return -1;
}

void mqr_bench_aux(mqr_bench_ctx_t *c, const char *name, double value, const char *unit) {
  int k = 0;
  while (k < c->n_aux && strcmp(c->aux[k].name, name) != 0) k++; /* (a figure set again: its last value) */
  if (k == MQR__MAX_AUX) return;
  snprintf(c->aux[k].name, sizeof c->aux[0].name, "%s", name);
  snprintf(c->aux[k].unit, sizeof c->aux[0].unit, "%s", unit);
  c->aux[k].value = value;
  if (k == c->n_aux) c->n_aux++;
}

/* ---- options -------------------------------------------------------------------- */

void mqr_bench_options_defaults(mqr_bench_options_t *o) {
  memset(o, 0, sizeof *o);
  o->warmup_iterations = 3;
  o->iterations = 5;
  o->warmup_time_s = 0.5;
  o->iteration_time_s = 0.5;
  o->forks = 2;
}

static const char *const mode_names[MQR_BM_COUNT] = {"thrpt", "avgt", "sample", "ss"};

const char *mqr__bench_mode_name(int m) { return m >= 0 && m < MQR_BM_COUNT ? mode_names[m] : "?"; }

int mqr__bench_parse_modes(const char *text) {
  int mask = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    int m = -1;
    for (int i = 0; i < MQR_BM_COUNT; i++)
      if (strcmp(w, mode_names[i]) == 0) m = i;
    if (strcmp(w, "all") == 0) return (1 << MQR_BM_COUNT) - 1;
    if (m < 0) return -1;
    mask |= 1 << m;
  }
  return mask;
}

/* ---- parameter combinations ------------------------------------------------------- */

typedef struct {
  int n;
  char keys[MQR__MAX_PARAMS][64];
  char vals[MQR__MAX_PARAMS][16][64];
  int n_vals[MQR__MAX_PARAMS];
} param_space_t;

static void parse_param_list(param_space_t *ps, const char *text, bool override_only) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *s1, *item = strtok_r(buf, ";", &s1); item; item = strtok_r(NULL, ";", &s1)) {
    char *eq = strchr(item, '=');
    if (!eq) continue;
    *eq = '\0';
    int k = -1;
    for (int i = 0; i < ps->n; i++)
      if (strcmp(ps->keys[i], item) == 0) k = i;
    if (k < 0) {
      if (override_only || ps->n == MQR__MAX_PARAMS) continue;
      k = ps->n++;
      snprintf(ps->keys[k], sizeof ps->keys[k], "%s", item);
    }
    ps->n_vals[k] = 0;
    for (char *s2, *v = strtok_r(eq + 1, ",", &s2); v && ps->n_vals[k] < 16; v = strtok_r(NULL, ",", &s2))
      snprintf(ps->vals[k][ps->n_vals[k]++], 64, "%s", v);
  }
}

static int combos_count(const param_space_t *ps) {
  int n = 1;
  for (int i = 0; i < ps->n; i++) n *= ps->n_vals[i] ? ps->n_vals[i] : 1;
  return n;
}

static void combo_at(const param_space_t *ps, int index, mqr__combo_t *out) {
  out->n = ps->n;
  for (int i = ps->n - 1; i >= 0; i--) {
    int nv = ps->n_vals[i] ? ps->n_vals[i] : 1;
    snprintf(out->keys[i], sizeof out->keys[i], "%s", ps->keys[i]);
    snprintf(out->vals[i], sizeof out->vals[i], "%s", ps->n_vals[i] ? ps->vals[i][index % nv] : "");
    index /= nv;
  }
}

/* ---- timing --------------------------------------------------------------------- */

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double unit_ns(int tu) {
  static const double f[] = {1, 1, 1e3, 1e6, 1e9};
  return tu >= 1 && tu <= 4 ? f[tu] : 1;
}

static const char *unit_name(int tu) {
  static const char *n[] = {"ns", "ns", "us", "ms", "s"};
  return tu >= 1 && tu <= 4 ? n[tu] : "ns";
}

void mqr__bench_unit(int mode, int tu, char *out, size_t cap) {
  if (mode == MQR_BM_THRPT)
    snprintf(out, cap, "ops/%s", tu ? unit_name(tu) : "s");
  else
    snprintf(out, cap, "%s/op", tu ? unit_name(tu) : "ns");
}

/* ---- where a trial's figures go: the parent's result, directly or through a pipe --- */

typedef struct {
  FILE *pipe;              /* in a fork */
  mqr_bench_result_t *res; /* in process */
  int fork;
} out_t;

static void push_double(double **arr, size_t *n, size_t *cap, double v) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    *arr = realloc(*arr, *cap * sizeof **arr);
  }
  (*arr)[(*n)++] = v;
}

void mqr__bench_add_sample(mqr_bench_result_t *r, int fork, double v) {
  if (r->n_samples == r->cap_samples) {
    r->cap_samples = r->cap_samples ? r->cap_samples * 2 : 64;
    r->samples = realloc(r->samples, r->cap_samples * sizeof *r->samples);
    r->fork_of = realloc(r->fork_of, r->cap_samples * sizeof *r->fork_of);
  }
  r->fork_of[r->n_samples] = fork;
  r->samples[r->n_samples++] = v;
}

void mqr__bench_add_alloc(mqr_bench_result_t *r, double bytes_per_op) {
  if (bytes_per_op < 0)
    r->alloc_unavailable = true;
  else
    push_double(&r->alloc, &r->n_alloc, &r->cap_alloc, bytes_per_op);
}

void mqr__bench_add_aux(mqr_bench_result_t *r, int fork, const char *name, const char *unit, double v) {
  int k = -1;
  for (int i = 0; i < r->n_aux; i++)
    if (strcmp(r->aux[i].name, name) == 0) k = i;
  if (k < 0) {
    if (r->n_aux == MQR__MAX_AUX) return;
    k = r->n_aux++;
    snprintf(r->aux[k].name, sizeof r->aux[k].name, "%s", name);
    snprintf(r->aux[k].unit, sizeof r->aux[k].unit, "%s", unit);
    for (int f = 0; f < MQR__MAX_FORKS; f++) r->aux[k].by_fork[f] = NAN;
  }
  if (fork >= 0 && fork < MQR__MAX_FORKS) r->aux[k].by_fork[fork] = v;
}

static void emit_sample(out_t *o, double v) {
  if (o->pipe)
    fprintf(o->pipe, "S %.17g\n", v);
  else
    mqr__bench_add_sample(o->res, o->fork, v);
}

static void emit_alloc(out_t *o, double v) {
  if (o->pipe)
    fprintf(o->pipe, "A %.17g\n", v);
  else
    mqr__bench_add_alloc(o->res, v);
}

static void emit_fail(out_t *o, const char *why) {
  if (o->pipe)
    fprintf(o->pipe, "F %s\n", why);
  else if (!o->res->failed) {
    o->res->failed = true;
    snprintf(o->res->why, sizeof o->res->why, "%.500s", why);
  }
}

static void emit_aux(out_t *o, const mqr_bench_ctx_t *c) {
  for (int i = 0; i < c->n_aux; i++) {
    if (o->pipe)
      fprintf(o->pipe, "X %s %s %.17g\n", c->aux[i].name, c->aux[i].unit, c->aux[i].value);
    else
      mqr__bench_add_aux(o->res, o->fork, c->aux[i].name, c->aux[i].unit, c->aux[i].value);
  }
}

/* ---- one trial ------------------------------------------------------------------ */

#define SAMPLE_CAP 200000 /* per iteration, reservoir-sampled past this */

static int fail_from(out_t *o, mqr_bench_ctx_t *c, const char *stage) {
  char why[600];
  snprintf(why, sizeof why, "%s: %s", stage, c->failed ? c->why : "returned an error");
  emit_fail(o, why);
  return -1;
}

static int finish_run(mqr_bench_ctx_t *c) { return c->def->finish ? c->def->finish(c) : 0; }

/* Finds a batch size whose run takes about a millisecond, so that reading the clock
 * between batches costs nothing measurable. Measured as the iterations run, batch after
 * batch with no finish between them, for 20 ms: a finish after each trial batch would time
 * a pipeline drained and refilled, a round trip's latency, and a batch sized from that is
 * too small for a pipelined benchmark (a loopback run then sends a few messages per pass
 * and can settle there at a few percent of its speed). */
static int calibrate(mqr_bench_ctx_t *c, uint64_t *batch) {
  uint64_t n = 1, ops = 0, t0 = now_ns(), dt;
  do {
    if (c->def->run(c, n) != 0) return -1;
    ops += n;
    if (n < (1ull << 40)) n *= 2;
    dt = now_ns() - t0;
  } while (dt < 20000000);
  if (finish_run(c) != 0) return -1;
  dt = now_ns() - t0;
  double per_ms = (double)ops * 1e6 / (double)dt;
  *batch = per_ms < 1 ? 1 : (uint64_t)per_ms;
  return 0;
}

/* One iteration of thrpt/avgt: returns the score in the result unit, and B/op. */
static int timed_iteration(mqr_bench_ctx_t *c, uint64_t batch, double seconds, int mode, int tu, double *score,
                           double *bpo) {
  uint64_t limit = (uint64_t)(seconds * 1e9), ops = 0, t0, t;
  int64_t a0 = mqr_bench_allocated_bytes();
  t0 = now_ns();
  do {
    if (c->def->run(c, batch) != 0) return -1;
    ops += batch;
    t = now_ns();
  } while (t - t0 < limit);
  if (finish_run(c) != 0) return -1;
  t = now_ns();
  int64_t a1 = mqr_bench_allocated_bytes();
  double ns = (double)(t - t0);
  if (mode == MQR_BM_THRPT)
    *score = (double)ops / (ns / unit_ns(tu ? tu : 4));
  else
    *score = ns / (double)ops / unit_ns(tu);
  *bpo = a0 < 0 ? -1 : (double)(a1 - a0) / (double)ops;
  return 0;
}

static uint64_t xs = 88172645463325252ull;
static uint64_t xrand(void) {
  xs ^= xs << 13;
  xs ^= xs >> 7;
  xs ^= xs << 17;
  return xs;
}

/* One iteration of sample mode: per-call times (timer overhead included, as in JMH). */
static int sample_iteration(mqr_bench_ctx_t *c, double seconds, int tu, out_t *o, bool record) {
  static double reservoir[SAMPLE_CAP];
  uint64_t limit = (uint64_t)(seconds * 1e9), seen = 0, start = now_ns(), t1;
  int64_t a0 = mqr_bench_allocated_bytes();
  do {
    uint64_t t0 = now_ns();
    if (c->def->run(c, 1) != 0 || finish_run(c) != 0) return -1;
    t1 = now_ns();
    double v = (double)(t1 - t0) / unit_ns(tu);
    if (seen < SAMPLE_CAP)
      reservoir[seen] = v;
    else {
      uint64_t j = xrand() % (seen + 1);
      if (j < SAMPLE_CAP) reservoir[j] = v;
    }
    seen++;
  } while (t1 - start < limit);
  int64_t a1 = mqr_bench_allocated_bytes();
  if (record) {
    for (uint64_t i = 0; i < seen && i < SAMPLE_CAP; i++) emit_sample(o, reservoir[i]);
    emit_alloc(o, a0 < 0 ? -1 : (double)(a1 - a0) / (double)seen);
  }
  return 0;
}

static int trial(const mqr_bench_def_t *def, const mqr__combo_t *combo, int mode, const mqr_bench_options_t *opt,
                 out_t *o) {
  mqr_bench_ctx_t c;
  memset(&c, 0, sizeof c);
  c.def = def;
  c.combo = *combo;
  if (def->setup_trial && def->setup_trial(&c) != 0) return fail_from(o, &c, "setup");
  int rc = 0;
  uint64_t batch = 1;
  if ((mode == MQR_BM_THRPT || mode == MQR_BM_AVGT) && calibrate(&c, &batch) != 0) {
    rc = fail_from(o, &c, "run");
    goto done;
  }
  int total = opt->warmup_iterations + opt->iterations;
  for (int it = 0; it < total; it++) {
    bool warm = it < opt->warmup_iterations;
    double secs = warm ? opt->warmup_time_s : opt->iteration_time_s;
    if (def->setup_iteration && def->setup_iteration(&c) != 0) {
      rc = fail_from(o, &c, "iteration setup");
      goto done;
    }
    double score = 0, bpo = 0;
    int r = 0;
    if (mode == MQR_BM_SAMPLE) {
      r = sample_iteration(&c, secs, opt->time_unit, o, !warm);
    } else if (mode == MQR_BM_SS) {
      int64_t a0 = mqr_bench_allocated_bytes();
      uint64_t t0 = now_ns();
      r = def->run(&c, 1);
      if (r == 0) r = finish_run(&c);
      uint64_t t1 = now_ns();
      int64_t a1 = mqr_bench_allocated_bytes();
      score = (double)(t1 - t0) / unit_ns(opt->time_unit);
      bpo = a0 < 0 ? -1 : (double)(a1 - a0);
    } else {
      r = timed_iteration(&c, batch, secs, mode, opt->time_unit, &score, &bpo);
    }
    if (def->teardown_iteration) def->teardown_iteration(&c);
    if (r != 0) {
      rc = fail_from(o, &c, "run");
      goto done;
    }
    if (!warm && mode != MQR_BM_SAMPLE) {
      emit_sample(o, score);
      emit_alloc(o, bpo);
    }
  }
  emit_aux(o, &c);
done:
  if (def->teardown_trial) def->teardown_trial(&c);
  return rc;
}

/* ---- forks ---------------------------------------------------------------------- */

/* ---- what a trial's process leaves: mqr_bench_at_exit ---- */

static void (*at_exit_fns[8])(void);
static int n_at_exit;

static void run_at_exit(void) {
  while (n_at_exit > 0) at_exit_fns[--n_at_exit]();
}

void mqr_bench_at_exit(void (*fn)(void)) {
  if (n_at_exit == 0) atexit(run_at_exit); /* (forks run it before their _exit) */
  if (n_at_exit < 8) at_exit_fns[n_at_exit++] = fn;
}

static void run_fork(const mqr_bench_def_t *def, const mqr__combo_t *combo, int mode, const mqr_bench_options_t *opt,
                     mqr_bench_result_t *res, int fork_no) {
  int fds[2];
  /* (close-on-exec: a broker the trial starts must not hold the pipe open after the fork
   * ends, or its end would never be read) */
  if (pipe2(fds, O_CLOEXEC) != 0) {
    res->failed = true;
    snprintf(res->why, sizeof res->why, "pipe: %s", strerror(errno));
    return;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    res->failed = true;
    snprintf(res->why, sizeof res->why, "fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    setpgid(0, 0); /* its own group: what it starts goes with it (below) */
    close(fds[0]);
    FILE *p = fdopen(fds[1], "w");
    out_t o = {p, NULL, fork_no};
    int rc = trial(def, combo, mode, opt, &o);
    run_at_exit(); /* (before the parent, told it is done, ends its group) */
    fprintf(p, "D %d\n", rc);
    fclose(p);
    _exit(0);
  }
  close(fds[1]);
  FILE *p = fdopen(fds[0], "r");
  char line[1024];
  bool done = false;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == 'S')
      mqr__bench_add_sample(res, fork_no, strtod(line + 2, NULL));
    else if (line[0] == 'A')
      mqr__bench_add_alloc(res, strtod(line + 2, NULL));
    else if (line[0] == 'F' && !res->failed) {
      res->failed = true;
      snprintf(res->why, sizeof res->why, "%.500s", line + 2);
    } else if (line[0] == 'X') {
      char name[64], unit[16];
      double v;
      if (sscanf(line + 2, "%63s %15s %lf", name, unit, &v) == 3) mqr__bench_add_aux(res, fork_no, name, unit, v);
    } else if (line[0] == 'D')
      done = true;
  }
  fclose(p);
  int status = 0;
  kill(-pid, SIGKILL); /* a broker its trial started and left (a failed setup, a crash) */
  waitpid(pid, &status, 0);
  if (!done && !res->failed) {
    res->failed = true;
    if (WIFSIGNALED(status))
      snprintf(res->why, sizeof res->why, "fork %d killed by signal %d (%s)", fork_no + 1, WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else
      snprintf(res->why, sizeof res->why, "fork %d exited with status %d before reporting", fork_no + 1,
               WEXITSTATUS(status));
  }
}

static void finish(mqr_bench_result_t *r) {
  mqr_bench_stats(r->samples, r->n_samples, &r->stats);
  if (r->mode == MQR_BM_SAMPLE && r->n_samples) {
    double *sorted = malloc(r->n_samples * sizeof *sorted);
    memcpy(sorted, r->samples, r->n_samples * sizeof *sorted);
    qsort(sorted, r->n_samples, sizeof *sorted, mqr__bench_cmp_double);
    static const double ps[MQR__N_PCT] = {0, 50, 90, 95, 99, 99.9, 99.99, 99.999, 100};
    for (int i = 0; i < MQR__N_PCT; i++)
      r->pct[i] = ps[i] == 0     ? sorted[0]
                  : ps[i] == 100 ? sorted[r->n_samples - 1]
                                 : mqr_bench_percentile(sorted, r->n_samples, ps[i]);
    free(sorted);
  }
  mqr_bench_stats(r->alloc, r->n_alloc, &r->alloc_stats);
}

int mqr__bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs one definition in every selected mode and parameter combination, appending
 * results to *arr. progress: print to stderr. */
size_t mqr__bench_run(const mqr_bench_def_t *def, const mqr_bench_options_t *opt, mqr_bench_result_t **arr, size_t n,
                      bool progress) {
  param_space_t ps;
  memset(&ps, 0, sizeof ps);
  if (def->params) parse_param_list(&ps, def->params, false);
  for (int i = 0; i < opt->n_param_overrides; i++) parse_param_list(&ps, opt->param_overrides[i], true);
  int modes = opt->modes ? opt->modes : mqr__bench_parse_modes(def->modes ? def->modes : "avgt");
  if (modes <= 0) modes = 1 << MQR_BM_AVGT;
  int nc = combos_count(&ps);
  for (int m = 0; m < MQR_BM_COUNT; m++) {
    if (!(modes & (1 << m))) continue;
    size_t first = n;
    *arr = realloc(*arr, (n + (size_t)nc) * sizeof **arr);
    int made = 0;
    for (int ci = 0; ci < nc; ci++) {
      mqr_bench_result_t *r = &(*arr)[n];
      memset(r, 0, sizeof *r);
      combo_at(&ps, ci, &r->combo);
      if (skip_of(def)) { /* a combination that does not apply: not run, not a result */
        mqr_bench_ctx_t c = {.def = def, .combo = r->combo};
        const char *why = skip_of(def)(&c);
        if (why) {
          if (progress) {
            fprintf(stderr, "# Skipped: %s", def->name);
            for (int k = 0; k < r->combo.n; k++) fprintf(stderr, " %s=%s", r->combo.keys[k], r->combo.vals[k]);
            fprintf(stderr, ": %s\n", why);
          }
          continue;
        }
      }
      n++, made++;
      snprintf(r->name, sizeof r->name, "%s", def->name);
      r->mode = m;
      r->forks = opt->forks;
      r->warmup_iterations = opt->warmup_iterations;
      r->iterations = opt->iterations;
      mqr__bench_unit(m, opt->time_unit, r->unit, sizeof r->unit);
      if (progress) {
        fprintf(stderr, "# Run: %s", def->name);
        for (int k = 0; k < r->combo.n; k++) fprintf(stderr, " %s=%s", r->combo.keys[k], r->combo.vals[k]);
        fprintf(stderr, " (%s, %d fork%s x %d+%d iterations)\n", mode_names[m], opt->forks, opt->forks == 1 ? "" : "s",
                opt->warmup_iterations, opt->iterations);
      }
    }
    /* Fork 1 of every combination, then fork 2 of every one, and so on: the sides of a
     * comparison (impl=mqr against impl=avroc, say) share the machine's slow and fast
     * phases instead of one side running wholly in one of them. */
    if (opt->forks == 0) {
      for (int ci = 0; ci < made; ci++) {
        mqr_bench_result_t *r = &(*arr)[first + (size_t)ci];
        out_t o = {NULL, r, 0};
        trial(def, &r->combo, m, opt, &o);
      }
    } else {
      for (int f = 0; f < opt->forks && f < MQR__MAX_FORKS; f++)
        for (int ci = 0; ci < made; ci++) {
          mqr_bench_result_t *r = &(*arr)[first + (size_t)ci];
          if (!r->failed) run_fork(def, &r->combo, m, opt, r, f);
        }
    }
    for (int ci = 0; ci < made; ci++) {
      mqr_bench_result_t *r = &(*arr)[first + (size_t)ci];
      if (!r->failed && r->n_samples == 0) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "no measurement (0 iterations?)");
      }
      finish(r);
      if (progress && r->failed) {
        fprintf(stderr, "#   FAILED: %s", r->name);
        for (int k = 0; k < r->combo.n; k++) fprintf(stderr, " %s=%s", r->combo.keys[k], r->combo.vals[k]);
        fprintf(stderr, ": %s\n", r->why);
      }
    }
  }
  return n;
}

mqr_bench_result_t *mqr_bench_run_def(const mqr_bench_def_t *def, const mqr_bench_options_t *o, size_t *n) {
  mqr_bench_result_t *arr = NULL;
  *n = mqr__bench_run(def, o, &arr, 0, false);
  return arr;
}

void mqr_bench_results_free(mqr_bench_result_t *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(r[i].samples);
    free(r[i].fork_of);
    free(r[i].alloc);
  }
  free(r);
}

bool mqr_bench_result_failed(const mqr_bench_result_t *r, size_t i, const char **why) {
  if (why) *why = r[i].why;
  return r[i].failed;
}
double mqr_bench_result_score(const mqr_bench_result_t *r, size_t i) { return r[i].failed ? NAN : r[i].stats.mean; }
double mqr_bench_result_error(const mqr_bench_result_t *r, size_t i) { return r[i].stats.error; }
size_t mqr_bench_result_count(const mqr_bench_result_t *r, size_t i) { return r[i].stats.n; }
double mqr_bench_result_alloc(const mqr_bench_result_t *r, size_t i) {
  return r[i].alloc_unavailable || r[i].n_alloc == 0 ? NAN : r[i].alloc_stats.mean;
}

double mqr_bench_result_aux_fork(const mqr_bench_result_t *r, size_t i, const char *name, int f) {
  for (int k = 0; k < r[i].n_aux; k++)
    if (strcmp(r[i].aux[k].name, name) == 0 && f >= 0 && f < MQR__MAX_FORKS) return r[i].aux[k].by_fork[f];
  return NAN;
}

double mqr_bench_result_aux(const mqr_bench_result_t *r, size_t i, const char *name) {
  double sum = 0;
  int n = 0;
  for (int f = 0; f < MQR__MAX_FORKS; f++) {
    double v = mqr_bench_result_aux_fork(r, i, name, f);
    if (!isnan(v)) sum += v, n++;
  }
  return n ? sum / n : NAN;
}

/* ---- main ----------------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
  return strcmp((*(const mqr_bench_def_t *const *)a)->name, (*(const mqr_bench_def_t *const *)b)->name);
}

int mqr_bench_main(const mqr_bench_options_t *opt) {
  regex_t re;
  if (opt->filter && regcomp(&re, opt->filter, REG_EXTENDED | REG_NOSUB) != 0) {
    fprintf(stderr, "mqr-bench: bad regular expression '%s'\n", opt->filter);
    return -1;
  }
  qsort(registry, n_registry, sizeof registry[0], by_name);
  mqr_bench_result_t *res = NULL;
  size_t n = 0;
  for (size_t i = 0; i < n_registry; i++) {
    if (opt->filter && regexec(&re, registry[i]->name, 0, NULL, 0) != 0) continue;
    n = mqr__bench_run(registry[i], opt, &res, n, !opt->quiet);
  }
  if (opt->filter) regfree(&re);
  if (n == 0) {
    fprintf(stderr, "mqr-bench: no benchmark matches '%s'\n", opt->filter ? opt->filter : "");
    return -1;
  }
  mqr__bench_print_table(stdout, res, n);
  int failed = 0;
  for (size_t i = 0; i < n; i++) failed += res[i].failed;
  if (opt->json_path && mqr__bench_write_json(opt->json_path, opt, res, n) != 0) failed++;
  mqr_bench_results_free(res, n);
  return failed;
}
