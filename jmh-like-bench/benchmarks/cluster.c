/* cluster: what replication costs, and against what (docs/cluster.md, docs/benchmarks.md).
 *
 *   cluster.loopback  as durable.loopback (durable_loop.h): one producer with a window of
 *                     WINDOW unanswered durable sends and one consumer, an operation is
 *                     one message sent, answered and received; all on this machine.
 *       impl=mqr        three mqrd nodes, the address replicated (its group's leader
 *                       answers once a majority has written the message, each node
 *                       fdatasyncing its Raft log); the clients on the leader
 *       impl=jetstream  three nats-server nodes in a cluster, a file stream with 3
 *                       replicas; nats.c's js_PublishAsync with MaxPending WINDOW and an
 *                       ordered push consumer, as durable.loopback runs it
 *       impl=single     one mqrd with its journal (durable.loopback's impl=mqr), for the
 *                       ratio in the same run
 *       impl=feed       impl=mqr's three nodes, each with its peers' urls, the producer on
 *                       the leader and the consumer on a follower: its queue fed from the
 *                       leader (docs/cluster.md, "Consumers on any node")
 *   cluster.latency   one replicated durable send at a time, waiting for its answer
 *                     (sample mode: the median is the figure); impl=single: one mqrd
 *
 * Each node's data is under the build (MQR_BENCH_DATA), on the machine's one disk. */
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "durable_loop.h"
#include "mqr/client.h"

/* ---- mqr: three nodes ---------------------------------------------------------------------- */

/* Whether the node at port leads group 0 (its cluster.status says so). */
static bool leads(int port) {
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  mqr_bclient_t *bc;
  if (mqr_bclient_connect(url, "bench-probe", 2000, &bc, NULL) != 0) return false;
  mqr_frame_manage_result_t *r = NULL;
  bool leading = false;
  if (mqr_bclient_manage(bc, MQR_STR("cluster.status"), NULL, 0, &r, NULL) == 0 && r->rows.count > 0) {
    const mqr_avro_map_t *row = r->rows.items;
    const mqr_value_t *values = row->values;
    for (size_t k = 0; k < row->count; k++)
      if (mqr_str_eq(row->keys[k], MQR_STR("leading")) && values[k].type == MQR_VALUE_BOOL) leading = values[k].u.b;
  }
  mqr_free(r);
  mqr_bclient_close(bc);
  return leading;
}

/* The node that leads group 0 (-1: none within 20 s). */
static int find_leader(const int *ports) {
  double end = bench_now() + 20;
  while (bench_now() < end) {
    for (int i = 0; i < 3; i++)
      if (leads(ports[i])) return i;
    usleep(100000);
  }
  return -1;
}

static int setup_nodes(mqr_bench_ctx_t *c, st_t *s, bool consumer, bool feed) {
  fresh(s, "cluster");
  int ports[3], raft[3];
  for (int i = 0; i < 3; i++) ports[i] = bench_free_port(), raft[i] = bench_free_port();
  for (int i = 0; i < 3; i++) {
    char path[700], peers[256] = "";
    for (int k = 0, n = 0; k < 3; k++)
      if (k != i)
        n += snprintf(peers + n, sizeof peers - (size_t)n,
                      "%s{id: %d, address: 127.0.0.1:%d, url: \"tcp://127.0.0.1:%d\"}", n ? ", " : "", k + 1, raft[k],
                      ports[k]);
    snprintf(path, sizeof path, "%s/n%d.yaml", s->dir, i + 1);
    if (!bench_cluster_config(path, ports[i], s->dir, i + 1, "  bench: {anycast: [bench]}\n", raft[i], 1, peers, ""))
      return mqr_bench_fail(c, "%s: cannot write", path);
    char *argv[] = {"mqrd", "--config", path, NULL};
    s->nodes[i] = bench_spawn(MQR_BENCH_MQRD, argv);
  }
  for (int i = 0; i < 3; i++)
    if (!bench_listening(ports[i])) return mqr_bench_fail(c, "mqrd node %d did not start listening", i + 1);
  int l = find_leader(ports);
  if (l < 0) return mqr_bench_fail(c, "no node leads the group within 20 s");
  char follower[64];
  snprintf(follower, sizeof follower, "tcp://127.0.0.1:%d", ports[(l + 1) % 3]);
  bench_mqr_sub_url = feed ? follower : NULL;
  int rc = mqr_clients(c, s, ports[l], consumer);
  bench_mqr_sub_url = NULL;
  return rc;
}

static void stop_nodes(st_t *s) {
  for (int i = 0; i < 3; i++) {
    bench_stop(s->nodes[i]);
    s->nodes[i] = 0;
  }
}

/* ---- mqr: one node (durable.loopback's) -------------------------------------------------------- */

