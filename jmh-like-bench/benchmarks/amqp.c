/* amqp.loopback: the AMQP 1.0 head end to end, against the AMQP 1.0 brokers Debian has,
 * through one client for every broker: Qpid Proton C's engine (its connection driver, the
 * library mqrd's head runs on too) over non-blocking sockets on this thread. One producer
 * connection with a sender link and one consumer connection with a receiver link, on
 * 127.0.0.1; an operation is one message sent and received. The message is encoded once
 * (a data section of size=16, 1024 or 65536 bytes, not durable) and sent as those bytes
 * each time, as a client that sends the same message would; each received message is read
 * whole.
 *
 *   settle=presettled  the producer sends settled (at most once), and the receiver link
 *                      asks for settled deliveries (snd-settle-mode settled)
 *   settle=unsettled   the producer keeps each transfer until the broker settles it
 *                      (accepted: answered); the consumer accepts and settles each one
 *
 * The client keeps a window of WINDOW messages sent and not yet received (and, unsettled,
 * not yet answered; at most WINDOW_BYTES of bodies), gives the receiver link credit up to
 * it, and never drains between batches: finish receives what is in flight, inside the
 * timed region. The producer is faster than the consumer whenever the broker lets it.
 *
 *   impl=mqr       mqrd (this build's) in its own process, its listener on every head
 *   impl=rabbitmq  Debian's RabbitMQ 3.10 with its rabbitmq_amqp1_0 plugin (the target and
 *                  source /queue/bench; SASL ANONYMOUS as its default user), its own node
 *                  on ephemeral ports: its listener and distribution on 127.0.0.1, an
 *                  epmd of its own on 127.0.0.1 (epmd adds ::1, loopback too)
 *   impl=activemq  skipped: Debian's ActiveMQ Classic 5.17 has no AMQP transport (the
 *                  activemq-amqp module and Proton-J are not packaged)
 *   impl=embedded  the broker in this process, on this thread's loop, between the client's
 *                  reads and writes: B/op is then the broker's allocation per message plus
 *                  the client's, and the aux figures split it (below)
 *
 * Aux figures, per iteration:
 *   cpu.broker   the broker's CPU (user + system, its process and their children) per
 *                message, us/op (not embedded)
 *   peak_rss_mb  the broker's peak RSS (VmHWM; summed over its processes)
 *   alloc.client, alloc.broker.proton, alloc.broker.mqr  (embedded) bytes allocated per
 *                message by the client's calls into Proton, by the broker's loop in
 *                Proton and the C library, and by mqr's own allocator: alloc.norm is
 *                their sum
 *
 * The brokers' data live under the build (MQR_BENCH_DATA). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "mqr/broker.h"

#define WINDOW 10000
#define WINDOW_BYTES (32u << 20)

enum { MQR, RABBITMQ, EMBEDDED };

typedef struct {
  int fd;
  pn_connection_driver_t d;
  bool inited;
  pn_link_t *link;
  bool open; /* the broker attached the link */
} side_t;

typedef struct {
  int impl;
  bool settled;
  size_t body;
  uint64_t window;
  int port;
  pid_t pid, epmd;
  char dir[600], path[700];
  uv_loop_t loop; /* embedded */
  mqr_config_t *cfg;
  mqr_broker_t *b;
  side_t pub, sub;
  char *msg; /* the encoded message */
  size_t msg_len;
  char scratch[65536 + 1024];
  uint64_t sent, received, answered, tag;
  double progress;
  char failure[300];
  /* per iteration: CPU ticks and operations at its start; the trial's sums */
  long long t0;
  uint64_t ops0, ops;
  double ticks;
  /* embedded: bytes allocated by the client, by the broker's loop, by mqr's allocator */
  int64_t a_client, a_loop, a_mqr, a0_client, a0_loop, a0_mqr;
} st_t;

/* ---- the counting allocator (embedded): what mqr's own code allocates ----------------------- */

static int64_t counted; /* bytes mqr allocated, as jemalloc counts them */

static void *count_malloc(size_t n) {
  int64_t b = mqr_bench_allocated_bytes();
  void *p = malloc(n);
  counted += mqr_bench_allocated_bytes() - b;
  return p;
}
static void *count_realloc(void *q, size_t n) {
  int64_t b = mqr_bench_allocated_bytes();
  void *p = realloc(q, n);
  counted += mqr_bench_allocated_bytes() - b;
  return p;
}
static void *count_calloc(size_t k, size_t n) {
  int64_t b = mqr_bench_allocated_bytes();
  void *p = calloc(k, n);
  counted += mqr_bench_allocated_bytes() - b;
  return p;
}

