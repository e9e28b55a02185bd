/* Reports: the JMH text table and the JSON file (with machine and build information). */
#include <jansson.h>
#include <jemalloc/jemalloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef MQR_BENCH_BUILD
#define MQR_BENCH_BUILD "unknown"
#endif

typedef struct {
  char name[200];
  char params[MQR__MAX_PARAMS][64];
  const char *mode;
  char cnt[16], score[32], pm[4], error[32];
  char unit[24];
  char failure[600];
} row_t;

/* JMH's style: three decimals; whole numbers from a million; tiny values in %g. */
static void fmt_num(char *out, size_t cap, double v) {
  if (isnan(v))
    out[0] = '\0';
  else if (fabs(v) >= 1e6)
    snprintf(out, cap, "%.0f", v);
  else if (v != 0 && fabs(v) < 0.001)
    snprintf(out, cap, "%.3g", v);
  else
    snprintf(out, cap, "%.3f", v);
}

static void row_figure(row_t *row, const char *suffix, const mqr_bench_result_t *r, size_t cnt, double score,
                       double err, const char *unit) {
  snprintf(row->name, sizeof row->name, "%s%s", r->name, suffix);
  row->mode = mqr__bench_mode_name(r->mode);
  snprintf(row->cnt, sizeof row->cnt, "%zu", cnt);
  fmt_num(row->score, sizeof row->score, score);
  if (!isnan(err)) {
    strcpy(row->pm, "±");
    fmt_num(row->error, sizeof row->error, err);
  }
  snprintf(row->unit, sizeof row->unit, "%s", unit);
}

