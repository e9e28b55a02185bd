/* cluster/group.c on libraft's fixture: three nodes in simulated time, with
 * disconnections and kills, deterministic. The state machine of each node is a log of
 * the records it applied; snapshots carry that log whole. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <raft.h>
#include <raft/fixture.h>
#include <raft/uv.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "group.h"

#define N 3
#define MAX_RECS 4096

typedef struct {
  uint64_t ids[MAX_RECS];
  uint32_t n;
  unsigned resets;
  unsigned became_leader, stopped_leading, disk_failed;
} sm_t;

typedef struct {
  struct raft_fixture f;
  mqr__rgroup_t *g[N];
  sm_t sm[N];
} fx_t;

static int sm_apply(void *arg, const mqr_journal_record_t *r) {
  sm_t *s = arg;
  if (s->n == MAX_RECS) return MQR_ELIMIT;
  /* the payload says the id again: the record came whole */
  uint64_t v;
  if (r->type != MQR_JOURNAL_ADD || r->len != sizeof v) return MQR_EBADDATA;
  memcpy(&v, r->payload, sizeof v);
  if (v != r->id) return MQR_EBADDATA;
  s->ids[s->n++] = r->id;
  return 0;
}

static int sm_snapshot(void *arg, mqr__rgroup_snap_t *snap) {
  sm_t *s = arg;
  for (uint32_t i = 0; i < s->n; i++) {
    int rc = mqr__rgroup_snapshot_record(snap, MQR_JOURNAL_ADD, s->ids[i], &s->ids[i], sizeof s->ids[i]);
    if (rc) return rc;
  }
  return 0;
}

static void sm_reset(void *arg) {
  sm_t *s = arg;
  s->n = 0;
  s->resets++;
}

static void sm_leadership(void *arg, bool leader) {
  sm_t *s = arg;
  if (leader)
    s->became_leader++;
  else
    s->stopped_leading++;
}

static void sm_disk_failed(void *arg, const char *why, bool leading) {
  sm_t *s = arg;
  (void)why, (void)leading;
  s->disk_failed++;
}

static fx_t *fx_make(unsigned threshold, unsigned trailing, size_t max_batch) {
  fx_t *x = calloc(1, sizeof *x);
  assert_int_equal(raft_fixture_initialize(&x->f), 0);
  for (unsigned i = 0; i < N; i++) {
    char addr[16];
    snprintf(addr, sizeof addr, "%u", i + 1);
    mqr__rgroup_options_t o = {.id = i + 1,
                               .address = addr,
                               .fsm = {&x->sm[i], sm_apply, sm_snapshot, sm_reset, sm_leadership, sm_disk_failed, NULL},
                               .snapshot_threshold = threshold,
                               .snapshot_trailing = trailing,
                               .max_batch = max_batch};
    assert_int_equal(mqr__rgroup_new(&o, &x->g[i], NULL), 0);
    assert_int_equal(raft_fixture_grow(&x->f, mqr__rgroup_fsm(x->g[i])), 0);
    mqr__rgroup_adopt(x->g[i], raft_fixture_get(&x->f, i));
  }
  /* the fixture's own timeouts (its time is simulated) */
  for (unsigned i = 0; i < N; i++) {
    raft_set_election_timeout(raft_fixture_get(&x->f, i), 1000);
    raft_set_heartbeat_timeout(raft_fixture_get(&x->f, i), 100);
  }
  struct raft_configuration conf;
  assert_int_equal(raft_fixture_configuration(&x->f, N, &conf), 0);
  assert_int_equal(raft_fixture_bootstrap(&x->f, &conf), 0);
  raft_configuration_close(&conf);
  assert_int_equal(raft_fixture_start(&x->f), 0);
  return x;
}

static void fx_free(fx_t *x) {
  raft_fixture_close(&x->f);
  for (unsigned i = 0; i < N; i++) mqr__rgroup_free(x->g[i]);
  free(x);
}

