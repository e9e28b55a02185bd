/* Durable messages through the broker's journal, in-process: what a restart keeps
 * (durable messages on durable queues, in order, with their delivery counts; queues made
 * at run time) and drops (the rest, and what was acknowledged); answers in call order
 * and only after the fdatasync; compaction and file reuse under load against a model of
 * what is live; a journal that cannot write (a file-size limit) refusing durable sends
 * while the rest goes on, and taking them again when it can; and every allocation of a
 * recovery, and of durable sends, failed in turn. Paging is test_broker_paging.c, power
 * losses test_power_loss.c. */
#include "durable_fx.h"

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
  if (mqr_broker_subscribe(f.b, MQR_STR("news2"), MQR_MULTICAST, MQR_STR("news2.keeper"), MQR_STR(""), 0, noop_msg,
                           NULL, &c, NULL, &err))
    fail_msg("%s", err.message);
  if (mqr_broker_subscribe(f.b, MQR_STR("news2"), MQR_MULTICAST, MQR_STR(""), MQR_STR(""), 0, noop_msg, NULL, &tmp, &qn,
                           &err))
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
  /* An address made by management: its record, in the first file, is copied forward. */
  assert_int_equal(mqr_broker_create_address(f.b, MQR_STR("kept"), mqr_routing_set_of(MQR_MULTICAST), NULL), 0);
  static answers_t a;
  a = (answers_t){0};
  /* A message waiting out a 60 s redelivery delay, in the first file: copied forward
   * with the time it is held to. */
  send_async(&f, &a, 0, "slow", true, "slow");
  wait_answers(&f, &a, 1);
  static sink_t once;
  once = (sink_t){.ack = false};
  mqr_broker_unsubscribe(drain(&f, "slow", 1, &once));
  assert_int_equal(once.n, 1);
  assert_int_equal(held_of(&f, "slow"), 1);
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
  assert_int_equal(st.durable, (uint64_t)held + 1); /* and the one on slow */
  fx_close(&f);
  assert_true(count_ext(".jrn") <= 6);
  assert_true(count_ext(".jrf") >= 1); /* released files wait for reuse */

  fx_open(&f);
  assert_int_equal(depth(&f, "q"), 0);
  assert_non_null(mqr_router_find_address(mqr_broker_router(f.b), MQR_STR("kept")));
  assert_int_equal(held_of(&f, "slow"), 1);
  assert_int_equal(depth(&f, "slow"), 0);
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
    mqr_broker_message_t m = {
        MQR_STR("q"), MQR_ROUTING_NONE, false, MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0,
        MQR_STR("t")};
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

/* A queue deleted (Artemis's destroyQueue) is refused while it has a consumer; then its
 * messages and itself go, and a restart does not make it again, whether the record that
 * made it is in the same journal file as its tombstone or an older one, before that file
 * is released and after; made again later, it comes back as made again. */
static void test_deleted_queue_stays_deleted(void **state) {
  (void)state;
  static sink_t s2;
  fresh_dir();
  extra_persistence = "  journal-compact-min-files: 3\n  journal-compact-percentage: 50\n";
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  send_async(&f, &a, 0, "auto.same", true, "x");   /* made by the send, deleted in its file */
  send_async(&f, &a, 1, "auto.older", true, "y");  /* made here, deleted files later */
  send_async(&f, &a, 2, "auto.again", true, "z1"); /* deleted, then made again */
  wait_answers(&f, &a, 3);
  mqr_broker_consumer_t *c;
  if (mqr_broker_subscribe(f.b, MQR_STR("auto.same"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 0, noop_msg, NULL, &c,
                           NULL, NULL))
    fail_msg("subscribe");
  mqr_error_t err;
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("auto.same"), &err), MQR_EQUEUEINUSE);
  mqr_broker_unsubscribe(c);
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("auto.same"), &err), 0);
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("auto.same"), &err), MQR_ENOQUEUE);
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("auto.again"), &err), 0);
  a = (answers_t){0};
  send_async(&f, &a, 0, "auto.again", true, "z2");
  /* Files go by (64 KiB each): auto.older's record is files behind when it is deleted. */
  static char big[2000];
  memset(big, 'b', sizeof big - 1);
  for (int i = 1; i <= 40; i++) send_async(&f, &a, i, "q", true, big); /* one file more, no compaction yet */
  wait_answers(&f, &a, 41);
  s2 = (sink_t){.ack = true};
  mqr_broker_unsubscribe(drain(&f, "q", 1000, &s2));
  assert_int_equal(mqr_broker_delete_queue(f.b, MQR_STR("auto.older"), &err), 0);
  send_async(&f, &a, 41, "q", true, "after");
  wait_answers(&f, &a, 42);
  /* Durable traffic through q until the old files are released: the tombstone, live while
   * the file that made auto.older lasts, then goes too. */
  mqr_broker_stats_t bs;
  mqr_broker_stats(f.b, &bs);
  uint64_t files_before = bs.journal_files;
  a = (answers_t){0};
  for (int i = 0; i < 400; i++) send_async(&f, &a, i, "q", true, big);
  wait_answers(&f, &a, 400);
  s2 = (sink_t){.ack = true};
  mqr_broker_unsubscribe(drain(&f, "q", 1000, &s2));
  a = (answers_t){0};
  for (int i = 0; i < 200; i++) send_async(&f, &a, i, "q", true, big); /* more files, the old ones released */
  wait_answers(&f, &a, 200);
  s2 = (sink_t){.ack = true};
  mqr_broker_unsubscribe(drain(&f, "q", 1000, &s2));
  send_async(&f, &a, 200, "q", true, "last");
  wait_answers(&f, &a, 201);
  mqr_broker_stats(f.b, &bs);
  /* Compaction copies the queues' records forward and the old files go; a tombstone
   * whose maker's file went goes with it, so nothing holds the journal long. */
  assert_true(bs.journal_files <= files_before + 4);
  fx_close(&f);

  fx_open(&f);
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("auto.same"), &st), MQR_ENOQUEUE);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("auto.older"), &st), MQR_ENOQUEUE);
  assert_int_equal(depth(&f, "auto.again"), 1); /* z2, not z1 */
  static sink_t s;
  s = (sink_t){.ack = true};
  mqr_broker_unsubscribe(drain(&f, "auto.again", 10, &s));
  assert_int_equal(s.n, 1);
  assert_string_equal(s.bodies[0], "z2");
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("auto.same"), &st), MQR_ENOQUEUE);
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("auto.older"), &st), MQR_ENOQUEUE);
  /* auto.again, made by a send, went when its consumer had taken what it held
   * (auto-delete-queues) */
  assert_int_equal(mqr_broker_queue_stats(f.b, MQR_STR("auto.again"), &st), MQR_ENOQUEUE);
  fx_close(&f);
  extra_persistence = "";
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_restart_keeps_durable),
      cmocka_unit_test(test_acks_and_delivery_counts),
      cmocka_unit_test(test_topology_survives),
      cmocka_unit_test(test_compaction_under_load),
      cmocka_unit_test(test_cannot_write),
      cmocka_unit_test(test_recovery_allocation_failures),
      cmocka_unit_test(test_send_allocation_failures),
      cmocka_unit_test(test_deleted_queue_stays_deleted),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 || getenv("MQR_KEEP") == NULL) fresh_dir();
  return rc;
}
