/* cluster.scale: what a replicated message costs each node, for the scale-out model of
 * docs/cluster.md, and the throughput of 1, 2 and 3 groups on this machine to check it.
 *
 * Three mqrd nodes (as cluster.loopback's) with `groups` Raft groups and one replicated
 * address per group (names chosen so that each falls in a different group), group g led
 * by node g+1 (moved there with cluster.transfer). For each group, one producer with a
 * window of WINDOW unanswered durable sends and one consumer; an operation is one
 * message sent, answered and received, all groups together.
 *
 *   via=leader    each producer on its group's leader
 *   via=follower  each producer on a follower of its group (node g+2 for group g), which
 *                 forwards its sends to the leader (the peers' urls are in the config);
 *                 the consumers on the leaders
 *
 * Aux figures, CPU time per operation over the trial's iterations, from /proc (user and
 * system time of each process, every thread):
 *   cpu.nodes     the three nodes together
 *   cpu.client    the benchmark's own process (the clients)
 *   cpu.leader    (groups=1) the leader; cpu.follower: a follower (the one that does not
 *                 forward); cpu.forward (via=follower): what forwarding adds to a follower */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "mqr/client.h"

#define WINDOW 4096
#define FLUSH_EVERY 256
#define MAX_GROUPS 3

typedef struct scale_s scale_t;

typedef struct {
  scale_t *s;
  char address[16], probe[16]; /* the group's address, and another of its group for probes */
  mqr_client_t *pub, *sub;
  mqr_client_sub_t *subscription;
  uint64_t sent, answered, failed, received, acked;
} stream_t;

struct scale_s {
  int groups;
  bool via_follower;
  size_t size;
  char body[1024];
  char dir[512];
  pid_t nodes[3];
  int ports[3];
  uv_loop_t loop;
  bool loop_open;
  stream_t streams[MAX_GROUPS];
  uint64_t flushed;
  int leader1; /* groups=1: the leader's index; the forwarding follower's, the other's */
  int forwarder, other;
  /* CPU ticks at the iteration's start, and the trial's sums */
  long long t0[4];
  uint64_t ops0;
  double ticks[4];
  uint64_t ops;
  int ready;
};

/* ---- CPU ----------------------------------------------------------------------------------- */

/* utime + stime of pid (0: this process), in clock ticks; -1 when unreadable. */
static long long cpu_ticks(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* (the command may hold spaces) */
  unsigned long long ut, st;
  if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
  return (long long)(ut + st);
}

static uint64_t total_sent(const scale_t *s) {
  uint64_t n = 0;
  for (int g = 0; g < s->groups; g++) n += s->streams[g].sent;
  return n;
}

static int start_iteration(mqr_bench_ctx_t *c) {
  scale_t *s = mqr_bench_state(c);
  for (int i = 0; i < 3; i++) s->t0[i] = cpu_ticks(s->nodes[i]);
  s->t0[3] = cpu_ticks(0);
  s->ops0 = total_sent(s);
  return 0;
}

static void end_iteration(mqr_bench_ctx_t *c) {
  scale_t *s = mqr_bench_state(c);
  for (int i = 0; i < 4; i++) {
    long long t = cpu_ticks(i < 3 ? s->nodes[i] : 0);
    if (t >= 0 && s->t0[i] >= 0) s->ticks[i] += (double)(t - s->t0[i]);
  }
  s->ops += total_sent(s) - s->ops0;
  if (s->ops == 0) return;
  double us = 1e6 / (double)sysconf(_SC_CLK_TCK) / (double)s->ops; /* a tick per operation, in us */
  mqr_bench_aux(c, "cpu.nodes", (s->ticks[0] + s->ticks[1] + s->ticks[2]) * us, "us/op");
  mqr_bench_aux(c, "cpu.client", s->ticks[3] * us, "us/op");
  if (s->groups == 1) {
    mqr_bench_aux(c, "cpu.leader", s->ticks[s->leader1] * us, "us/op");
    mqr_bench_aux(c, "cpu.follower", s->ticks[s->other] * us, "us/op");
    if (s->via_follower) mqr_bench_aux(c, "cpu.forward", (s->ticks[s->forwarder] - s->ticks[s->other]) * us, "us/op");
  }
}

