/* Durable messages through the broker's journal, in-process: what a restart keeps
 * (durable messages on durable queues, in order, with their delivery counts; queues made
 * at run time) and drops (the rest, and what was acknowledged); answers in call order
 * and only after the fdatasync; compaction and file reuse under load against a model of
 * what is live; a journal that cannot write (a file-size limit) refusing durable sends
 * while the rest goes on, and taking them again when it can; and every allocation of a
 * recovery failed in turn. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mqr/broker.h"
#include "testutil.h"

static char dir[256];

static void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/mqr-durable-test-%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static const char *extra_persistence = "";

static void fx_config(fx_t *f) {
  char yaml[2048];
  int n = snprintf(yaml, sizeof yaml,
                   "persistence:\n"
                   "  directory: %s\n"
                   "  journal-file-size: 65536\n"
                   "%s"
                   "address-settings:\n"
                   "  '#': {auto-create-addresses: true, auto-create-queues: true}\n"
                   "  'big': {max-size-bytes: 10KiB, address-full-policy: PAGE}\n"
                   "  'pm': {max-size-bytes: 10KiB, address-full-policy: PAGE}\n"
                   "addresses:\n"
                   "  q: {anycast: [q]}\n"
                   "  hold: {anycast: [hold]}\n"
                   "  big: {anycast: [big]}\n"
                   "  pm: {multicast: [pm.a, pm.b]}\n"
                   "  t: {multicast: [t.a, t.b]}\n"
                   "  v:\n"
                   "    anycast:\n"
                   "      v: {durable: false}\n",
                   dir, extra_persistence);
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  if (mqr_config_load_string("t.yaml", yaml, (size_t)n, &f->cfg, &d) != 0) fail_msg("%s", items[0].message);
}

/* The broker on f's config (made first). */
static int fx_create(fx_t *f, mqr_error_t *err) {
  uv_loop_init(&f->loop);
  mqr_broker_options_t opt = {.config = f->cfg};
  int rc = mqr_broker_create(&f->loop, &opt, &f->b, err);
  if (rc) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
  }
  return rc;
}

static void fx_open(fx_t *f) {
  mqr_error_t err;
  fx_config(f);
  if (fx_create(f, &err) != 0) fail_msg("%s", err.message);
}

static void fx_stop(fx_t *f) {
  mqr_broker_close(f->b, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void fx_close(fx_t *f) {
  fx_stop(f);
  mqr_config_destroy(f->cfg);
}

/* ---- answers ------------------------------------------------------------------------------ */

typedef struct {
  int n, ok, failed, order_errors;
  int next; /* the index the next answer should have */
} answers_t;

typedef struct {
  answers_t *a;
  int index;
} ticket_t;

static ticket_t tickets[8192];

static void on_sent(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  ticket_t *t = arg;
  answers_t *a = t->a;
  if (t->index != a->next) a->order_errors++;
  a->next = t->index + 1;
  a->n++;
  if (status == 0) {
    a->ok++;
    assert_true(r->message_id > 0);
  } else {
    a->failed++;
    assert_non_null(err);
  }
}

static void send_async(fx_t *f, answers_t *a, int index, const char *address, bool durable, const char *body) {
  /* auto.*: made by the send, ANYCAST (an address made for a MULTICAST send has no queue) */
  int rt = strncmp(address, "auto.", 5) == 0 ? MQR_ANYCAST : MQR_ROUTING_NONE;
  mqr_broker_message_t m = {mqr_str(address), rt, durable, MQR_STR(""), NULL, NULL, 0, mqr_str(body)};
  tickets[index % 8192] = (ticket_t){a, index};
  mqr_broker_send_async(f->b, &m, on_sent, &tickets[index % 8192]);
}

static void wait_answers(fx_t *f, answers_t *a, int n) {
  while (a->n < n) uv_run(&f->loop, UV_RUN_ONCE);
}

/* ---- draining ------------------------------------------------------------------------------ */

typedef struct {
  char bodies[4096][16];
  int32_t counts[4096];
  int n;
  bool ack;
} sink_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  sink_t *s = arg;
  if (s->n < 4096) {
    snprintf(s->bodies[s->n], sizeof s->bodies[0], "%.*s", (int)m->body.len, m->body.ptr);
    s->counts[s->n] = m->delivery_count;
  }
  s->n++;
  if (s->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

/* Takes up to credit messages of queue into s. */
static mqr_broker_consumer_t *drain(fx_t *f, const char *queue, uint32_t credit, sink_t *s) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  if (mqr_broker_subscribe(f->b, mqr_str(queue), MQR_ROUTING_NONE, MQR_STR(""), credit, on_msg, s, &c, NULL, &err))
    fail_msg("%s", err.message);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  return c;
}

static uint64_t depth(fx_t *f, const char *queue) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(queue), &st), 0);
  return st.depth + st.in_flight;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* Durable messages on durable queues survive a restart, in order; non-durable messages,
 * and durable ones on a non-durable queue, do not. Answers come in call order, the
 * non-durable ones after the durable ones before them. */
