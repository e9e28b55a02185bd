/* The journal writer: records appended from the loop come back, in order, when the
 * directory is opened again; each callback runs once its record is durable, in append
 * order; records appended in one loop pass share one write (group commit); files fill and
 * the next is made; a record too large for a file is refused; a torn tail in the last
 * file is cut and damage in the middle stops the opening; a write that fails fails its
 * records and every later append. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mqr/journal_writer.h"
#include "testutil.h"

static char dir[256];

static void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/mqr-journal-test-%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

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

static int on_recover(void *ctx, const char *file, const mqr_journal_record_t *r) {
  (void)file;
  got_t *g = ctx;
  if (g->n < 4096) g->ids[g->n] = r->id;
  g->n++;
  if (r->id != (uint64_t)g->n) g->in_order = 0;
  char want[32];
  int len = snprintf(want, sizeof want, "payload %llu", (unsigned long long)r->id);
  if (r->len != (size_t)len || memcmp(r->payload, want, r->len) != 0) g->payload_ok = 0;
  return 0;
}

static int open_journal(uv_loop_t *loop, size_t file_size, got_t *g, mqr_journal_writer_t **w, mqr_error_t *err) {
  mqr_journal_options_t opt = {dir, file_size, false};
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

/* The newest file cut inside its last record (a crash mid-write): recovery stops there.
 * A record in the middle of a file damaged: the opening stops, naming file and offset. */
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
  append_n(w, &d, 1, 20);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_journal(&loop, w);
  char path[300];
  snprintf(path, sizeof path, "%s/%016llx.jrn", dir, 1ull);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  /* Record 20 starts at 24 + 19 * record size; overwrite its last bytes. */
  size_t rec = mqr_journal_record_size(strlen("payload 10")); /* ids 10..20 have two digits */
  size_t r20 = MQR_JOURNAL_HEADER + 9 * mqr_journal_record_size(strlen("payload 1")) + 10 * rec;
  fseek(f, (long)(r20 + rec - 2), SEEK_SET);
  fputc('X', f);
  fclose(f);
  if (open_journal(&loop, 0, &g, &w, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(g.n, 19); /* a torn tail: record 20 is cut off */
  close_journal(&loop, w);
  /* Record 5 damaged, with 6..19 valid after it: damage in the middle. */
  f = fopen(path, "r+b");
  fseek(f, (long)(MQR_JOURNAL_HEADER + 4 * mqr_journal_record_size(strlen("payload 1")) + 30), SEEK_SET);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_recover),   cmocka_unit_test(test_files_fill_and_rotate),
      cmocka_unit_test(test_torn_and_damaged),    cmocka_unit_test(test_write_failure),
      cmocka_unit_test(test_allocation_failures), cmocka_unit_test(test_no_space),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
