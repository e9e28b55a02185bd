/* The journal writer (mqr/journal_writer.h): appending and group commit. On the loop:
 * records are encoded into the open segment (the bytes bound for one file, with their
 * callbacks); a record that does not fit the file closes the segment and opens one for
 * the next file. At the next loop pass (the idle phase; or when buffer_timeout_us has
 * passed or buffer_size is reached) the oldest segment goes to a worker thread, which
 * writes it and the end marker with one pwrite and makes it durable with one fdatasync;
 * everything appended meanwhile waits for the next write. A new file is taken from the
 * pool (its header rewritten and synced before it is renamed into use) or made
 * zero-filled, so that an fdatasync never has to commit block allocations, as Artemis
 * fills its files. Back on the loop, the segment's callbacks run in order, and the files
 * released before it was closed go back to the pool. Segments are kept and reused: a
 * warm writer allocates nothing. Opening and recovery are recover.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writer_int.h"

#define MAX_SPARE 4

void mqr__journal_path(const mqr_journal_writer_t *w, uint64_t id, bool pool, char *out, size_t cap) {
  snprintf(out, cap, "%s/%016llx.%s", w->dir, (unsigned long long)id, pool ? "jrf" : "jrn");
}

static mqr__jseg_t *seg_take(mqr_journal_writer_t *w, uint64_t file_id, size_t off, bool new_file) {
  mqr__jseg_t *s = w->spare;
  if (s) {
    w->spare = s->next;
    w->n_spare--;
  } else if ((s = mqr_calloc(1, sizeof *s)) == NULL) {
    return NULL;
  }
  s->file_id = file_id;
  s->off = off;
  s->new_file = new_file;
  s->len = s->n_cbs = s->n_rel = 0;
  s->first_ns = 0;
  s->next = NULL;
  return s;
}

static void seg_free(mqr__jseg_t *s) {
  if (s == NULL) return;
  mqr_free(s->bytes);
  mqr_free(s->cbs);
  mqr_free(s->rel);
  mqr_free(s);
}

static void seg_put(mqr_journal_writer_t *w, mqr__jseg_t *s) {
  if (w->n_spare >= MAX_SPARE || s->cap > ((size_t)4 << 20)) return seg_free(s);
  s->next = w->spare;
  w->spare = s;
  w->n_spare++;
}

/* ---- the worker ---------------------------------------------------------------------- */

static void fail(mqr_journal_writer_t *w, const char *what, const char *path) {
  w->status = MQR_EIO;
  snprintf(w->why, sizeof w->why, "%s %.160s: %.60s", what, path, strerror(errno));
}

static bool sync_dir(mqr_journal_writer_t *w) {
  if (w->no_sync) return true;
  int d = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0 || fsync(d) != 0) {
    int e = errno;
    if (d >= 0) close(d);
    errno = e;
    fail(w, "cannot sync the directory", w->dir);
    return false;
  }
  close(d);
  return true;
}

int mqr__journal_make_file(const mqr_journal_writer_t *w, const char *path, int *fd_out) {
  static const uint8_t zeros[65536];
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  for (size_t at = 0; at < w->file_size;) {
    size_t n = w->file_size - at < sizeof zeros ? w->file_size - at : sizeof zeros;
    ssize_t k = pwrite(fd, zeros, n, (off_t)at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = k < 0 ? errno : ENOSPC;
      close(fd);
      unlink(path);
      return e;
    }
    at += (size_t)k;
  }
  if (!w->no_sync && fdatasync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(path);
    return e;
  }
  *fd_out = fd;
  return 0;
}

/* A pool file to reuse, or 0. */
static uint64_t pool_pick(const mqr_journal_writer_t *w) {
  DIR *d = opendir(w->dir);
  uint64_t id = 0;
  for (struct dirent *e; d && id == 0 && (e = readdir(d)) != NULL;) {
    char *end;
    if (strlen(e->d_name) != 20 || strcmp(e->d_name + 16, ".jrf") != 0) continue;
    unsigned long long v = strtoull(e->d_name, &end, 16);
    if (end == e->d_name + 16 && v) id = v;
  }
  if (d) closedir(d);
  return id;
}

/* Begins file s->file_id: a pool file with its new header, synced, then renamed into
 * use; or a new zero-filled one. Either way the directory is synced after. */