static void test_restart_keeps_durable(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  char body[16];
  int k = 0;
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d", i);
    send_async(&f, &a, k++, "q", true, body);
    if (i % 10 == 0) send_async(&f, &a, k++, "q", false, "transient");
    if (i % 10 == 5) send_async(&f, &a, k++, "v", true, "on-v");
  }
  /* Nothing durable is on the queue before its fdatasync: only the transient ones. */
  assert_true(depth(&f, "q") <= 10);
  wait_answers(&f, &a, k);
  assert_int_equal(a.ok, k);
  assert_int_equal(a.order_errors, 0);
  assert_int_equal(depth(&f, "q"), 110);
  mqr_broker_stats_t st;
  mqr_broker_stats(f.b, &st);
  assert_true(st.persistence);
  assert_int_equal(st.durable, 100);
  fx_close(&f);

  fx_open(&f);
  assert_int_equal(depth(&f, "q"), 100);
  assert_int_equal(depth(&f, "v"), 0);
  static sink_t s;
  s = (sink_t){.n = 0};
  drain(&f, "q", 1000, &s);
  assert_int_equal(s.n, 100);
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d", i);
    assert_string_equal(s.bodies[i], body);
    assert_int_equal(s.counts[i], 1);
  }
  fx_close(&f);
}

/* What was acknowledged is not delivered again; what was delivered and not
 * acknowledged comes back with its delivery count; multicast copies are kept per queue. */
static void test_acks_and_delivery_counts(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  char body[16];
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d", i);
    send_async(&f, &a, i, "q", true, body);
  }
  for (int i = 0; i < 10; i++) {
    snprintf(body, sizeof body, "t%d", i);
    send_async(&f, &a, 100 + i, "t", true, body);
  }
  wait_answers(&f, &a, 110);
  static sink_t s;
  s = (sink_t){.n = 0, .ack = true};
  drain(&f, "q", 30, &s); /* 30 acknowledged */
  assert_int_equal(s.n, 30);
  s = (sink_t){.n = 0, .ack = false};
  drain(&f, "q", 20, &s); /* 20 delivered, never acknowledged */
  assert_int_equal(s.n, 20);
  s = (sink_t){.n = 0, .ack = true};
  drain(&f, "t.a", 100, &s); /* t.a takes all its copies; t.b none */
  assert_int_equal(s.n, 10);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  fx_close(&f);

  fx_open(&f);
  assert_int_equal(depth(&f, "q"), 70);
  assert_int_equal(depth(&f, "t.a"), 0);
  assert_int_equal(depth(&f, "t.b"), 10);
  s = (sink_t){.n = 0, .ack = true};
  drain(&f, "q", 1000, &s);
  assert_int_equal(s.n, 70);
  for (int i = 0; i < 70; i++) {
    snprintf(body, sizeof body, "m%d", 30 + i);
    assert_string_equal(s.bodies[i], body);
    assert_int_equal(s.counts[i], i < 20 ? 2 : 1); /* the 20 delivered before come again */
  }
  uv_run(&f.loop, UV_RUN_NOWAIT);
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(depth(&f, "q"), 0);
  assert_int_equal(depth(&f, "t.b"), 10);
  fx_close(&f);
}

