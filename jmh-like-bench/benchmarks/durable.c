/* durable: what durability costs, and against what (docs/benchmarks.md, docs/durability.md).
 *
 *   durable.loopback  one producer with a window of WINDOW unanswered sends and one
 *                     consumer through a broker on 127.0.0.1; an operation is one
 *                     durable message sent, answered and received.
 *       impl=mqr        mqrd with its journal (fdatasync before every receipt); libmqr-
 *                       client, a receipt per send, the consumer acking cumulatively
 *       impl=jetstream  nats-server -js (file storage) and nats.c: js_PublishAsync with
 *                       MaxPending WINDOW, an ordered push consumer (no acks): NATS's own
 *                       bench shape. JetStream acknowledges a publish once it is written,
 *                       not synced (it syncs every two minutes by default)
 *       impl=disk       the ceiling: the same bytes (a record of the body and 48 bytes of
 *                       framing per message) written by this process in batches of
 *                       WINDOW, one pwrite and one fdatasync per batch
 *   durable.latency   one durable send at a time, waiting for its receipt (sample mode:
 *                     the median is the figure); impl=disk: one pwrite of the same bytes
 *                     and one fdatasync
 *   durable.recovery  a broker starting on a journal of `messages` durable messages over
 *                     ten queues (single shot); aux: records recovered per second
 *   durable.dosend    in-process: mqr_broker_send_async of a durable message to a durable
 *                     queue with an in-process consumer acking it, fdatasync included;
 *                     B/op is the durable send path's allocation per message
 *
 * The journals live under the build (MQR_BENCH_DATA), on the disk the machine has. */
#include <fcntl.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "durable_loop.h"
#include "mqr/broker.h"
#include "mqr/client.h"

/* ---- mqr over loopback, and JetStream (their runs: durable_loop.h) ------------------------------ */

static int setup_mqr(mqr_bench_ctx_t *c, st_t *s, bool consumer) {
  fresh(s, "mqr");
  int port = bench_free_port();
  snprintf(s->config_path, sizeof s->config_path, "%s/mqr.yaml", s->dir);
  FILE *f = fopen(s->config_path, "w");
  if (f == NULL) return mqr_bench_fail(c, "%s: cannot write", s->config_path);
  fprintf(f,
          "security: {allow-anonymous: true}\nlisteners:\n  - {name: bench, host: 127.0.0.1, port: %d}\n"
          "persistence: {directory: %s/journal, journal-sync: %s}\n"
          "addresses:\n  bench: {anycast: [bench]}\n",
          port, s->dir, getenv("MQR_BENCH_NOSYNC") ? "false" : "true");
  fclose(f);
  char *argv[] = {"mqrd", "--config", s->config_path, NULL};
  s->mqrd = bench_spawn(MQR_BENCH_MQRD, argv);
  if (!bench_listening(port)) return mqr_bench_fail(c, "mqrd did not start listening on %d", port);
  return mqr_clients(c, s, port, consumer);
}

static void teardown_mqr(st_t *s) { bench_mqr_close(&s->loop, s->pub, s->sub, s->mqrd); }

static int setup_js(mqr_bench_ctx_t *c, st_t *s) {
  fresh(s, "jetstream");
  int port = bench_free_port();
  char ports[16], url[64];
  snprintf(ports, sizeof ports, "%d", port);
  snprintf(url, sizeof url, "nats://127.0.0.1:%d", port);
  char *argv[] = {"nats-server", "-js", "-sd", s->dir, "-a", "127.0.0.1", "-p", ports, NULL};
  s->server = bench_spawn("/usr/sbin/nats-server", argv);
  return js_stream(c, s, url, 1, bench_now() + 10);
}

/* ---- the disk alone ---------------------------------------------------------------------------- */

static int setup_disk(mqr_bench_ctx_t *c, st_t *s) {
  fresh(s, "disk");
  char path[600];
  snprintf(path, sizeof path, "%s/ceiling.dat", s->dir);
  s->file_size = (size_t)64 << 20;
  s->fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  s->buf = calloc(1, (size_t)WINDOW * (sizeof s->body + FRAMING));
  if (s->fd < 0 || s->buf == NULL) return mqr_bench_fail(c, "%s: cannot make", path);
  for (size_t at = 0; at < s->file_size; at += (size_t)1 << 20) /* filled, as the journal's files are */
    if (pwrite(s->fd, s->buf, (size_t)1 << 20, (off_t)at) != (ssize_t)1 << 20) return mqr_bench_fail(c, "fill");
  fdatasync(s->fd);
  memset(s->buf, 'm', (size_t)WINDOW * (sizeof s->body + FRAMING));
  return 0;
}

/* n messages' bytes, one pwrite and one fdatasync. */
static int disk_write(mqr_bench_ctx_t *c, st_t *s, uint64_t n) {
  size_t len = (size_t)n * (s->size + FRAMING);
  if (s->off + len > s->file_size) s->off = 0;
  if (pwrite(s->fd, s->buf, len, (off_t)s->off) != (ssize_t)len || fdatasync(s->fd) != 0)
    return mqr_bench_fail(c, "write");
  s->off += len;
  return 0;
}

