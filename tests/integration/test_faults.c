/* Faults an adversarial client found in mqrd, each driven end to end against a real
 * broker started as a shell starts it (default signal dispositions, mqrd_proc.h): a
 * consumer that resets its connection with deliveries unwritten, a producer that
 * vanishes while BLOCK holds it, names that are not UTF-8, a connection that never says
 * CONNECT or goes silent, a client's declared max_frame, and hostile ack floods. */
#include <stddef.h>

#include "mqr/client.h"
#include "mqrd_proc.h"
#include "testutil.h"

static const char config[] = "security: {allow-anonymous: true}\nlisteners:\n"
                             "  - name: main\n"
                             "    host: 127.0.0.1\n"
                             "    port: 0\n"
                             "    max-frame-size: 256KiB\n"
                             "    handshake-timeout: 1s\n"
                             "    idle-timeout: 2s\n"
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
  mqr_frame_t f = {MQR_FRAME_CONNECT,
                   {.connect = {MQR_PROTOCOL_VERSION, MQR_STR("raw"), max_frame, {NULL, 0}, {NULL, 0}}}};
  send_frame(s, &f);
  return s;
}

static void raw_subscribe(int s, int64_t id, const char *target, int32_t credit) {
  mqr_frame_t f = {MQR_FRAME_SUBSCRIBE,
                   {.subscribe = {id, mqr_str(target), MQR_PROTO_RT_NONE, MQR_STR(""), credit, MQR_STR("")}}};
  send_frame(s, &f);
}

static void raw_send_msg(int s, const char *address, mqr_str_t body, int64_t receipt) {
  mqr_frame_t f = {
      MQR_FRAME_SEND,
      {.send = {mqr_str(address), MQR_PROTO_RT_ANYCAST, false, MQR_STR(""), receipt, 4, 0, 0, MQR_STR(""), {0}, body}}};
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

static bool read_until(int s, reader_t *r, int want, mqr_frame_t *f, double wait_s) {
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
    mqr_client_message_t m = {MQR_STR("big"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0,
                              {"", 0},        NULL,        NULL,  0,       mqr_str_n(body, size)};
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
    mqr_frame_t f = {MQR_FRAME_ACK, {.ack = {1, 1000000 + d, false, 0}}};
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
  mqr_client_message_t m = {MQR_STR("held"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0,
                            {"", 0},         NULL,        NULL,  0,       MQR_STR("h")};
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
  assert_int_equal(mqr_bclient_subscribe(c, MQR_STR("block.q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 100, &sub,
                                         NULL, 0, NULL),
                   0);
  mqr_bclient_message_t *msg;
  while (mqr_bclient_receive(c, 300, &msg, NULL) == 0) {
    mqr_bclient_ack(c, msg->subscription, msg->delivery, false, NULL);
    mqr_bclient_message_free(msg);
  }
  mqr_bclient_close(c);
  assert_alive();
}

/* mqrd ignores SIGPIPE whatever it inherited (mqrd_start execs it with SIGPIPE at its
 * default action, as a shell does). */
static void test_sigpipe_ignored(void **state) {
  (void)state;
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)broker.pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  unsigned long long ign = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "SigIgn: %llx", &ign) == 1) break;
  fclose(f);
  assert_true(ign & (1ull << (SIGPIPE - 1)));
}

/* ---- timeouts and heartbeats ------------------------------------------------------------- */

/* A connection that never says CONNECT is told and closed after handshake-timeout. */
static void test_handshake_timeout(void **state) {
  (void)state;
  int s = raw_connect(broker.port);
  static reader_t r;
  memset(&r, 0, sizeof r);
  mqr_frame_t f;
  double t0 = now_s();
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 5));
  assert_int_equal(f.u.error.code, MQR_ETIMEOUT);
  assert_true(f.u.error.fatal);
  assert_true(now_s() - t0 >= 0.9);
  assert_false(read_until(s, &r, MQR_FRAME_ERROR, &f, 2));
  assert_true(r.closed);
  close(s);
}

/* A silent connection gets a PING after half of idle-timeout; one that answers it stays,
 * one that does not is closed at idle-timeout. */