/* Steps simulated time, flushing every group as a loop pass would, until pred or ms pass. */
static bool run_until(fx_t *x, bool (*pred)(fx_t *, void *), void *arg, unsigned ms) {
  raft_time end = raft_fixture_time(&x->f) + ms;
  while (raft_fixture_time(&x->f) < end) {
    for (unsigned i = 0; i < N; i++)
      if (raft_fixture_alive(&x->f, i)) mqr__rgroup_flush(x->g[i]);
    if (pred && pred(x, arg)) return true;
    raft_fixture_step(&x->f);
  }
  return pred ? pred(x, arg) : true;
}

static bool someone_leads(fx_t *x, void *arg) {
  unsigned *who = arg;
  for (unsigned i = 0; i < N; i++)
    if (raft_fixture_alive(&x->f, i) && mqr__rgroup_leading(x->g[i])) {
      if (who) *who = i;
      return true;
    }
  return false;
}

typedef struct {
  unsigned node;
  uint32_t n;
} want_t;

static bool has_applied(fx_t *x, void *arg) {
  want_t *w = arg;
  return x->sm[w->node].n >= w->n;
}

typedef struct {
  int status;
  int calls;
} done_t;

static void done(void *arg, int status) {
  done_t *d = arg;
  d->status = status;
  d->calls++;
}

static int append_id(mqr__rgroup_t *g, uint64_t id, done_t *d) {
  return mqr__rgroup_append(g, MQR_JOURNAL_ADD, id, &id, sizeof id, d ? done : NULL, d);
}

static unsigned elect(fx_t *x) {
  unsigned leader = N;
  assert_true(run_until(x, someone_leads, &leader, 20000));
  return leader;
}

static void assert_same_state(fx_t *x, unsigned a, unsigned b) {
  assert_int_equal(x->sm[a].n, x->sm[b].n);
  assert_memory_equal(x->sm[a].ids, x->sm[b].ids, x->sm[a].n * sizeof(uint64_t));
}

/* Batches proposed on the leader commit, are applied on every node in the same order,
 * and each record's callback says so after its batch is applied. */
static void test_batches_apply_everywhere_in_order(void **state) {
  (void)state;
  fx_t *x = fx_make(0, 0, 0);
  unsigned l = elect(x);
  assert_int_equal(x->sm[l].became_leader, 1);
  for (unsigned i = 0; i < N; i++)
    if (i != l) assert_int_equal(append_id(x->g[i], 1, NULL), MQR_ENOTLEADER);
  static done_t d[300];
  uint64_t id = 1;
  for (int batch = 0; batch < 30; batch++) {
    for (int k = 0; k < 10; k++, id++) assert_int_equal(append_id(x->g[l], id, &d[id - 1]), 0);
    mqr__rgroup_flush(x->g[l]);
  }
  for (unsigned i = 0; i < N; i++) {
    want_t w = {i, 300};
    assert_true(run_until(x, has_applied, &w, 20000));
  }
  for (unsigned i = 0; i < N; i++) {
    assert_int_equal(x->sm[i].n, 300);
    for (uint32_t k = 0; k < 300; k++) assert_int_equal(x->sm[i].ids[k], k + 1);
  }
  run_until(x, NULL, NULL, 500);
  for (int k = 0; k < 300; k++) {
    assert_int_equal(d[k].calls, 1);
    assert_int_equal(d[k].status, 0);
  }
  assert_int_equal(mqr__rgroup_committed(x->g[l]), 30);
  fx_free(x);
}

/* A leader cut off before its batch commits: the batch's callbacks say "in doubt" (or
 * "not the leader"), never OK; a new leader is elected by the others and commits; after
 * the partition heals the old leader has the new leader's state, without its own batch. */