/* ---- the nodes --------------------------------------------------------------------------------- */

static uint32_t fnv1a(const char *p) { /* (the cluster's hash of an address: docs/cluster.md) */
  uint32_t h = 2166136261u;
  for (; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h;
}

/* A management operation on the node at port: 0, or its error with why. */
static int manage(int port, const char *op, const mqr_str_t *args, size_t n, char *why, size_t cap) {
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  mqr_bclient_t *bc;
  mqr_error_t err = {0};
  int rc = mqr_bclient_connect(url, "bench-manage", 2000, &bc, &err);
  if (rc == 0) {
    mqr_frame_manage_result_t *r = NULL;
    rc = mqr_bclient_manage(bc, mqr_str(op), args, n, &r, &err);
    mqr_free(r);
    mqr_bclient_close(bc);
  }
  if (rc) snprintf(why, cap, "%.200s", err.message);
  return rc;
}

/* Whether node i leads the group of address: it takes a consumer of it (a follower
 * refuses one with ENOTLEADER, forwarding or not). */
static bool leads(const scale_t *s, int i, const char *address) {
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", s->ports[i]);
  mqr_bclient_t *bc;
  if (mqr_bclient_connect(url, "bench-probe", 2000, &bc, NULL) != 0) return false;
  int64_t sub;
  int rc =
      mqr_bclient_subscribe(bc, mqr_str(address), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, &sub, NULL, 0, NULL);
  mqr_bclient_close(bc);
  return rc == 0;
}

/* Group g led by node g: the leader is asked to hand it over (once a second: a transfer
 * takes an election, and asking again meanwhile can spoil it), until it is so. */
static int place_leaders(mqr_bench_ctx_t *c, scale_t *s) {
  for (int g = 0; g < s->groups; g++) {
    double end = bench_now() + 30, asked = 0;
    char gs[16], ns[16];
    snprintf(gs, sizeof gs, "%d", g);
    snprintf(ns, sizeof ns, "%d", g + 1);
    mqr_str_t args[2] = {mqr_str(gs), mqr_str(ns)};
    int found = -1;
    char why[256] = "";
    while (bench_now() < end) {
      found = -1;
      for (int i = 0; i < 3 && found < 0; i++)
        if (leads(s, i, s->streams[g].probe)) found = i;
      if (found == g) break;
      if (found >= 0 && bench_now() - asked >= 1) {
        manage(s->ports[found], "cluster.transfer", args, 2, why, sizeof why);
        asked = bench_now();
      }
      usleep(100000);
    }
    if (found != g) return mqr_bench_fail(c, "node %d does not lead group %d (node %d does)", g + 1, g, found + 1);
  }
  return 0;
}

/* The first of n free ports in a row, below the kernel's ephemeral range (a node's group
 * g listens at its port + g: a port picked by the kernel may have its next one taken by
 * the connections the nodes make meanwhile). */
static int free_block(int n) {
  for (;;) {
    int base = 20000 + rand() % 12000, ok = 1;
    for (int k = 0; k < n && ok; k++) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(base + k))};
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
      close(fd);
    }
    if (ok) return base;
  }
}

