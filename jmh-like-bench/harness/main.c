/* mqr-bench: runs the registered benchmarks, JMH's command line.
 *   mqr-bench [REGEX] [-bm MODES] [-wi N] [-i N] [-w TIME] [-r TIME] [-f N] [-tu UNIT]
 *             [-p KEY=V1,V2]... [--json FILE] [--list] [-q] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char usage_text[] =
    "usage: mqr-bench [REGEX] [options]\n"
    "  -bm MODES    thrpt, avgt, sample, ss, comma separated, or all (default: each benchmark's)\n"
    "  -wi N        warmup iterations (3)       -i N    measurement iterations (5)\n"
    "  -w TIME      warmup iteration time (500ms) -r TIME measurement iteration time (500ms)\n"
    "  -f N         forks (2; 0 runs in this process)\n"
    "  -tu UNIT     ns, us, ms or s (default ns/op, and ops/s for thrpt)\n"
    "  -p K=V1,V2   parameter values (repeatable)\n"
    "  --json FILE  also write the results as JSON\n"
    "  --list       list the benchmarks and their parameters\n"
    "  -q           no progress lines on stderr\n"
    "TIME is a number with s, ms or us (1s, 500ms).\n";

static int parse_time(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  if (strcmp(end, "s") == 0 || *end == '\0')
    *out = v;
  else if (strcmp(end, "ms") == 0)
    *out = v / 1e3;
  else if (strcmp(end, "us") == 0)
    *out = v / 1e6;
  else
    return -1;
  return 0;
}

static int parse_int(const char *s, int min, int max, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  mqr_bench_options_t o;
  mqr_bench_options_defaults(&o);
  static char command[4096];
  size_t cl = 0;
  for (int i = 0; i < argc && cl < sizeof command - 2; i++)
    cl += (size_t)snprintf(command + cl, sizeof command - cl, "%s%s", i ? " " : "", argv[i]);
  o.command = command;
  bool list = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                                         \
  do {                                                                                                                 \
    if (!v) {                                                                                                          \
      fprintf(stderr, "mqr-bench: %s needs a value\n", a);                                                             \
      return 2;                                                                                                        \
    }                                                                                                                  \
    i++;                                                                                                               \
  } while (0)
#define BAD()                                                                                                          \
  do {                                                                                                                 \
    fprintf(stderr, "mqr-bench: bad value '%s' for %s\n", v, a);                                                       \
    return 2;                                                                                                          \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    } else if (!strcmp(a, "--list")) {
      list = true;
    } else if (!strcmp(a, "-q")) {
      o.quiet = true;
    } else if (!strcmp(a, "-bm")) {
      NEED();
      if ((o.modes = mqr__bench_parse_modes(v)) <= 0) BAD();
    } else if (!strcmp(a, "-wi")) {
      NEED();
      if (parse_int(v, 0, 1000, &o.warmup_iterations)) BAD();
    } else if (!strcmp(a, "-i")) {
      NEED();
      if (parse_int(v, 1, 1000, &o.iterations)) BAD();
    } else if (!strcmp(a, "-f")) {
      NEED();
      if (parse_int(v, 0, MQR__MAX_FORKS, &o.forks)) BAD();
    } else if (!strcmp(a, "-w")) {
      NEED();
      if (parse_time(v, &o.warmup_time_s)) BAD();
    } else if (!strcmp(a, "-r")) {
      NEED();
      if (parse_time(v, &o.iteration_time_s) || o.iteration_time_s <= 0) BAD();
    } else if (!strcmp(a, "-tu")) {
      NEED();
      static const char *u[] = {"ns", "us", "ms", "s"};
      o.time_unit = 0;
      for (int k = 0; k < 4; k++)
        if (!strcmp(v, u[k])) o.time_unit = k + 1;
      if (!o.time_unit) BAD();
    } else if (!strcmp(a, "-p")) {
      NEED();
      if (!strchr(v, '=') || o.n_param_overrides == 16) BAD();
      o.param_overrides[o.n_param_overrides++] = v;
    } else if (!strcmp(a, "--json")) {
      NEED();
      o.json_path = v;
    } else if (a[0] == '-') {
      fprintf(stderr, "mqr-bench: unknown option '%s'\n%s", a, usage_text);
      return 2;
    } else if (!o.filter) {
      o.filter = a;
    } else {
      fprintf(stderr, "mqr-bench: one REGEX only\n");
      return 2;
    }
  }
  if (list) {
    const mqr_bench_def_t **defs;
    size_t n = mqr__bench_registry(&defs);
    for (size_t i = 0; i < n; i++)
      printf("%s%s%s  [%s]\n", defs[i]->name, defs[i]->params ? "  " : "", defs[i]->params ? defs[i]->params : "",
             defs[i]->modes ? defs[i]->modes : "avgt");
    return 0;
  }
  int failed = mqr_bench_main(&o);
  return failed < 0 ? 2 : failed > 0 ? 1 : 0;
}