static void noop_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) { (void)c, (void)m, (void)arg; }

/* Queues made at run time survive: one auto-created by a send, a named durable
 * subscription; a temporary subscription queue does not. */
static void test_topology_survives(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  mqr_broker_consumer_t *c, *tmp;
  mqr_error_t err;
  mqr_str_t qn;
  if (mqr_broker_subscribe(f.b, MQR_STR("news2"), MQR_MULTICAST, MQR_STR("news2.keeper"), 0, noop_msg, NULL, &c, NULL,
                           &err))
    fail_msg("%s", err.message);
  if (mqr_broker_subscribe(f.b, MQR_STR("news2"), MQR_MULTICAST, MQR_STR(""), 0, noop_msg, NULL, &tmp, &qn, &err))
    fail_msg("%s", err.message);
  char tmpname[128];
  snprintf(tmpname, sizeof tmpname, "%.*s", (int)qn.len, qn.ptr);
  static answers_t a;
  a = (answers_t){0};
  send_async(&f, &a, 0, "auto.made", true, "first");
  send_async(&f, &a, 1, "news2", true, "story");
  wait_answers(&f, &a, 2);
  assert_int_equal(a.ok, 2);
  fx_close(&f);

  fx_open(&f);
  assert_int_equal(depth(&f, "auto.made"), 1);
  assert_int_equal(depth(&f, "news2.keeper"), 1);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, mqr_str(tmpname), &st), MQR_ENOQUEUE);
  /* The queue made again takes new sends. */
  a = (answers_t){0};
  send_async(&f, &a, 0, "news2", true, "story 2");
  wait_answers(&f, &a, 1);
  assert_int_equal(depth(&f, "news2.keeper"), 2);
  fx_close(&f);
}

static int count_ext(const char *ext) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name), k = strlen(ext);
    n += l > k && strcmp(e->d_name + l - k, ext) == 0;
  }
  if (d) closedir(d);
  return n;
}

/* Under load, with a few messages held for long: files are released and reused, the
 * held messages are copied forward, and the journal stays a few files long; a restart
 * brings back exactly what the model says is live, in order. */
static void test_compaction_under_load(void **state) {
  (void)state;
  fresh_dir();
  extra_persistence = "  journal-compact-min-files: 3\n  journal-compact-percentage: 50\n";
  fx_t f;
  fx_open(&f);
  static sink_t s;
  s = (sink_t){.n = 0, .ack = true};
  mqr_broker_consumer_t *c = drain(&f, "q", 0, &s);
  static answers_t a;
  a = (answers_t){0};
  char body[16];
  int sent = 0, held = 0;
  static char model[64][16]; /* what "hold" must have */
  for (int round = 0; round < 60; round++) {
    for (int i = 0; i < 100; i++) {
      snprintf(body, sizeof body, "q%d", sent);
      send_async(&f, &a, sent++, "q", true, body);
    }
    if (round % 2 == 0) {
      snprintf(model[held], sizeof model[0], "h%d", held);
      send_async(&f, &a, sent++, "hold", true, model[held]);
      held++;
    }
    wait_answers(&f, &a, sent);
    mqr_broker_credit(c, 100); /* the consumer takes and acknowledges this round's */
    uv_run(&f.loop, UV_RUN_NOWAIT);
  }
  assert_int_equal(a.ok, sent);
  while (s.n < sent - held) uv_run(&f.loop, UV_RUN_ONCE);
  for (int i = 0; i < 50; i++) uv_run(&f.loop, UV_RUN_NOWAIT); /* compaction's passes */
  mqr_broker_stats_t st;
  mqr_broker_stats(f.b, &st);
  assert_true(st.compactions > 0);
  assert_true(st.journal_files <= 6);
  assert_int_equal(st.durable, (uint64_t)held);
  fx_close(&f);
  assert_true(count_ext(".jrn") <= 6);
  assert_true(count_ext(".jrf") >= 1); /* released files wait for reuse */

  fx_open(&f);
  assert_int_equal(depth(&f, "q"), 0);
  s = (sink_t){.n = 0, .ack = false};
  drain(&f, "hold", 1000, &s);
  assert_int_equal(s.n, held);
  for (int i = 0; i < held; i++) assert_string_equal(s.bodies[i], model[i]);
  fx_close(&f);
  extra_persistence = "";
}

