/* Opening a journal directory: every journal file (.jrn) read in file-id order, mapped,
 * its valid records handed to the caller; a torn tail of the newest file cut where it
 * starts (an end marker written and synced there, so that it is logged once); damage (a
 * bad record before a later write, or anywhere in an older file) refused, or
 * with truncate_damaged, the journal cut there (the damaged file kept beside, later files
 * set aside). Then the pool (.jrf) is counted and topped up to min_files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writer_int.h"

typedef struct {
  char *path;
  uint64_t id;
} file_t;

static int by_id(const void *a, const void *b) {
  uint64_t x = ((const file_t *)a)->id, y = ((const file_t *)b)->id;
  return x < y ? -1 : x > y;
}

typedef struct {
  mqr_journal_recover_fn fn;
  void *ctx;
  uint64_t id;
  const char *path;
} rec_ctx_t;

static int recover_one(void *ctx, const mqr_journal_record_t *r) {
  rec_ctx_t *c = ctx;
  return c->fn ? c->fn(c->ctx, c->id, c->path, r) : 0;
}

/* Writes an end marker at off and syncs: the file's data ends there. */
static int cut_at(const char *path, size_t off, bool sync, mqr_error_t *err) {
  uint8_t end[MQR_JOURNAL_END];
  mqr_journal_end_write(end);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0 || pwrite(fd, end, sizeof end, (off_t)off) != (ssize_t)sizeof end || (sync && fdatasync(fd) != 0)) {
    int e = errno;
    if (fd >= 0) close(fd);
    return mqr_error_set(err, MQR_EIO, "cannot cut %s at byte %zu: %s", path, off, strerror(e));
  }
  close(fd);
  return 0;
}

/* A copy of path at path.damaged, for the operator. */
static int keep_copy(const char *path, const uint8_t *data, size_t len, mqr_error_t *err) {
  char to[4200];
  snprintf(to, sizeof to, "%s.damaged", path);
  int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  size_t done = 0;
  while (fd >= 0 && done < len) {
    ssize_t k = write(fd, data + done, len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += (size_t)k;
  }
  if (fd < 0 || done < len || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return mqr_error_set(err, MQR_EIO, "cannot keep a copy of %s: %s", path, strerror(e));
  }
  close(fd);
  return 0;
}

static int set_aside(const char *path, mqr_error_t *err) {
  char to[4200];
  snprintf(to, sizeof to, "%s.damaged", path);
  if (rename(path, to) != 0) return mqr_error_set(err, MQR_EIO, "cannot set %s aside: %s", path, strerror(errno));
  return 0;
}

/* Maps path read-only; *data NULL for an empty file. */
static int map_file(const char *path, const uint8_t **data, size_t *len, mqr_error_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return mqr_error_set(err, MQR_EIO, "cannot read %s: %s", path, strerror(e));
  }
  *len = (size_t)st.st_size;
  *data = NULL;
  if (*len) {
    void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      return mqr_error_set(err, e == ENOMEM ? MQR_ENOMEM : MQR_EIO, "cannot map %s: %s", path, strerror(e));
    }
    madvise(p, *len, MADV_SEQUENTIAL);
    *data = p;
  }
  close(fd);
  return 0;
}

/* One file: its records to fn; its tail cut or its damage handled. *stop: the journal
 * was cut in this file (truncate_damaged): later files are set aside. */