static int run_disk(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  for (uint64_t done = 0; done < ops;) {
    uint64_t n = ops - done < WINDOW ? ops - done : WINDOW;
    if (disk_write(c, s, n)) return -1;
    done += n;
  }
  return 0;
}

/* ---- durable.loopback ----------------------------------------------------------------------------- */

static int setup(mqr_bench_ctx_t *c) {
  static const char *const impls[] = {"mqr", "jetstream", "disk"};
  st_t *s = st_new(c, impls, 3);
  if (s == NULL) return -1;
  return s->impl == 1 ? setup_js(c, s) : s->impl == 2 ? setup_disk(c, s) : setup_mqr(c, s, true);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s->impl == 1)
    teardown_js(s);
  else if (s->impl == 0)
    teardown_mqr(s);
  if (s->fd >= 0) close(s->fd);
  free(s->buf);
  remove_dir(s);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  return s->impl == 1 ? run_js(c, s, ops) : s->impl == 2 ? run_disk(c, s, ops) : run_mqr(c, s, ops);
}

static int finish(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  return s->impl == 1 ? finish_js(c, s) : s->impl == 0 ? finish_mqr(s) : 0;
}

static const mqr_bench_def_t loopback = {
    "durable.loopback", "size=16,1024;impl=mqr,jetstream,disk", "thrpt", setup, teardown, NULL, NULL, run, finish};
MQR_BENCH_REGISTER(loopback)

/* ---- durable.latency --------------------------------------------------------------------------- */

static int setup_latency(mqr_bench_ctx_t *c) {
  static const char *const impls[] = {"mqr", "", "disk"}; /* (the same numbers as durable.loopback's) */
  st_t *s = st_new(c, impls, 3);
  if (s == NULL) return -1;
  return s->impl == 2 ? setup_disk(c, s) : setup_mqr(c, s, false);
}

__attribute__((noinline)) static int run_latency(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  if (s->impl == 2) {
    for (uint64_t i = 0; i < ops; i++)
      if (disk_write(c, s, 1)) return -1;
    return 0;
  }
  return run_mqr_one_by_one(c, s, ops);
}

static const mqr_bench_def_t latency = {
    "durable.latency", "size=16,1024;impl=mqr,disk", "sample", setup_latency, teardown, NULL, NULL, run_latency, NULL};
MQR_BENCH_REGISTER(latency)

/* ---- durable.recovery ---------------------------------------------------------------------------- */

typedef struct {
  st_t s;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  uv_loop_t loop;
  long messages;
} rec_t;

static const char rec_yaml[] = "persistence: {directory: %s/journal, journal-sync: %s}\n"
                               "addresses:\n"
                               "  q0: {anycast: [q0]}\n  q1: {anycast: [q1]}\n  q2: {anycast: [q2]}\n"
                               "  q3: {anycast: [q3]}\n  q4: {anycast: [q4]}\n  q5: {anycast: [q5]}\n"
                               "  q6: {anycast: [q6]}\n  q7: {anycast: [q7]}\n  q8: {anycast: [q8]}\n"
                               "  q9: {anycast: [q9]}\n";