static int start_nodes(mqr_bench_ctx_t *c, scale_t *s) {
  snprintf(s->dir, sizeof s->dir, "%s/scale-%d", MQR_BENCH_DATA, (int)getpid());
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", s->dir, s->dir);
  if (system(cmd) != 0) return mqr_bench_fail(c, "cannot make %s", s->dir);
  /* per group, an address for the stream and one for probes: the first names in it */
  for (int g = 0; g < s->groups; g++) {
    for (int k = 0;; k++) {
      snprintf(s->streams[g].address, sizeof s->streams[g].address, "scale%d", k);
      if ((int)(fnv1a(s->streams[g].address) % (uint32_t)s->groups) == g) break;
    }
    for (int k = 0;; k++) {
      snprintf(s->streams[g].probe, sizeof s->streams[g].probe, "probe%d", k);
      if ((int)(fnv1a(s->streams[g].probe) % (uint32_t)s->groups) == g) break;
    }
  }
  int raft[3];
  for (int i = 0; i < 3; i++) {
    s->ports[i] = bench_free_port();
    bool apart = false;
    while (!apart) { /* (each node's block of group ports its own) */
      raft[i] = free_block(s->groups);
      apart = true;
      for (int k = 0; k < i; k++) apart = apart && abs(raft[i] - raft[k]) >= s->groups;
    }
  }
  for (int i = 0; i < 3; i++) {
    char path[700], peers[400] = "", addresses[512] = "";
    for (int k = 0, n = 0; k < 3; k++) {
      char url[64] = "";
      if (s->via_follower) snprintf(url, sizeof url, ", url: \"tcp://127.0.0.1:%d\"", s->ports[k]);
      if (k != i)
        n += snprintf(peers + n, sizeof peers - (size_t)n, "%s{id: %d, address: 127.0.0.1:%d%s}", n ? ", " : "", k + 1,
                      raft[k], url);
    }
    for (int g = 0, n = 0; g < s->groups; g++)
      n += snprintf(addresses + n, sizeof addresses - (size_t)n, "  %s: {anycast: [%s]}\n  %s: {anycast: [%s]}\n",
                    s->streams[g].address, s->streams[g].address, s->streams[g].probe, s->streams[g].probe);
    snprintf(path, sizeof path, "%s/n%d.yaml", s->dir, i + 1);
    /* (a follower refuses a consumer, which leads() relies on: the clients are placed by hand) */
    if (!bench_cluster_config(path, s->ports[i], s->dir, i + 1, addresses, raft[i], s->groups, peers,
                              ", follower-consumers: redirect"))
      return mqr_bench_fail(c, "%s: cannot write", path);
    char *argv[] = {"mqrd", "--config", path, NULL};
    s->nodes[i] = bench_spawn(MQR_BENCH_MQRD, argv);
  }
  for (int i = 0; i < 3; i++)
    if (!bench_listening(s->ports[i])) return mqr_bench_fail(c, "mqrd node %d did not start listening", i + 1);
  return place_leaders(c, s);
}

/* ---- the clients --------------------------------------------------------------------------------- */

static void on_ready(mqr_client_t *cl, int status, const mqr_frame_t *f, void *arg) {
  (void)cl, (void)f;
  stream_t *t = arg;
  t->s->ready += status == 0 ? 1 : 1000;
}

static void on_receipt(mqr_client_t *cl, int status, const mqr_frame_t *f, void *arg) {
  (void)cl, (void)f;
  stream_t *t = arg;
  t->answered++;
  if (status != 0) t->failed++;
}

static void on_message(mqr_client_sub_t *sub, const mqr_frame_message_t *m, void *arg) {
  stream_t *t = arg;
  t->received++;
  if (t->received - t->acked >= 1000) {
    mqr_client_ack(sub, m->delivery, true);
    mqr_client_credit(sub, (uint32_t)(t->received - t->acked));
    t->acked = t->received;
  }
}

static bool wait_ready(scale_t *s, int want) {
  while (s->ready < want) uv_run(&s->loop, UV_RUN_ONCE);
  return s->ready == want;
}

static int connect_stream(mqr_bench_ctx_t *c, scale_t *s, int g) {
  stream_t *t = &s->streams[g];
  t->s = s;
  int pub_node = s->via_follower ? (g + 1) % 3 : g, sub_node = g; /* (node g leads group g) */
  char pub_url[64], sub_url[64];
  snprintf(pub_url, sizeof pub_url, "tcp://127.0.0.1:%d", s->ports[pub_node]);
  snprintf(sub_url, sizeof sub_url, "tcp://127.0.0.1:%d", s->ports[sub_node]);
  mqr_client_options_t opt = {.client_id = "bench"};
  mqr_error_t err = {0};
  s->ready = 0;
  if (mqr_client_create(&s->loop, &opt, &t->pub) || mqr_client_connect(t->pub, pub_url, on_ready, t, &err) ||
      mqr_client_create(&s->loop, &opt, &t->sub) || mqr_client_connect(t->sub, sub_url, on_ready, t, &err) ||
      !wait_ready(s, 2))
    return mqr_bench_fail(c, "connect: %s", err.message);
  if (mqr_client_subscribe(t->sub, mqr_str(t->address), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 2 * WINDOW,
                           on_message, on_ready, t, &t->subscription, &err) != 0 ||
      !wait_ready(s, 3))
    return mqr_bench_fail(c, "subscribe to %s: %s", t->address, err.message);
  return 0;
}