/* ---- processes ------------------------------------------------------------------------------ */

/* utime + stime of pid and of every process under it, in clock ticks; its VmHWM summed
 * likewise into *hwm_kib when not NULL. */
static long long tree_ticks(pid_t pid, long *hwm_kib) {
  char path[96], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  long long t = 0;
  unsigned long long ut, st;
  char *p = strrchr(buf, ')');
  if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
    t = (long long)(ut + st);
  if (hwm_kib) {
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) != NULL) {
      while (fgets(buf, sizeof buf, f))
        if (strncmp(buf, "VmHWM:", 6) == 0) *hwm_kib += strtol(buf + 6, NULL, 10);
      fclose(f);
    }
  }
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  if ((f = fopen(path, "r")) == NULL) return t;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  for (char *q = buf, *end; (end = NULL, strtol(q, &end, 10)) > 0 && end != q; q = end)
    t += tree_ticks((pid_t)strtol(q, NULL, 10), hwm_kib);
  return t;
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fputs(text, f);
  return fclose(f) == 0 ? 0 : -1;
}

static const char mqr_yaml[] = "security: {allow-anonymous: true}\nlisteners:\n"
                               "  - {name: bench, host: 127.0.0.1, port: %d, protocols: [amqp]}\n"
                               "addresses:\n"
                               "  bench: {anycast: [bench]}\n";

static int start_rabbitmq(mqr_bench_ctx_t *c, st_t *s) {
  int epmd_port = bench_free_port(), dist_port = bench_free_port();
  char p[800], text[600];
  snprintf(p, sizeof p, "%s/enabled_plugins", s->dir);
  if (write_file(p, "[rabbitmq_amqp1_0].\n") != 0) return mqr_bench_fail(c, "%s", p);
  snprintf(s->path, sizeof s->path, "%s/rabbitmq.conf", s->dir);
  snprintf(text, sizeof text,
           "listeners.tcp.1 = 127.0.0.1:%d\namqp1_0.default_user = guest\nloopback_users = none\n"
           "log.console = false\nlog.file.level = warning\n",
           s->port);
  if (write_file(s->path, text) != 0) return mqr_bench_fail(c, "%s", s->path);
  char port_s[16];
  snprintf(port_s, sizeof port_s, "%d", epmd_port);
  char *eargv[] = {"epmd", "-port", port_s, "-address", "127.0.0.1", NULL};
  s->epmd = bench_spawn("/usr/bin/epmd", eargv);
  if (!bench_listening(epmd_port)) return mqr_bench_fail(c, "epmd did not listen on %d", epmd_port);
  char env[12][800];
  int k = 0;
  snprintf(env[k++], sizeof env[0], "HOME=%s", s->dir);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_NODENAME=bench@localhost");
  snprintf(env[k++], sizeof env[0], "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1");
  snprintf(env[k++], sizeof env[0], "RABBITMQ_NODE_PORT=%d", s->port);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_DIST_PORT=%d", dist_port);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_MNESIA_BASE=%s/mnesia", s->dir);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_LOG_BASE=%s/log", s->dir);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_ENABLED_PLUGINS_FILE=%s/enabled_plugins", s->dir);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_CONFIG_FILE=%s", s->path);
  snprintf(env[k++], sizeof env[0], "RABBITMQ_PLUGINS_EXPAND_DIR=%s/plugins", s->dir);
  snprintf(env[k++], sizeof env[0], "ERL_EPMD_PORT=%d", epmd_port);
  snprintf(env[k++], sizeof env[0], "ERL_EPMD_ADDRESS=127.0.0.1");
  for (int i = 0; i < k; i++) putenv(env[i]); /* (this process is the trial's fork: they go with it) */
  setenv("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false", 1);
  char *argv[] = {"rabbitmq-server", NULL};
  s->pid = bench_spawn("/usr/lib/rabbitmq/bin/rabbitmq-server", argv);
  for (int i = 0; i < 6; i++) /* (up to 60 s) */
    if (bench_listening(s->port)) return 0;
  return mqr_bench_fail(c, "RabbitMQ did not listen on %d", s->port);
}