static int open_broker(mqr_bench_ctx_t *c, rec_t *r, bool sync) {
  char yaml[sizeof rec_yaml + 600];
  int n = snprintf(yaml, sizeof yaml, rec_yaml, r->s.dir, sync ? "true" : "false");
  if (mqr_config_load_string("bench.yaml", yaml, (size_t)n, &r->cfg, NULL) != 0) return mqr_bench_fail(c, "config");
  uv_loop_init(&r->loop);
  mqr_broker_options_t opt = {.config = r->cfg};
  mqr_error_t err;
  if (mqr_broker_create(&r->loop, &opt, &r->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  return 0;
}

static void close_broker(rec_t *r) {
  if (r->b) mqr_broker_close(r->b, NULL, NULL);
  r->b = NULL;
  uv_run(&r->loop, UV_RUN_DEFAULT);
  uv_loop_close(&r->loop);
  mqr_config_destroy(r->cfg);
  r->cfg = NULL;
}

static int setup_recovery(mqr_bench_ctx_t *c) {
  rec_t *r = calloc(1, sizeof *r);
  mqr_bench_set_state(c, r);
  r->messages = mqr_bench_param_long(c, "messages");
  fresh(&r->s, "recovery");
  /* The journal, written once (without fdatasync: only its contents matter here). */
  if (open_broker(c, r, false)) return -1;
  char body[16] = "0123456789abcdef", name[4] = "q0";
  for (long i = 0; i < r->messages; i++) {
    name[1] = (char)('0' + i % 10);
    mqr_broker_message_t m = {
        mqr_str_n(name, 2), MQR_ROUTING_NONE, true, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0,
        mqr_str_n(body, 16)};
    if (mqr_broker_send(r->b, &m, NULL, NULL) != 0) return mqr_bench_fail(c, "send %ld", i);
    if (i % 10000 == 9999) uv_run(&r->loop, UV_RUN_NOWAIT);
  }
  close_broker(r);
  return 0;
}

__attribute__((noinline)) static int run_recovery(mqr_bench_ctx_t *c, uint64_t ops) {
  rec_t *r = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (r->b) close_broker(r);
    double t0 = bench_now();
    if (open_broker(c, r, true)) return -1;
    double t = bench_now() - t0;
    mqr_broker_stats_t st;
    mqr_broker_stats(r->b, &st);
    if (st.durable != (uint64_t)r->messages)
      return mqr_bench_fail(c, "recovered %llu of %ld", (unsigned long long)st.durable, r->messages);
    /* Each message is two records here (its ADD and its REF). */
    mqr_bench_aux(c, "records_per_s", 2.0 * (double)r->messages / t, "records/s");
  }
  return 0;
}

static void teardown_recovery_iteration(mqr_bench_ctx_t *c) {
  rec_t *r = mqr_bench_state(c);
  if (r->b) close_broker(r);
}

static void teardown_recovery(mqr_bench_ctx_t *c) {
  rec_t *r = mqr_bench_state(c);
  if (r->b) close_broker(r);
  remove_dir(&r->s);
  free(r);
}

static const mqr_bench_def_t recovery = {
    "durable.recovery",          "messages=1000000", "ss", setup_recovery, teardown_recovery, NULL,
    teardown_recovery_iteration, run_recovery,       NULL};
MQR_BENCH_REGISTER(recovery)

/* ---- durable.dosend ---------------------------------------------------------------------------- */

typedef struct {
  rec_t r;
  mqr_broker_consumer_t *k;
  uint64_t sent, answered, received;
} ds_t;

static void ds_answer(void *arg, int status, const mqr_broker_receipt_t *rc, const mqr_error_t *err) {
  (void)rc, (void)err;
  ds_t *d = arg;
  d->answered++;
  if (status) d->answered |= 1ull << 62; /* seen by run */
}

static void ds_message(mqr_broker_consumer_t *k, const mqr_frame_message_t *m, void *arg) {
  ds_t *d = arg;
  d->received++;
  mqr_broker_ack(k, m->delivery, false);
  mqr_broker_credit(k, 1);
}

static int run_dosend(mqr_bench_ctx_t *c, uint64_t ops);
static int finish_dosend(mqr_bench_ctx_t *c);

static int setup_dosend(mqr_bench_ctx_t *c) {
  ds_t *d = calloc(1, sizeof *d);
  mqr_bench_set_state(c, d);
  fresh(&d->r.s, "dosend");
  if (open_broker(c, &d->r, true)) return -1;
  mqr_error_t err;
  if (mqr_broker_subscribe(d->r.b, MQR_STR("q0"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), WINDOW, ds_message, d,
                           &d->k, NULL, &err))
    return mqr_bench_fail(c, "subscribe: %s", err.message);
  /* Warm: the writer's batch buffers grow to the largest batch this rate makes, once
   * (they are kept and reused: a run of 3M sends after this allocates once, if at all). */
  if (run_dosend(c, 500000) || finish_dosend(c)) return -1;
  return 0;
}

__attribute__((noinline)) static int run_dosend(mqr_bench_ctx_t *c, uint64_t ops) {
  ds_t *d = mqr_bench_state(c);
  mqr_broker_message_t m = {MQR_STR("q0"),
                            MQR_ROUTING_NONE,
                            true,
                            {"", 0},
                            MQR_PRIORITY_DEFAULT,
                            0,
                            0,
                            {"", 0},
                            NULL,
                            NULL,
                            0,
                            MQR_STR("0123456789abcdef")};
  uint64_t end = d->sent + ops;
  while (d->sent < end) {
    while (d->sent < end && d->sent - d->answered < WINDOW) {
      mqr_broker_send_async(d->r.b, &m, ds_answer, d);
      d->sent++;
    }
    uv_run(&d->r.loop, UV_RUN_ONCE);
  }
  return d->answered >> 62 ? mqr_bench_fail(c, "a send failed") : 0;
}

static int finish_dosend(mqr_bench_ctx_t *c) {
  ds_t *d = mqr_bench_state(c);
  while (d->answered < d->sent || d->received < d->sent) uv_run(&d->r.loop, UV_RUN_ONCE);
  return 0;
}

static void teardown_dosend(mqr_bench_ctx_t *c) {
  ds_t *d = mqr_bench_state(c);
  if (d->r.b) close_broker(&d->r);
  remove_dir(&d->r.s);
  free(d);
}

static const mqr_bench_def_t dosend = {
    "durable.dosend", NULL, "thrpt", setup_dosend, teardown_dosend, NULL, NULL, run_dosend, finish_dosend};
MQR_BENCH_REGISTER(dosend)