/* ---- the benchmark ----------------------------------------------------------------------------- */

static int setup(mqr_bench_ctx_t *c) {
  scale_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  signal(SIGPIPE, SIG_IGN);
  srand((unsigned)getpid());
  s->groups = (int)mqr_bench_param_long(c, "groups");
  s->via_follower = strcmp(mqr_bench_param(c, "via"), "follower") == 0;
  s->size = (size_t)mqr_bench_param_long(c, "size");
  if (s->groups < 1 || s->groups > MAX_GROUPS || s->size > sizeof s->body)
    return mqr_bench_fail(c, "groups 1 to %d, size at most %zu", MAX_GROUPS, sizeof s->body);
  memset(s->body, 'm', s->size);
  s->leader1 = 0, s->forwarder = 1, s->other = 2; /* (group 0 is moved to node 1; its producer on node 2) */
  if (start_nodes(c, s) != 0) return -1;
  uv_loop_init(&s->loop);
  s->loop_open = true;
  for (int g = 0; g < s->groups; g++)
    if (connect_stream(c, s, g) != 0) return -1;
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  scale_t *s = mqr_bench_state(c);
  if (s->loop_open) {
    for (int g = 0; g < s->groups; g++) {
      if (s->streams[g].pub) mqr_client_close(s->streams[g].pub, NULL, NULL);
      if (s->streams[g].sub) mqr_client_close(s->streams[g].sub, NULL, NULL);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
  }
  for (int i = 0; i < 3; i++) bench_stop(s->nodes[i]);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (s->dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", s->dir);
  free(s);
}

static bool room(const stream_t *t) { return t->sent - t->answered < WINDOW && t->sent - t->received < 2 * WINDOW; }

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  scale_t *s = mqr_bench_state(c);
  uint64_t end = total_sent(s) + ops, sent = total_sent(s);
  while (sent < end) {
    bool any = false;
    for (int g = 0; g < s->groups && sent < end; g++) { /* (round robin: the groups share the operations) */
      stream_t *t = &s->streams[g];
      if (!room(t)) continue;
      mqr_client_message_t m = {
          mqr_str(t->address),        MQR_ANYCAST, true, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0,
          mqr_str_n(s->body, s->size)};
      if (mqr_client_send(t->pub, &m, on_receipt, t, NULL) != 0) return mqr_bench_fail(c, "send");
      t->sent++, sent++, any = true;
    }
    if (!any || sent - s->flushed >= FLUSH_EVERY) { /* (blocks only when every window is full) */
      uv_run(&s->loop, any ? UV_RUN_NOWAIT : UV_RUN_ONCE);
      s->flushed = sent;
    }
  }
  for (int g = 0; g < s->groups; g++)
    if (s->streams[g].failed) return mqr_bench_fail(c, "%llu sends refused", (unsigned long long)s->streams[g].failed);
  return 0;
}

static int finish(mqr_bench_ctx_t *c) {
  scale_t *s = mqr_bench_state(c);
  for (int g = 0; g < s->groups; g++) {
    stream_t *t = &s->streams[g];
    while (t->received < t->sent || t->answered < t->sent) uv_run(&s->loop, UV_RUN_ONCE);
  }
  s->flushed = total_sent(s);
  return 0;
}

static const mqr_bench_def_t scale = {"cluster.scale", "size=16,1024;groups=1,2,3;via=leader,follower",
                                      "thrpt",         setup,
                                      teardown,        start_iteration,
                                      end_iteration,   run,
                                      finish};
MQR_BENCH_REGISTER(scale)