static int recover_file(mqr_journal_writer_t *w, const mqr_journal_options_t *opt, const file_t *f, bool last,
                        mqr_journal_recover_fn fn, void *ctx, bool *stop, mqr_error_t *err) {
  const uint8_t *data = NULL;
  size_t len = 0;
  int rc = map_file(f->path, &data, &len, err);
  if (rc) return rc;
  mqr_journal_scan_t s;
  rec_ctx_t c = {fn, ctx, f->id, f->path};
  rc = mqr_journal_scan(data, len, recover_one, &c, &s, err);
  w->stats.recovered += s.records;
  /* Only the newest file can end in a torn write: the writer syncs each write before the
   * next, and begins a file only after the last write of the one before was synced. A bad
   * record in an older file is damage. */
  if (rc == 0 && s.status == MQR_JOURNAL_TORN && !last) s.status = MQR_JOURNAL_DAMAGED;
  if (rc == MQR_EBADDATA) {
    char why[sizeof err->message];
    snprintf(why, sizeof why, "%s", err ? err->message : "not a journal file");
    rc = mqr_error_set(err, MQR_EBADDATA, "%s: %s", f->path, why);
  } else if (rc == 0 && s.status == MQR_JOURNAL_DAMAGED) {
    if (!opt->truncate_damaged) {
      rc = mqr_error_set(err, MQR_EBADDATA,
                         "%s: a damaged record at byte %zu, with valid records after it (mqrd --recover=truncate "
                         "cuts the journal there)",
                         f->path, s.bad_offset);
    } else if ((rc = keep_copy(f->path, data, len, err)) == 0 &&
               (rc = cut_at(f->path, s.bad_offset, !w->no_sync, err)) == 0) {
      w->stats.cut_file = f->id;
      w->stats.cut_offset = s.bad_offset;
      *stop = true;
    }
  } else if (rc == 0 && s.status == MQR_JOURNAL_TORN) {
    w->stats.torn++;
    if (last) rc = cut_at(f->path, s.bad_offset, !w->no_sync, err);
  }
  if (data) munmap((void *)data, len);
  return rc;
}

static bool journal_name(const char *name, const char *ext, uint64_t *id) {
  char *end;
  if (strlen(name) != 20 || name[16] != '.' || strcmp(name + 17, ext) != 0) return false;
  unsigned long long v = strtoull(name, &end, 16);
  if (end != name + 16 || v == 0) return false;
  *id = v;
  return true;
}

int mqr__journal_recover(mqr_journal_writer_t *w, const mqr_journal_options_t *opt, mqr_journal_recover_fn fn,
                         void *ctx, mqr_error_t *err) {
  DIR *d = opendir(w->dir);
  if (d == NULL) return mqr_error_set(err, MQR_EIO, "cannot open %s: %s", w->dir, strerror(errno));
  file_t *v = NULL;
  size_t n = 0, cap = 0;
  uint64_t max_pool = 0;
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
    uint64_t id;
    if (journal_name(e->d_name, "jrf", &id)) {
      w->n_pool++;
      if (id > max_pool) max_pool = id;
      continue;
    }
    if (!journal_name(e->d_name, "jrn", &id)) continue;
    size_t l = strlen(w->dir) + strlen(e->d_name) + 2;
    if (!mqr__grow_size((void **)&v, &cap, n + 1, sizeof *v) || (v[n].path = mqr_malloc(l)) == NULL) {
      rc = mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
      break;
    }
    snprintf(v[n].path, l, "%s/%s", w->dir, e->d_name);
    v[n++].id = id;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_id);
  bool stop = false;
  w->stats.first_file = n ? v[0].id : 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (stop)
      rc = set_aside(v[i].path, err);
    else
      rc = recover_file(w, opt, &v[i], i + 1 == n, fn, ctx, &stop, err);
    if (v[i].id >= w->file_id) w->file_id = v[i].id + 1;
  }
  for (size_t i = 0; i < n; i++) mqr_free(v[i].path);
  mqr_free(v);
  if (rc) return rc;
  if (w->stats.first_file == 0) w->stats.first_file = w->file_id;
  /* The pool, topped up to min_files (the file about to be begun counts). Pool files get
   * ids of their own, above every other, so that they never meet a file in use. */
  uint64_t in_use = n + 1;
  for (uint64_t next = (max_pool > w->file_id ? max_pool : w->file_id) + (1ull << 40);
       rc == 0 && in_use + w->n_pool < w->min_files; next++) {
    char path[4096];
    mqr__journal_path(w, next, true, path, sizeof path);
    int fd;
    int e = mqr__journal_make_file(w, path, &fd);
    if (e == EEXIST) continue;
    if (e) return mqr_error_set(err, MQR_EIO, "cannot make %s: %s", path, strerror(e));
    close(fd);
    w->n_pool++;
  }
  return 0;
}
