/* libFuzzer: the protocol heads as a client meets them. One broker, in this process, with
 * a listener of all five protocols on 127.0.0.1; each input is two clients' byte
 * streams (the first byte says where the input is cut in two), written on two sockets
 * at once, each then closed for writing, the broker run until it has closed both. The
 * heads' state (MQTT sessions, retained messages, durable subscriptions) carries from one
 * input to the next, as a broker's does. ASan sees any fault; after each input every
 * queue's counters still add up, and the broker still answers a new client. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "mqr/broker.h"
#include "mqr/config.h"

static const char yaml[] = "security: {allow-anonymous: true}\nlisteners:\n"
                           "  - {name: f, port: 0, protocols: [mqr, mqtt, stomp, http, amqp], handshake-timeout: 0,\n"
                           "     mqtt: {max-packet-size: 4KiB}, stomp: {max-frame-size: 4KiB, max-headers: 16},\n"
                           "     http: {max-header-size: 1KiB, max-body-size: 4KiB, anonymous-metrics: true}}\n"
                           "address-settings:\n"
                           "  '#': {auto-create-addresses: true, auto-create-queues: true, max-size-bytes: 1MiB,\n"
                           "        address-full-policy: FAIL}\n"
                           "addresses:\n"
                           "  q: {anycast: [q]}\n";

static uv_loop_t loop;
static mqr_broker_t *broker;
static int port;

static int dial(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  /* A connect the machine cannot make now (no ephemeral port free on a shared machine,
   * one CI run in five) is tried again; the broker refusing it (ECONNREFUSED: its
   * listener gone) is a failure at once. */
  int fd = -1, rc = -1;
  for (int tries = 0; tries < 100 && rc != 0; tries++) {
    if (fd >= 0) close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (rc != 0 && errno != EADDRNOTAVAIL && errno != EAGAIN && errno != EINTR) break;
    if (rc != 0) usleep(20000);
  }
  if (rc != 0) fprintf(stderr, "fuzz_heads: connect to 127.0.0.1:%d: %s\n", port, strerror(errno));
  FUZZ_CHECK(rc == 0);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  /* Closed with a reset: tens of thousands of runs must not use up the ephemeral ports in
   * TIME_WAIT. */
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  return fd;
}

typedef struct {
  int fd;
  const uint8_t *data;
  size_t len, at;
  bool shut, eof;
} client_t;

/* Writes what it can, reads (and drops) what came; true once the broker closed it. */
static void step(client_t *c) {
  if (c->eof) return;
  if (c->at < c->len) {
    ssize_t n = write(c->fd, c->data + c->at, c->len - c->at);
    if (n > 0) c->at += (size_t)n;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) c->at = c->len; /* reset: the broker closed it */
  } else if (!c->shut) {
    shutdown(c->fd, SHUT_WR);
    c->shut = true;
  }
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c->eof = true;
    break;
  }
}

static int each_queue(mqr_address_t *a, void *arg) {
  (void)arg;
  for (uint32_t i = 0; i < mqr_address_queue_count(a); i++) {
    mqr_broker_queue_stats_t st;
    FUZZ_CHECK(mqr_broker_queue_stats(broker, mqr_queue_name(mqr_address_queue(a, i)), &st) == 0);
    FUZZ_CHECK(st.enqueued ==
               st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (broker == NULL) {
    mqr_config_t *cfg;
    mqr_broker_register_protocols();
    FUZZ_CHECK(mqr_config_load_string("fuzz.yaml", yaml, sizeof yaml - 1, &cfg, NULL) == 0);
    uv_loop_init(&loop);
    mqr_broker_options_t opt = {.config = cfg, .listen = true};
    FUZZ_CHECK(mqr_broker_create(&loop, &opt, &broker, NULL) == 0);
    port = mqr_broker_listener_port(broker, 0);
    FUZZ_CHECK(port > 0);
  }
  if (size == 0) return 0;
  size_t cut = 1 + (size - 1) * data[0] / 256;
  client_t cs[2] = {{dial(), data + 1, cut - 1, 0, false, false}, {dial(), data + cut, size - cut, 0, false, false}};
  for (int i = 0; i < 20000 && !(cs[0].eof && cs[1].eof); i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    step(&cs[0]);
    step(&cs[1]);
    if (i > 50) { /* waiting on the broker: let it run */
      struct pollfd p[2] = {{cs[0].fd, POLLIN, 0}, {cs[1].fd, POLLIN, 0}};
      poll(p, 2, 0);
    }
  }
  /* A client that has not gone yet (the broker holds it: a full address) goes now. */
  for (int k = 0; k < 2; k++) close(cs[k].fd);
  for (int i = 0; i < 50; i++) uv_run(&loop, UV_RUN_NOWAIT);
  mqr_router_foreach_address(mqr_broker_router(broker), each_queue, NULL);
  /* Still answering: a STOMP CONNECT gets CONNECTED. */
  client_t probe = {dial(), (const uint8_t *)"CONNECT\naccept-version:1.2\n\n", 29, 0, false, false};
  char got[16] = "";
  for (int i = 0; i < 20000 && got[0] == 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (probe.at < probe.len) {
      ssize_t n = write(probe.fd, probe.data + probe.at, probe.len - probe.at);
      if (n > 0) probe.at += (size_t)n;
    }
    if (read(probe.fd, got, sizeof got - 1) <= 0) got[0] = 0;
  }
  FUZZ_CHECK(memcmp(got, "CONNECTED", 9) == 0);
  close(probe.fd);
  for (int i = 0; i < 50; i++) uv_run(&loop, UV_RUN_NOWAIT);
  return 0;
}
