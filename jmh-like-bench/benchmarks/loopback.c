/* loopback: one producer and one consumer through a broker on 127.0.0.1, messages per
 * second end to end (an operation is one message sent and received), side by side with
 * nats-server and the nats.c client in the same run.
 *
 *   impl=mqr   mqrd (this build's) in its own process; producer and consumer are two
 *              libmqr-client connections on one libuv loop in the benchmark; sends are
 *              fire-and-forget; the consumer acknowledges cumulatively and grants credit
 *              every 1000 messages
 *   impl=nats  nats-server (Debian's) in its own process; producer and consumer are two
 *              nats.c connections, the subscriber asynchronous with unlimited pending;
 *              the producer publishes and nats.c's flusher thread writes, with no
 *              flush round trip: a plain publisher and async subscriber, as NATS's own
 *              benchmark tool runs them
 *
 * Each peer runs as its own best client runs it: mqr within its credit window (WINDOW
 * messages sent and not yet received), NATS with no window, only a guard (NATS_AHEAD)
 * that keeps the subscriber's client-side queue from growing without end. Neither
 * drains its pipeline between batches: what is in flight at the end of an iteration is
 * received in the harness's finish hook, inside the timed region, so every message
 * counted was received. size: the body's bytes (16 B to 64 KiB); for large bodies the window
 * and the guard are also held to WINDOW_BYTES and NATS_AHEAD_BYTES of bodies.
 *
 * tls=1: both over TLS (a self-signed P-256 certificate made for the run by the openssl
 * tool): mqrd's listener with a tls block and tls:// clients; nats-server --tls and
 * nats.c with its CA. The aux idle_conn.rss is what one more idle connection costs the
 * broker's resident memory (100 connected, no traffic), plaintext or TLS. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "mqr/client.h"

#define WINDOW 20000
#define WINDOW_BYTES (32u << 20)

/* mqrd's config, with the port the benchmark picked. */
static const char yaml[] = "security: {allow-anonymous: true}\nlisteners:\n"
                           "  - {name: bench, host: 127.0.0.1, port: %d%s}\n"
                           "addresses:\n"
                           "  bench: {anycast: [bench]}\n";

/* VmRSS of pid, KiB. */
static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

typedef struct {
  bool nats, tls;
  size_t size;
  char *body;
  uint64_t window, ahead; /* mqr's window and NATS's guard for this size */
  /* mqr */
  pid_t mqrd;
  char config_path[64];
  uv_loop_t loop;
  mqr_client_t *pub, *sub;
  mqr_client_sub_t *subscription;
  uint64_t sent, received, acked;
  /* nats */
  pid_t server;
  natsConnection *npub, *nsub;
  natsSubscription *nsubscription;
  _Atomic uint64_t nreceived;
  _Atomic uint64_t wake_at; /* the subscriber signals when nreceived reaches it */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} st_t;

/* ---- mqr ------------------------------------------------------------------------------- */

static void on_message(mqr_client_sub_t *sub, const mqr_frame_message_t *m, void *arg) {
  st_t *s = arg;
  s->received++;
  if (s->received - s->acked >= 1000) {
    mqr_client_ack(sub, m->delivery, true);
    mqr_client_credit(sub, (uint32_t)(s->received - s->acked));
    s->acked = s->received;
  }
}

