/* The journal writer (mqr/journal_writer.h). On the loop: records are encoded into the
 * open segment (the bytes bound for one file, with their callbacks); a record that does
 * not fit the file closes the segment and opens one for the next file. Once per loop pass
 * (the idle phase) the oldest segment goes to a worker thread, which writes it and the
 * end marker with one pwrite and makes it durable with one fdatasync (a new file:
 * created, pre-allocated, its header written, the directory synced); everything appended
 * meanwhile waits for the next write. Back on the loop, the segment's callbacks run in
 * order. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mqr/journal_writer.h"

typedef struct {
  mqr_journal_done_fn done;
  void *arg;
} cb_t;

typedef struct seg_s {
  uint64_t file_id;
  size_t off;    /* where its bytes go in the file */
  bool new_file; /* the file is made first */
  uint8_t *bytes;
  size_t len, cap;
  cb_t *cbs;
  size_t n_cbs, cap_cbs;
  struct seg_s *next;
} seg_t;

struct mqr_journal_writer_s {
  uv_loop_t *loop;
  char *dir;
  size_t file_size;
  bool no_sync;
  /* The loop's side. */
  uint64_t file_id; /* of the open segment's file */
  size_t file_off;  /* bytes of that file taken, the open segment's included */
  seg_t *open;      /* appends go here */
  seg_t *ready, *ready_tail;
  uv_idle_t idle;
  bool idle_on, failed, closing;
  void (*close_cb)(void *arg);
  void *close_arg;
  mqr_journal_stats_t stats;
  /* The write in flight, and the worker's side. */
  uv_work_t work;
  seg_t *writing;
  int fd; /* the current file, the worker's */
  int status;
  char why[256];
};

static seg_t *seg_new(uint64_t file_id, size_t off, bool new_file) {
  seg_t *s = mqr_calloc(1, sizeof *s);
  if (s) *s = (seg_t){file_id, off, new_file, NULL, 0, 0, NULL, 0, 0, NULL};
  return s;
}

static void seg_free(seg_t *s) {
  if (s == NULL) return;
  mqr_free(s->bytes);
  mqr_free(s->cbs);
  mqr_free(s);
}

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = mqr_realloc(*p, n * size);
  if (q == NULL) return false;
  *p = q;
  *cap = n;
  return true;
}

/* ---- the worker ---------------------------------------------------------------------- */

static void fail(mqr_journal_writer_t *w, const char *what, const char *path) {
  w->status = MQR_EIO;
  snprintf(w->why, sizeof w->why, "%s %.160s: %.60s", what, path, strerror(errno));
}

static void file_path(const mqr_journal_writer_t *w, uint64_t id, char *out, size_t cap) {
  snprintf(out, cap, "%s/%016llx.jrn", w->dir, (unsigned long long)id);
}

static void write_segment(uv_work_t *req) {
  mqr_journal_writer_t *w = req->data;
  seg_t *s = w->writing;
  char path[4096];
  file_path(w, s->file_id, path, sizeof path);
  w->status = 0;
  if (s->new_file) {
    if (w->fd >= 0) close(w->fd);
    w->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->fd < 0) return fail(w, "cannot create", path);
    int rc = posix_fallocate(w->fd, 0, (off_t)w->file_size);
    if (rc != 0) {
      errno = rc;
      return fail(w, "cannot allocate", path);
    }
    uint8_t h[MQR_JOURNAL_HEADER];
    mqr_journal_header_write(h, s->file_id);
    if (pwrite(w->fd, h, sizeof h, 0) != (ssize_t)sizeof h) return fail(w, "cannot write", path);
  }
  /* The records and the end marker after them, in one write. */
  if (!grow((void **)&s->bytes, &s->cap, s->len + MQR_JOURNAL_END, 1)) {
    errno = ENOMEM;
    return fail(w, "out of memory writing", path);
  }
  mqr_journal_end_write(s->bytes + s->len);
  size_t n = s->len + MQR_JOURNAL_END, done = 0;
  while (done < n) {
    ssize_t k = pwrite(w->fd, s->bytes + done, n - done, (off_t)(s->off + done));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return fail(w, "cannot write", path);
    done += (size_t)k;
  }
  if (!w->no_sync && fdatasync(w->fd) != 0) return fail(w, "cannot sync", path);
  if (s->new_file && !w->no_sync) { /* the file's name, durable too */
    int d = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || fsync(d) != 0) {
      if (d >= 0) close(d);
      return fail(w, "cannot sync the directory", w->dir);
    }
    close(d);
  }
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void kick(mqr_journal_writer_t *w);
static void finish_close(mqr_journal_writer_t *w);

static void run_callbacks(seg_t *s, int status) {
  for (size_t i = 0; i < s->n_cbs; i++)
    if (s->cbs[i].done) s->cbs[i].done(s->cbs[i].arg, status);
}

