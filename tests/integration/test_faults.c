/* Faults an adversarial client found in mqrd, each driven end to end against a real
 * broker started as a shell starts it (default signal dispositions, mqrd_proc.h): a
 * consumer that resets its connection with deliveries unwritten, a producer that
 * vanishes while BLOCK holds it, names that are not UTF-8, a connection that never says
 * CONNECT or goes silent, a client's declared max_frame, and hostile ack floods. */
#include <stddef.h>

#include "mqr/client.h"
#include "mqrd_proc.h"
#include "testutil.h"

static const char config[] = "listeners:\n"
                             "  - name: main\n"
                             "    host: 127.0.0.1\n"
                             "    port: 0\n"
                             "    max-frame-size: 256KiB\n"
                             "address-settings:\n"
                             "  '#': {auto-create-addresses: true, auto-create-queues: true}\n"
                             "  'block.#': {max-size-bytes: 4KiB, address-full-policy: BLOCK}\n"
                             "addresses:\n"
                             "  big: {anycast: [big]}\n"
                             "  held: {anycast: [held]}\n"
                             "  block.q: {anycast: [block.q]}\n"
                             "  alive: {anycast: [alive]}\n"
                             "  small: {anycast: [small]}\n";

static mqrd_t broker;

static mqr_bclient_t *connect_(void) {
  mqr_bclient_t *bc;
  mqr_error_t err;
  if (mqr_bclient_connect(broker.url, "faults", 5000, &bc, &err) != 0)
    fail_msg("connect: %s; mqrd said:\n%s", err.message, broker.log);
  return bc;
}

/* mqrd is still running and serves a round trip. */
static void assert_alive(void) {
  int status;
  if (waitpid(broker.pid, &status, WNOHANG) != 0) {
    mqrd_read_log(&broker, 0.2);
    fail_msg("mqrd is gone (status 0x%x):\n%s", status, broker.log);
  }
  mqr_bclient_t *bc = connect_();
  mqr_frame_query_result_t *r;
  assert_int_equal(mqr_bclient_query(bc, &r, NULL), 0);
  mqr_free(r);
  mqr_bclient_close(bc);
}

/* ---- raw frames ------------------------------------------------------------------------ */

static void send_frame(int s, const mqr_frame_t *f) {
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_error_t err;
  if (mqr_frame_encode(f, &b, &err) != 0) fail_msg("encode: %s", err.message);
  raw_send(s, b.data, b.len);
  mqr_avro_buf_free(&b);
}

/* A small receive buffer: the broker's writes wait on it soon. */
static int small_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    close(s);
    return -1;
  }
  return s;
}

static int raw_client(int32_t max_frame) {
  int s = small_connect(broker.port);
  assert_true(s >= 0);
  mqr_frame_t f = {MQR_FRAME_CONNECT, {.connect = {MQR_PROTOCOL_VERSION, MQR_STR("raw"), max_frame}}};
  send_frame(s, &f);
  return s;
}

static void raw_subscribe(int s, int64_t id, const char *target, int32_t credit) {
  mqr_frame_t f = {MQR_FRAME_SUBSCRIBE,
                   {.subscribe = {id, mqr_str(target), MQR_PROTO_RT_NONE, MQR_STR(""), credit}}};
  send_frame(s, &f);
}

static void raw_send_msg(int s, const char *address, mqr_str_t body, int64_t receipt) {
  mqr_frame_t f = {MQR_FRAME_SEND,
                   {.send = {mqr_str(address), MQR_PROTO_RT_ANYCAST, false, MQR_STR(""), receipt, {0}, body}}};
  send_frame(s, &f);
}

/* Reads frames until one of type `want` arrives (decoded into f: its views stay valid
 * until the next call), the peer closes, or wait_s passes: true when it came. */
typedef struct {
  uint8_t buf[1 << 20];
  size_t len, skip;
  uint8_t arena[1 << 16];
  bool closed;
} reader_t;

__attribute__((unused)) static bool read_until(int s, reader_t *r, int want, mqr_frame_t *f, double wait_s) {
  double end = now_s() + wait_s;
  for (;;) {
    uint32_t body;
    while (mqr_frame_peek(r->buf + r->skip, r->len - r->skip, UINT32_MAX, &body) == 1) {
      mqr_avro_arena_t arena = {r->arena, sizeof r->arena, 0};
      size_t at = r->skip;
      r->skip += MQR_FRAME_HEADER + body;
      if (mqr_frame_decode(r->buf + at + MQR_FRAME_HEADER, body, f, &arena, NULL) == 0 && f->type == want) return true;
    }
    memmove(r->buf, r->buf + r->skip, r->len - r->skip);
    r->len -= r->skip;
    r->skip = 0;
    double left = end - now_s();
    if (left <= 0 || r->closed) return false;
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) return false;
    ssize_t k = recv(s, r->buf + r->len, sizeof r->buf - r->len, 0);
    if (k <= 0) {
      r->closed = true;
      continue;
    }
    r->len += (size_t)k;
  }
}

/* ---- a client can kill the broker ------------------------------------------------------ */

/* Fills queue `big` with n messages of size bytes. */
static void fill_big(int n, size_t size) {
  mqr_bclient_t *p = connect_();
  char *body = malloc(size);
  memset(body, 'b', size);
  for (int i = 0; i < n; i++) {
    mqr_client_message_t m = {MQR_STR("big"), MQR_ANYCAST, false, {"", 0}, NULL, NULL, 0, mqr_str_n(body, size)};
    mqr_error_t err;
    if (mqr_bclient_send(p, &m, i == n - 1, NULL, &err) != 0) fail_msg("send: %s", err.message);
  }
  free(body);
  mqr_bclient_close(p);
}

