/* cluster/cluster.c: three nodes of three groups each, over raft_uv and TCP on one loop.
 * Records appended on each group's leader reach every node's replicated state; a leader
 * closed, the others elect one who holds everything committed and commits on; the closed
 * node, opened again from its directories, catches up; a leader closes with writes of its
 * log queued; a leader holds back appends for a follower past its bound of bytes in flight,
 * and everything still commits everywhere. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "cluster.h"

#define NODES 3
#define GROUPS 3

typedef struct {
  uv_loop_t loop;
  mqr__cluster_t *node[NODES];
  char bind[NODES][32], dir[NODES][64];
  mqr__cluster_peer_t peers[NODES][NODES - 1];
  int leads[NODES][GROUPS]; /* leadership callbacks: +1 leading, -1 not */
  int closed;
  size_t send_max; /* the nodes' (0: the default) */
} fx_t;

static fx_t x;

/* A base port with GROUPS free ports from it, for each node. */
static int free_base(void) {
  for (;;) {
    int base = 20000 + rand() % 30000, ok = 1;
    for (int g = 0; g < GROUPS && ok; g++) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(base + g))};
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
      close(fd);
    }
    if (ok) return base;
  }
}

static void leadership(void *arg, uint32_t g, bool leader) {
  int *row = arg;
  row[g] += leader ? 1 : -1;
}

static void open_node(int i) {
  mqr__cluster_options_t o = {.node_id = (uint64_t)i + 1,
                              .bind = x.bind[i],
                              .peers = x.peers[i],
                              .n_peers = NODES - 1,
                              .groups = GROUPS,
                              .directory = x.dir[i],
                              .election_timeout = 300,
                              .heartbeat_timeout = 50,
                              .leadership = leadership,
                              .arg = x.leads[i],
                              .send_max = x.send_max};
  mqr_error_t err;
  if (mqr__cluster_open(&x.loop, &o, &x.node[i], &err) != 0) fail_msg("node %d: %s", i + 1, err.message);
}

static void closed(void *arg) {
  (void)arg;
  x.closed++;
}

static void close_node(int i) {
  int before = x.closed;
  mqr__cluster_close(x.node[i], closed, NULL);
  x.node[i] = NULL;
  while (x.closed == before) uv_run(&x.loop, UV_RUN_ONCE);
  memset(x.leads[i], 0, sizeof x.leads[i]);
}

/* The node leading group g (-1: none within 20 s). */
static int leader_of(uint32_t g) {
  uint64_t end = uv_now(&x.loop) + 20000;
  while (uv_now(&x.loop) < end) {
    for (int i = 0; i < NODES; i++)
      if (x.node[i] && mqr__rgroup_leading(mqr__cluster_group(x.node[i], g))) return i;
    uv_run(&x.loop, UV_RUN_ONCE);
  }
  return -1;
}

typedef struct {
  int ok, failed;
} tally_t;

static void done(void *arg, int status) {
  tally_t *t = arg;
  if (status == 0)
    t->ok++;
  else
    t->failed++;
}

/* n messages sent to address on its group's leader: an ADD and a REF each. */
static void send_to(const char *address, int64_t first, int n, tally_t *t) {
  uint32_t g = mqr__cluster_group_of(x.node[0] ? x.node[0] : x.node[1], mqr_str(address));
  int l = leader_of(g);
  assert_true(l >= 0);
  mqr__rgroup_t *gr = mqr__cluster_group(x.node[l], g);
  for (int64_t id = first; id < first + n; id++) {
    assert_int_equal(mqr__rgroup_append(gr, MQR_JOURNAL_ADD, (uint64_t)id, address, strlen(address), NULL, NULL), 0);
    assert_int_equal(mqr__rgroup_append(gr, MQR_JOURNAL_REF, (uint64_t)id, address, strlen(address), done, t), 0);
  }
}

static void run_until_done(tally_t *t, int n) {
  uint64_t end = uv_now(&x.loop) + 20000;
  while (t->ok + t->failed < n && uv_now(&x.loop) < end) uv_run(&x.loop, UV_RUN_ONCE);
  assert_int_equal(t->ok, n);
}