static void test_leader_cut_off(void **state) {
  (void)state;
  fx_t *x = fx_make(0, 0, 0);
  unsigned l = elect(x);
  static done_t first;
  assert_int_equal(append_id(x->g[l], 1, &first), 0);
  mqr__rgroup_flush(x->g[l]);
  for (unsigned i = 0; i < N; i++) {
    want_t w = {i, 1};
    assert_true(run_until(x, has_applied, &w, 20000));
  }
  run_until(x, NULL, NULL, 200);
  assert_int_equal(first.status, 0);
  /* cut l off, then propose on it */
  for (unsigned i = 0; i < N; i++)
    if (i != l) raft_fixture_disconnect(&x->f, l, i), raft_fixture_disconnect(&x->f, i, l);
  static done_t lost;
  assert_int_equal(append_id(x->g[l], 999, &lost), 0);
  mqr__rgroup_flush(x->g[l]);
  /* the other two elect one of themselves */
  unsigned other = N;
  raft_time end = raft_fixture_time(&x->f) + 30000;
  while (raft_fixture_time(&x->f) < end && other == N) {
    for (unsigned i = 0; i < N; i++) {
      mqr__rgroup_flush(x->g[i]);
      if (i != l && mqr__rgroup_leading(x->g[i])) other = i;
    }
    raft_fixture_step(&x->f);
  }
  assert_int_not_equal(other, N);
  static done_t second;
  assert_int_equal(append_id(x->g[other], 2, &second), 0);
  mqr__rgroup_flush(x->g[other]);
  want_t w = {other, 2};
  assert_true(run_until(x, has_applied, &w, 20000));
  /* heal: the old leader steps down, drops 999 and takes 2 */
  for (unsigned i = 0; i < N; i++)
    if (i != l) raft_fixture_reconnect(&x->f, l, i), raft_fixture_reconnect(&x->f, i, l);
  w = (want_t){l, 2};
  assert_true(run_until(x, has_applied, &w, 30000));
  run_until(x, NULL, NULL, 1000);
  assert_int_equal(lost.calls, 1);
  assert_true(lost.status == MQR_EINDOUBT || lost.status == MQR_ENOTLEADER);
  assert_int_equal(second.status, 0);
  for (unsigned i = 0; i < N; i++) {
    assert_int_equal(x->sm[i].n, 2);
    assert_int_equal(x->sm[i].ids[0], 1);
    assert_int_equal(x->sm[i].ids[1], 2);
  }
  assert_int_equal(x->sm[l].stopped_leading, 1);
  fx_free(x);
}

/* mqr__rgroup_after: nothing uncommitted, 1 and no call; after records in the batch, or
 * with the batch proposed and not yet committed, called once (0) only after those
 * records' own callbacks, in order; a leader cut off tells it what it tells them. */
static int order[8], n_order;
static void ordered(void *arg, int status) {
  (void)status;
  order[n_order++] = (int)(intptr_t)arg;
}

static bool calls_reached(fx_t *x, void *arg) {
  (void)x;
  return n_order >= *(int *)arg;
}

