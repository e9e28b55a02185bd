/* cluster.dosend: the leader's replicated send path in steady state, in-process
 * (docs/cluster.md: "0 B/op on the leader's replicated send path").
 *
 * A cluster of three nodes on 127.0.0.1: node 1 a broker on the benchmark's own thread
 * and loop, nodes 2 and 3 mqrd processes. Node 1 is made to lead
 * (its election timeout is the shortest by far; the others hear its heartbeats long
 * before theirs run out). An operation is durable.dosend's: mqr_broker_send_async of a
 * durable message (`size` bytes) to a replicated queue with an in-process consumer on
 * node 1 acking it (at most 4096 sends unanswered and 8192 not yet received); a send is
 * answered once a majority has written its entry (each node fdatasyncing its Raft log),
 * and each ack's DELETE is replicated as well. B/op is the leader's: the broker, its
 * Raft group, libraft and its libuv I/O on the loop's thread for every message, batch and
 * snapshot, per message (libraft's snapshot writes, on libuv's worker threads, are not
 * counted). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_proc.h"
#include "durable_loop.h"
#include "mqr/broker.h"

typedef struct {
  st_t s; /* its dir, and the followers' processes (nodes[1], nodes[2]) */
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b; /* node 1 */
  mqr_broker_consumer_t *k;
  uint64_t sent, answered, received, failed;
  uint8_t body[1024];
  size_t size;
} cd_t;

/* Writes node i's config (bench_cluster_config's) to path: node 1's election timeout is
 * by far the shortest, so that it leads. */
static int write_config(mqr_bench_ctx_t *c, const cd_t *d, int i, const int *raft, int port, char *path, size_t cap) {
  char peers[256] = "";
  for (int k = 0, n = 0; k < 3; k++)
    if (k != i)
      n += snprintf(peers + n, sizeof peers - (size_t)n, "%s{id: %d, address: \"127.0.0.1:%d\"}", n ? ", " : "", k + 1,
                    raft[k]);
  snprintf(path, cap, "%s/n%d.yaml", d->s.dir, i + 1);
  if (!bench_cluster_config(path, port, d->s.dir, i + 1, "  q0: {anycast: [q0]}\n", raft[i], 1, peers,
                            i == 0 ? ", election-timeout: 150ms, heartbeat-timeout: 50ms"
                                   : ", election-timeout: 20s, heartbeat-timeout: 50ms"))
    return mqr_bench_fail(c, "%s: cannot write", path);
  return 0;
}

/* Nodes 2 and 3: mqrd processes, started as a shell would. */
static int start_follower(mqr_bench_ctx_t *c, cd_t *d, int i, const int *raft) {
  char path[700];
  int port = bench_free_port();
  if (write_config(c, d, i, raft, port, path, sizeof path)) return -1;
  char *argv[] = {"mqrd", "--config", path, NULL};
  d->s.nodes[i] = bench_spawn(MQR_BENCH_MQRD, argv);
  if (!bench_listening(port)) return mqr_bench_fail(c, "mqrd node %d did not start listening", i + 1);
  return 0;
}

/* Node 1: a broker on this thread's loop. */
static int open_leader(mqr_bench_ctx_t *c, cd_t *d, const int *raft) {
  char path[700];
  if (write_config(c, d, 0, raft, bench_free_port(), path, sizeof path)) return -1;
  mqr_error_t err;
  mqr_diags_t diags;
  mqr_diags_init(&diags, &err, 1);
  if (mqr_config_load_file(path, &d->cfg, &diags) != 0) return mqr_bench_fail(c, "node 1 config: %s", err.message);
  uv_loop_init(&d->loop);
  mqr_broker_options_t opt = {.config = d->cfg};
  if (mqr_broker_create(&d->loop, &opt, &d->b, &err) != 0) return mqr_bench_fail(c, "node 1: %s", err.message);
  return 0;
}

static void on_sent(void *arg, int status, const mqr_broker_receipt_t *rc, const mqr_error_t *err) {
  (void)rc, (void)err;
  cd_t *d = arg;
  d->answered++;
  if (status) d->failed++;
}

static void on_delivery(mqr_broker_consumer_t *k, const mqr_frame_message_t *m, void *arg) {
  cd_t *d = arg;
  d->received++;
  mqr_broker_ack(k, m->delivery, false);
  mqr_broker_credit(k, 1);
}

