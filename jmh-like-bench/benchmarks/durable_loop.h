/* What the durable benchmarks share (durable.c, cluster.c): a producer with a window of
 * unanswered durable sends and a consumer through a broker on 127.0.0.1, for mqr
 * (libmqr-client) and NATS JetStream (nats.c), each as its own best client runs it.
 * Header-only: each benchmark file is its own translation unit. */
#ifndef MQR_BENCH_DURABLE_LOOP_H
#define MQR_BENCH_DURABLE_LOOP_H

#include <nats/nats.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "mqr/client.h"

#define WINDOW 4096
#define FRAMING 48
#define FLUSH_EVERY 256

typedef struct {
  int impl; /* 0 mqr, 1 jetstream, 2 disk */
  size_t size;
  char body[1024];
  char dir[512];
  /* mqr */
  pid_t mqrd;
  pid_t nodes[3]; /* cluster.c's: the three nodes (mqrd, or nats-server), 0 when none */
  char config_path[600];
  uv_loop_t loop;
  mqr_client_t *pub, *sub;
  mqr_client_sub_t *subscription;
  uint64_t sent, answered, failed, received, acked, flushed;
  /* jetstream */
  pid_t server;
  natsConnection *npub, *nsub;
  jsCtx *js, *jsub;
  natsSubscription *nsubscription;
  _Atomic uint64_t nreceived;
  /* disk */
  int fd;
  uint8_t *buf;
  size_t off, file_size;
} st_t;

static inline void fresh(st_t *s, const char *what) {
  snprintf(s->dir, sizeof s->dir, "%s/%s-%d", MQR_BENCH_DATA, what, (int)getpid());
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", s->dir, s->dir);
  if (system(cmd) != 0) abort();
}

static inline void remove_dir(st_t *s) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", s->dir);
}

/* ---- mqr over loopback ------------------------------------------------------------------- */

static inline void on_receipt(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c, (void)f;
  st_t *s = arg;
  s->answered++;
  if (status != 0) s->failed++;
}

static inline void on_message(mqr_client_sub_t *sub, const mqr_frame_message_t *m, void *arg) {
  st_t *s = arg;
  s->received++;
  if (s->received - s->acked >= 1000) {
    mqr_client_ack(sub, m->delivery, true);
    mqr_client_credit(sub, (uint32_t)(s->received - s->acked));
    s->acked = s->received;
  }
}

static inline int run_mqr(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  mqr_client_message_t m = {MQR_STR("bench"), MQR_ANYCAST, true, {"", 0}, MQR_PRIORITY_DEFAULT,       0, 0,
                            {"", 0},          NULL,        NULL, 0,       mqr_str_n(s->body, s->size)};
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    while (s->sent < end && s->sent - s->answered < WINDOW && s->sent - s->received < 2 * WINDOW) {
      if (mqr_client_send(s->pub, &m, on_receipt, s, NULL) != 0) return mqr_bench_fail(c, "send");
      s->sent++;
    }
    /* As a pipelining client does: sends gather in the client's buffer and go out
     * every FLUSH_EVERY (one pass that writes and reads without waiting), and the loop
     * blocks only when the window is full. */
    bool room = s->sent - s->answered < WINDOW && s->sent - s->received < 2 * WINDOW;
    if (!room || s->sent - s->flushed >= FLUSH_EVERY) {
      uv_run(&s->loop, room ? UV_RUN_NOWAIT : UV_RUN_ONCE);
      s->flushed = s->sent;
    }
  }
  return s->failed ? mqr_bench_fail(c, "%llu sends refused", (unsigned long long)s->failed) : 0;
}

static inline int finish_mqr(st_t *s) {
  s->flushed = s->sent;
  while (s->received < s->sent || s->answered < s->sent) uv_run(&s->loop, UV_RUN_ONCE);
  return 0;
}

/* ---- JetStream ------------------------------------------------------------------------------ */

static inline void on_js(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg) {
  (void)nc, (void)sub;
  st_t *s = arg;
  atomic_fetch_add_explicit(&s->nreceived, 1, memory_order_acq_rel);
  natsMsg_Destroy(msg);
}

static inline void wait_js(st_t *s, uint64_t n) {
  while (atomic_load_explicit(&s->nreceived, memory_order_acquire) < n) usleep(200);
}

static inline int run_js(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    /* MaxPending stalls the publisher at WINDOW unacknowledged publishes. */
    natsStatus st = js_PublishAsync(s->js, "bench", s->body, (int)s->size, NULL);
    if (st == NATS_TIMEOUT) continue;
    if (st != NATS_OK) return mqr_bench_fail(c, "publish: %s", natsStatus_GetText(st));
    s->sent++;
    if (s->sent - atomic_load_explicit(&s->nreceived, memory_order_relaxed) > 2 * WINDOW) wait_js(s, s->sent - WINDOW);
  }
  return 0;
}