static int start_broker(mqr_bench_ctx_t *c, st_t *s) {
  s->port = bench_free_port();
  snprintf(s->dir, sizeof s->dir, "%s/amqp-%d", MQR_BENCH_DATA, (int)getpid());
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", s->dir, s->dir);
  if (system(cmd) != 0) return mqr_bench_fail(c, "cannot make %s", s->dir);
  if (s->impl == RABBITMQ) return start_rabbitmq(c, s);
  char yaml[400];
  snprintf(yaml, sizeof yaml, mqr_yaml, s->port);
  if (s->impl == EMBEDDED) {
    mqr_set_allocator(count_malloc, count_realloc, count_calloc, free);
    uv_loop_init(&s->loop);
    mqr_error_t err;
    mqr_broker_register_protocols();
    if (mqr_config_load_string("amqp.yaml", yaml, strlen(yaml), &s->cfg, NULL) != 0) return mqr_bench_fail(c, "config");
    mqr_broker_options_t opt = {.config = s->cfg, .listen = true};
    if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "%s", err.message);
    return 0;
  }
  snprintf(s->path, sizeof s->path, "%s/mqrd.yaml", s->dir);
  if (write_file(s->path, yaml) != 0) return mqr_bench_fail(c, "%s", s->path);
  char *argv[] = {"mqrd", "--config", s->path, NULL};
  s->pid = bench_spawn(MQR_BENCH_MQRD, argv);
  return bench_listening(s->port) ? 0 : mqr_bench_fail(c, "mqrd did not listen on %d", s->port);
}

/* ---- the client ----------------------------------------------------------------------------- */