void mqr__bench_print_table(FILE *f, const mqr_bench_result_t *res, size_t n) {
  /* Columns for every parameter key, in order of first appearance. */
  char keys[MQR__MAX_PARAMS * 4][64];
  int nk = 0;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < res[i].combo.n; k++) {
      int found = 0;
      for (int j = 0; j < nk; j++) found |= strcmp(keys[j], res[i].combo.keys[k]) == 0;
      if (!found && nk < MQR__MAX_PARAMS * 4) snprintf(keys[nk++], 64, "%s", res[i].combo.keys[k]);
    }
  if (nk > MQR__MAX_PARAMS) nk = MQR__MAX_PARAMS;
  size_t cap = n * (4 + MQR__N_PCT + MQR__MAX_AUX), nr = 0;
  row_t *rows = calloc(cap, sizeof *rows);
  for (size_t i = 0; i < n; i++) {
    const mqr_bench_result_t *r = &res[i];
    size_t first = nr;
    if (r->failed) {
      row_t *row = &rows[nr++];
      snprintf(row->name, sizeof row->name, "%s", r->name);
      row->mode = mqr__bench_mode_name(r->mode);
      snprintf(row->failure, sizeof row->failure, "FAILED: %s", r->why);
    } else {
      row_figure(&rows[nr++], "", r, r->stats.n, r->stats.mean, r->stats.error, r->unit);
      if (r->mode == MQR_BM_SAMPLE) {
        static const char *pn[MQR__N_PCT] = {":p0.00",  ":p0.50",   ":p0.90",    ":p0.95", ":p0.99",
                                             ":p0.999", ":p0.9999", ":p0.99999", ":p1.00"};
        for (int p = 0; p < MQR__N_PCT; p++) row_figure(&rows[nr++], pn[p], r, r->stats.n, r->pct[p], NAN, r->unit);
      }
      if (r->alloc_unavailable) {
        row_t *row = &rows[nr++];
        snprintf(row->name, sizeof row->name, "%s:alloc.norm", r->name);
        row->mode = mqr__bench_mode_name(r->mode);
        snprintf(row->failure, sizeof row->failure, "unavailable (not running on jemalloc with stats)");
      } else {
        row_figure(&rows[nr++], ":alloc.norm", r, r->alloc_stats.n, r->alloc_stats.mean, r->alloc_stats.error, "B/op");
      }
      for (int a = 0; a < r->n_aux; a++) {
        double v[MQR__MAX_FORKS];
        size_t k = 0;
        for (int fk = 0; fk < MQR__MAX_FORKS; fk++)
          if (!isnan(r->aux[a].by_fork[fk])) v[k++] = r->aux[a].by_fork[fk];
        mqr_bench_stats_t st;
        mqr_bench_stats(v, k, &st);
        char suffix[80];
        snprintf(suffix, sizeof suffix, ":%s", r->aux[a].name);
        row_figure(&rows[nr++], suffix, r, k, st.mean, st.error, r->aux[a].unit);
      }
    }
    for (size_t j = first; j < nr; j++)
      for (int k = 0; k < nk; k++) {
        const char *v = "N/A";
        for (int q = 0; q < r->combo.n; q++)
          if (strcmp(r->combo.keys[q], keys[k]) == 0) v = r->combo.vals[q];
        snprintf(rows[j].params[k], 64, "%s", v);
      }
  }
  int w_name = 9, w_p[MQR__MAX_PARAMS], w_cnt = 3, w_score = 5, w_err = 5, w_unit = 5;
  for (int k = 0; k < nk; k++) w_p[k] = (int)strlen(keys[k]) + 2;
  for (size_t j = 0; j < nr; j++) {
    row_t *row = &rows[j];
#define W(w, s)                                                                                                        \
  if ((int)strlen(s) > w) w = (int)strlen(s)
    W(w_name, row->name);
    for (int k = 0; k < nk; k++) W(w_p[k], row->params[k]);
    W(w_cnt, row->cnt);
    W(w_score, row->score);
    W(w_err, row->error);
    W(w_unit, row->unit);
#undef W
  }
  fprintf(f, "%-*s", w_name, "Benchmark");
  for (int k = 0; k < nk; k++) fprintf(f, "  (%s)%*s", keys[k], w_p[k] - (int)strlen(keys[k]) - 2, "");
  fprintf(f, "    Mode  %*s  %*s    %*s  %-*s\n", w_cnt, "Cnt", w_score, "Score", w_err, "Error", w_unit, "Units");
  for (size_t j = 0; j < nr; j++) {
    row_t *row = &rows[j];
    fprintf(f, "%-*s", w_name, row->name);
    for (int k = 0; k < nk; k++) fprintf(f, "  %*s", w_p[k], row->params[k]);
    if (row->failure[0])
      fprintf(f, "  %6s  %s\n", row->mode, row->failure);
    else
      fprintf(f, "  %6s  %*s  %*s  %s %*s  %-*s\n", row->mode, w_cnt, row->cnt, w_score, row->score,
              row->pm[0] ? row->pm : " ", w_err, row->error, w_unit, row->unit);
  }
  free(rows);
}

static json_t *num(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *machine_info(void) {
  json_t *m = json_object();
  struct utsname u;
  if (uname(&u) == 0) {
    json_object_set_new(m, "os", json_sprintf("%s %s", u.sysname, u.release));
    json_object_set_new(m, "arch", json_string(u.machine));
  }
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c += 2;
        c[strcspn(c, "\n")] = '\0';
        json_object_set_new(m, "cpu", json_string(c));
      }
      break;
    }
  }
  if (f) fclose(f);
  json_object_set_new(m, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
  struct sysinfo si;
  if (sysinfo(&si) == 0)
    json_object_set_new(m, "memory_gib", json_real((double)si.totalram * si.mem_unit / (1024.0 * 1024 * 1024)));
  return m;
}

static json_t *build_info(void) {
  json_t *b = json_object();
  json_object_set_new(b, "compiler", json_string(__VERSION__));
  json_object_set_new(b, "build", json_string(MQR_BENCH_BUILD));
  const char *ver = NULL;
  size_t sz = sizeof ver;
  if (mallctl("version", &ver, &sz, NULL, 0) == 0 && ver) json_object_set_new(b, "jemalloc", json_string(ver));
  return b;
}

static json_t *stats_json(const mqr_bench_stats_t *st, const char *unit) {
  json_t *o = json_object();
  json_object_set_new(o, "score", num(st->mean));
  json_object_set_new(o, "scoreError", num(st->error));
  json_object_set_new(o, "scoreConfidence",
                      json_pack("[oo]", num(st->mean - (isnan(st->error) ? 0 : st->error)),
                                num(st->mean + (isnan(st->error) ? 0 : st->error))));
  json_object_set_new(o, "scoreUnit", json_string(unit));
  json_object_set_new(o, "n", json_integer((json_int_t)st->n));
  return o;
}