static inline int finish_js(mqr_bench_ctx_t *c, st_t *s) {
  if (js_PublishAsyncComplete(s->js, NULL) != NATS_OK) return mqr_bench_fail(c, "publish complete");
  wait_js(s, s->sent);
  return 0;
}

static inline void teardown_js(st_t *s) {
  natsSubscription_Destroy(s->nsubscription);
  jsCtx_Destroy(s->js);
  jsCtx_Destroy(s->jsub);
  natsConnection_Destroy(s->npub);
  natsConnection_Destroy(s->nsub);
  bench_stop(s->server);
}

/* A benchmark's state, made its own: impl (the index of the `impl` parameter's value in
 * impls, n of them), and a body of its `size` parameter; NULL (the trial failed) for an
 * impl the benchmark does not have or a size past the body's room. */
static inline st_t *st_new(mqr_bench_ctx_t *c, const char *const *impls, int n) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  signal(SIGPIPE, SIG_IGN);
  const char *impl = mqr_bench_param(c, "impl");
  s->impl = -1;
  for (int i = 0; i < n; i++)
    if (strcmp(impl, impls[i]) == 0) s->impl = i;
  if (s->impl < 0) {
    mqr_bench_fail(c, "impl=%s: not one of this benchmark's", impl);
    return NULL;
  }
  s->fd = -1;
  s->size = (size_t)mqr_bench_param_long(c, "size");
  if (s->size > sizeof s->body) {
    mqr_bench_fail(c, "size %zu", s->size);
    return NULL;
  }
  memset(s->body, 'm', s->size);
  return s;
}

/* The JetStream side once its server(s) run: a publisher connected to url (retried until
 * `end`), a file stream BENCH of `replicas` on subject bench (retried until then: a
 * cluster elects its meta leader first) and an ordered push consumer of it. */
static inline int js_stream(mqr_bench_ctx_t *c, st_t *s, const char *url, int replicas, double end) {
  natsStatus st = NATS_ERR;
  while (bench_now() < end && (st = natsConnection_ConnectTo(&s->npub, url)) != NATS_OK) usleep(20000);
  if (st != NATS_OK) return mqr_bench_fail(c, "nats-server did not start: %s", natsStatus_GetText(st));
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = WINDOW;
  if (natsConnection_JetStream(&s->js, s->npub, &jo) != NATS_OK) return mqr_bench_fail(c, "jetstream context");
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  const char *subjects[] = {"bench"};
  sc.Name = "BENCH";
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.Replicas = replicas;
  jsErrCode jerr = 0;
  while ((st = js_AddStream(NULL, s->js, &sc, NULL, &jerr)) != NATS_OK && bench_now() < end) usleep(200000);
  if (st != NATS_OK) return mqr_bench_fail(c, "add a stream of %d replica(s): %d", replicas, (int)jerr);
  if (natsConnection_ConnectTo(&s->nsub, url) != NATS_OK ||
      natsConnection_JetStream(&s->jsub, s->nsub, NULL) != NATS_OK)
    return mqr_bench_fail(c, "subscriber connection");
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Ordered = true;
  if (js_Subscribe(&s->nsubscription, s->jsub, "bench", on_js, s, NULL, &so, &jerr) != NATS_OK ||
      natsSubscription_SetPendingLimits(s->nsubscription, -1, -1) != NATS_OK)
    return mqr_bench_fail(c, "subscribe: %d", (int)jerr);
  return 0;
}

/* The mqr side once mqrd listens on port: a producer and (with consumer) a consumer. */
static inline int mqr_clients(mqr_bench_ctx_t *c, st_t *s, int port, bool consumer) {
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  uv_loop_init(&s->loop);
  char why[600];
  if (bench_mqr_connect(&s->loop, url, &s->pub, &s->sub, &s->subscription, 2 * WINDOW, consumer ? on_message : NULL, s,
                        why, sizeof why))
    return mqr_bench_fail(c, "%s", why);
  return 0;
}

/* One durable send at a time, each waiting for its answer (the latency benchmarks). */
static inline int run_mqr_one_by_one(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  mqr_client_message_t m = {MQR_STR("bench"), MQR_ANYCAST, true, {"", 0}, MQR_PRIORITY_DEFAULT,       0, 0,
                            {"", 0},          NULL,        NULL, 0,       mqr_str_n(s->body, s->size)};
  for (uint64_t i = 0; i < ops; i++) {
    if (mqr_client_send(s->pub, &m, on_receipt, s, NULL) != 0) return mqr_bench_fail(c, "send");
    s->sent++;
    while (s->answered < s->sent) uv_run(&s->loop, UV_RUN_ONCE);
  }
  return s->failed ? mqr_bench_fail(c, "refused") : 0;
}

#endif