/* A connection with one session and one link, sender or receiver, on address. */
static int open_side(st_t *s, side_t *x, bool sender, const char *address) {
  if ((x->fd = bench_dial(s->port)) < 0) return -1;
  if (pn_connection_driver_init(&x->d, NULL, NULL) != 0) return -1;
  x->inited = true;
  pn_sasl_allowed_mechs(pn_sasl(x->d.transport), "ANONYMOUS");
  pn_connection_set_container(x->d.connection, sender ? "bench-pub" : "bench-sub");
  pn_connection_set_hostname(x->d.connection, "localhost");
  pn_connection_open(x->d.connection);
  pn_session_t *ss = pn_session(x->d.connection);
  pn_session_set_incoming_capacity(ss, 0); /* (no session bound: the link's credit is the window) */
  pn_session_open(ss);
  x->link = sender ? pn_sender(ss, "bench-pub") : pn_receiver(ss, "bench-sub");
  pn_terminus_set_address(sender ? pn_link_target(x->link) : pn_link_source(x->link), address);
  pn_terminus_set_address(sender ? pn_link_source(x->link) : pn_link_target(x->link), address);
  pn_link_set_snd_settle_mode(x->link, s->settled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  pn_link_open(x->link);
  if (!sender) pn_link_flow(x->link, (int)s->window);
  return 0;
}

/* The connection's events: links opened, messages received, transfers answered. */
static void events(st_t *s, side_t *x) {
  pn_event_t *e;
  while ((e = pn_connection_driver_next_event(&x->d)) != NULL) {
    switch (pn_event_type(e)) {
    case PN_LINK_REMOTE_OPEN: x->open = true; break;
    case PN_DELIVERY: {
      pn_delivery_t *d = pn_event_delivery(e);
      pn_link_t *l = pn_delivery_link(d);
      if (pn_link_is_sender(l)) { /* an answer */
        if (!pn_delivery_settled(d)) break;
        uint64_t state = pn_delivery_remote_state(d);
        if (state != PN_ACCEPTED && !s->failure[0])
          snprintf(s->failure, sizeof s->failure, "a transfer was not accepted (outcome 0x%llx)",
                   (unsigned long long)state);
        pn_delivery_settle(d);
        s->answered++;
        break;
      }
      if (!pn_delivery_readable(d) || pn_delivery_partial(d)) break;
      while (pn_link_recv(l, s->scratch, sizeof s->scratch) > 0) {
      }
      bool remote = pn_delivery_settled(d);
      pn_link_advance(l);
      if (!remote) pn_delivery_update(d, PN_ACCEPTED);
      pn_delivery_settle(d);
      s->received++;
      int credit = pn_link_credit(l);
      if ((uint64_t)credit < s->window / 2) pn_link_flow(l, (int)s->window - credit);
      break;
    }
    case PN_TRANSPORT_ERROR:
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
      pn_condition_t *cond = pn_event_condition(e);
      if (!s->failure[0])
        snprintf(s->failure, sizeof s->failure, "%s: %s %s", pn_event_type_name(pn_event_type(e)),
                 cond && pn_condition_get_name(cond) ? pn_condition_get_name(cond) : "",
                 cond && pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
      break;
    }
    default: break;
    }
  }
}

/* Writes what Proton has, reads what there is (waiting at most 10 ms, or not at all when
 * the broker is on this thread's loop), takes the events. */
static int pump(st_t *s) {
  if (s->impl == EMBEDDED) {
    int64_t b = mqr_bench_allocated_bytes(), m = counted;
    uv_run(&s->loop, UV_RUN_NOWAIT);
    s->a_loop += mqr_bench_allocated_bytes() - b - (counted - m);
    s->a_mqr += counted - m;
  }
  int64_t b = mqr_bench_allocated_bytes();
  side_t *xs[2] = {&s->pub, &s->sub};
  struct pollfd p[2];
  for (int i = 0; i < 2; i++) {
    events(s, xs[i]);
    p[i] = (struct pollfd){xs[i]->fd,
                           (short)(POLLIN | (pn_connection_driver_write_buffer(&xs[i]->d).size ? POLLOUT : 0)), 0};
  }
  int rc = 0;
  if (poll(p, 2, s->impl == EMBEDDED ? 0 : 10) < 0 && errno != EINTR) rc = -1;
  for (int i = 0; rc == 0 && i < 2; i++) {
    side_t *x = xs[i];
    for (;;) {
      pn_bytes_t w = pn_connection_driver_write_buffer(&x->d);
      if (w.size == 0) break;
      ssize_t n = write(x->fd, w.start, w.size);
      if (n > 0) {
        pn_connection_driver_write_done(&x->d, (size_t)n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) rc = -1;
      break;
    }
    for (int k = 0; rc == 0 && k < 16; k++) {
      pn_rwbytes_t r = pn_connection_driver_read_buffer(&x->d);
      if (r.size == 0) break;
      ssize_t n = read(x->fd, r.start, r.size);
      if (n > 0) {
        pn_connection_driver_read_done(&x->d, (size_t)n);
        events(s, x);
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) rc = -1;
      break;
    }
  }
  s->a_client += mqr_bench_allocated_bytes() - b;
  return rc;
}

/* Sends what the window and the link's credit allow, at most up to end. */
static void produce(st_t *s, uint64_t end) {
  int64_t b = mqr_bench_allocated_bytes();
  pn_link_t *l = s->pub.link;
  while (s->sent < end && s->sent - s->received < s->window && (s->settled || s->sent - s->answered < s->window) &&
         pn_link_credit(l) > 0) {
    uint64_t tag = s->tag++;
    pn_delivery_t *d = pn_delivery(l, pn_dtag((const char *)&tag, sizeof tag));
    pn_link_send(l, s->msg, s->msg_len);
    pn_link_advance(l);
    if (s->settled) pn_delivery_settle(d);
    s->sent++;
  }
  s->a_client += mqr_bench_allocated_bytes() - b;
}

static int take(mqr_bench_ctx_t *c, st_t *s) {
  uint64_t before = s->received + s->answered;
  if (pump(s) != 0) return mqr_bench_fail(c, "connection lost%s%s", s->failure[0] ? ": " : "", s->failure);
  if (s->failure[0]) return mqr_bench_fail(c, "%s", s->failure);
  double now = bench_now();
  if (s->received + s->answered != before || s->progress == 0) s->progress = now;
  if (now - s->progress > 10)
    return mqr_bench_fail(c, "nothing came for 10 s, %llu of %llu messages received, %llu answered",
                          (unsigned long long)s->received, (unsigned long long)s->sent,
                          (unsigned long long)s->answered);
  return 0;
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    produce(s, end);
    if (take(c, s) != 0) return -1;
  }
  return 0;
}

static int finish(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  double start = bench_now();
  while (s->received < s->sent || (!s->settled && s->answered < s->sent)) {
    if (take(c, s) != 0) return -1;
    if (bench_now() - start > 30)
      return mqr_bench_fail(c, "the last %llu messages in flight took more than 30 s",
                            (unsigned long long)(s->sent - s->received));
  }
  return 0;
}

/* ---- the trial ------------------------------------------------------------------------------ */

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  signal(SIGPIPE, SIG_IGN);
  const char *impl = mqr_bench_param(c, "impl");
  s->impl = strcmp(impl, "rabbitmq") == 0 ? RABBITMQ : strcmp(impl, "embedded") == 0 ? EMBEDDED : MQR;
  s->settled = strcmp(mqr_bench_param(c, "settle"), "presettled") == 0;
  s->body = (size_t)mqr_bench_param_long(c, "size");
  if (s->body == 0 || s->body > 65536) s->body = 16;
  s->window = WINDOW_BYTES / s->body < WINDOW ? WINDOW_BYTES / s->body : WINDOW;
  s->pub.fd = s->sub.fd = -1;
  /* The message, encoded once: a data section of body bytes. */
  pn_message_t *m = pn_message();
  char *body = malloc(s->body);
  memset(body, 'x', s->body);
  pn_data_put_binary(pn_message_body(m), pn_bytes(s->body, body));
  pn_message_set_inferred(m, true);
  s->msg_len = s->body + 256;
  s->msg = malloc(s->msg_len);
  int rc = pn_message_encode(m, s->msg, &s->msg_len);
  pn_message_free(m);
  free(body);
  if (rc != 0) return mqr_bench_fail(c, "pn_message_encode: %d", rc);
  if (start_broker(c, s) != 0) return -1;
  if (s->impl == EMBEDDED) uv_run(&s->loop, UV_RUN_NOWAIT);
  const char *address = s->impl == RABBITMQ ? "/queue/bench" : "bench";
  /* (the consumer first: RabbitMQ's /queue/ source declares the queue) */
  if (open_side(s, &s->sub, false, address) != 0 || open_side(s, &s->pub, true, address) != 0)
    return mqr_bench_fail(c, "cannot connect to %d", s->port);
  for (double end = bench_now() + 20; !(s->pub.open && s->sub.open);) {
    if (pump(s) != 0 || s->failure[0]) return mqr_bench_fail(c, "the links were refused: %s", s->failure);
    if (bench_now() > end) return mqr_bench_fail(c, "the links were not attached in 20 s");
  }
  /* Messages through for 3 s, untimed: a BEAM peer warms up, and a broker's memory reaches
   * the high that a producer a window ahead of its consumer keeps it at (mqr's B/op then
   * counts what each message costs, not the first growth of its pools). */
  for (double end = bench_now() + 3.0; bench_now() < end;)
    if (run(c, 1000) != 0 || finish(c) != 0) return -1;
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  side_t *xs[2] = {&s->pub, &s->sub};
  for (int i = 0; i < 2; i++) {
    if (xs[i]->fd >= 0) close(xs[i]->fd);
    if (xs[i]->inited) pn_connection_driver_destroy(&xs[i]->d);
  }
  if (s->impl == EMBEDDED && s->b) {
    mqr_broker_close(s->b, NULL, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    mqr_config_destroy(s->cfg);
  } else {
    bench_stop(s->pid);
    bench_stop(s->epmd);
  }
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0) fprintf(stderr, "amqp: %s left\n", s->dir);
  free(s->msg);
  free(s);
}