static int count_msg(void *ctx, int64_t id, const uint8_t *p, size_t len, const mqr__rref_t *refs, uint32_t n) {
  (void)id, (void)p, (void)len, (void)refs;
  int *c = ctx;
  *c += n == 1;
  return 0;
}

/* Messages node i's replicated state holds over all groups, once it holds want (20 s). */
static int held(int i, int want) {
  uint64_t end = uv_now(&x.loop) + 20000;
  for (;;) {
    int c = 0;
    for (uint32_t g = 0; g < GROUPS; g++) mqr__rstate_each(mqr__cluster_state(x.node[i], g), count_msg, &c);
    if (c >= want || uv_now(&x.loop) > end) return c;
    uv_run(&x.loop, UV_RUN_ONCE);
  }
}

/* Three nodes on a new loop, each with its own ports and directory. */
static void start_nodes(void) {
  srand((unsigned)getpid());
  signal(SIGPIPE, SIG_IGN); /* (as mqrd does: a peer gone is an error, not a death) */
  assert_int_equal(uv_loop_init(&x.loop), 0);
  for (int i = 0; i < NODES; i++) {
    snprintf(x.bind[i], sizeof x.bind[i], "127.0.0.1:%d", free_base());
    snprintf(x.dir[i], sizeof x.dir[i], "/tmp/mqr-test-%d-node%d", (int)getpid(), i + 1);
  }
  for (int i = 0; i < NODES; i++)
    for (int k = 0, j = 0; k < NODES; k++)
      if (k != i) x.peers[i][j++] = (mqr__cluster_peer_t){(uint64_t)k + 1, x.bind[k]};
  for (int i = 0; i < NODES; i++) open_node(i);
}

/* The open nodes closed, the loop and the directories gone. */
static void stop_nodes(void) {
  for (int i = 0; i < NODES; i++)
    if (x.node[i]) close_node(i);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&x.loop), 0);
  for (int i = 0; i < NODES; i++) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", x.dir[i]);
    assert_int_equal(system(cmd), 0);
  }
}

/* A leader hands its transport at most send_max bytes of entries for one follower: past
 * it, libraft is told the follower cannot be reached, and sends again from where the
 * follower is. With a bound of one byte (one message in flight to each follower at a
 * time) every message still commits and reaches every node, and the leader says how many
 * of its appends it held back. */
static void test_send_bound(void **state) {
  (void)state;
  memset(&x, 0, sizeof x);
  x.send_max = 1;
  start_nodes();
  static tally_t t;
  int64_t id = 1;
  uint32_t g = mqr__cluster_group_of(x.node[0], mqr_str("orders"));
  for (int k = 0; k < 100; k++, id += 5) { /* (ten entries a loop pass: several in flight at once) */
    send_to("orders", id, 5, &t);
    assert_int_equal(mqr__rgroup_flush(mqr__cluster_group(x.node[leader_of(g)], g)), 0);
    if (k % 10 == 9) uv_run(&x.loop, UV_RUN_NOWAIT);
  }
  run_until_done(&t, 500);
  for (int i = 0; i < NODES; i++) assert_int_equal(held(i, 500), 500);
  mqr__cluster_status_t st;
  mqr__cluster_status(x.node[leader_of(g)], g, &st);
  assert_true(st.sends_refused > 0);
  stop_nodes();
}