static void test_after_what_was_appended(void **state) {
  (void)state;
  fx_t *x = fx_make(0, 0, 0);
  unsigned l = elect(x);
  run_until(x, NULL, NULL, 200);
  static done_t none;
  assert_int_equal(mqr__rgroup_after(x->g[l], done, &none), 1); /* nothing uncommitted */
  n_order = 0;
  uint64_t id = 1;
  /* in the batch being gathered: after its record's callback */
  assert_int_equal(mqr__rgroup_append(x->g[l], MQR_JOURNAL_ADD, id, &id, sizeof id, ordered, (void *)1), 0);
  assert_int_equal(mqr__rgroup_after(x->g[l], ordered, (void *)2), 0);
  mqr__rgroup_flush(x->g[l]);
  /* the batch proposed, not committed: after it too */
  assert_int_equal(mqr__rgroup_after(x->g[l], ordered, (void *)3), 0);
  assert_int_equal(n_order, 0); /* nothing before the commit */
  int want = 3;
  assert_true(run_until(x, calls_reached, &want, 20000));
  run_until(x, NULL, NULL, 500);
  assert_int_equal(n_order, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(order[i], i + 1);
  assert_int_equal(mqr__rgroup_after(x->g[l], done, &none), 1); /* committed: nothing left */
  assert_int_equal(none.calls, 0);
  /* cut off: the record's and the wait's callbacks both say it is not known */
  for (unsigned i = 0; i < N; i++)
    if (i != l) raft_fixture_disconnect(&x->f, l, i), raft_fixture_disconnect(&x->f, i, l);
  static done_t lost, waited;
  assert_int_equal(append_id(x->g[l], 99, &lost), 0);
  mqr__rgroup_flush(x->g[l]);
  assert_int_equal(mqr__rgroup_after(x->g[l], done, &waited), 0);
  run_until(x, NULL, NULL, 30000);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(waited.calls, 1);
  assert_int_not_equal(waited.status, 0);
  assert_int_equal(waited.status, lost.status);
  fx_free(x);
}

/* The leader's own write of an entry fails (libraft's fixture injects the I/O error): its
 * batch is told it is not known to commit, the group hears of the disk, the node stops
 * leading and a follower takes the group over, which then commits. */
static bool other_leads(fx_t *x, void *arg) {
  unsigned *not = arg, who = N;
  return someone_leads(x, &who) && who != *not ;
}

static void test_a_leader_whose_disk_fails_hands_over(void **state) {
  (void)state;
  fx_t *x = fx_make(0, 0, 0);
  unsigned l = elect(x);
  run_until(x, NULL, NULL, 200);
  static done_t lost;
  raft_fixture_io_fault(&x->f, l, 0, 1); /* its next I/O request: the entry's append */
  assert_int_equal(append_id(x->g[l], 7, &lost), 0);
  mqr__rgroup_flush(x->g[l]);
  assert_int_equal(lost.calls, 1);
  assert_int_not_equal(lost.status, 0);
  assert_int_equal(x->sm[l].disk_failed, 1);
  assert_false(mqr__rgroup_leading(x->g[l]));
  assert_int_equal(x->sm[l].stopped_leading, 1);
  assert_int_equal(append_id(x->g[l], 8, NULL), MQR_ENOTLEADER); /* it takes nothing more */
  assert_true(run_until(x, other_leads, &l, 20000));
  unsigned n = N;
  assert_true(someone_leads(x, &n));
  static done_t after;
  assert_int_equal(append_id(x->g[n], 9, &after), 0);
  mqr__rgroup_flush(x->g[n]);
  want_t w = {n, 1};
  assert_true(run_until(x, has_applied, &w, 20000));
  run_until(x, NULL, NULL, 500);
  assert_int_equal(after.status, 0);
  fx_free(x);
}

/* A follower down while the leader commits many entries and takes snapshots catches up
 * from a snapshot (its state reset, then the snapshot's records) and the entries after. */
static void test_follower_catches_up_from_a_snapshot(void **state) {
  (void)state;
  fx_t *x = fx_make(8, 2, 0);
  unsigned l = elect(x);
  unsigned down = (l + 1) % N;
  raft_fixture_kill(&x->f, down);
  uint64_t id = 1;
  for (int batch = 0; batch < 40; batch++) {
    for (int k = 0; k < 5; k++, id++) assert_int_equal(append_id(x->g[l], id, NULL), 0);
    mqr__rgroup_flush(x->g[l]);
    want_t w = {l, (uint32_t)(id - 1)};
    assert_true(run_until(x, has_applied, &w, 20000));
  }
  assert_int_equal(x->sm[down].n, 0);
  raft_fixture_revive(&x->f, down);
  want_t w = {down, 200};
  assert_true(run_until(x, has_applied, &w, 60000));
  assert_true(x->sm[down].resets >= 1); /* it came by a snapshot, not entry by entry */
  assert_same_state(x, l, down);
  for (uint32_t k = 0; k < 200; k++) assert_int_equal(x->sm[down].ids[k], k + 1);
  /* and it follows on after it */
  for (int k = 0; k < 5; k++, id++) assert_int_equal(append_id(x->g[l], id, NULL), 0);
  mqr__rgroup_flush(x->g[l]);
  w = (want_t){down, 205};
  assert_true(run_until(x, has_applied, &w, 20000));
  assert_same_state(x, l, down);
  fx_free(x);
}

/* A batch larger than max_batch is proposed in parts; oversized payloads are refused. */
static void test_limits(void **state) {
  (void)state;
  fx_t *x = fx_make(0, 0, MQR_JOURNAL_HEADER + 10 * mqr_journal_record_size(sizeof(uint64_t)));
  unsigned l = elect(x);
  assert_int_equal(mqr__rgroup_append(x->g[l], MQR_JOURNAL_ADD, 1, NULL, MQR_JOURNAL_MAX_PAYLOAD + 1, NULL, NULL),
                   MQR_ELIMIT);
  uint64_t before = mqr__rgroup_committed(x->g[l]);
  for (uint64_t id = 1; id <= 100; id++) assert_int_equal(append_id(x->g[l], id, NULL), 0);
  mqr__rgroup_flush(x->g[l]);
  want_t w = {l, 100};
  assert_true(run_until(x, has_applied, &w, 20000));
  run_until(x, NULL, NULL, 200);
  assert_int_equal(mqr__rgroup_committed(x->g[l]) - before, 10); /* ten records a batch */
  fx_free(x);
}

/* ---- over TCP, on a libuv loop, as mqrd runs it ----------------------------------------- */

typedef struct {
  uv_loop_t loop;
  uv_timer_t tick;
  struct raft_uv_transport tr[N];
  struct raft_io io[N];
  mqr__rgroup_t *g[N];
  sm_t sm[N];
  char dirs[N][64], addrs[N][32];
  int closed;
} net_t;

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t n = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  close(fd);
  return ntohs(a.sin_port);
}