static bool begin_file(mqr_journal_writer_t *w, mqr__jseg_t *s, const char *path) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  uint8_t h[MQR_JOURNAL_HEADER];
  mqr_journal_header_write(h, s->file_id);
  uint64_t pid = w->n_pool ? pool_pick(w) : 0;
  w->reused = false;
  if (pid) {
    char from[4096];
    mqr__journal_path(w, pid, true, from, sizeof from);
    int fd = open(from, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h && (w->no_sync || fdatasync(fd) == 0) &&
        rename(from, path) == 0) {
      w->fd = fd;
      w->n_pool--;
      w->reused = true;
      return sync_dir(w);
    }
    if (fd >= 0) close(fd);
    w->n_pool = 0; /* the pool is not what it seemed: make files from now on */
  }
  /* A new file is made whole under a pool name (zero-filled, its header written and
   * synced) and only then renamed into use: a crash never leaves a .jrn without its
   * header. If one does stay behind as .jrf, the pool reuses it. */
  char tmp[4096];
  mqr__journal_path(w, s->file_id, true, tmp, sizeof tmp);
  unlink(tmp);
  int rc = mqr__journal_make_file(w, tmp, &w->fd);
  if (rc != 0) {
    errno = rc;
    fail(w, "cannot make", tmp);
    return false;
  }
  if (pwrite(w->fd, h, sizeof h, 0) != (ssize_t)sizeof h || (!w->no_sync && fdatasync(w->fd) != 0)) {
    fail(w, "cannot write", tmp);
    return false;
  }
  if (rename(tmp, path) != 0) {
    fail(w, "cannot rename into use", tmp);
    return false;
  }
  return sync_dir(w);
}

/* Released files, after the records that made them dead are durable: renamed into the
 * pool (or deleted past pool_max), the directory synced after each so that a crash can
 * bring back only the newest of them, never one older than a file still released. */
static void release_files(mqr_journal_writer_t *w, const mqr__jseg_t *s) {
  for (size_t i = 0; i < s->n_rel && w->status == 0; i++) {
    char from[4096], to[4096];
    mqr__journal_path(w, s->rel[i], false, from, sizeof from);
    if (w->pool_max && w->n_pool >= w->pool_max) {
      if (unlink(from) != 0 && errno != ENOENT) return fail(w, "cannot delete", from);
    } else {
      mqr__journal_path(w, s->rel[i], true, to, sizeof to);
      if (rename(from, to) != 0) {
        if (errno == ENOENT) continue;
        return fail(w, "cannot release", from);
      }
      w->n_pool++;
    }
    if (!sync_dir(w)) return;
  }
}