static void test_three_nodes(void **state) {
  (void)state;
  start_nodes();

  /* the stable hash: the same group on every node, and the addresses spread */
  const char *addresses[] = {"orders", "orders.eu", "metrics", "payments", "billing", "a.b.c"};
  bool used[GROUPS] = {false};
  for (int a = 0; a < 6; a++) {
    uint32_t g = mqr__cluster_group_of(x.node[0], mqr_str(addresses[a]));
    for (int i = 1; i < NODES; i++) assert_int_equal(mqr__cluster_group_of(x.node[i], mqr_str(addresses[a])), g);
    used[g] = true;
  }
  assert_true(used[0] && used[1] && used[2]);

  /* every group has one leader, told through the callback */
  for (uint32_t g = 0; g < GROUPS; g++) {
    int l = leader_of(g);
    assert_true(l >= 0);
    assert_int_equal(x.leads[l][g], 1);
    mqr__cluster_status_t st;
    mqr__cluster_status(x.node[l], g, &st);
    assert_true(st.leading && st.leader_id == (uint64_t)l + 1 && st.term >= 1);
    assert_int_equal(st.n_followers, NODES - 1);
  }

  static tally_t t1;
  int64_t id = 1;
  for (int a = 0; a < 6; a++, id += 50) send_to(addresses[a], id, 50, &t1);
  run_until_done(&t1, 300);
  for (int i = 0; i < NODES; i++) assert_int_equal(held(i, 300), 300);

  /* the leader of "orders"'s group goes; the two others elect one who holds all */
  uint32_t g = mqr__cluster_group_of(x.node[0], mqr_str("orders"));
  int old = leader_of(g);
  close_node(old);
  int now = leader_of(g);
  assert_true(now >= 0 && now != old);
  assert_int_equal(held(now, 300), 300);
  assert_true(mqr__rstate_stats(mqr__cluster_state(x.node[now], g)).max_id >= 1);
  static tally_t t2;
  send_to("orders", id, 40, &t2);
  id += 40;
  run_until_done(&t2, 40);

  /* the old leader, back from its directories, catches up */
  open_node(old);
  assert_int_equal(held(old, 340), 340);
  uint64_t end = uv_now(&x.loop) + 5000; /* (and its followers' lag closes) */
  for (;;) {
    mqr__cluster_status_t st;
    mqr__cluster_status(x.node[now], g, &st);
    bool caught = st.leading && st.n_followers == NODES - 1;
    for (uint32_t k = 0; k < st.n_followers; k++) caught = caught && st.followers[k].lag == 0;
    if (caught) break;
    assert_true(uv_now(&x.loop) < end);
    uv_run(&x.loop, UV_RUN_ONCE);
  }

  /* a leader closing with writes of its log queued (twenty proposals at once): they end
   * first (libraft 0.15, cancelling them, truncated its log past its end) */
  int l = leader_of(g);
  mqr__rgroup_t *gr = mqr__cluster_group(x.node[l], g);
  static tally_t t3;
  for (int k = 0; k < 20; k++, id++) {
    assert_int_equal(mqr__rgroup_append(gr, MQR_JOURNAL_ADD, (uint64_t)id, "orders", 6, done, &t3), 0);
    assert_int_equal(mqr__rgroup_flush(gr), 0);
  }
  close_node(l);
  assert_int_equal(t3.ok + t3.failed, 20); /* (each answered: committed, or not) */

  stop_nodes();
}

/* Options that cannot make a node are refused with what is wrong. */
static void test_bad_options(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr__cluster_peer_t same = {1, "127.0.0.1:7002"}, bad = {2, "nowhere"};
  struct {
    mqr__cluster_options_t o;
    const char *says;
  } cases[] = {
      {{.node_id = 0, .bind = "127.0.0.1:7001", .directory = "/tmp"}, "node-id"},
      {{.node_id = 1, .bind = "127.0.0.1", .directory = "/tmp"}, "IP:PORT"},
      {{.node_id = 1, .bind = "127.0.0.1:65535", .groups = 2, .directory = "/tmp"}, "groups' ports"},
      {{.node_id = 1, .bind = "127.0.0.1:7001", .directory = "/tmp", .peers = &same, .n_peers = 1}, "this node's"},
      {{.node_id = 1, .bind = "127.0.0.1:7001", .directory = "/tmp", .peers = &bad, .n_peers = 1}, "nowhere"},
      {{.node_id = 1, .bind = "127.0.0.1:7001"}, "directory"},
      {{.node_id = 1, .bind = "127.0.0.1:7001", .directory = "/tmp", .groups = 65}, "at most"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mqr__cluster_t *c = NULL;
    mqr_error_t err;
    assert_int_equal(mqr__cluster_open(&loop, &cases[i].o, &c, &err), MQR_EINVAL);
    assert_null(c);
    if (strstr(err.message, cases[i].says) == NULL) fail_msg("case %zu: %s", i, err.message);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_three_nodes),
      cmocka_unit_test(test_send_bound),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
