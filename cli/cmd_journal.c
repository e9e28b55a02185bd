/* mqr journal check|dump PATH...: journal files read offline, each file (or each *.jrn
 * file of a directory, in file-id order) scanned to where its valid data ends. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"

const char mqr_usage_journal[] =
    "usage: mqr journal check PATH...   each journal file's records and how its data ends\n"
    "       mqr journal dump PATH...    every record: offset, type, id, payload size\n"
    "  PATH is a journal file, or a directory whose *.jrn files are read in file-id order.\n"
    "  Exit 1 when a file is not a journal or is damaged in the middle (a torn tail, which\n"
    "  a crash leaves, is reported and is not an error).\n";

static const char *type_name(mqr_journal_record_type_t t) {
  switch (t) {
  case MQR_JOURNAL_ADD: return "ADD";
  case MQR_JOURNAL_REF: return "REF";
  case MQR_JOURNAL_DELETE: return "DELETE";
  case MQR_JOURNAL_UPDATE: return "UPDATE";
  case MQR_JOURNAL_TOPOLOGY: return "TOPOLOGY";
  case MQR_JOURNAL_PAGED: return "PAGED";
  }
  return "?";
}

static int print_record(void *ctx, const mqr_journal_record_t *r) {
  const char *path = ctx;
  printf("%s:%zu %s id=%llu payload=%zu\n", path, r->offset, type_name(r->type), (unsigned long long)r->id, r->len);
  return 0;
}

/* One file: 0, or 1 after saying why. */
static int one(const char *path, bool dump) {
  size_t len;
  char *data = cli_read_file(path, &len);
  if (data == NULL) return 1;
  mqr_journal_scan_t s;
  mqr_error_t err;
  int rc = mqr_journal_scan((const uint8_t *)data, len, dump ? print_record : NULL, (void *)path, &s, &err);
  free(data);
  if (rc) return cli_error("%s: %s", path, err.message);
  static const char *const how[] = {"clean", "torn tail", "DAMAGED"};
  printf("%s: file id %llu, %llu records, valid data ends at byte %zu (%s", path, (unsigned long long)s.file_id,
         (unsigned long long)s.records, s.end, how[s.status]);
  if (s.status != MQR_JOURNAL_CLEAN) printf(" at byte %zu", s.bad_offset);
  printf(")\n");
  return s.status == MQR_JOURNAL_DAMAGED ? 1 : 0;
}

typedef struct {
  char *path;
  uint64_t id;
} entry_t;

static int by_id(const void *a, const void *b) {
  uint64_t x = ((const entry_t *)a)->id, y = ((const entry_t *)b)->id;
  return x < y ? -1 : x > y;
}

/* A directory: its *.jrn files by file id (from each header). */
static int dir(const char *path, bool dump) {
  DIR *d = opendir(path);
  if (d == NULL) return cli_error("%s: %s", path, strerror(errno));
  entry_t *v = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 4, ".jrn") != 0) continue;
    if (n == cap) {
      entry_t *g = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
      if (g == NULL) {
        rc = cli_error("out of memory");
        break;
      }
      v = g;
    }
    size_t pl = strlen(path) + l + 2;
    v[n].path = malloc(pl);
    if (v[n].path == NULL) {
      rc = cli_error("out of memory");
      break;
    }
    snprintf(v[n].path, pl, "%s/%s", path, e->d_name);
    uint8_t h[MQR_JOURNAL_HEADER] = {0};
    FILE *f = fopen(v[n].path, "rb");
    if (f) {
      if (fread(h, 1, sizeof h, f) != sizeof h) memset(h, 0, sizeof h);
      fclose(f);
    }
    v[n].id = 0;
    for (int i = 0; i < 8; i++) v[n].id |= (uint64_t)h[8 + i] << (8 * i);
    n++;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_id);
  if (rc == 0 && n == 0) printf("%s: no journal files\n", path);
  for (size_t i = 0; i < n; i++) rc |= one(v[i].path, dump);
  for (size_t i = 0; i < n; i++) free(v[i].path);
  free(v);
  return rc;
}

int mqr_cmd_journal(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "check") && strcmp(argv[1], "dump")))
    return cli_usage_error(mqr_usage_journal, argc < 2 ? NULL : "give check or dump, then one PATH or more");
  bool dump = argv[1][0] == 'd';
  int rc = 0;
  for (int i = 2; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      rc |= cli_error("%s: %s", argv[i], strerror(errno));
      continue;
    }
    rc |= S_ISDIR(st.st_mode) ? dir(argv[i], dump) : one(argv[i], dump);
  }
  return rc ? 1 : 0;
}
