/* The journal writer: records appended from the loop come back, in order, when the
 * directory is opened again; each callback runs once its record is durable, in append
 * order; records appended in one loop pass share one write (group commit); files fill and
 * the next is made; a record too large for a file is refused; a torn tail in the last
 * file is cut and damage in the middle stops the opening; a write that fails fails its
 * records and every later append. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mqr/journal_writer.h"
#include "test_dir.h"
#include "testutil.h"

#define B (MQR_JOURNAL_RECORD_HEAD + MQR_JOURNAL_RECORD_FIXED) /* the BATCH record that begins each write */

typedef struct {
  uint64_t ids[4096];
  int n, last_status;
  int order_errors;
} done_t;

typedef struct {
  done_t *d;
  uint64_t id;
} arg_t;

static arg_t args[4096];

static void on_done(void *arg, int status) {
  arg_t *a = arg;
  done_t *d = a->d;
  if (d->n > 0 && d->ids[d->n - 1] + 1 != a->id) d->order_errors++;
  d->ids[d->n++] = a->id;
  d->last_status = status;
}

typedef struct {
  uint64_t ids[4096]; /* the first 4096 */
  int n;
  char payload_ok, in_order; /* every id is its position + 1 */
} got_t;

static int on_recover(void *ctx, uint64_t file_id, const char *file, const mqr_journal_record_t *r) {
  (void)file;
  (void)file_id;
  got_t *g = ctx;
  if (g->n < 4096) g->ids[g->n] = r->id;
  g->n++;
  if (r->id != (uint64_t)g->n) g->in_order = 0;
  char want[32];
  int len = snprintf(want, sizeof want, "payload %llu", (unsigned long long)r->id);
  if (r->len != (size_t)len || memcmp(r->payload, want, r->len) != 0) g->payload_ok = 0;
  return 0;
}

static uint32_t min_files; /* 0: the default */

static int open_journal(uv_loop_t *loop, size_t file_size, got_t *g, mqr_journal_writer_t **w, mqr_error_t *err) {
  mqr_journal_options_t opt = {.directory = dir, .file_size = file_size, .min_files = min_files};
  if (g) *g = (got_t){.n = 0, .payload_ok = 1, .in_order = 1};
  return mqr_journal_open(loop, &opt, on_recover, g, w, err);
}

static void append_n(mqr_journal_writer_t *w, done_t *d, uint64_t from, int n) {
  for (int i = 0; i < n; i++) {
    uint64_t id = from + (uint64_t)i;
    char p[32];
    int len = snprintf(p, sizeof p, "payload %llu", (unsigned long long)id);
    args[id % 4096] = (arg_t){d, id};
    assert_int_equal(mqr_journal_append(w, MQR_JOURNAL_ADD, id, p, (size_t)len, on_done, &args[id % 4096]), 0);
  }
}

static void close_journal(uv_loop_t *loop, mqr_journal_writer_t *w) {
  mqr_journal_close(w, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
}

static void test_write_and_recover(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 0);
  static done_t d;
  d = (done_t){.n = 0};
  append_n(w, &d, 1, 1000); /* one loop pass: one write */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(d.n, 1000);
  assert_int_equal(d.order_errors, 0);
  assert_int_equal(d.last_status, 0);
  mqr_journal_stats_t st;
  mqr_journal_stats(w, &st);
  assert_int_equal(st.records, 1000);
  assert_int_equal(st.writes, 1);
  /* Appends while a write is in flight gather into the next. */
  for (int round = 0; round < 5; round++) {
    append_n(w, &d, 1001 + (uint64_t)round * 200, 200);
    uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(d.n, 2000);
  assert_int_equal(d.order_errors, 0);
  mqr_journal_stats(w, &st);
  assert_true(st.writes < 1 + 5 + 1);
  close_journal(&loop, w);
  /* Opened again: every record, in order, with its payload. */
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 2000);
  for (int i = 0; i < g.n; i++) assert_int_equal(g.ids[i], (uint64_t)i + 1);
  assert_true(g.payload_ok);
  /* New records go to a new file, after the old ones. */
  append_n(w, &d, 2001, 10);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_journal(&loop, w);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 2010);
  assert_int_equal(g.ids[2009], 2010);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static int count_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strstr(e->d_name, ".jrn") != NULL;
  if (d) closedir(d);
  return n;
}