static int setup_mqr(mqr_bench_ctx_t *c, st_t *s) {
  int port = bench_free_port();
  snprintf(s->config_path, sizeof s->config_path, "/tmp/mqr-bench-%d.yaml", (int)getpid());
  FILE *f = fopen(s->config_path, "w");
  if (f == NULL) return mqr_bench_fail(c, "%s: cannot write", s->config_path);
  char tls[256] = "";
  if (s->tls) snprintf(tls, sizeof tls, ", tls: {cert: %s/cert.pem, key: %s/key.pem}", bench_tls_dir, bench_tls_dir);
  fprintf(f, yaml, port, tls);
  fclose(f);
  char *argv[] = {"mqrd", "--config", s->config_path, NULL};
  s->mqrd = bench_spawn(MQR_BENCH_MQRD, argv);
  if (!bench_listening(port)) return mqr_bench_fail(c, "mqrd did not start listening on %d", port);
  char url[64], ca[128];
  snprintf(url, sizeof url, "%s://127.0.0.1:%d", s->tls ? "tls" : "tcp", port);
  snprintf(ca, sizeof ca, "%s/cert.pem", bench_tls_dir);
  bench_mqr_ca = s->tls ? ca : NULL;
  uv_loop_init(&s->loop);
  char why[600];
  if (bench_mqr_connect(&s->loop, url, &s->pub, &s->sub, &s->subscription, (uint32_t)(2 * s->window), on_message, s,
                        why, sizeof why))
    return mqr_bench_fail(c, "%s", why);
  /* What an idle connection costs the broker: 100 more, connected, then none. */
  long before = rss_kib(s->mqrd);
  mqr_client_t *idle[100];
  mqr_client_options_t opt = {.client_id = "idle", .tls_ca = bench_mqr_ca};
  int up = 0;
  for (int i = 0; i < 100; i++)
    if (mqr_client_create(&s->loop, &opt, &idle[i]) != 0 ||
        mqr_client_connect(idle[i], url, bench_ready, &up, NULL) != 0)
      return mqr_bench_fail(c, "idle connection %d", i);
  int want = bench_ready_count + 100;
  while (bench_ready_count < want) uv_run(&s->loop, UV_RUN_ONCE);
  usleep(200000);
  long after = rss_kib(s->mqrd);
  for (int i = 0; i < 100; i++) mqr_client_close(idle[i], NULL, NULL);
  for (int i = 0; i < 20; i++) uv_run(&s->loop, UV_RUN_NOWAIT);
  if (before > 0 && after > 0) mqr_bench_aux(c, "idle_conn.rss", (double)(after - before) / 100.0, "KiB");
  return 0;
}

static int run_mqr(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  mqr_client_message_t m = {MQR_STR("bench"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT,       0, 0,
                            {"", 0},          NULL,        NULL,  0,       mqr_str_n(s->body, s->size)};
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    /* Fill the window, let the loop write and read, again. */
    while (s->sent < end && s->sent - s->received < s->window) {
      if (mqr_client_send(s->pub, &m, NULL, NULL, NULL) != 0) return mqr_bench_fail(c, "send");
      s->sent++;
    }
    uv_run(&s->loop, UV_RUN_ONCE);
  }
  return 0;
}

static int finish_mqr(st_t *s) {
  while (s->received < s->sent) uv_run(&s->loop, UV_RUN_ONCE);
  return 0;
}

static void teardown_mqr(st_t *s) {
  bench_mqr_close(&s->loop, s->pub, s->sub, s->mqrd);
  unlink(s->config_path);
}

/* ---- nats ---------------------------------------------------------------------------------- */

static void on_nats(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg) {
  (void)nc, (void)sub;
  st_t *s = arg;
  uint64_t n = atomic_fetch_add_explicit(&s->nreceived, 1, memory_order_acq_rel) + 1;
  natsMsg_Destroy(msg);
  if (n == atomic_load_explicit(&s->wake_at, memory_order_acquire)) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
}

static int setup_nats(mqr_bench_ctx_t *c, st_t *s) {
  int port = bench_free_port();
  char ports[16], url[64];
  snprintf(ports, sizeof ports, "%d", port);
  snprintf(url, sizeof url, "nats://127.0.0.1:%d", port);
  char cert[128], key[128];
  snprintf(cert, sizeof cert, "%s/cert.pem", bench_tls_dir);
  snprintf(key, sizeof key, "%s/key.pem", bench_tls_dir);
  char *argv[] = {"nats-server", "-a", "127.0.0.1", "-p", ports, NULL, NULL, NULL, NULL, NULL, NULL};
  if (s->tls) argv[5] = "--tls", argv[6] = "--tlscert", argv[7] = cert, argv[8] = "--tlskey", argv[9] = key;
  s->server = bench_spawn("/usr/sbin/nats-server", argv);
  if (s->tls) snprintf(url, sizeof url, "tls://127.0.0.1:%d", port);
  natsOptions *no = NULL;
  if (natsOptions_Create(&no) != NATS_OK || natsOptions_SetURL(no, url) != NATS_OK ||
      (s->tls &&
       (natsOptions_SetSecure(no, true) != NATS_OK || natsOptions_LoadCATrustedCertificates(no, cert) != NATS_OK)))
    return mqr_bench_fail(c, "nats options");
  double end = bench_now() + 10;
  natsStatus st = NATS_ERR;
  while (bench_now() < end && (st = natsConnection_Connect(&s->npub, no)) != NATS_OK) usleep(20000);
  if (st != NATS_OK) {
    natsOptions_Destroy(no);
    return mqr_bench_fail(c, "nats-server did not start: %s", natsStatus_GetText(st));
  }
  st = natsConnection_Connect(&s->nsub, no);
  natsOptions_Destroy(no);
  if (st != NATS_OK || natsConnection_Subscribe(&s->nsubscription, s->nsub, "bench", on_nats, s) != NATS_OK ||
      natsSubscription_SetPendingLimits(s->nsubscription, -1, -1) != NATS_OK ||
      natsConnection_Flush(s->nsub) != NATS_OK)
    return mqr_bench_fail(c, "nats subscribe");
  return 0;
}