static int start_iteration(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  s->t0 = s->impl == EMBEDDED ? 0 : tree_ticks(s->pid, NULL);
  s->ops0 = s->received;
  s->a0_client = s->a_client, s->a0_loop = s->a_loop, s->a0_mqr = s->a_mqr;
  return 0;
}

static void end_iteration(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  uint64_t ops = s->received - s->ops0;
  if (ops == 0) return;
  long hwm = 0;
  if (s->impl == EMBEDDED) {
    tree_ticks(getpid(), &hwm);
    mqr_bench_aux(c, "peak_rss_mb", (double)hwm / 1024.0, "MiB");
    mqr_bench_aux(c, "alloc.client", (double)(s->a_client - s->a0_client) / (double)ops, "B/op");
    mqr_bench_aux(c, "alloc.broker.proton", (double)(s->a_loop - s->a0_loop) / (double)ops, "B/op");
    mqr_bench_aux(c, "alloc.broker.mqr", (double)(s->a_mqr - s->a0_mqr) / (double)ops, "B/op");
    return;
  }
  long long t = tree_ticks(s->pid, &hwm);
  s->ticks += (double)(t - s->t0);
  s->ops += ops;
  mqr_bench_aux(c, "cpu.broker", s->ticks * 1e6 / (double)sysconf(_SC_CLK_TCK) / (double)s->ops, "us/op");
  mqr_bench_aux(c, "peak_rss_mb", (double)hwm / 1024.0, "MiB");
}

static const char *skip(const mqr_bench_ctx_t *c) {
  const char *impl = mqr_bench_param(c, "impl");
  if (impl && strcmp(impl, "activemq") == 0)
    return "Debian's ActiveMQ Classic 5.17 has no AMQP transport (activemq-amqp and Proton-J are not packaged)";
  return NULL;
}

static const mqr_bench_def_t loopback = {
    "amqp.loopback", "settle=presettled,unsettled;size=16,1024,65536;impl=mqr,rabbitmq,activemq,embedded",
    "thrpt",         setup,
    teardown,        start_iteration,
    end_iteration,   run,
    finish};
MQR_BENCH_REGISTER(loopback)
__attribute__((constructor)) static void skips(void) { mqr_bench_register_skip(&loopback, skip); }