/* A journal that cannot grow (the file-size limit under its next file, as a full disk):
 * durable sends are answered with MQR_EIO, never OK; non-durable traffic goes on; once
 * the limit is lifted, durable sends are taken again. Every message answered OK is
 * there after a restart. */
static void test_cannot_write(void **state) {
  (void)state;
  fresh_dir();
  extra_persistence = "  journal-min-files: 1\n";
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    getrlimit(RLIMIT_FSIZE, &lim);
    struct rlimit small = {16384, lim.rlim_max};
    fx_t f;
    fx_open(&f);
    static answers_t a;
    a = (answers_t){0};
    send_async(&f, &a, 0, "q", true, "first"); /* the journal's first file is made */
    wait_answers(&f, &a, 1);
    if (setrlimit(RLIMIT_FSIZE, &small) != 0) _exit(10);
    char body[600];
    memset(body, 'x', sizeof body - 1);
    body[sizeof body - 1] = 0;
    int k = 1;
    for (; k < 400 && a.failed == 0; k++) { /* 600 bytes each: past 16 KiB of the file soon */
      send_async(&f, &a, k, "q", true, body);
      wait_answers(&f, &a, k + 1);
    }
    if (a.failed == 0) _exit(11);
    int ok_before = a.ok;
    mqr_broker_stats_t st;
    mqr_broker_stats(f.b, &st);
    if (!st.journal_failed) _exit(12);
    /* Non-durable traffic goes on. */
    mqr_broker_message_t m = {MQR_STR("q"), MQR_ROUTING_NONE, false, MQR_STR(""), NULL, NULL, 0, MQR_STR("t")};
    if (mqr_broker_send(f.b, &m, NULL, NULL) != 0) _exit(13);
    /* Durable sends are refused at once while it fails. */
    send_async(&f, &a, k, "q", true, "refused");
    wait_answers(&f, &a, ++k);
    if (a.failed < 2) _exit(14);
    /* Room again: within the retry period, durable sends are taken again. */
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(15);
    uint64_t t0 = uv_hrtime();
    do {
      uv_run(&f.loop, UV_RUN_ONCE);
      mqr_broker_stats(f.b, &st);
    } while (st.journal_failed && uv_hrtime() - t0 < 5000000000ull);
    if (st.journal_failed) _exit(16);
    send_async(&f, &a, k, "q", true, "after");
    wait_answers(&f, &a, ++k);
    if (a.ok != ok_before + 1) _exit(17);
    fx_close(&f);
    _exit(ok_before < 10 ? 18 : 0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("the child ended with status %#x", status);
  fx_t f;
  fx_open(&f);
  /* Every OK answer is here (a send answered with an error may be too: at least once). */
  assert_true(depth(&f, "q") >= 11);
  fx_close(&f);
  extra_persistence = "";
}

/* Every allocation of a recovery failed in turn: the broker either starts with every
 * message or fails with MQR_ENOMEM, and leaks nothing. */
static void test_recovery_allocation_failures(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  for (int i = 0; i < 20; i++) send_async(&f, &a, i, i % 2 ? "q" : "t", true, "body");
  send_async(&f, &a, 20, "auto.q", true, "auto");
  wait_answers(&f, &a, 21);
  fx_close(&f);
  long tried = 0;
  for (long n = 1;; n++) {
    talloc_install();
    fx_config(&f);
    long before = talloc.live;
    talloc.fail_at = talloc.calls + n;
    mqr_error_t err;
    int rc = fx_create(&f, &err);
    bool hit = talloc.failed > 0;
    if (rc == 0) {
      talloc.fail_at = 0;
      assert_int_equal(depth(&f, "q"), 10);
      assert_int_equal(depth(&f, "t.a"), 10);
      assert_int_equal(depth(&f, "auto.q"), 1);
      fx_stop(&f);
    } else if (rc != MQR_ENOMEM) {
      fail_msg("N=%ld: %s", n, err.message);
    }
    if (talloc.live != before) fail_msg("N=%ld: %ld blocks leaked", n, talloc.live - before);
    mqr_config_destroy(f.cfg);
    talloc_uninstall();
    if (!hit) break;
    tried++;
  }
  assert_true(tried >= 10);
}

typedef struct {
  int n, order_errors;
  int next; /* the index the next body should have */
  uint64_t max_bytes;
  mqr_broker_t *b;
  bool ack;
  int limit; /* credit is given back until this many came (0: always) */
} pager_sink_t;

static void on_paged(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  pager_sink_t *s = arg;
  char body[32];
  snprintf(body, sizeof body, "%.*s", (int)m->body.len, m->body.ptr);
  if (atoi(body + 1) != s->next) s->order_errors++;
  s->next = atoi(body + 1) + 1;
  s->n++;
  mqr_broker_stats_t st;
  mqr_broker_stats(s->b, &st);
  if (st.bytes > s->max_bytes) s->max_bytes = st.bytes;
  if (s->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
  if (s->limit == 0 || s->n < s->limit) mqr_broker_credit(c, 1);
}

static mqr_broker_consumer_t *page_drain(fx_t *f, const char *queue, pager_sink_t *s, int want) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  s->b = f->b;
  if (mqr_broker_subscribe(f->b, mqr_str(queue), MQR_ROUTING_NONE, MQR_STR(""), 1, on_paged, s, &c, NULL, &err))
    fail_msg("%s", err.message);
  uint64_t t0 = uv_hrtime();
  while (s->n < want && uv_hrtime() - t0 < 20000000000ull) uv_run(&f->loop, UV_RUN_ONCE);
  return c;
}

/* PAGE: past max-size-bytes the address's messages go to page files, in order, and the
 * broker's memory stays bounded however many wait; they survive a restart (durable ones:
 * non-durable ones paged are dropped, as in memory); a consumer gets them in order, each
 * once; multicast queues each get theirs; the address stops paging when drained. */
static void test_paging(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  char body[160];
  enum { N = 20000 };
  for (int i = 0; i < N; i++) {
    snprintf(body, sizeof body, "m%d %0100d", i, 0);
    send_async(&f, &a, i, "big", true, body);
    if (i % 1000 == 999) wait_answers(&f, &a, i + 1);
  }
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d", i);
    send_async(&f, &a, N + i, "pm", true, body);
  }
  send_async(&f, &a, N + 100, "big", false, "transient"); /* paged, and not kept */
  wait_answers(&f, &a, N + 101);
  assert_int_equal(a.ok, N + 101);
  assert_int_equal(a.order_errors, 0);
  mqr_broker_stats_t st;
  mqr_broker_stats(f.b, &st);
  assert_true(st.bytes < 64 * 1024); /* 2 MB sent, a few KiB held */
  assert_int_equal(depth(&f, "big"), N + 1);
  static pager_sink_t ps;
  ps = (pager_sink_t){.ack = true, .limit = 5000};
  page_drain(&f, "big", &ps, 5000); /* some, acknowledged */
  assert_int_equal(ps.n, 5000);
  int taken = ps.n;
  assert_int_equal(ps.order_errors, 0);
  assert_true(ps.max_bytes < 512 * 1024);
  fx_close(&f);

  /* After a restart: the rest, in order, from where the acknowledged ones ended. */
  fx_open(&f);
  mqr_broker_stats(f.b, &st);
  assert_true(st.bytes < 512 * 1024);
  assert_int_equal(depth(&f, "big"), N - taken);
  ps = (pager_sink_t){.ack = true, .next = taken};
  mqr_broker_consumer_t *k = page_drain(&f, "big", &ps, N - taken);
  for (int i = 0; i < 20; i++) uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(ps.n, N - taken); /* not the transient one */
  assert_int_equal(ps.order_errors, 0);
  assert_int_equal(depth(&f, "big"), 0);
  mqr_broker_unsubscribe(k);
  static pager_sink_t pa, pb;
  pa = (pager_sink_t){.ack = true};
  pb = (pager_sink_t){.ack = true};
  page_drain(&f, "pm.a", &pa, 100);
  page_drain(&f, "pm.b", &pb, 100);
  assert_int_equal(pa.n, 100);
  assert_int_equal(pb.n, 100);
  assert_int_equal(pa.order_errors + pb.order_errors, 0);
  /* Drained: new sends go straight to the queue again. */
  a = (answers_t){0};
  send_async(&f, &a, 0, "big", true, "m0");
  wait_answers(&f, &a, 1);
  mqr_broker_stats(f.b, &st);
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(depth(&f, "big"), 1);
  assert_int_equal(depth(&f, "pm.a"), 0);
  fx_close(&f);
  /* The page files read back were released: a file or two per address is left. */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s/paging/*/*.jrn | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int files = -1;
  assert_int_equal(fscanf(p, "%d", &files), 1);
  pclose(p);
  if (files > 6) fail_msg("%d page files left", files);
}

/* Every allocation of durable sends failed in turn (the sends, their records, their
 * answers, the deliveries that follow): each send is answered once, OK or an error;
 * nothing leaks; after a restart every message answered OK is there. */
static void test_send_allocation_failures(void **state) {
  (void)state;
  long tried = 0;
  for (long n = 1;; n++) {
    fresh_dir();
    fx_t f;
    talloc_install();
    fx_config(&f);
    mqr_error_t err;
    if (fx_create(&f, &err) != 0) fail_msg("%s", err.message);
    static answers_t a;
    a = (answers_t){0};
    talloc.fail_at = talloc.calls + n;
    for (int i = 0; i < 20; i++) send_async(&f, &a, i, i % 2 ? "q" : "t", true, "body");
    wait_answers(&f, &a, 20);
    bool hit = talloc.failed > 0;
    talloc.fail_at = 0;
    assert_int_equal(a.n, 20);
    assert_int_equal(a.order_errors, 0);
    fx_stop(&f);
    mqr_config_destroy(f.cfg);
    if (talloc.live != 0) fail_msg("N=%ld: %ld blocks leaked", n, talloc.live);
    talloc_uninstall();
    fx_open(&f);
    /* Each answered OK is on its queues (t's copies on t.a and t.b). */
    assert_true(depth(&f, "q") + depth(&f, "t.a") >= (uint64_t)a.ok);
    assert_true(depth(&f, "q") + depth(&f, "t.a") <= 20);
    fx_close(&f);
    if (!hit) break;
    tried++;
  }
  assert_true(tried >= 5);
}

/* ---- power loss ------------------------------------------------------------------------- */

/* An I/O layer that remembers what each write replaced until an fdatasync covers it;
 * pl_crash() puts those bytes back (the power went: what was not synced is gone), and
 * every write and sync after it fails, as on a machine that is off: the writer does
 * nothing more (no file released after the moment of the crash). */
typedef struct {
  int fd;
  off_t off;
  size_t len;
  uint8_t *old;
} undo_t;

static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;
static undo_t pl_undo[4096];
static int pl_n;
static bool pl_crashed;

static ssize_t pl_pwrite(int fd, const void *buf, size_t n, off_t off) {
  pthread_mutex_lock(&pl_mu);
  if (pl_crashed) {
    pthread_mutex_unlock(&pl_mu);
    errno = EIO;
    return -1;
  }
  if (pl_n == 4096) abort();
  uint8_t *old = malloc(n);
  ssize_t k = pread(fd, old, n, off);
  if (k < (ssize_t)n) memset(old + (k < 0 ? 0 : k), 0, n - (size_t)(k < 0 ? 0 : k));
  pl_undo[pl_n++] = (undo_t){fd, off, n, old};
  ssize_t w = pwrite(fd, buf, n, off);
  pthread_mutex_unlock(&pl_mu);
  return w;
}

static int pl_fdatasync(int fd) {
  pthread_mutex_lock(&pl_mu);
  int rc = -1;
  errno = EIO;
  if (!pl_crashed) {
    rc = fdatasync(fd);
    int k = 0;
    for (int i = 0; i < pl_n; i++) {
      if (pl_undo[i].fd == fd)
        free(pl_undo[i].old);
      else
        pl_undo[k++] = pl_undo[i];
    }
    pl_n = k;
  }
  pthread_mutex_unlock(&pl_mu);
  return rc;
}

/* Whether the disk kept a 512-byte sector of an unsynced write (partial losses). */
static bool pl_kept(int fd, off_t sector, unsigned seed) {
  uint64_t h = ((uint64_t)(unsigned)fd * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)sector * 0xC2B2AE3D27D4EB4Full) ^ seed;
  h ^= h >> 29;
  return (h * 0xBF58476D1CE4E5B9ull) >> 63;
}