const double mqr_journal_latency_bounds[MQR_JOURNAL_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

static void write_segment(uv_work_t *req) {
  mqr_journal_writer_t *w = req->data;
  mqr__jseg_t *s = w->writing;
  uint64_t t0 = uv_hrtime();
  char path[4096];
  mqr__journal_path(w, s->file_id, false, path, sizeof path);
  w->status = 0;
  if (s->new_file && !begin_file(w, s, path)) return;
  if (s->len) { /* the records and the end marker after them, in one write (cap has room) */
    mqr_journal_end_write(s->bytes + s->len);
    size_t n = s->len + MQR_JOURNAL_END, done = 0;
    while (done < n) {
      ssize_t k = w->io.pwrite(w->fd, s->bytes + done, n - done, (off_t)(s->off + done));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return fail(w, "cannot write", path);
      done += (size_t)k;
    }
    if (!w->no_sync && w->io.fdatasync(w->fd) != 0) return fail(w, "cannot sync", path);
  }
  w->write_ns = uv_hrtime() - t0; /* (read on the loop once this work is done) */
  release_files(w, s);
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void kick(mqr_journal_writer_t *w);
static void finish_close(mqr_journal_writer_t *w);

static void run_callbacks(mqr__jseg_t *s, int status) {
  for (size_t i = 0; i < s->n_cbs; i++)
    if (s->cbs[i].done) s->cbs[i].done(s->cbs[i].arg, status);
}

/* Everything not yet written fails: after a failed write the writer takes nothing more. */
static void fail_pending(mqr_journal_writer_t *w) {
  while (w->ready) {
    mqr__jseg_t *s = w->ready;
    w->ready = s->next;
    run_callbacks(s, MQR_EIO);
    seg_put(w, s);
  }
  w->ready_tail = NULL;
  if (w->open) {
    run_callbacks(w->open, MQR_EIO);
    seg_put(w, w->open);
    w->open = NULL;
  }
}

static void written(uv_work_t *req, int status) {
  mqr_journal_writer_t *w = req->data;
  mqr__jseg_t *s = w->writing;
  w->writing = NULL;
  int rc = status == 0 ? w->status : MQR_EIO;
  if (rc == 0) {
    w->stats.records += s->n_cbs;
    w->stats.writes += s->len != 0;
    if (s->len) {
      int k = 0;
      while (k < MQR_JOURNAL_LATENCY_BUCKETS && (double)w->write_ns > mqr_journal_latency_bounds[k] * 1e9) k++;
      w->stats.write_latency[k]++;
      w->stats.write_ns += w->write_ns;
    }
    w->stats.bytes += s->len;
    w->stats.released += s->n_rel;
    if (s->new_file) {
      w->stats.files++;
      w->stats.reused += w->reused;
    }
  } else {
    w->failed = true;
    if (w->why[0] == 0) snprintf(w->why, sizeof w->why, "a journal write was cancelled");
  }
  w->stats.pool = w->n_pool;
  run_callbacks(s, rc);
  seg_put(w, s);
  if (w->failed) fail_pending(w);
  kick(w);
}

static void idle_cb(uv_idle_t *h) {
  mqr_journal_writer_t *w = h->data;
  uv_idle_stop(&w->idle);
  w->idle_on = false;
  kick(w);
}

static void timer_cb(uv_timer_t *h) {
  mqr_journal_writer_t *w = h->data;
  w->timer_on = false;
  kick(w);
}

static bool has_work(const mqr__jseg_t *s) { return s && (s->len || s->n_rel || s->new_file); }

/* The next segment to the worker, when none is in flight: the oldest ready one, else the
 * open one with whatever it gathered (once its wait is over). */
static void kick(mqr_journal_writer_t *w) {
  if (w->writing) return;
  if (w->ready == NULL && w->open && (w->open->len || w->open->n_rel)) {
    if (w->timeout_ns && w->open->len < w->buffer_size && !w->closing) {
      uint64_t age = uv_hrtime() - w->open->first_ns;
      if (age < w->timeout_ns) {
        if (!w->timer_on) {
          w->timer_on = true;
          uv_timer_start(&w->timer, timer_cb, (w->timeout_ns - age + 999999) / 1000000, 0);
        }
        return;
      }
    }
    w->ready = w->ready_tail = w->open;
    w->open = seg_take(w, w->file_id, w->file_off, false); /* NULL: the next append makes it */
  }
  if (w->timer_on && (w->ready || !has_work(w->open))) {
    uv_timer_stop(&w->timer);
    w->timer_on = false;
  }
  if (w->ready) {
    mqr__jseg_t *s = w->ready;
    w->ready = s->next;
    if (w->ready == NULL) w->ready_tail = NULL;
    s->next = NULL;
    w->writing = s;
    w->work.data = w;
    if (uv_queue_work(w->loop, &w->work, write_segment, written) != 0) {
      w->writing = NULL;
      w->failed = true;
      snprintf(w->why, sizeof w->why, "cannot start a journal write");
      run_callbacks(s, MQR_EIO);
      seg_put(w, s);
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

/* The open segment moves to the ready list (when it has anything) and one for the next
 * file takes its place. */
static int next_file(mqr_journal_writer_t *w) {
  mqr__jseg_t *next = seg_take(w, w->file_id + 1, MQR_JOURNAL_HEADER, true);
  if (next == NULL) return MQR_ENOMEM;
  if (has_work(w->open)) {
    if (w->ready_tail)
      w->ready_tail->next = w->open;
    else
      w->ready = w->open;
    w->ready_tail = w->open;
  } else if (w->open) {
    seg_put(w, w->open);
  }
  w->open = next;
  w->file_id++;
  w->file_off = MQR_JOURNAL_HEADER;
  return 0;
}

#define BATCH_SIZE (MQR_JOURNAL_RECORD_HEAD + MQR_JOURNAL_RECORD_FIXED)

int mqr_journal_append(mqr_journal_writer_t *w, mqr_journal_record_type_t type, uint64_t id, const void *payload,
                       size_t len, mqr_journal_done_fn done, void *arg) {
  if (w->failed) return MQR_EIO;
  if (w->closing) return MQR_ECLOSED;
  size_t need = mqr_journal_record_size(len);
  if (len > MQR_JOURNAL_MAX_PAYLOAD || MQR_JOURNAL_HEADER + BATCH_SIZE + need + MQR_JOURNAL_END > w->file_size)
    return MQR_ELIMIT;
  /* A write begins with a BATCH record: the first record of a segment brings it. */
  size_t batch = w->open == NULL || w->open->len == 0 ? BATCH_SIZE : 0;
  if (w->file_off + batch + need + MQR_JOURNAL_END > w->file_size) {
    int rc = next_file(w); /* what the full file has goes as it is; this record starts the next */
    if (rc) return rc;
    batch = BATCH_SIZE;
  }
  if (w->open == NULL && (w->open = seg_take(w, w->file_id, w->file_off, false)) == NULL) return MQR_ENOMEM;
  mqr__jseg_t *s = w->open;
  if (!mqr__grow_size((void **)&s->bytes, &s->cap, s->len + batch + need + MQR_JOURNAL_END, 1) ||
      !mqr__grow_size((void **)&s->cbs, &s->cap_cbs, s->n_cbs + 1, sizeof *s->cbs))
    return MQR_ENOMEM;
  if (s->len == 0) {
    s->first_ns = w->timeout_ns ? uv_hrtime() : 0;
    s->len = mqr_journal_record_write(s->bytes, s->file_id, MQR_JOURNAL_BATCH, ++w->batches, NULL, 0);
    w->file_off += s->len;
  }
  s->len += mqr_journal_record_write(s->bytes + s->len, s->file_id, type, id, payload, len);
  s->cbs[s->n_cbs++] = (mqr__jcb_t){done, arg};
  w->file_off += need;
  if (w->timeout_ns && s->len >= w->buffer_size && !w->writing)
    kick(w);
  else
    wake(w);
  return 0;
}

uint64_t mqr_journal_file(const mqr_journal_writer_t *w) { return w->file_id; }

void mqr_journal_position(const mqr_journal_writer_t *w, uint64_t *file_id, size_t *offset) {
  *file_id = w->file_id;
  *offset = w->file_off;
}

int mqr_journal_release(mqr_journal_writer_t *w, uint64_t file_id) {
  if (w->failed) return MQR_EIO;
  if (w->closing) return MQR_ECLOSED;
  if (file_id >= w->file_id || file_id == 0) return MQR_EINVAL;
  if (w->open == NULL && (w->open = seg_take(w, w->file_id, w->file_off, false)) == NULL) return MQR_ENOMEM;
  mqr__jseg_t *s = w->open;
  if (!mqr__grow_size((void **)&s->rel, &s->cap_rel, s->n_rel + 1, sizeof *s->rel) ||
      !mqr__grow_size((void **)&s->bytes, &s->cap, s->len + MQR_JOURNAL_END, 1))
    return MQR_ENOMEM;
  if (s->len == 0 && s->n_rel == 0) s->first_ns = w->timeout_ns ? uv_hrtime() : 0;
  s->rel[s->n_rel++] = file_id;
  wake(w);
  return 0;
}

const char *mqr_journal_error(const mqr_journal_writer_t *w) { return w->failed ? w->why : NULL; }

void mqr_journal_stats(const mqr_journal_writer_t *w, mqr_journal_stats_t *out) { *out = w->stats; }

static void handle_closed(uv_handle_t *h) {
  mqr_journal_writer_t *w = h->data;
  if (--w->handles) return;
  void (*cb)(void *) = w->close_cb;
  void *arg = w->close_arg;
  if (w->fd >= 0) close(w->fd);
  seg_free(w->open);
  while (w->spare) {
    mqr__jseg_t *s = w->spare;
    w->spare = s->next;
    seg_free(s);
  }
  mqr_free(w->dir);
  mqr_free(w);
  if (cb) cb(arg);
}

static void finish_close(mqr_journal_writer_t *w) {
  if (uv_is_closing((uv_handle_t *)&w->idle)) return;
  uv_idle_stop(&w->idle);
  uv_timer_stop(&w->timer);
  w->handles = 2;
  uv_close((uv_handle_t *)&w->idle, handle_closed);
  uv_close((uv_handle_t *)&w->timer, handle_closed);
}

void mqr_journal_close(mqr_journal_writer_t *w, void (*cb)(void *arg), void *arg) {
  if (w->closing) return;
  w->closing = true;
  w->close_cb = cb;
  w->close_arg = arg;
  kick(w); /* what is appended is written first; the last write's completion closes */
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
  w->min_files = opt->min_files ? opt->min_files : 2;
  w->pool_max = opt->pool_files;
  w->timeout_ns = (uint64_t)opt->buffer_timeout_us * 1000;
  w->buffer_size = opt->buffer_size ? opt->buffer_size : (size_t)490 << 10;
  w->fd = -1;
  w->file_id = 1;
  w->io.pwrite = opt->io && opt->io->pwrite ? opt->io->pwrite : pwrite;
  w->io.fdatasync = opt->io && opt->io->fdatasync ? opt->io->fdatasync : fdatasync;
  int rc = mqr__journal_recover(w, opt, recover, ctx, err);
  /* Appends go to a new file after the last. */
  if (rc == 0 && (w->open = seg_take(w, w->file_id, MQR_JOURNAL_HEADER, true)) == NULL)
    rc = mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
  if (rc) {
    mqr_free(w->dir);
    mqr_free(w);
    return rc;
  }
  w->file_off = MQR_JOURNAL_HEADER;
  w->stats.pool = w->n_pool;
  uv_idle_init(loop, &w->idle);
  uv_timer_init(loop, &w->timer);
  w->idle.data = w->timer.data = w;
  *out = w;
  return 0;
}