/* Everything not yet written fails: after a failed write the writer takes nothing more. */
static void fail_pending(mqr_journal_writer_t *w) {
  while (w->ready) {
    seg_t *s = w->ready;
    w->ready = s->next;
    run_callbacks(s, MQR_EIO);
    seg_free(s);
  }
  w->ready_tail = NULL;
  if (w->open) {
    run_callbacks(w->open, MQR_EIO);
    seg_free(w->open);
    w->open = NULL;
  }
}

static void written(uv_work_t *req, int status) {
  mqr_journal_writer_t *w = req->data;
  seg_t *s = w->writing;
  w->writing = NULL;
  int rc = status == 0 ? w->status : MQR_EIO;
  if (rc == 0) {
    w->stats.records += s->n_cbs;
    w->stats.writes++;
    w->stats.bytes += s->len;
    if (s->new_file) w->stats.files++;
  } else {
    w->failed = true;
  }
  run_callbacks(s, rc);
  seg_free(s);
  if (w->failed) fail_pending(w);
  kick(w);
}

static void idle_cb(uv_idle_t *h) {
  mqr_journal_writer_t *w = h->data;
  uv_idle_stop(&w->idle);
  w->idle_on = false;
  kick(w);
}

/* The next segment to the worker, when none is in flight: the oldest ready one, else the
 * open one with whatever it gathered. */
static void kick(mqr_journal_writer_t *w) {
  if (w->writing) return;
  if (w->ready == NULL && w->open && w->open->len) {
    w->ready = w->ready_tail = w->open;
    w->open = seg_new(w->file_id, w->file_off, false); /* NULL: the next append makes it */
  }
  if (w->ready) {
    seg_t *s = w->ready;
    w->ready = s->next;
    if (w->ready == NULL) w->ready_tail = NULL;
    s->next = NULL;
    w->writing = s;
    w->work.data = w;
    if (uv_queue_work(w->loop, &w->work, write_segment, written) != 0) {
      w->writing = NULL;
      w->failed = true;
      run_callbacks(s, MQR_EIO);
      seg_free(s);
      fail_pending(w);
    }
    return;
  }
  if (w->closing) finish_close(w);
}

static void wake(mqr_journal_writer_t *w) {
  if (w->idle_on) return;
  w->idle_on = true;
  uv_idle_start(&w->idle, idle_cb);
}

int mqr_journal_append(mqr_journal_writer_t *w, mqr_journal_record_type_t type, uint64_t id, const void *payload,
                       size_t len, mqr_journal_done_fn done, void *arg) {
  if (w->failed) return MQR_EIO;
  if (w->closing) return MQR_ECLOSED;
  size_t need = mqr_journal_record_size(len);
  if (len > MQR_JOURNAL_MAX_PAYLOAD || MQR_JOURNAL_HEADER + need + MQR_JOURNAL_END > w->file_size) return MQR_ELIMIT;
  if (w->file_off + need + MQR_JOURNAL_END > w->file_size) {
    /* The file is full: what it has goes as it is, and this record starts the next. */
    seg_t *next = seg_new(w->file_id + 1, MQR_JOURNAL_HEADER, true);
    if (next == NULL) return MQR_ENOMEM;
    if (w->open && (w->open->len || w->open->new_file)) {
      if (w->ready_tail)
        w->ready_tail->next = w->open;
      else
        w->ready = w->open;
      w->ready_tail = w->open;
    } else {
      seg_free(w->open);
    }
    w->open = next;
    w->file_id++;
    w->file_off = MQR_JOURNAL_HEADER;
  }
  if (w->open == NULL && (w->open = seg_new(w->file_id, w->file_off, false)) == NULL) return MQR_ENOMEM;
  seg_t *s = w->open;
  if (!grow((void **)&s->bytes, &s->cap, s->len + need + MQR_JOURNAL_END, 1) ||
      !grow((void **)&s->cbs, &s->cap_cbs, s->n_cbs + 1, sizeof *s->cbs))
    return MQR_ENOMEM;
  s->len += mqr_journal_record_write(s->bytes + s->len, s->file_id, type, id, payload, len);
  s->cbs[s->n_cbs++] = (cb_t){done, arg};
  w->file_off += need;
  wake(w);
  return 0;
}

void mqr_journal_stats(const mqr_journal_writer_t *w, mqr_journal_stats_t *out) { *out = w->stats; }

static void idle_closed(uv_handle_t *h) {
  mqr_journal_writer_t *w = h->data;
  void (*cb)(void *) = w->close_cb;
  void *arg = w->close_arg;
  if (w->fd >= 0) close(w->fd);
  seg_free(w->open);
  mqr_free(w->dir);
  mqr_free(w);
  if (cb) cb(arg);
}

static void finish_close(mqr_journal_writer_t *w) {
  if (uv_is_closing((uv_handle_t *)&w->idle)) return;
  uv_idle_stop(&w->idle);
  uv_close((uv_handle_t *)&w->idle, idle_closed);
}

void mqr_journal_close(mqr_journal_writer_t *w, void (*cb)(void *arg), void *arg) {
  if (w->closing) return;
  w->closing = true;
  w->close_cb = cb;
  w->close_arg = arg;
  kick(w); /* what is appended is written first; the last write's completion closes */
}