/* partial: the disk kept some sectors of the unsynced writes and lost others, in no
 * order (what a real disk may do); else every unsynced byte is lost. */
static void pl_crash(bool partial, unsigned seed) {
  pthread_mutex_lock(&pl_mu);
  pl_crashed = true;
  for (int i = pl_n - 1; i >= 0; i--) {
    const undo_t *u = &pl_undo[i];
    for (off_t at = u->off; at < u->off + (off_t)u->len;) {
      off_t end = (at / 512 + 1) * 512;
      if (end > u->off + (off_t)u->len) end = u->off + (off_t)u->len;
      if (!partial || !pl_kept(u->fd, at / 512, seed))
        if (pwrite(u->fd, u->old + (at - u->off), (size_t)(end - at), at) != end - at) abort();
      at = end;
    }
    free(u->old);
  }
  pl_n = 0;
  pthread_mutex_unlock(&pl_mu);
}

static const mqr_journal_io_t pl_io = {pl_pwrite, pl_fdatasync};

enum { PL_MAX = 200000 };
static struct {
  bool ok[PL_MAX];         /* answered OK before the power went */
  int64_t ack_at[PL_MAX];  /* the ack's place in the order of acks, or -1 */
  int64_t acks, committed; /* acks made; those known synced */
  int64_t acks_at_send[PL_MAX];
  int sent, answered;
  bool crashed;
} pl;

