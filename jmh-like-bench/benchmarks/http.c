#define _GNU_SOURCE /* memmem */
/* http.metrics: one Prometheus scrape of a broker with `queues` queues (each on an address
 * of its own, a few messages in each), as Prometheus makes it: GET /metrics on a kept-alive
 * connection, the whole answer read. The broker is in this process, on this thread's loop,
 * between the client's reads and writes (so B/op is the broker's and the client's
 * together, and the time is the scrape's alone, no other process on the core). Each
 * iteration also reports the longest single pass of the broker's loop during its scrapes
 * (loop_max_ms): how long a scrape holds the loop, and every other client, at a time. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "mqr/broker.h"

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  int fd;
  char *in;
  size_t in_len, in_cap;
  double loop_max_ms;
} st_t;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void pass(st_t *s) {
  double t0 = now_ms();
  uv_run(&s->loop, UV_RUN_NOWAIT);
  double dt = now_ms() - t0;
  if (dt > s->loop_max_ms) s->loop_max_ms = dt;
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  s->fd = -1;
  long queues = mqr_bench_param_long(c, "queues");
  size_t cap = 4096 + (size_t)queues * 64;
  char *yaml = malloc(cap);
  int n = snprintf(yaml, cap,
                   "security: {allow-anonymous: true}\n"
                   "listeners:\n  - {name: web, host: 127.0.0.1, port: 0, protocols: [http]}\naddresses:\n");
  for (long i = 0; i < queues; i++)
    n += snprintf(yaml + n, cap - (size_t)n, "  app.orders.%ld: {anycast: [app.orders.%ld]}\n", i, i);
  uv_loop_init(&s->loop);
  mqr_broker_register_protocols();
  int rc = mqr_config_load_string("http.yaml", yaml, (size_t)n, &s->cfg, NULL);
  free(yaml);
  if (rc) return mqr_bench_fail(c, "config");
  mqr_error_t err;
  mqr_broker_options_t opt = {.config = s->cfg, .listen = true};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  /* A few messages in every queue, so that the figures are not all zero. */
  for (long i = 0; i < queues; i++) {
    char name[64];
    snprintf(name, sizeof name, "app.orders.%ld", i);
    mqr_broker_message_t m = {.address = mqr_str(name),
                              .routing_type = MQR_ANYCAST,
                              .priority = MQR_PRIORITY_DEFAULT,
                              .body = MQR_STR("0123456789abcdef")};
    for (int k = 0; k < 3; k++)
      if (mqr_broker_send(s->b, &m, NULL, &err) != 0) return mqr_bench_fail(c, "send: %s", err.message);
  }
  int port = mqr_broker_listener_port(s->b, 0);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
  if (connect(s->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) return mqr_bench_fail(c, "connect");
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (int i = 0; i < 20; i++) pass(s);
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s->fd >= 0) close(s->fd);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  free(s->in);
  free(s);
}

/* One scrape: the request written, the loop run and the answer read until it is whole
 * (its Content-Length of body after the headers). */
static int scrape(mqr_bench_ctx_t *c, st_t *s) {
  static const char req[] = "GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n";
  size_t at = 0;
  s->in_len = 0;
  size_t want = 0;
  for (double end = now_ms() + 10000; now_ms() < end;) {
    if (at < sizeof req - 1) {
      ssize_t w = write(s->fd, req + at, sizeof req - 1 - at);
      if (w > 0) at += (size_t)w;
    }
    pass(s);
    for (;;) {
      if (s->in_cap - s->in_len < 65536) {
        s->in_cap = s->in_cap ? s->in_cap * 2 : 1 << 20;
        if ((s->in = realloc(s->in, s->in_cap)) == NULL) return mqr_bench_fail(c, "memory");
      }
      ssize_t n = read(s->fd, s->in + s->in_len, s->in_cap - s->in_len);
      if (n > 0) {
        s->in_len += (size_t)n;
        continue;
      }
      if (n == 0) return mqr_bench_fail(c, "the broker closed the connection");
      break;
    }
    if (want == 0 && s->in_len > 12) {
      char *end_of_head = memmem(s->in, s->in_len, "\r\n\r\n", 4);
      char *cl = end_of_head ? memmem(s->in, (size_t)(end_of_head - s->in), "Content-Length: ", 16) : NULL;
      if (cl) {
        if (strncmp(s->in, "HTTP/1.1 200", 12) != 0) return mqr_bench_fail(c, "answered %.40s", s->in);
        want = (size_t)(end_of_head + 4 - s->in) + strtoull(cl + 16, NULL, 10);
      }
    }
    if (want && s->in_len >= want) return 0;
  }
  return mqr_bench_fail(c, "no whole answer in 10 s");
}

static int setup_iteration(mqr_bench_ctx_t *c) {
  ((st_t *)mqr_bench_state(c))->loop_max_ms = 0;
  return 0;
}

static void teardown_iteration(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  mqr_bench_aux(c, "loop_max_ms", s->loop_max_ms, "ms");
  mqr_bench_aux(c, "answer_kib", (double)s->in_len / 1024.0, "KiB");
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++)
    if (scrape(c, s) != 0) return -1;
  return 0;
}

static const mqr_bench_def_t metrics = {"http.metrics",  "queues=100,10000", "avgt", setup, teardown,
                                        setup_iteration, teardown_iteration, run,    NULL};
MQR_BENCH_REGISTER(metrics)