/* A consumer that floods acknowledgements (for deliveries it never read) and never reads
 * what the broker writes, then goes. */
static void flood_and_go(bool reset) {
  int s = raw_client(1 << 20);
  raw_subscribe(s, 1, "big", 1000);
  fcntl(s, F_SETFL, O_NONBLOCK);
  uint8_t acks[4096];
  size_t n = 0;
  for (int64_t d = 1; n + 40 < sizeof acks; d++) {
    mqr_frame_t f = {MQR_FRAME_ACK, {.ack = {1, 1000000 + d, false}}};
    mqr_avro_buf_t b;
    mqr_avro_buf_init(&b, acks + n, sizeof acks - n);
    assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
    n += b.len;
  }
  double end = now_s() + 0.5;
  while (now_s() < end) {
    if (send(s, acks, n, MSG_NOSIGNAL) < 0 && errno != EAGAIN) break;
    usleep(1000);
  }
  if (reset) {
    struct linger l = {1, 0};
    setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  close(s);
}

/* A consumer takes deliveries far past what its socket buffers hold, reads none, and
 * goes: by a reset (SO_LINGER 0), by close() with unread data, by kill -9 of its
 * process, and while flooding acknowledgements. Before the fix a reset peer made mqrd's
 * next write raise SIGPIPE, and mqrd, started with default dispositions, died of it. */
static void test_consumer_reset_does_not_kill(void **state) {
  (void)state;
  for (int round = 0; round < 6; round++) {
    fill_big(round < 3 ? 200 : 60, 32 * 1024);
    if (round == 2) {
      pid_t child = fork();
      if (child == 0) {
        int s = raw_client(1 << 20);
        raw_subscribe(s, 1, "big", 1000);
        pause();
        _exit(0);
      }
      usleep(300000);
      kill(child, SIGKILL);
      waitpid(child, NULL, 0);
    } else if (round >= 3) {
      flood_and_go(round == 3);
    } else {
      int s = raw_client(1 << 20);
      raw_subscribe(s, 1, "big", 1000);
      usleep(300000); /* the broker has written what the socket takes and waits */
      if (round == 0) {
        struct linger l = {1, 0};
        setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      close(s);
    }
    usleep(300000);
    assert_alive();
  }
}

/* ---- a producer held by BLOCK that disconnects --------------------------------------- */

static int64_t queue_field(const char *queue, bool in_flight) {
  mqr_bclient_t *bc = connect_();
  mqr_frame_query_result_t *r;
  assert_int_equal(mqr_bclient_query(bc, &r, NULL), 0);
  int64_t v = -1;
  const mqr_frame_queue_info_t *q = r->queues.items;
  for (size_t i = 0; i < r->queues.count; i++)
    if (mqr_str_eq(q[i].name, mqr_str(queue))) v = in_flight ? q[i].in_flight : q[i].depth;
  mqr_free(r);
  mqr_bclient_close(bc);
  return v;
}

static int32_t connections(void) {
  mqr_bclient_t *bc = connect_();
  mqr_frame_query_result_t *r;
  assert_int_equal(mqr_bclient_query(bc, &r, NULL), 0);
  int32_t n = r->connections - 1; /* not this one */
  mqr_free(r);
  mqr_bclient_close(bc);
  return n;
}

/* A connection that consumes from `held` (one delivery unacknowledged) and produces to a
 * BLOCK address until it is paused, then closes its socket. The broker must see it go
 * although it no longer reads from it: its delivery goes back to the queue. */
static void test_blocked_producer_vanishes(void **state) {
  (void)state;
  mqr_bclient_t *p = connect_();
  mqr_client_message_t m = {MQR_STR("held"), MQR_ANYCAST, false, {"", 0}, NULL, NULL, 0, MQR_STR("h")};
  assert_int_equal(mqr_bclient_send(p, &m, true, NULL, NULL), 0);
  mqr_bclient_close(p);
  int before = connections();
  int s = raw_client(1 << 20);
  raw_subscribe(s, 1, "held", 10);
  char body[1024];
  memset(body, 'x', sizeof body);
  for (int i = 0; i < 12; i++) raw_send_msg(s, "block.q", mqr_str_n(body, sizeof body), 0);
  usleep(300000);
  assert_int_equal(queue_field("held", true), 1);
  assert_int_equal(connections(), before + 1);
  close(s);
  double end = now_s() + 5;
  while (queue_field("held", true) != 0 && now_s() < end) usleep(100000);
  assert_int_equal(queue_field("held", true), 0);
  assert_int_equal(queue_field("held", false), 1);
  assert_int_equal(connections(), before);
  /* Drain block.q for the tests after. */
  mqr_bclient_t *c = connect_();
  int64_t sub;
  assert_int_equal(mqr_bclient_subscribe(c, MQR_STR("block.q"), MQR_ROUTING_NONE, MQR_STR(""), 100, &sub, NULL, 0, NULL),
                   0);
  mqr_bclient_message_t *msg;
  while (mqr_bclient_receive(c, 300, &msg, NULL) == 0) {
    mqr_bclient_ack(c, msg->subscription, msg->delivery, false, NULL);
    mqr_bclient_message_free(msg);
  }
  mqr_bclient_close(c);
  assert_alive();
}

static int group_setup(void **state) {
  (void)state;
  srandom((unsigned)getpid());
  mqrd_start(&broker, config);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  int status = mqrd_stop(&broker, SIGTERM);
  if (status != 0) fprintf(stderr, "mqrd exited %d:\n%s\n", status, broker.log);
  return status;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* this process's own sockets; mqrd_start resets it for mqrd */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_consumer_reset_does_not_kill),
      cmocka_unit_test(test_blocked_producer_vanishes),
  };
  return cmocka_run_group_tests_name("faults", tests, group_setup, group_teardown);
}