static void test_idle_timeout_and_ping(void **state) {
  (void)state;
  int quiet = raw_client(1 << 20), answers = raw_client(1 << 20);
  static reader_t rq, ra;
  memset(&rq, 0, sizeof rq);
  memset(&ra, 0, sizeof ra);
  mqr_frame_t f;
  assert_true(read_until(quiet, &rq, MQR_FRAME_CONNECTED, &f, 2));
  assert_true(read_until(answers, &ra, MQR_FRAME_CONNECTED, &f, 2));
  double t0 = now_s();
  for (int i = 0; i < 3; i++) { /* 3 idle periods: answered each time */
    assert_true(read_until(answers, &ra, MQR_FRAME_PING, &f, 3));
    mqr_frame_t pong = {MQR_FRAME_PONG, {.pong = {f.u.ping.token}}};
    send_frame(answers, &pong);
  }
  assert_true(now_s() - t0 >= 2.5);
  assert_true(read_until(quiet, &rq, MQR_FRAME_PING, &f, 1));
  assert_true(read_until(quiet, &rq, MQR_FRAME_ERROR, &f, 3));
  assert_int_equal(f.u.error.code, MQR_ETIMEOUT);
  assert_false(read_until(quiet, &rq, MQR_FRAME_ERROR, &f, 1));
  assert_true(rq.closed);
  /* The one that answered is still served. */
  mqr_frame_t q = {MQR_FRAME_QUERY, {.query = {5}}};
  send_frame(answers, &q);
  assert_true(read_until(answers, &ra, MQR_FRAME_QUERY_RESULT, &f, 2));
  close(quiet);
  close(answers);
  /* The library's client answers PINGs while it waits. */
  mqr_bclient_t *bc = connect_();
  mqr_bclient_message_t *m;
  assert_int_equal(mqr_bclient_receive(bc, 3000, &m, NULL), MQR_ETIMEOUT);
  mqr_frame_query_result_t *res;
  assert_int_equal(mqr_bclient_query(bc, &res, NULL), 0);
  mqr_free(res);
  mqr_bclient_close(bc);
}

/* ---- names that are not UTF-8 ------------------------------------------------------------ */

static bool address_listed(const char *name, size_t len) {
  mqr_bclient_t *bc = connect_();
  mqr_frame_query_result_t *r;
  assert_int_equal(mqr_bclient_query(bc, &r, NULL), 0);
  bool found = false;
  const mqr_frame_address_info_t *a = r->addresses.items;
  for (size_t i = 0; i < r->addresses.count; i++)
    if (mqr_str_eq(a[i].name, mqr_str_n(name, len))) found = true;
  mqr_free(r);
  mqr_bclient_close(bc);
  return found;
}

/* Addresses, queue names and property keys and values that are not UTF-8 are refused
 * with an error that says so; nothing of them is routed or listed. Before, they were
 * routed, then returned in QUERY results and deliveries no Avro reader can read. */