/* ---- opening: recovery ------------------------------------------------------------------ */

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
  const char *path;
} rec_ctx_t;

static int recover_one(void *ctx, const mqr_journal_record_t *r) {
  rec_ctx_t *c = ctx;
  return c->fn ? c->fn(c->ctx, c->path, r) : 0;
}

/* Reads path whole into *data. */
static int slurp(const char *path, uint8_t **data, size_t *len, mqr_error_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return mqr_error_set(err, MQR_EIO, "cannot read %s: %s", path, strerror(e));
  }
  *len = (size_t)st.st_size;
  *data = mqr_malloc(*len ? *len : 1);
  if (*data == NULL) {
    close(fd);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory reading %s", path);
  }
  size_t done = 0;
  while (done < *len) {
    ssize_t k = read(fd, *data + done, *len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = errno;
      close(fd);
      mqr_free(*data);
      return mqr_error_set(err, MQR_EIO, "cannot read %s: %s", path, k ? strerror(e) : "it got shorter");
    }
    done += (size_t)k;
  }
  close(fd);
  return 0;
}

static int recover_dir(mqr_journal_writer_t *w, mqr_journal_recover_fn fn, void *ctx, mqr_error_t *err) {
  DIR *d = opendir(w->dir);
  if (d == NULL) return mqr_error_set(err, MQR_EIO, "cannot open %s: %s", w->dir, strerror(errno));
  file_t *v = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name);
    char *end;
    if (l != 20 || strcmp(e->d_name + 16, ".jrn") != 0) continue;
    unsigned long long id = strtoull(e->d_name, &end, 16);
    if (end != e->d_name + 16) continue;
    if (!grow((void **)&v, &cap, n + 1, sizeof *v) || (v[n].path = mqr_malloc(strlen(w->dir) + l + 2)) == NULL) {
      rc = mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
      break;
    }
    sprintf(v[n].path, "%s/%s", w->dir, e->d_name);
    v[n++].id = id;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_id);
  for (size_t i = 0; i < n && rc == 0; i++) {
    uint8_t *data = NULL;
    size_t len = 0;
    if ((rc = slurp(v[i].path, &data, &len, err)) != 0) break;
    mqr_journal_scan_t s;
    rec_ctx_t c = {fn, ctx, v[i].path};
    rc = mqr_journal_scan(data, len, recover_one, &c, &s, err);
    mqr_free(data);
    if (rc == MQR_EBADDATA) {
      char why[sizeof err->message];
      snprintf(why, sizeof why, "%s", err ? err->message : "not a journal file");
      rc = mqr_error_set(err, MQR_EBADDATA, "%s: %s", v[i].path, why);
    } else if (rc == 0 && s.status == MQR_JOURNAL_DAMAGED)
      rc = mqr_error_set(err, MQR_EBADDATA, "%s: a damaged record at byte %zu, with valid records after it", v[i].path,
                         s.bad_offset);
    if (v[i].id >= w->file_id) w->file_id = v[i].id + 1;
  }
  for (size_t i = 0; i < n; i++) mqr_free(v[i].path);
  mqr_free(v);
  return rc;
}

int mqr_journal_open(uv_loop_t *loop, const mqr_journal_options_t *opt, mqr_journal_recover_fn recover, void *ctx,
                     mqr_journal_writer_t **out, mqr_error_t *err) {
  if (opt == NULL || opt->directory == NULL) return mqr_error_set(err, MQR_EINVAL, "no journal directory");
  size_t size = opt->file_size ? opt->file_size : (size_t)10 << 20;
  if (size < 4096) return mqr_error_set(err, MQR_EINVAL, "journal files of %zu bytes: at least 4096", size);
  if (mkdir(opt->directory, 0700) != 0 && errno != EEXIST)
    return mqr_error_set(err, MQR_EIO, "cannot make %s: %s", opt->directory, strerror(errno));
  mqr_journal_writer_t *w = mqr_calloc(1, sizeof *w);
  char *dir = mqr_malloc(strlen(opt->directory) + 1);
  if (w == NULL || dir == NULL) {
    mqr_free(w);
    mqr_free(dir);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
  }
  w->loop = loop;
  w->dir = strcpy(dir, opt->directory);
  w->file_size = size;
  w->no_sync = opt->no_sync;
  w->fd = -1;
  w->file_id = 1;
  int rc = recover_dir(w, recover, ctx, err);
  if (rc) {
    mqr_free(w->dir);
    mqr_free(w);
    return rc;
  }
  /* Appends go to a new file after the last. */
  w->open = seg_new(w->file_id, MQR_JOURNAL_HEADER, true);
  if (w->open == NULL) {
    mqr_free(w->dir);
    mqr_free(w);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
  }
  w->file_off = MQR_JOURNAL_HEADER;
  uv_idle_init(loop, &w->idle);
  w->idle.data = w;
  *out = w;
  return 0;
}