static mqr_broker_message_t message(const cd_t *d) {
  return (mqr_broker_message_t){.address = MQR_STR("q0"),
                                .routing_type = MQR_ROUTING_NONE,
                                .durable = true,
                                .priority = MQR_PRIORITY_DEFAULT,
                                .body = mqr_str_n((const char *)d->body, d->size)};
}

static int run_cd(mqr_bench_ctx_t *c, uint64_t ops);
static int finish_cd(mqr_bench_ctx_t *c);

static int setup_cd(mqr_bench_ctx_t *c) {
  signal(SIGPIPE, SIG_IGN); /* (as mqrd does: a closing peer's socket is an error, not a signal) */
  cd_t *d = calloc(1, sizeof *d);
  mqr_bench_set_state(c, d);
  d->size = (size_t)mqr_bench_param_long(c, "size");
  if (d->size == 0 || d->size > sizeof d->body) return mqr_bench_fail(c, "size must be 1..%zu", sizeof d->body);
  memset(d->body, 'm', d->size);
  fresh(&d->s, "cluster-dosend");
  int raft[3];
  for (int i = 0; i < 3; i++) raft[i] = bench_free_port();
  for (int i = 1; i < 3; i++)
    if (start_follower(c, d, i, raft)) return -1;
  if (open_leader(c, d, raft)) return -1;
  /* Node 1 leads once a send of its is answered OK (before, it refuses: ENOTLEADER). */
  mqr_broker_message_t m = message(d);
  for (double end = bench_now() + 20;;) {
    uint64_t failed = d->failed;
    mqr_broker_send_async(d->b, &m, on_sent, d);
    d->sent++;
    while (d->answered < d->sent) uv_run(&d->loop, UV_RUN_ONCE);
    if (d->failed == failed) break;
    if (bench_now() > end) return mqr_bench_fail(c, "node 1 did not come to lead within 20 s");
    for (double t = bench_now() + 0.05; bench_now() < t;) uv_run(&d->loop, UV_RUN_NOWAIT);
  }
  d->failed = 0, d->sent = d->answered = 1; /* (the refused sends went nowhere; the one taken is on q0) */
  mqr_error_t err;
  if (mqr_broker_subscribe(d->b, MQR_STR("q0"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), WINDOW, on_delivery, d,
                           &d->k, NULL, &err))
    return mqr_bench_fail(c, "subscribe: %s", err.message);
  /* Warm: batch buffers, the log's arrays and the first snapshots grow to this rate's. */
  if (run_cd(c, 200000) || finish_cd(c)) return -1;
  return 0;
}

__attribute__((noinline)) static int run_cd(mqr_bench_ctx_t *c, uint64_t ops) {
  cd_t *d = mqr_bench_state(c);
  mqr_broker_message_t m = message(d);
  uint64_t end = d->sent + ops;
  while (d->sent < end) {
    /* (at most WINDOW unanswered, and as many more not yet received: a consumer that falls
     * behind holds the producer back, so that what is measured is the path, not a backlog's
     * growth in the queue and the replicated state) */
    while (d->sent < end && d->sent - d->answered < WINDOW && d->sent - d->received < 2 * WINDOW) {
      mqr_broker_send_async(d->b, &m, on_sent, d);
      d->sent++;
    }
    uv_run(&d->loop, UV_RUN_ONCE);
  }
  return d->failed ? mqr_bench_fail(c, "%llu sends failed", (unsigned long long)d->failed) : 0;
}

static int finish_cd(mqr_bench_ctx_t *c) {
  cd_t *d = mqr_bench_state(c);
  while (d->answered < d->sent || d->received < d->sent) uv_run(&d->loop, UV_RUN_ONCE);
  return 0;
}

static void teardown_cd(mqr_bench_ctx_t *c) {
  cd_t *d = mqr_bench_state(c);
  if (d->b) mqr_broker_close(d->b, NULL, NULL);
  if (d->cfg) {
    uv_run(&d->loop, UV_RUN_DEFAULT);
    uv_loop_close(&d->loop);
    mqr_config_destroy(d->cfg);
  }
  for (int i = 1; i < 3; i++) bench_stop(d->s.nodes[i]);
  remove_dir(&d->s);
  free(d);
}

static const mqr_bench_def_t dosend = {"cluster.dosend", "size=16,1024", "thrpt", setup_cd, teardown_cd, NULL, NULL,
                                       run_cd,           finish_cd};
MQR_BENCH_REGISTER(dosend)