/* The index in a body "m<i>" (bodies are views, not strings). */
static int body_index(mqr_str_t b) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)(b.len < 31 ? b.len : 31), b.ptr);
  return atoi(buf + 1);
}

static void pl_answer(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r, (void)err;
  int i = (int)(intptr_t)arg;
  pl.answered++;
  if (pl.crashed || status != 0) return;
  pl.ok[i] = true;
  if (pl.acks_at_send[i] > pl.committed) pl.committed = pl.acks_at_send[i]; /* the journal is one ordered log */
}

static void pl_message(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)arg;
  int i = body_index(m->body);
  if (!pl.crashed && i % 3 != 0) { /* two in three are acknowledged */
    pl.ack_at[i] = pl.acks++;
    mqr_broker_ack(c, m->delivery, false);
  }
  mqr_broker_credit(c, 1);
}

static struct {
  bool present[PL_MAX];
  int last, order_errors, n;
} chk;

static void pl_check_message(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)c, (void)arg;
  int i = body_index(m->body);
  if (i >= 0 && i < PL_MAX) chk.present[i] = true;
  if (i <= chk.last && chk.order_errors++ == 0)
    print_message("m%d (message %lld, delivery count %d) after m%d\n", i, (long long)m->message_id, m->delivery_count,
                  chk.last);
  chk.last = i;
  chk.n++;
}