static void test_invalid_utf8_refused(void **state) {
  (void)state;
  static const char bad_addr[] = "utf8.\xff\xfe";
  static reader_t r;
  mqr_frame_t f;
  /* SEND to a bad address: a malformed frame (Avro strings are UTF-8), fatal. */
  memset(&r, 0, sizeof r);
  int s = raw_client(1 << 20);
  raw_send_msg(s, bad_addr, MQR_STR("x"), 1);
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
  assert_non_null(strstr(f.u.error.text.ptr, "not valid UTF-8"));
  assert_false(read_until(s, &r, MQR_FRAME_RECEIPT, &f, 1));
  close(s);
  assert_false(address_listed(bad_addr, strlen(bad_addr)));
  /* A property key, and a property value, that are not UTF-8. */
  for (int which = 0; which < 2; which++) {
    memset(&r, 0, sizeof r);
    s = raw_client(1 << 20);
    mqr_str_t keys[1] = {which ? MQR_STR("k") : MQR_STR("\xc3\x28")};
    mqr_value_t values[1] = {mqr_value_string(which ? MQR_STR("\xed\xa0\x80") : MQR_STR("v"))}; /* a surrogate */
    mqr_frame_t send = {MQR_FRAME_SEND,
                        {.send = {MQR_STR("utf8.props"),
                                  MQR_PROTO_RT_ANYCAST,
                                  false,
                                  MQR_STR(""),
                                  1,
                                  4,
                                  0,
                                  0,
                                  MQR_STR(""),
                                  {keys, values, 1},
                                  MQR_STR("x")}}};
    send_frame(s, &send);
    assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
    assert_non_null(
        strstr(f.u.error.text.ptr, which ? "property value is not valid UTF-8" : "property key is not valid UTF-8"));
    close(s);
  }
  assert_false(address_listed("utf8.props", 10));
  /* SUBSCRIBE to a bad target: refused, the connection goes on. */
  memset(&r, 0, sizeof r);
  s = raw_client(1 << 20);
  mqr_frame_t sub = {MQR_FRAME_SUBSCRIBE,
                     {.subscribe = {3, mqr_str(bad_addr), MQR_PROTO_RT_ANYCAST, MQR_STR(""), 10, MQR_STR("")}}};
  send_frame(s, &sub);
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
  assert_int_equal(f.u.error.receipt, 3);
  assert_false(f.u.error.fatal);
  assert_non_null(strstr(f.u.error.text.ptr, "target is not valid UTF-8"));
  mqr_frame_t q = {MQR_FRAME_QUERY, {.query = {9}}};
  send_frame(s, &q);
  assert_true(read_until(s, &r, MQR_FRAME_QUERY_RESULT, &f, 2));
  close(s);
  assert_false(address_listed(bad_addr, strlen(bad_addr)));
}

/* A frame whose union index is written in two bytes (a valid Avro int: a varint may carry
 * a continuation byte of zeros) reads as the same frame: a SEND is routed and receipted, a
 * PING answered. */
static void send_wide_index(int s, const mqr_frame_t *f) {
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_error_t err;
  if (mqr_frame_encode(f, &b, &err) != 0) fail_msg("encode: %s", err.message);
  assert_true(b.len > MQR_FRAME_HEADER && b.data[MQR_FRAME_HEADER] < 0x80);
  uint32_t body = (uint32_t)(b.len - MQR_FRAME_HEADER) + 1;
  uint8_t *w = malloc(b.len + 1);
  w[0] = (uint8_t)(body >> 24), w[1] = (uint8_t)(body >> 16), w[2] = (uint8_t)(body >> 8), w[3] = (uint8_t)body;
  w[4] = b.data[MQR_FRAME_HEADER] | 0x80;
  w[5] = 0;
  memcpy(w + 6, b.data + MQR_FRAME_HEADER + 1, b.len - MQR_FRAME_HEADER - 1);
  raw_send(s, w, b.len + 1);
  free(w);
  mqr_avro_buf_free(&b);
}

static void test_union_index_as_long_varint(void **state) {
  (void)state;
  static reader_t r;
  mqr_frame_t f;
  memset(&r, 0, sizeof r);
  int s = raw_client(1 << 20);
  mqr_frame_t send = {MQR_FRAME_SEND,
                      {.send = {MQR_STR("wide.index"),
                                MQR_PROTO_RT_ANYCAST,
                                false,
                                MQR_STR(""),
                                5,
                                4,
                                0,
                                0,
                                MQR_STR(""),
                                {0},
                                MQR_STR("x")}}};
  send_wide_index(s, &send);
  assert_true(read_until(s, &r, MQR_FRAME_RECEIPT, &f, 3));
  assert_int_equal(f.u.receipt.receipt, 5);
  mqr_frame_t ping = {MQR_FRAME_PING, {.ping = {77}}};
  send_wide_index(s, &ping);
  assert_true(read_until(s, &r, MQR_FRAME_PONG, &f, 3));
  assert_int_equal(f.u.pong.token, 77);
  close(s);
}

/* ---- hostile management ------------------------------------------------------------------ */