static int setup_single(mqr_bench_ctx_t *c, st_t *s, bool consumer) {
  fresh(s, "single");
  int port = bench_free_port();
  snprintf(s->config_path, sizeof s->config_path, "%s/mqr.yaml", s->dir);
  FILE *f = fopen(s->config_path, "w");
  if (f == NULL) return mqr_bench_fail(c, "%s: cannot write", s->config_path);
  fprintf(f,
          "security: {allow-anonymous: true}\nlisteners:\n  - {name: bench, host: 127.0.0.1, port: %d}\n"
          "persistence: {directory: %s/journal}\naddresses:\n  bench: {anycast: [bench]}\n",
          port, s->dir);
  fclose(f);
  char *argv[] = {"mqrd", "--config", s->config_path, NULL};
  s->mqrd = bench_spawn(MQR_BENCH_MQRD, argv);
  if (!bench_listening(port)) return mqr_bench_fail(c, "mqrd did not start listening on %d", port);
  return mqr_clients(c, s, port, consumer);
}

/* ---- JetStream: three servers, a stream of three replicas ---------------------------------------- */

static int setup_js3(mqr_bench_ctx_t *c, st_t *s) {
  fresh(s, "js3");
  int ports[3], routes[3];
  for (int i = 0; i < 3; i++) ports[i] = bench_free_port(), routes[i] = bench_free_port();
  for (int i = 0; i < 3; i++) {
    char port[16], name[16], sd[600], cluster[64], others[160];
    snprintf(port, sizeof port, "%d", ports[i]);
    snprintf(name, sizeof name, "n%d", i + 1);
    snprintf(sd, sizeof sd, "%s/n%d", s->dir, i + 1);
    snprintf(cluster, sizeof cluster, "nats://127.0.0.1:%d", routes[i]);
    int n = 0;
    for (int k = 0; k < 3; k++)
      if (k != i)
        n += snprintf(others + n, sizeof others - (size_t)n, "%snats://127.0.0.1:%d", n ? "," : "", routes[k]);
    char *argv[] = {"nats-server",    "-js",   "-sd",       sd,      "-a",       "127.0.0.1", "-p", port, "-n", name,
                    "--cluster_name", "bench", "--cluster", cluster, "--routes", others,      NULL};
    s->nodes[i] = bench_spawn("/usr/sbin/nats-server", argv);
  }
  char url[64];
  snprintf(url, sizeof url, "nats://127.0.0.1:%d", ports[0]);
  return js_stream(c, s, url, 3, bench_now() + 20);
}

/* ---- cluster.loopback ------------------------------------------------------------------------------ */

static int setup(mqr_bench_ctx_t *c) {
  static const char *const impls[] = {"mqr", "jetstream", "single", "feed"};
  st_t *s = st_new(c, impls, 4);
  if (s == NULL) return -1;
  return s->impl == 1   ? setup_js3(c, s)
         : s->impl == 2 ? setup_single(c, s, true)
                        : setup_nodes(c, s, true, s->impl == 3);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s->impl == 1) {
    s->server = 0;
    teardown_js(s);
  } else {
    bench_mqr_close(&s->loop, s->pub, s->sub, s->mqrd);
  }
  stop_nodes(s);
  remove_dir(s);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  return s->impl == 1 ? run_js(c, s, ops) : run_mqr(c, s, ops);
}

static int finish(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  return s->impl == 1 ? finish_js(c, s) : finish_mqr(s);
}

static const mqr_bench_def_t loopback = {"cluster.loopback",
                                         "size=16,1024;impl=mqr,jetstream,single,feed",
                                         "thrpt",
                                         setup,
                                         teardown,
                                         NULL,
                                         NULL,
                                         run,
                                         finish};
MQR_BENCH_REGISTER(loopback)

/* ---- cluster.latency ------------------------------------------------------------------------------- */

static int setup_latency(mqr_bench_ctx_t *c) {
  static const char *const impls[] = {"mqr", "", "single"}; /* (the same numbers as cluster.loopback's) */
  st_t *s = st_new(c, impls, 3);
  if (s == NULL) return -1;
  return s->impl == 2 ? setup_single(c, s, false) : setup_nodes(c, s, false, false);
}

__attribute__((noinline)) static int run_latency(mqr_bench_ctx_t *c, uint64_t ops) {
  return run_mqr_one_by_one(c, mqr_bench_state(c), ops);
}

static const mqr_bench_def_t latency = {"cluster.latency",
                                        "size=16,1024;impl=mqr,single",
                                        "sample",
                                        setup_latency,
                                        teardown,
                                        NULL,
                                        NULL,
                                        run_latency,
                                        NULL};
MQR_BENCH_REGISTER(latency)
