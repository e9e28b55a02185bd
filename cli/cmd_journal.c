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
  case MQR_JOURNAL_BATCH: return "BATCH";
  }
  return "?";
}

/* A name the broker wrote: printable UTF-8, no control characters. */
static bool printable(const uint8_t *p, size_t n) {
  if (n == 0 || mqr_utf8_check((const char *)p, n) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (p[i] < 0x20 || p[i] == 0x7f) return false;
  return true;
}

static size_t get16(const uint8_t *p) { return (size_t)(p[0] | p[1] << 8); }

/* What the broker's records say (docs/durability.md), when the payload is one of its. */
static void describe(const mqr_journal_record_t *r) {
  const uint8_t *p = r->payload, *end = r->payload + r->len;
  switch (r->type) {
  case MQR_JOURNAL_ADD: {
    mqr_stored_view_t v;
    if (mqr_message_read_stored(p, r->len, &v, NULL) == 0 && v.message_id == (int64_t)r->id &&
        printable((const uint8_t *)v.address.ptr, v.address.len))
      printf(" address=%.*s", (int)v.address.len, v.address.ptr);
    return;
  }
  case MQR_JOURNAL_REF:
  case MQR_JOURNAL_DELETE:
    if (printable(p, r->len)) printf(" queue=%.*s", (int)r->len, (const char *)p);
    return;
  case MQR_JOURNAL_UPDATE: {
    uint32_t count = r->len >= 4 ? (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24) : 0;
    if (count & 0x80000000u) { /* a redelivery delay: the time it is held to follows */
      int64_t due = 0;
      if (r->len > 12) memcpy(&due, p + 4, 8);
      if (r->len > 12 && printable(p + 12, r->len - 12))
        printf(" count=%u held-until=%lld queue=%.*s", count & 0x7fffffffu, (long long)due, (int)(r->len - 12),
               (const char *)p + 12);
    } else if (r->len > 4 && printable(p + 4, r->len - 4)) {
      printf(" count=%u queue=%.*s", count, (int)(r->len - 4), (const char *)p + 4);
    }
    return;
  }
  case MQR_JOURNAL_TOPOLOGY:
    /* op 1, 2: a queue made (2 with its kind after the names); 3: a queue deleted; 4: an
     * address made; 5: an address deleted. */
    if (r->len >= 14 && (p[0] == 1 || p[0] == 2) && r->len >= 14 + get16(p + 8) + get16(p + 10) + get16(p + 12))
      printf(" queue=%.*s address=%.*s %s%s%s", (int)get16(p + 8), (const char *)p + 14, (int)get16(p + 10),
             (const char *)p + 14 + get16(p + 8), p[1] == MQR_ANYCAST ? "ANYCAST" : "MULTICAST",
             p[2] & 1 ? " durable" : "", p[3] & 1 ? " paused" : "");
    else if (r->len >= 3 && (p[0] == 3 || p[0] == 5) && r->len == 3 + get16(p + 1))
      printf(" deleted %s=%.*s", p[0] == 3 ? "queue" : "address", (int)get16(p + 1), (const char *)p + 3);
    else if (r->len >= 4 && p[0] == 4 && r->len == 4 + get16(p + 2))
      printf(" address=%.*s%s%s", (int)get16(p + 2), (const char *)p + 4, p[1] & (1u << MQR_ANYCAST) ? " ANYCAST" : "",
             p[1] & (1u << MQR_MULTICAST) ? " MULTICAST" : "");
    return;
  case MQR_JOURNAL_BATCH: return; /* never handed to readers */
  case MQR_JOURNAL_PAGED:
    if (r->len == 0) {
      printf(" (page release barrier)");
    } else if (r->len >= 4 && get16(p) + 4 <= r->len && r->len == 4 + get16(p) + get16(p + 2 + get16(p))) {
      printf(" mark address=%.*s queue=%.*s", (int)get16(p), (const char *)p + 2, (int)get16(p + 2 + get16(p)),
             (const char *)p + 4 + get16(p));
    } else if (r->len >= 2) {
      size_t n = get16(p);
      const uint8_t *q = p + 2;
      printf(" queues=");
      for (size_t i = 0; i < n && end - q >= 2 && (size_t)(end - q - 2) >= get16(q); i++) {
        printf("%s%.*s", i ? "," : "", (int)get16(q), (const char *)q + 2);
        q += 2 + get16(q);
      }
    }
    return;
  }
}

static int print_record(void *ctx, const mqr_journal_record_t *r) {
  const char *path = ctx;
  printf("%s:%zu %s id=%llu payload=%zu", path, r->offset, type_name(r->type), (unsigned long long)r->id, r->len);
  describe(r);
  printf("\n");
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