static void tick_cb(uv_timer_t *t) {
  net_t *x = t->data;
  for (unsigned i = 0; i < N; i++)
    if (x->g[i]) mqr__rgroup_flush(x->g[i]);
}

static void net_open(net_t *x, bool first) {
  assert_int_equal(uv_loop_init(&x->loop), 0);
  uv_timer_init(&x->loop, &x->tick);
  x->tick.data = x;
  uv_timer_start(&x->tick, tick_cb, 1, 1);
  raft_id ids[N];
  const char *addrs[N];
  for (unsigned i = 0; i < N; i++) {
    if (first) {
      snprintf(x->dirs[i], sizeof x->dirs[i], "/tmp/mqr-test-%d-raft%u", (int)getpid(), i + 1);
      char cmd[128];
      snprintf(cmd, sizeof cmd, "rm -rf %s", x->dirs[i]);
      assert_int_equal(system(cmd), 0);
      assert_int_equal(mkdir(x->dirs[i], 0700), 0);
      snprintf(x->addrs[i], sizeof x->addrs[i], "127.0.0.1:%d", free_port());
    }
    ids[i] = i + 1, addrs[i] = x->addrs[i];
  }
  for (unsigned i = 0; i < N; i++) {
    memset(&x->sm[i], 0, sizeof x->sm[i]);
    assert_int_equal(raft_uv_tcp_init(&x->tr[i], &x->loop), 0);
    assert_int_equal(raft_uv_init(&x->io[i], &x->loop, x->dirs[i], &x->tr[i]), 0);
    mqr__rgroup_options_t o = {.id = i + 1,
                               .address = x->addrs[i],
                               .fsm = {&x->sm[i], sm_apply, sm_snapshot, sm_reset, sm_leadership, sm_disk_failed, NULL},
                               .election_timeout_ms = 300,
                               .heartbeat_timeout_ms = 50};
    mqr_error_t err;
    assert_int_equal(mqr__rgroup_new(&o, &x->g[i], &err), 0);
    assert_int_equal(mqr__rgroup_open(x->g[i], &x->io[i], &err), 0);
    assert_int_equal(mqr__rgroup_bootstrap(x->g[i], N, ids, addrs, &err), 0); /* (a restart: nothing to do) */
    if (mqr__rgroup_start(x->g[i], &err) != 0) fail_msg("%s", err.message);
  }
}