/* Waits, without spinning (the client's threads and the server need the cores), until the
 * subscriber has received n. */
static void wait_received(st_t *s, uint64_t n) {
  pthread_mutex_lock(&s->mu);
  atomic_store_explicit(&s->wake_at, n, memory_order_release);
  while (atomic_load_explicit(&s->nreceived, memory_order_acquire) < n) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 1000000; /* and look again every millisecond */
    if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&s->cv, &s->mu, &t);
  }
  pthread_mutex_unlock(&s->mu);
}

/* Publish, and let nats.c's flusher thread write what is buffered; the asynchronous
 * subscriber counts. nats-server cuts a subscriber whose socket falls 64 MiB behind, but
 * nats.c's reader takes everything into the subscription's unlimited queue, so the only
 * brake is this guard on that queue: more than NATS_AHEAD sent and not received waits
 * for half of them. */
#define NATS_AHEAD 1000000
#define NATS_AHEAD_BYTES (256u << 20)

static int run_nats(mqr_bench_ctx_t *c, st_t *s, uint64_t ops) {
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    if (natsConnection_Publish(s->npub, "bench", s->body, (int)s->size) != NATS_OK) return mqr_bench_fail(c, "publish");
    s->sent++;
    if (s->sent - atomic_load_explicit(&s->nreceived, memory_order_relaxed) > s->ahead)
      wait_received(s, s->sent - s->ahead / 2);
  }
  return 0;
}

static int finish_nats(st_t *s) {
  wait_received(s, s->sent);
  return 0;
}

static void teardown_nats(st_t *s) {
  natsSubscription_Destroy(s->nsubscription);
  natsConnection_Destroy(s->npub);
  natsConnection_Destroy(s->nsub);
  bench_stop(s->server);
}

/* ---- the benchmark ------------------------------------------------------------------------- */

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  signal(SIGPIPE, SIG_IGN);
  s->nats = strcmp(mqr_bench_param(c, "impl"), "nats") == 0;
  s->tls = mqr_bench_param_long(c, "tls") == 1;
  if (s->tls && !bench_make_cert()) return mqr_bench_fail(c, "the openssl tool could not make a certificate");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->size = (size_t)mqr_bench_param_long(c, "size");
  if (s->size == 0 || s->size > (64u << 10) || (s->body = malloc(s->size)) == NULL)
    return mqr_bench_fail(c, "size %zu", s->size);
  memset(s->body, 'm', s->size);
  s->window = WINDOW_BYTES / s->size < WINDOW ? WINDOW_BYTES / s->size : WINDOW;
  s->ahead = NATS_AHEAD_BYTES / s->size < NATS_AHEAD ? NATS_AHEAD_BYTES / s->size : NATS_AHEAD;
  return s->nats ? setup_nats(c, s) : setup_mqr(c, s);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s->nats)
    teardown_nats(s);
  else
    teardown_mqr(s);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->body);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  return s->nats ? run_nats(c, s, ops) : run_mqr(c, s, ops);
}

static int finish(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  return s->nats ? finish_nats(s) : finish_mqr(s);
}

static const mqr_bench_def_t loopback = {
    "loopback", "size=16,128,1024,65536;impl=mqr,nats;tls=0,1", "thrpt", setup, teardown, NULL, NULL, run, finish};
MQR_BENCH_REGISTER(loopback)