static void test_files_fill_and_rotate(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
  static done_t d;
  d = (done_t){.n = 0};
  append_n(w, &d, 1, 500); /* about 45 bytes each: several 4 KiB files */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(d.n, 500);
  assert_int_equal(d.order_errors, 0);
  mqr_journal_stats_t st;
  mqr_journal_stats(w, &st);
  assert_true(st.files >= 5);
  assert_int_equal((int)st.files, count_files());
  /* Too large for a file: refused, nothing appended. */
  static char big[8192];
  assert_int_equal(mqr_journal_append(w, MQR_JOURNAL_ADD, 9999, big, sizeof big, NULL, NULL), MQR_ELIMIT);
  close_journal(&loop, w);
  if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 500);
  for (int i = 0; i < g.n; i++) assert_int_equal(g.ids[i], (uint64_t)i + 1);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The newest file cut inside its last record (a crash mid-write): recovery stops there. A
 * bad record with valid ones after it in the same, last, write (a write the disk kept
 * with holes): a torn tail too. A bad record with a later write after it: damage in the
 * middle, and the opening stops, naming file and offset. */
static void test_torn_and_damaged(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  static done_t d;
  d = (done_t){.n = 0};
  append_n(w, &d, 1, 10); /* two writes: [B][1..10] [B][11..20] */
  uv_run(&loop, UV_RUN_DEFAULT);
  append_n(w, &d, 11, 10);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_journal(&loop, w);
  char path[300];
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 1ull);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  size_t s1 = mqr_journal_record_size(strlen("payload 1")), s2 = mqr_journal_record_size(strlen("payload 10"));
  size_t w2 = MQR_JOURNAL_HEADER + B + 9 * s1 + s2; /* the second write */
  /* Record 20's last bytes overwritten. */
  fseek(f, (long)(w2 + B + 10 * s2 - 2), SEEK_SET);
  fputc('X', f);
  fclose(f);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 19); /* a torn tail: record 20 is cut off */
  close_journal(&loop, w);
  /* Record 15 bad, 16..19 valid after it in the same (last) write: torn there. */
  f = fopen(path, "r+b");
  fseek(f, (long)(w2 + B + 4 * s2 + 30), SEEK_SET);
  fputc('Y', f);
  fclose(f);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 14);
  close_journal(&loop, w);
  /* Record 5 bad, with the second write after it: damage in the middle. */
  f = fopen(path, "r+b");
  fseek(f, (long)(MQR_JOURNAL_HEADER + B + 4 * s1 + 30), SEEK_SET);
  fputc('Z', f);
  fclose(f);
  assert_int_equal(open_journal(&loop, 0, &g, &w, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "0000000000000001.jrn"));
  assert_non_null(strstr(err.message, "damaged"));
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* A file the writer cannot make (its name taken by a directory): the write fails, its
 * records' callbacks get MQR_EIO, and the writer takes nothing more. */
static void test_write_failure(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  if (open_journal(&loop, 0, NULL, &w, &err) != 0) fail_msg("%s", err.message);
  char path[300];
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 1ull);
  assert_int_equal(mkdir(path, 0700), 0);
  static done_t d;
  d = (done_t){.n = 0};
  append_n(w, &d, 1, 3);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(d.n, 3);
  assert_int_equal(d.last_status, MQR_EIO);
  assert_int_equal(mqr_journal_append(w, MQR_JOURNAL_ADD, 4, "x", 1, NULL, NULL), MQR_EIO);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* Every allocation of opening (recovering two files) and of appending failed in turn:
 * the call that meets it returns MQR_ENOMEM with nothing done (no callback for a refused
 * append), everything else goes on, nothing leaks, and what the callbacks called durable
 * is exactly what a later opening recovers. */