/* Power losses at random moments of a durable load, in-process: the journal's unsynced
 * writes are undone, as the disk would lose them (every other round, only some of their
 * sectors, as a disk may keep a write with holes: the broker must still start, cutting the
 * torn write). After each, every message answered OK is there unless its ack was known
 * synced, no message whose ack was known synced is, and the queue is in send order. */
static void test_power_loss(void **state) {
  (void)state;
  fresh_dir();
  memset(&pl, 0, sizeof pl);
  for (int i = 0; i < PL_MAX; i++) pl.ack_at[i] = -1;
  unsigned seed = getenv("MQR_SEED") ? (unsigned)atoi(getenv("MQR_SEED")) : (unsigned)time(NULL);
  print_message("seed %u\n", seed);
  char body[32];
  long must = 0, checked_acks = 0;
  for (int round = 0; round < 24; round++) {
    fx_t f;
    fx_config(&f);
    uv_loop_init(&f.loop);
    mqr_broker_options_t opt = {.config = f.cfg, .journal_io = &pl_io};
    mqr_error_t err;
    pl_crashed = false;
    pl.crashed = false;
    if (mqr_broker_create(&f.loop, &opt, &f.b, &err) != 0) fail_msg("round %d: %s", round, err.message);
    mqr_broker_consumer_t *c;
    if (mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), 64, pl_message, NULL, &c, NULL, &err))
      fail_msg("%s", err.message);
    int until = pl.sent + 2000 + (int)(rand_r(&seed) % 6000);
    while (pl.sent < until && pl.sent < PL_MAX) {
      while (pl.sent < until && pl.sent - pl.answered < 512) {
        int i = pl.sent++;
        snprintf(body, sizeof body, "m%d", i);
        pl.acks_at_send[i] = pl.acks;
        mqr_broker_message_t m = {MQR_STR("q"), MQR_ROUTING_NONE, true, MQR_STR(""), NULL, NULL, 0, mqr_str(body)};
        mqr_broker_send_async(f.b, &m, pl_answer, (void *)(intptr_t)i);
      }
      uv_run(&f.loop, UV_RUN_ONCE);
    }
    pl_crash(round % 2 == 1, seed + (unsigned)round); /* the power goes: nothing more reaches the disk */
    pl.crashed = true;
    fx_stop(&f);
    mqr_config_destroy(f.cfg);
    /* Back, on the files as the disk kept them. */
    fx_config(&f);
    if (fx_create(&f, &err) != 0) fail_msg("round %d: %s", round, err.message);
    memset(&chk, 0, sizeof chk);
    chk.last = -1;
    mqr_broker_consumer_t *k;
    if (mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), 1000000, pl_check_message, NULL, &k,
                             NULL, &err))
      fail_msg("%s", err.message);
    uv_run(&f.loop, UV_RUN_NOWAIT);
    if (chk.order_errors) fail_msg("round %d: %d out of order", round, chk.order_errors);
    for (int i = 0; i < pl.sent; i++) {
      bool acked = pl.ack_at[i] >= 0 && pl.ack_at[i] < pl.committed;
      if (acked && chk.present[i]) fail_msg("round %d: m%d is back though its ack was synced", round, i);
      /* Never acknowledged and answered OK: it must be there. (An ack not known synced may
       * have been: then the message may be gone.) */
      bool kept = pl.ok[i] && pl.ack_at[i] < 0;
      if (kept && !chk.present[i]) fail_msg("round %d: m%d was answered OK and is lost", round, i);
      must += kept;
      checked_acks += acked;
    }
    mqr_broker_unsubscribe(k); /* they stay for the next round */
    fx_stop(&f);
    mqr_config_destroy(f.cfg);
  }
  assert_true(must > 1000);
  assert_true(checked_acks > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_restart_keeps_durable),
      cmocka_unit_test(test_acks_and_delivery_counts),
      cmocka_unit_test(test_topology_survives),
      cmocka_unit_test(test_compaction_under_load),
      cmocka_unit_test(test_cannot_write),
      cmocka_unit_test(test_recovery_allocation_failures),
      cmocka_unit_test(test_paging),
      cmocka_unit_test(test_send_allocation_failures),
      cmocka_unit_test(test_power_loss),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 || getenv("MQR_KEEP") == NULL) fresh_dir();
  return rc;
}