static void group_closed(void *arg) {
  net_t *x = arg;
  x->closed++;
}

static void net_close(net_t *x) {
  x->closed = 0;
  for (unsigned i = 0; i < N; i++) mqr__rgroup_close(x->g[i], group_closed, x);
  while (x->closed < N) uv_run(&x->loop, UV_RUN_ONCE);
  for (unsigned i = 0; i < N; i++) {
    raft_uv_close(&x->io[i]);
    raft_uv_tcp_close(&x->tr[i]);
    mqr__rgroup_free(x->g[i]);
    x->g[i] = NULL;
  }
  uv_close((uv_handle_t *)&x->tick, NULL);
  uv_run(&x->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&x->loop), 0);
}

/* Runs the loop until every node applied n records (or 20 s pass). */
static bool net_until_applied(net_t *x, uint32_t n) {
  uint64_t end = uv_now(&x->loop) + 20000;
  for (;;) {
    bool all = true;
    for (unsigned i = 0; i < N; i++) all = all && x->sm[i].n >= n;
    if (all) return true;
    if (uv_now(&x->loop) > end) return false;
    uv_run(&x->loop, UV_RUN_ONCE);
  }
}

static int net_leader(net_t *x) {
  uint64_t end = uv_now(&x->loop) + 20000;
  while (uv_now(&x->loop) < end) {
    for (unsigned i = 0; i < N; i++)
      if (mqr__rgroup_leading(x->g[i])) return (int)i;
    uv_run(&x->loop, UV_RUN_ONCE);
  }
  return -1;
}

/* Three nodes over raft_uv and TCP on one loop: batches commit and apply everywhere;
 * closed and opened again from their directories, the nodes replay the log into fresh
 * state machines. */
static void test_over_tcp_and_after_a_restart(void **state) {
  (void)state;
  static net_t x;
  net_open(&x, true);
  int l = net_leader(&x);
  assert_true(l >= 0);
  static done_t d[100];
  for (uint64_t id = 1; id <= 100; id++) {
    assert_int_equal(append_id(x.g[l], id, &d[id - 1]), 0);
    if (id % 10 == 0) uv_run(&x.loop, UV_RUN_NOWAIT);
  }
  assert_true(net_until_applied(&x, 100));
  for (int k = 0; k < 100; k++) uv_run(&x.loop, UV_RUN_NOWAIT);
  for (unsigned i = 0; i < N; i++)
    for (uint32_t k = 0; k < 100; k++) assert_int_equal(x.sm[i].ids[k], k + 1);
  int ok = 0;
  for (int k = 0; k < 100; k++) ok += d[k].calls == 1 && d[k].status == 0;
  assert_int_equal(ok, 100);
  net_close(&x);
  net_open(&x, false);
  assert_true(net_leader(&x) >= 0);
  assert_true(net_until_applied(&x, 100));
  for (unsigned i = 0; i < N; i++) {
    assert_int_equal(x.sm[i].n, 100);
    for (uint32_t k = 0; k < 100; k++) assert_int_equal(x.sm[i].ids[k], k + 1);
  }
  net_close(&x);
  for (unsigned i = 0; i < N; i++) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", x.dirs[i]);
    assert_int_equal(system(cmd), 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_apply_everywhere_in_order),    cmocka_unit_test(test_leader_cut_off),
      cmocka_unit_test(test_follower_catches_up_from_a_snapshot),  cmocka_unit_test(test_limits),
      cmocka_unit_test(test_over_tcp_and_after_a_restart),         cmocka_unit_test(test_after_what_was_appended),
      cmocka_unit_test(test_a_leader_whose_disk_fails_hands_over),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