static void test_allocation_failures(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  static done_t d;
  /* Opening: two files of five records to recover. */
  fresh_dir();
  for (int round = 0; round < 2; round++) {
    if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
    d = (done_t){.n = 0};
    append_n(w, &d, (uint64_t)round * 5 + 1, 5);
    uv_run(&loop, UV_RUN_DEFAULT);
    close_journal(&loop, w);
  }
  long tried = 0;
  for (long n = 1;; n++) {
    talloc_install();
    talloc.fail_at = n;
    int rc = open_journal(&loop, 4096, &g, &w, &err);
    bool hit = talloc.failed > 0;
    if (rc == 0) {
      assert_int_equal(g.n, 10);
      close_journal(&loop, w);
    } else {
      assert_int_equal(rc, MQR_ENOMEM);
      assert_true(hit);
    }
    if (talloc.live != 0) fail_msg("open, N=%ld: %ld blocks leaked", n, talloc.live);
    talloc_uninstall();
    if (!hit) break;
    tried++;
  }
  assert_true(tried >= 5);
  /* Appending: 20 records into a fresh directory, the Nth allocation failed. */
  tried = 0;
  for (long n = 1;; n++) {
    fresh_dir();
    talloc_install();
    talloc.fail_at = n;
    uint64_t next = 1;
    int rc = open_journal(&loop, 4096, &g, &w, &err);
    if (rc == 0) {
      d = (done_t){.n = 0};
      int refused = 0;
      for (int i = 0; i < 20; i++) {
        char p[32];
        int len = snprintf(p, sizeof p, "payload %llu", (unsigned long long)next);
        args[next] = (arg_t){&d, next};
        int a = mqr_journal_append(w, MQR_JOURNAL_ADD, next, p, (size_t)len, on_done, &args[next]);
        if (a == 0) {
          next++;
        } else {
          assert_int_equal(a, MQR_ENOMEM);
          refused++;
        }
      }
      uv_run(&loop, UV_RUN_DEFAULT);
      assert_int_equal(d.n, 20 - refused);
      if (d.n) assert_int_equal(d.last_status, 0);
      close_journal(&loop, w);
    } else {
      assert_int_equal(rc, MQR_ENOMEM);
    }
    bool hit = talloc.failed > 0;
    if (talloc.live != 0) fail_msg("append, N=%ld: %ld blocks leaked", n, talloc.live);
    talloc_uninstall();
    /* What the callbacks called durable, and nothing else, in order. */
    if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
    assert_int_equal((uint64_t)g.n, next - 1);
    assert_true(g.in_order);
    assert_true(g.payload_ok);
    close_journal(&loop, w);
    if (!hit) break;
    tried++;
  }
  assert_true(tried >= 3);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The system refuses the space (a file-size limit, as a full disk refuses it): in a child
 * with RLIMIT_FSIZE under the journal's file size, the file cannot be allocated, the
 * records' callbacks get MQR_EIO (never 0), later appends are refused, and nothing
 * crashes. */
static void test_no_space(void **state) {
  (void)state;
  fresh_dir();
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead of killing */
    struct rlimit lim = {64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
    uv_loop_t loop;
    uv_loop_init(&loop);
    mqr_journal_writer_t *w;
    mqr_error_t err;
    /* The pool's files cannot be made: the opening fails, saying why. */
    if (open_journal(&loop, 1 << 20, NULL, &w, &err) != MQR_EIO || strstr(err.message, ".jrf") == NULL) _exit(15);
    min_files = 1; /* no pool: the first write meets the limit */
    if (open_journal(&loop, 1 << 20, NULL, &w, &err) != 0) _exit(11);
    static done_t d;
    d = (done_t){.n = 0};
    for (uint64_t id = 1; id <= 5; id++) {
      args[id] = (arg_t){&d, id};
      if (mqr_journal_append(w, MQR_JOURNAL_ADD, id, "x", 1, on_done, &args[id]) != 0) _exit(12);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    if (d.n != 5 || d.last_status != MQR_EIO) _exit(13);
    if (mqr_journal_append(w, MQR_JOURNAL_ADD, 6, "x", 1, NULL, NULL) != MQR_EIO) _exit(14);
    mqr_journal_close(w, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("the child ended with status %#x", status);
}

/* Files released go to the pool once what was appended before is durable, and new files
 * are taken from it; a reused file's old records are never recovered; past pool_files a
 * released file is deleted. */
static void test_release_and_reuse(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(count_ext(".jrf"), 1); /* min_files 2: the file in use and one ready */
  static done_t d;
  d = (done_t){.n = 0};
  append_n(w, &d, 1, 500);
  uv_run(&loop, UV_RUN_DEFAULT);
  uint64_t cur = mqr_journal_file(w);
  assert_true(cur >= 5);
  assert_int_equal(mqr_journal_release(w, cur), MQR_EINVAL);
  for (uint64_t f = 1; f < cur; f++) assert_int_equal(mqr_journal_release(w, f), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  mqr_journal_stats_t st;
  mqr_journal_stats(w, &st);
  assert_int_equal(st.released, cur - 1);
  assert_int_equal(st.reused, 1);
  assert_int_equal(count_ext(".jrn"), 1);
  assert_int_equal((uint64_t)count_ext(".jrf"), cur - 1);
  assert_int_equal(st.pool, cur - 1);
  /* More records: the new files come from the pool. */
  append_n(w, &d, 501, 500);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(d.n, 1000);
  assert_int_equal(d.order_errors, 0);
  mqr_journal_stats(w, &st);
  assert_true(st.reused >= 1 + 4);
  assert_int_equal((uint64_t)(count_ext(".jrn") + count_ext(".jrf")), st.files - st.reused + 1);
  close_journal(&loop, w);
  /* Recovered: the records of the file not released and later, in order; nothing of the
   * earlier uses of the reused files. */
  if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_true(g.n > 500 && g.n < 1000);
  uint64_t first = 1000 - (uint64_t)g.n + 1;
  for (int i = 0; i < g.n; i++) assert_int_equal(g.ids[i], first + (uint64_t)i);
  assert_true(g.payload_ok);
  close_journal(&loop, w);
  /* With pool_files 1, released files past the first are deleted. */
  fresh_dir();
  mqr_journal_options_t opt = {.directory = dir, .file_size = 4096, .pool_files = 1};
  if (mqr_journal_open(&loop, &opt, NULL, NULL, &w, &err) != 0) fail_msg("%s", err.message);
  append_n(w, &d, 1, 500);
  uv_run(&loop, UV_RUN_DEFAULT);
  cur = mqr_journal_file(w);
  for (uint64_t f = 1; f < cur; f++) assert_int_equal(mqr_journal_release(w, f), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(count_ext(".jrf"), 1);
  assert_int_equal(count_ext(".jrn"), 1);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* A batch waits up to buffer_timeout_us for more records, unless it reaches buffer_size. */
static void test_buffer_timeout(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  mqr_journal_options_t opt = {.directory = dir, .buffer_timeout_us = 20000, .buffer_size = 4000};
  if (mqr_journal_open(&loop, &opt, NULL, NULL, &w, &err) != 0) fail_msg("%s", err.message);
  static done_t d;
  d = (done_t){.n = 0};
  uint64_t t0 = uv_hrtime();
  append_n(w, &d, 1, 1);
  while (d.n == 0) uv_run(&loop, UV_RUN_ONCE);
  assert_true(uv_hrtime() - t0 >= 19000000ull); /* it waited for more */
  /* A full buffer goes at once: 200 records of ~40 bytes are over 4000 bytes. */
  d = (done_t){.n = 0};
  t0 = uv_hrtime();
  append_n(w, &d, 2, 200);
  while (d.n < 200) uv_run(&loop, UV_RUN_ONCE);
  mqr_journal_stats_t st;
  mqr_journal_stats(w, &st);
  assert_int_equal(d.order_errors, 0);
  assert_int_equal(st.records, 201);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* With truncate_damaged, a damaged record cuts the journal: the records before it are
 * recovered, the file is kept beside as .damaged, later files are set aside, and the next
 * opening is clean. A torn tail is cut once: the next opening does not see it again. */
static void test_truncate_damaged(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  static done_t d;
  for (int round = 0; round < 2; round++) { /* two files of 20 records */
    if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
    d = (done_t){.n = 0};
    append_n(w, &d, (uint64_t)round * 20 + 1, 20);
    uv_run(&loop, UV_RUN_DEFAULT);
    close_journal(&loop, w);
  }
  char path[300];
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 1ull);
  FILE *f = fopen(path, "r+b");
  fseek(f, (long)(MQR_JOURNAL_HEADER + B + 4 * mqr_journal_record_size(strlen("payload 1")) + 30), SEEK_SET);
  fputc('Z', f); /* record 5: the file is not the newest, so this is damage */
  fclose(f);
  assert_int_equal(open_journal(&loop, 0, &g, &w, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "--recover=truncate"));
  mqr_journal_options_t opt = {.directory = dir, .truncate_damaged = true};
  g = (got_t){.n = 0, .payload_ok = 1, .in_order = 1};
  if (mqr_journal_open(&loop, &opt, on_recover, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 4);
  assert_true(g.in_order);
  mqr_journal_stats_t st;
  mqr_journal_stats(w, &st);
  assert_int_equal(st.cut_file, 1);
  assert_int_equal(count_ext(".damaged"), 2);
  append_n(w, &d, 5, 3); /* the journal goes on after the cut */
  uv_run(&loop, UV_RUN_DEFAULT);
  close_journal(&loop, w);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 7);
  assert_true(g.in_order);
  /* A torn tail in the newest file: cut at the first opening, gone at the next. */
  append_n(w, &d, 8, 5);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_journal(&loop, w);
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 4ull);
  f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, (long)(MQR_JOURNAL_HEADER + B + 4 * mqr_journal_record_size(strlen("payload 8")) + 3), SEEK_SET);
  fputc('T', f); /* the last record, 12 */
  fclose(f);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 11);
  mqr_journal_stats(w, &st);
  assert_int_equal(st.torn, 1);
  close_journal(&loop, w);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 11);
  mqr_journal_stats(w, &st);
  assert_int_equal(st.torn, 0);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* fdatasync fails (an injected I/O layer) on its third call: the records of that write
 * get MQR_EIO, never 0, and so does everything after; the records answered 0 before it
 * are all recovered. */
static int syncs, fail_sync_at;
static int failing_fdatasync(int fd) {
  if (++syncs == fail_sync_at) {
    errno = EIO;
    return -1;
  }
  return fdatasync(fd);
}

static void test_failing_fdatasync(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  static const mqr_journal_io_t io = {NULL, failing_fdatasync};
  mqr_journal_options_t opt = {.directory = dir, .min_files = 1, .io = &io};
  syncs = 0;
  fail_sync_at = 3;
  mqr_journal_writer_t *w;
  mqr_error_t err;
  if (mqr_journal_open(&loop, &opt, NULL, NULL, &w, &err) != 0) fail_msg("%s", err.message);
  static done_t d;
  d = (done_t){.n = 0};
  int ok = 0;
  for (int round = 0; round < 5; round++) {
    int before = d.n;
    append_n(w, &d, (uint64_t)round * 10 + 1, 10);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(d.n, before + 10);
    if (d.last_status != 0) break;
    ok += 10;
  }
  assert_int_equal(ok, 20); /* the third write's fdatasync failed */
  assert_int_equal(d.last_status, MQR_EIO);
  assert_non_null(mqr_journal_error(w));
  assert_non_null(strstr(mqr_journal_error(w), "cannot sync"));
  assert_int_equal(mqr_journal_append(w, MQR_JOURNAL_ADD, 99, "x", 1, NULL, NULL), MQR_EIO);
  close_journal(&loop, w);
  got_t g;
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_true(g.n >= ok); /* every record answered 0 is there */
  for (int i = 0; i < ok; i++) assert_int_equal(g.ids[i], (uint64_t)i + 1);
  close_journal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Torn writes: the newest file cut at every byte of its last records (what follows the
 * cut zeroed, as a pre-allocated file holds), and each bit of its last records flipped:
 * recovery takes exactly the complete, valid records before the first bad one; a bad
 * record with a later write after it stops the opening. */
static void test_torn_every_byte(void **state) {
  (void)state;
  fresh_dir();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_journal_writer_t *w;
  mqr_error_t err;
  got_t g;
  static done_t d;
  d = (done_t){.n = 0};
  if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("%s", err.message);
  for (int batch = 0; batch < 6; batch++) { /* 30 records in 6 writes */
    append_n(w, &d, (uint64_t)batch * 5 + 1, 5);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  close_journal(&loop, w);
  char path[300];
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 1ull);
  FILE *f = fopen(path, "rb");
  static uint8_t orig[4096], copy[4096];
  assert_int_equal(fread(orig, 1, sizeof orig, f), sizeof orig);
  fclose(f);
  size_t ends[31]; /* ends[i]: where record i + 1 ends */
  size_t at = MQR_JOURNAL_HEADER;
  for (int i = 0; i < 30; i++) {
    char p[32];
    if (i % 5 == 0) at += B; /* each write of five begins with its BATCH record */
    at += mqr_journal_record_size((size_t)snprintf(p, sizeof p, "payload %d", i + 1));
    ends[i] = at;
  }
  int checked = 0;
  for (size_t cut = ends[24]; cut <= ends[29] + MQR_JOURNAL_END; cut++) {
    memcpy(copy, orig, sizeof copy);
    memset(copy + cut, 0, sizeof copy - cut);
    f = fopen(path, "wb");
    fwrite(copy, 1, sizeof copy, f);
    fclose(f);
    if (open_journal(&loop, 4096, &g, &w, &err) != 0) fail_msg("cut %zu: %s", cut, err.message);
    int want = 0;
    while (want < 30 && ends[want] <= cut) want++;
    if (g.n != want) fail_msg("cut at %zu: %d records recovered, %d complete", cut, g.n, want);
    assert_true(g.in_order);
    close_journal(&loop, w);
    /* The opening cut the tail and began a new file: the next round starts clean. */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cd %s && ls | grep -v '^0000000000000001.jrn$' | xargs -r rm -f", dir);
    assert_int_equal(system(cmd), 0);
    checked++;
  }
  /* Records 23..25 lie in the fifth write, which the sixth follows: damage. Records
   * 28..30 lie in the last write: a torn tail, whatever follows them in it. */
  static const int flip[] = {22, 23, 24, 27, 28, 29};
  for (size_t fi = 0; fi < sizeof flip / sizeof *flip; fi++) {
    int rec = flip[fi];
    size_t from = ends[rec] - mqr_journal_record_size(rec + 1 >= 10 ? 10 : 9);
    for (size_t byte = from; byte < ends[rec]; byte++)
      for (int bit = 0; bit < 8; bit++) {
        memcpy(copy, orig, sizeof copy);
        copy[byte] ^= (uint8_t)(1u << bit);
        f = fopen(path, "wb");
        fwrite(copy, 1, sizeof copy, f);
        fclose(f);
        int rc = open_journal(&loop, 4096, &g, &w, &err);
        if (rec >= 25) { /* in the last write: a torn tail */
          if (rc != 0) fail_msg("flip in record %d: %s", rec + 1, err.message);
          assert_int_equal(g.n, rec);
          close_journal(&loop, w);
        } else { /* a later write follows: damage */
          assert_int_equal(rc, MQR_EBADDATA);
          assert_int_equal(g.n, rec); /* exactly the records before it were seen */
        }
        char cmd[400];
        snprintf(cmd, sizeof cmd, "cd %s && ls | grep -v '^0000000000000001.jrn$' | xargs -r rm -f", dir);
        assert_int_equal(system(cmd), 0);
        checked++;
      }
  }
  assert_true(checked > 500);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_recover),   cmocka_unit_test(test_files_fill_and_rotate),
      cmocka_unit_test(test_torn_and_damaged),    cmocka_unit_test(test_write_failure),
      cmocka_unit_test(test_allocation_failures), cmocka_unit_test(test_no_space),
      cmocka_unit_test(test_release_and_reuse),   cmocka_unit_test(test_buffer_timeout),
      cmocka_unit_test(test_truncate_damaged),    cmocka_unit_test(test_failing_fdatasync),
      cmocka_unit_test(test_torn_every_byte),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