/* MANAGE frames a client should not send: each answered with a refusal (the connection
 * and the broker go on), none making what it names. */
static void test_hostile_manage(void **state) {
  (void)state;
  static reader_t r;
  memset(&r, 0, sizeof r);
  int s = raw_client(1 << 20);
  mqr_frame_t f;
  struct {
    const char *op;
    mqr_str_t args[4];
    size_t n;
    const char *want;
  } bad[] = {
      {"address.create", {MQR_STR("mg.\xff"), MQR_STR("ANYCAST")}, 2, "not valid UTF-8"},
      {"queue.create\xc3", {MQR_STR("a"), MQR_STR("b"), MQR_STR("ANYCAST")}, 3, "not valid UTF-8"},
      {"queue.explode", {MQR_STR("q")}, 1, "unknown operation"},
      {"queue.create", {MQR_STR("mg.q")}, 1, "usage: queue.create"},
      {"queue.create", {MQR_STR("mg.q"), MQR_STR("mg"), MQR_STR("BOTH")}, 3, "bad routing type"},
      {"queue.create", {MQR_STR("mg.q"), MQR_STR("mg"), MQR_STR("ANYCAST"), MQR_STR("ring-size=1e9")}, 4, "ring-size"},
      {"address.create", {MQR_STR("mg"), MQR_STR("SIDEWAYS")}, 2, "bad routing types"},
      {"queue.browse", {MQR_STR("nope"), MQR_STR("-1")}, 2, "MAX must be"},
      {"address.delete", {MQR_STR("held"), MQR_STR("now")}, 2, "may be 'force'"},
      {"queue.move", {MQR_STR("held"), MQR_STR("held")}, 2, "cannot move to itself"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mqr_frame_t m = {MQR_FRAME_MANAGE, {.manage = {(int64_t)i + 1, mqr_str(bad[i].op), {bad[i].args, bad[i].n}}}};
    send_frame(s, &m);
    assert_true(read_until(s, &r, MQR_FRAME_MANAGE_RESULT, &f, 3));
    assert_int_equal(f.u.manage_result.request, (int64_t)i + 1);
    assert_true(f.u.manage_result.code < 0);
    if (strstr(f.u.manage_result.text.ptr, bad[i].want) == NULL)
      fail_msg("%s: '%.*s' lacks '%s'", bad[i].op, (int)f.u.manage_result.text.len, f.u.manage_result.text.ptr,
               bad[i].want);
  }
  /* 10,000 arguments: more than the frame decoder holds, a bad frame (fatal); the
   * broker goes on. */
  static mqr_str_t many[10000];
  for (size_t i = 0; i < 10000; i++) many[i] = MQR_STR("x=y");
  mqr_frame_t m = {MQR_FRAME_MANAGE, {.manage = {99, MQR_STR("queue.create"), {many, 10000}}}};
  send_frame(s, &m);
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
  assert_true(f.u.error.code < 0);
  close(s);
  /* 20 arguments fit: refused for what they say. */
  memset(&r, 0, sizeof r);
  s = raw_client(1 << 20);
  m.u.manage.args.count = 20;
  send_frame(s, &m);
  assert_true(read_until(s, &r, MQR_FRAME_MANAGE_RESULT, &f, 3));
  assert_true(f.u.manage_result.code < 0);
  close(s);
  assert_false(address_listed("mg", 2));
  /* A browse larger than the client's max_frame: refused (ELIMIT), not cut. */
  mqr_bclient_t *p = connect_();
  char body[900];
  memset(body, 'b', sizeof body);
  for (int i = 0; i < 4; i++) {
    mqr_client_message_t msg = {MQR_STR("mg.big"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT,        0, 0,
                                {"", 0},           NULL,        NULL,  0,       mqr_str_n(body, sizeof body)};
    assert_int_equal(mqr_bclient_send(p, &msg, true, NULL, NULL), 0);
  }
  mqr_bclient_close(p);
  memset(&r, 0, sizeof r);
  s = raw_client(1024);
  mqr_str_t q[1] = {MQR_STR("mg.big")};
  m = (mqr_frame_t){MQR_FRAME_MANAGE, {.manage = {7, MQR_STR("queue.browse"), {q, 1}}}};
  send_frame(s, &m);
  assert_true(read_until(s, &r, MQR_FRAME_MANAGE_RESULT, &f, 3));
  assert_int_equal(f.u.manage_result.code, MQR_ELIMIT);
  assert_int_equal(f.u.manage_result.rows.count, 0);
  close(s);
}

/* ---- a client's declared max_frame ------------------------------------------------------ */

/* A client that declared max_frame 1024 is never sent a longer frame: a message that does
 * not fit is held at the head of its queue (the client is told, once) until a consumer
 * that can take it does; then the small one gets what follows. */
static void test_max_frame_honoured(void **state) {
  (void)state;
  mqr_bclient_t *p = connect_();
  char big[2000];
  memset(big, 'B', sizeof big);
  mqr_client_message_t m1 = {MQR_STR("small"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT,      0, 0,
                             {"", 0},          NULL,        NULL,  0,       mqr_str_n(big, sizeof big)};
  mqr_client_message_t m2 = {MQR_STR("small"), MQR_ANYCAST, false, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0,
                             {"", 0},          NULL,        NULL,  0,       MQR_STR("tiny")};
  assert_int_equal(mqr_bclient_send(p, &m1, true, NULL, NULL), 0);
  assert_int_equal(mqr_bclient_send(p, &m2, true, NULL, NULL), 0);
  static reader_t r;
  memset(&r, 0, sizeof r);
  int s = raw_client(1024);
  raw_subscribe(s, 7, "small", 10);
  mqr_frame_t f;
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
  assert_int_equal(f.u.error.code, MQR_ELIMIT);
  assert_int_equal(f.u.error.receipt, 7);
  assert_false(f.u.error.fatal);
  assert_false(read_until(s, &r, MQR_FRAME_MESSAGE, &f, 0.5)); /* held: nothing longer came */
  assert_int_equal(queue_field("small", false), 2);
  /* A consumer that takes it: then the small one gets the next. */
  mqr_bclient_t *c = connect_();
  int64_t sub;
  assert_int_equal(
      mqr_bclient_subscribe(c, MQR_STR("small"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, &sub, NULL, 0, NULL),
      0);
  mqr_bclient_message_t *msg;
  assert_int_equal(mqr_bclient_receive(c, 2000, &msg, NULL), 0);
  assert_int_equal(msg->body.len, sizeof big);
  assert_int_equal(mqr_bclient_ack(c, msg->subscription, msg->delivery, false, NULL), 0);
  mqr_bclient_message_free(msg);
  mqr_bclient_close(c);
  assert_true(read_until(s, &r, MQR_FRAME_MESSAGE, &f, 3));
  assert_true(mqr_str_eq(f.u.message.body, MQR_STR("tiny")));
  /* Each frame it was sent fits what it declared. */
  close(s);
  mqr_bclient_close(p);
  /* A client that declares less than the minimum every client must take is refused. */
  memset(&r, 0, sizeof r);
  s = raw_client(100);
  assert_true(read_until(s, &r, MQR_FRAME_ERROR, &f, 3));
  assert_true(f.u.error.fatal);
  close(s);
}

static int group_setup(void **state) {
  (void)state;
  return mqrd_group_start(&broker, config);
}

static int group_teardown(void **state) {
  (void)state;
  return mqrd_group_stop(&broker);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* this process's own sockets; mqrd_start resets it for mqrd */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigpipe_ignored),
      cmocka_unit_test(test_consumer_reset_does_not_kill),
      cmocka_unit_test(test_blocked_producer_vanishes),
      cmocka_unit_test(test_handshake_timeout),
      cmocka_unit_test(test_idle_timeout_and_ping),
      cmocka_unit_test(test_invalid_utf8_refused),
      cmocka_unit_test(test_max_frame_honoured),
      cmocka_unit_test(test_hostile_manage),
      cmocka_unit_test(test_union_index_as_long_varint),
  };
  return cmocka_run_group_tests_name("faults", tests, group_setup, group_teardown);
}
