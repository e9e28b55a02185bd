/* Out of memory while the broker answers: a client that sent CONNECT, SUBSCRIBE and a
 * SEND with a receipt waits for an answer to each: CONNECTED, SUBSCRIBED (or an ERROR
 * for subscription 1) and RECEIPT (or an ERROR for receipt 7). With every allocation the
 * broker makes on that path failed in turn, the client gets all three answers or sees
 * its connection closed; it never waits forever, and the broker frees everything. The
 * broker listens on 127.0.0.1 in this process; the client is a plain non-blocking socket
 * driven alongside the loop (its bytes are encoded before the failures start). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mqr/broker.h"
#include "testutil.h"

static const char yaml[] = "security: {allow-anonymous: true}\nlisteners:\n"
                           "  - {name: t, host: 127.0.0.1, port: 0}\n"
                           "addresses:\n"
                           "  q: {anycast: [q]}\n";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void encode(mqr_avro_buf_t *b, const mqr_frame_t *f) {
  mqr_error_t err;
  if (mqr_frame_encode(f, b, &err) != 0) fail_msg("encode: %s", err.message);
}

typedef struct {
  bool connected, subscribed, receipt, closed;
  int errors;
} seen_t;

/* One attempt with the Nth allocation (counted from the first client byte) failed; 0
 * fails none. Returns whether a failure was injected. */
static bool attempt(long n, seen_t *seen) {
  talloc_install();
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_string("t.yaml", yaml, sizeof yaml - 1, &cfg, NULL), 0);
  mqr_broker_options_t opt = {.config = cfg, .listen = true};
  mqr_broker_t *b;
  mqr_error_t err;
  if (mqr_broker_create(&loop, &opt, &b, &err) != 0) fail_msg("%s", err.message);
  int port = mqr_broker_listener_port(b, 0);

  mqr_avro_buf_t out;
  mqr_avro_buf_init_growable(&out);
  mqr_frame_t f = {MQR_FRAME_CONNECT, {.connect = {MQR_PROTOCOL_VERSION, MQR_STR("oom"), 1 << 20, {NULL, 0}, {NULL, 0}}}};
  encode(&out, &f);
  f = (mqr_frame_t){MQR_FRAME_SUBSCRIBE,
                    {.subscribe = {1, MQR_STR("q"), MQR_PROTO_RT_NONE, MQR_STR(""), 10, MQR_STR("")}}};
  encode(&out, &f);
  f = (mqr_frame_t){
      MQR_FRAME_SEND,
      {.send = {
           MQR_STR("q"), MQR_PROTO_RT_ANYCAST, false, MQR_STR(""), 7, 4, 0, 0, MQR_STR(""), {0}, MQR_STR("body")}}};
  encode(&out, &f);

  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  fcntl(s, F_SETFL, O_NONBLOCK);
  int rc = connect(s, (struct sockaddr *)&a, sizeof a);
  assert_true(rc == 0 || errno == EINPROGRESS);

  talloc.calls = 0;
  talloc.fail_at = n;
  long failed = talloc.failed;
  *seen = (seen_t){0};
  static uint8_t in[1 << 16];
  size_t have = 0, sent = 0;
  uint8_t arena[4096];
  double end = now() + 10;
  while (!(seen->connected && seen->subscribed && seen->receipt) && !seen->closed) {
    if (now() > end)
      fail_msg("N=%ld: the client waits forever (connected %d, subscribed %d, receipt %d)", n, seen->connected,
               seen->subscribed, seen->receipt);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (sent < out.len) {
      ssize_t k = send(s, out.data + sent, out.len - sent, MSG_NOSIGNAL);
      if (k > 0) sent += (size_t)k;
    }
    ssize_t k = recv(s, in + have, sizeof in - have, 0);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)) seen->closed = true;
    if (k > 0) have += (size_t)k;
    uint32_t body;
    while (mqr_frame_peek(in, have, UINT32_MAX, &body) == 1) {
      mqr_avro_arena_t ar = {arena, sizeof arena, 0};
      assert_int_equal(mqr_frame_decode(in + MQR_FRAME_HEADER, body, &f, &ar, NULL), 0);
      if (f.type == MQR_FRAME_CONNECTED) seen->connected = true;
      if (f.type == MQR_FRAME_SUBSCRIBED) seen->subscribed = true;
      if (f.type == MQR_FRAME_RECEIPT) seen->receipt = true;
      if (f.type == MQR_FRAME_ERROR) {
        seen->errors++;
        if (f.u.error.receipt == 1) seen->subscribed = true;
        if (f.u.error.receipt == 7) seen->receipt = true;
      }
      memmove(in, in + MQR_FRAME_HEADER + body, have - MQR_FRAME_HEADER - body);
      have -= MQR_FRAME_HEADER + body;
    }
    if (k <= 0) usleep(200);
  }
  bool hit = talloc.failed != failed;
  talloc.fail_at = 0;
  close(s);
  mqr_avro_buf_free(&out);
  mqr_broker_close(b, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  mqr_config_destroy(cfg);
  if (talloc.live != 0) fail_msg("N=%ld: %ld blocks left after close", n, talloc.live);
  talloc_uninstall();
  return hit;
}

static void test_every_reply_allocation_failure(void **state) {
  (void)state;
  seen_t seen;
  assert_non_null(mqr_protocol_schema()); /* built once per process: not counted below */
  assert_false(attempt(0, &seen));
  assert_true(seen.connected && seen.subscribed && seen.receipt);
  assert_int_equal(seen.errors, 0);
  long tried = 0, closed = 0, errors = 0;
  for (long n = 1; attempt(n, &seen); n++) {
    tried++;
    /* Every answer came, or the connection closed: attempt fails the test otherwise.
     * Count both outcomes to be sure the failures were met on the answering path. */
    if (!(seen.connected && seen.subscribed && seen.receipt)) closed++;
    if (seen.errors) errors++;
  }
  printf("failed %ld allocations in turn: %ld closed the connection, %ld were answered with an ERROR\n", tried, closed,
         errors);
  assert_true(tried >= 3);
  assert_true(closed >= 1);
  assert_true(errors >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_reply_allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