int mqr__bench_write_json(const char *path, const mqr_bench_options_t *opt, const mqr_bench_result_t *res, size_t n) {
  json_t *root = json_object();
  char date[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  json_object_set_new(root, "date", json_string(date));
  json_object_set_new(root, "command", json_string(opt->command ? opt->command : ""));
  json_object_set_new(root, "machine", machine_info());
  json_object_set_new(root, "build", build_info());
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    const mqr_bench_result_t *r = &res[i];
    json_t *o = json_object();
    json_object_set_new(o, "benchmark", json_string(r->name));
    json_object_set_new(o, "mode", json_string(mqr__bench_mode_name(r->mode)));
    json_t *params = json_object();
    for (int k = 0; k < r->combo.n; k++) json_object_set_new(params, r->combo.keys[k], json_string(r->combo.vals[k]));
    json_object_set_new(o, "params", params);
    json_object_set_new(o, "forks", json_integer(r->forks));
    json_object_set_new(o, "warmupIterations", json_integer(r->warmup_iterations));
    json_object_set_new(o, "measurementIterations", json_integer(r->iterations));
    json_object_set_new(o, "failed", json_boolean(r->failed));
    if (r->failed) json_object_set_new(o, "failure", json_string(r->why));
    json_t *pm = stats_json(&r->stats, r->unit);
    if (r->mode != MQR_BM_SAMPLE) {
      json_t *raw = json_array();
      for (int fk = 0; fk < (r->forks ? r->forks : 1); fk++) {
        json_t *fa = json_array();
        for (size_t s = 0; s < r->n_samples; s++)
          if (r->fork_of[s] == fk) json_array_append_new(fa, json_real(r->samples[s]));
        json_array_append_new(raw, fa);
      }
      json_object_set_new(pm, "rawData", raw);
    } else if (!r->failed) {
      static const char *pn[MQR__N_PCT] = {"0.0", "50.0", "90.0", "95.0", "99.0", "99.9", "99.99", "99.999", "100.0"};
      json_t *pc = json_object();
      for (int p = 0; p < MQR__N_PCT; p++) json_object_set_new(pc, pn[p], num(r->pct[p]));
      json_object_set_new(pm, "scorePercentiles", pc);
    }
    json_object_set_new(o, "primaryMetric", pm);
    json_t *sec = json_object();
    if (r->alloc_unavailable) {
      json_object_set_new(sec, "alloc.norm", json_pack("{s:s}", "unavailable", "not running on jemalloc with stats"));
    } else {
      json_t *a = stats_json(&r->alloc_stats, "B/op");
      json_t *raw = json_array();
      for (size_t s = 0; s < r->n_alloc; s++) json_array_append_new(raw, json_real(r->alloc[s]));
      json_object_set_new(a, "rawData", raw);
      json_object_set_new(sec, "alloc.norm", a);
    }
    for (int k = 0; k < r->n_aux; k++) {
      double v[MQR__MAX_FORKS];
      size_t c = 0;
      json_t *raw = json_array();
      for (int fk = 0; fk < MQR__MAX_FORKS; fk++)
        if (!isnan(r->aux[k].by_fork[fk])) {
          v[c++] = r->aux[k].by_fork[fk];
          json_array_append_new(raw, json_real(r->aux[k].by_fork[fk]));
        }
      mqr_bench_stats_t st;
      mqr_bench_stats(v, c, &st);
      json_t *a = stats_json(&st, r->aux[k].unit);
      json_object_set_new(a, "rawData", raw);
      json_object_set_new(sec, r->aux[k].name, a);
    }
    json_object_set_new(o, "secondaryMetrics", sec);
    json_array_append_new(arr, o);
  }
  json_object_set_new(root, "results", arr);
  int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (rc != 0) fprintf(stderr, "mqr-bench: cannot write %s\n", path);
  return rc;
}
