#define _GNU_SOURCE /* memmem */
/* The native protocol's frames: every type round trips; a Send read as the broker reads it
 * gives its fields and its tail; a delivery made of a head and stored bytes (as the broker
 * writes it) decodes as the Message frame a client reads; broken frames fail cleanly. */
#include "mqr/protocol.h"
#include "testutil.h"

static mqr_str_t keys[] = {MQR_STR("k1"), MQR_STR("content-type")};
static mqr_value_t vals[] = {{MQR_VALUE_STRING, {.s = MQR_STR("v1")}},
                             {MQR_VALUE_STRING, {.s = MQR_STR("text/plain")}}};

/* One property of each type. */
static mqr_str_t tkeys[] = {MQR_STR("n"), MQR_STR("b"), MQR_STR("i"), MQR_STR("l"),
                            MQR_STR("f"), MQR_STR("d"), MQR_STR("s"), MQR_STR("y")};
static mqr_value_t tvals[] = {{MQR_VALUE_NULL, {.l = 0}},
                              {MQR_VALUE_BOOL, {.b = true}},
                              {MQR_VALUE_INT, {.i = -7}},
                              {MQR_VALUE_LONG, {.l = 1LL << 40}},
                              {MQR_VALUE_FLOAT, {.f = 2.5f}},
                              {MQR_VALUE_DOUBLE, {.d = -0.125}},
                              {MQR_VALUE_STRING, {.s = {"red", 3}}},
                              {MQR_VALUE_BYTES, {.s = {"\0\1", 2}}}};

static void check_typed(const mqr_str_t *k, const mqr_value_t *v, size_t n) {
  assert_int_equal(n, 8);
  for (size_t i = 0; i < n; i++) {
    assert_true(mqr_str_eq(k[i], tkeys[i]));
    assert_int_equal(v[i].type, tvals[i].type);
  }
  assert_true(v[1].u.b);
  assert_int_equal(v[2].u.i, -7);
  assert_true(v[3].u.l == 1LL << 40);
  assert_true(v[4].u.f == 2.5f && v[5].u.d == -0.125);
  assert_true(mqr_str_eq(v[6].u.s, MQR_STR("red")) && v[7].u.s.len == 2 && v[7].u.s.ptr[1] == 1);
}

static void roundtrip(const mqr_frame_t *f, mqr_frame_t *back, mqr_avro_buf_t *b, uint8_t *mem, size_t cap) {
  mqr_error_t err;
  b->len = 0;
  if (mqr_frame_encode(f, b, &err) != 0) fail_msg("encode %s: %s", mqr_frame_type_name(f->type), err.message);
  uint32_t body = 0;
  assert_int_equal(mqr_frame_peek(b->data, b->len, 1 << 20, &body), 1);
  assert_int_equal(body + MQR_FRAME_HEADER, b->len);
  assert_int_equal(mqr_frame_peek(b->data, b->len - 1, 1 << 20, &body), 0);
  mqr_avro_arena_t arena = {mem, cap, 0};
  memset(back, 0, sizeof *back);
  if (mqr_frame_decode(b->data + MQR_FRAME_HEADER, body, back, &arena, &err) != 0)
    fail_msg("decode %s: %s", mqr_frame_type_name(f->type), err.message);
  assert_int_equal(back->type, f->type);
}

static void test_every_frame_round_trips(void **state) {
  (void)state;
  assert_non_null(mqr_protocol_schema());
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  uint8_t mem[4096];
  mqr_frame_t f, g;

  f = (mqr_frame_t){MQR_FRAME_CONNECT,
                    {.connect = {MQR_PROTOCOL_VERSION, MQR_STR("c-1"), 1 << 20, {NULL, 0}, {NULL, 0}}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(mqr_str_eq(g.u.connect.client_id, MQR_STR("c-1")) && g.u.connect.max_frame == 1 << 20);

  f = (mqr_frame_t){MQR_FRAME_SEND,
                    {.send = {MQR_STR("orders"),
                              MQR_PROTO_RT_ANYCAST,
                              true,
                              MQR_STR("dup-1"),
                              77,
                              9,
                              1700000000000LL,
                              1700000060000LL,
                              MQR_STR("ID:1"),
                              {keys, vals, 2},
                              MQR_STR("hello")}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(mqr_str_eq(g.u.send.address, MQR_STR("orders")) && g.u.send.routing_type == MQR_PROTO_RT_ANYCAST);
  assert_true(g.u.send.durable && g.u.send.receipt == 77 && mqr_str_eq(g.u.send.body, MQR_STR("hello")));
  assert_true(g.u.send.priority == 9 && g.u.send.timestamp == 1700000000000LL &&
              g.u.send.expiration == 1700000060000LL && mqr_str_eq(g.u.send.user_id, MQR_STR("ID:1")));
  assert_int_equal(g.u.send.properties.count, 2);
  assert_true(mqr_str_eq(((mqr_value_t *)g.u.send.properties.values)[1].u.s, MQR_STR("text/plain")));
  /* Every property type round trips. */
  f.u.send.properties = (mqr_avro_map_t){tkeys, tvals, 8};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  check_typed(g.u.send.properties.keys, g.u.send.properties.values, g.u.send.properties.count);

  f = (mqr_frame_t){MQR_FRAME_SUBSCRIBE,
                    {.subscribe = {9, MQR_STR("news"), MQR_PROTO_RT_MULTICAST, MQR_STR(""), 100, MQR_STR("a > 1")}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_int_equal(g.u.subscribe.credit, 100);
  assert_true(mqr_str_eq(g.u.subscribe.selector, MQR_STR("a > 1")));
  f = (mqr_frame_t){MQR_FRAME_ACK, {.ack = {9, 12345678901LL, true, 77}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(g.u.ack.delivery == 12345678901LL && g.u.ack.cumulative && g.u.ack.receipt == 77);
  f = (mqr_frame_t){MQR_FRAME_ERROR, {.error = {MQR_ENOADDR, MQR_STR("ENOADDR"), MQR_STR("no"), 77, false}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_int_equal(g.u.error.code, MQR_ENOADDR);
  mqr_frame_queue_info_t qi[2] = {{MQR_STR("q1"), MQR_STR("a"), MQR_PROTO_RT_ANYCAST, 5, 1, 2, 9, 3, true},
                                  {MQR_STR("q2"), MQR_STR("a"), MQR_PROTO_RT_MULTICAST, 0, 0, 0, 0, 0, false}};
  f = (mqr_frame_t){MQR_FRAME_QUERY_RESULT, {.query_result = {4, {NULL, 0}, {qi, 2}, 3, 1}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_int_equal(g.u.query_result.queues.count, 2);
  assert_int_equal(((mqr_frame_queue_info_t *)g.u.query_result.queues.items)[0].depth, 5);
  assert_true(((mqr_frame_queue_info_t *)g.u.query_result.queues.items)[0].paused);
  /* MANAGE and its result, with rows of typed values. */
  mqr_str_t margs[2] = {MQR_STR("orders"), MQR_STR("persist")};
  f = (mqr_frame_t){MQR_FRAME_MANAGE, {.manage = {9, MQR_STR("queue.pause"), {margs, 2}}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(g.u.manage.request == 9 && mqr_str_eq(g.u.manage.operation, MQR_STR("queue.pause")));
  assert_int_equal(g.u.manage.args.count, 2);
  assert_true(mqr_str_eq(((mqr_str_t *)g.u.manage.args.items)[1], MQR_STR("persist")));
  mqr_str_t rk[2] = {MQR_STR("@message_id"), MQR_STR("@body")};
  mqr_value_t rv[2] = {mqr_value_long(77), mqr_value_bytes(MQR_STR("b\0dy"))};
  mqr_avro_map_t rows[1] = {{rk, rv, 2}};
  f = (mqr_frame_t){MQR_FRAME_MANAGE_RESULT, {.manage_result = {9, 0, MQR_STR("1 message"), 1, {rows, 1}}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_int_equal(g.u.manage_result.rows.count, 1);
  const mqr_avro_map_t *gr = g.u.manage_result.rows.items;
  assert_int_equal(gr->count, 2);
  assert_int_equal(((const mqr_value_t *)gr->values)[0].u.l, 77);
  assert_int_equal(((const mqr_value_t *)gr->values)[1].u.s.len, 4);
  f = (mqr_frame_t){MQR_FRAME_PING, {.ping = {-42}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(g.type == MQR_FRAME_PING && g.u.ping.token == -42);
  f = (mqr_frame_t){MQR_FRAME_PONG, {.pong = {7}}};
  roundtrip(&f, &g, &b, mem, sizeof mem);
  assert_true(g.type == MQR_FRAME_PONG && g.u.pong.token == 7);
  for (int t = 0; t < MQR_FRAME_COUNT; t++) assert_string_not_equal(mqr_frame_type_name(t), "?");
  assert_string_equal(mqr_frame_type_name(MQR_FRAME_COUNT), "?");

  /* Any Avro reader reads frames: the body as JSON through the published schema. */
  f = (mqr_frame_t){MQR_FRAME_CREDIT, {.credit = {3, 50}}};
  b.len = 0;
  assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  assert_int_equal(mqr_avro_binary_to_json(mqr_protocol_schema(), b.data + 4, b.len - 4, NULL, &j, NULL), 0);
  const char *want = "{\"mqr.protocol.Credit\":{\"subscription\":3,\"messages\":50}}";
  assert_int_equal(j.len, strlen(want));
  assert_memory_equal(j.data, want, j.len);
  mqr_avro_buf_free(&j);
  mqr_avro_buf_free(&b);
}

/* The broker's path: a Send's view, the stored message, a head per delivery; the client
 * decodes the result as an ordinary Message frame. */
static void test_send_to_delivery(void **state) {
  (void)state;
  mqr_avro_buf_t b, stored;
  mqr_avro_buf_init_growable(&b);
  mqr_avro_buf_init_growable(&stored);
  mqr_frame_t f = {MQR_FRAME_SEND,
                   {.send = {MQR_STR("news.eu"),
                             MQR_PROTO_RT_MULTICAST,
                             false,
                             MQR_STR(""),
                             0,
                             3,
                             123,
                             456,
                             MQR_STR("u"),
                             {tkeys, tvals, 8},
                             MQR_STR("body bytes")}}};
  assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
  mqr_send_view_t v;
  mqr_error_t err;
  if (mqr_frame_send_view(b.data + 4, b.len - 4, &v, &err) != 0) fail_msg("%s", err.message);
  assert_true(mqr_str_eq(v.address, MQR_STR("news.eu")));
  assert_int_equal(v.routing_type, MQR_PROTO_RT_MULTICAST);
  assert_false(v.durable);
  assert_int_equal(v.duplicate_id.len, 0);
  assert_int_equal(v.receipt, 0);
  assert_int_equal(v.body_len, 10);
  assert_ptr_equal(v.tail + v.tail_len, b.data + b.len);

  size_t ssize = mqr_message_stored_size(42, MQR_STR("news.eu"), v.tail_len);
  assert_int_equal(mqr_avro_buf_reserve(&stored, ssize), 0);
  stored.len =
      mqr_message_write_stored(stored.data, 42, MQR_STR("news.eu"), MQR_PROTO_RT_MULTICAST, true, v.tail, v.tail_len);
  assert_int_equal(stored.len, ssize);
  /* Read back: the same fields, the tail a view of the same bytes; cut short, an error. */
  mqr_stored_view_t sv;
  if (mqr_message_read_stored(stored.data, stored.len, &sv, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(sv.message_id, 42);
  assert_true(mqr_str_eq(sv.address, MQR_STR("news.eu")));
  assert_int_equal(sv.routing_type, MQR_PROTO_RT_MULTICAST);
  assert_true(sv.durable);
  assert_int_equal(sv.tail_len, v.tail_len);
  assert_memory_equal(sv.tail, v.tail, v.tail_len);
  assert_int_equal(mqr_message_read_stored(stored.data, 5, &sv, &err), MQR_ETRUNCATED);
  /* A tail made from values is the same bytes as the Send's. */
  uint8_t tail[128];
  mqr_tail_t t = {3, 123, 456, MQR_STR("u"), tkeys, tvals, 8, MQR_STR("body bytes")};
  assert_int_equal(mqr_message_tail_size(&t), v.tail_len);
  assert_int_equal(mqr_message_write_tail(tail, &t), v.tail_len);
  assert_memory_equal(tail, v.tail, v.tail_len);
  /* The tail read back: its headers, its properties one by one, its body. */
  mqr_tail_view_t tv;
  if (mqr_message_read_tail(tail, v.tail_len, &tv, &err) != 0) fail_msg("%s", err.message);
  assert_true(tv.priority == 3 && tv.timestamp == 123 && tv.expiration == 456 && mqr_str_eq(tv.user_id, MQR_STR("u")));
  assert_true(mqr_str_eq(tv.body, MQR_STR("body bytes")));
  mqr_props_iter_t it;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  mqr_str_t pk[8];
  mqr_value_t pv[8];
  size_t np = 0;
  while (np < 8 && mqr_props_next(&it, &pk[np], &pv[np]) == 1) np++;
  assert_int_equal(mqr_props_next(&it, &pk[0], &pv[0]), 0);
  check_typed(pk, pv, np);
  for (size_t cut = 0; cut < v.tail_len; cut++) assert_true(mqr_message_read_tail(tail, cut, &tv, NULL) < 0);
  /* The headers alone: the same, and the properties walked from what follows them. */
  mqr_tail_view_t hv;
  assert_int_equal(mqr_message_read_headers(tail, v.tail_len, &hv, NULL), 0);
  assert_true(hv.priority == 3 && hv.timestamp == 123 && hv.expiration == 456 && mqr_str_eq(hv.user_id, MQR_STR("u")));
  assert_ptr_equal(hv.props, tv.props);
  mqr_props_iter_init(&it, hv.props, hv.props_len);
  np = 0;
  while (np < 8 && mqr_props_next(&it, &pk[np], &pv[np]) == 1) np++;
  assert_int_equal(mqr_props_next(&it, &pk[0], &pv[0]), 0);
  check_typed(pk, pv, np);
  assert_int_equal(mqr_message_read_headers(tail, 2, &hv, NULL), MQR_ETRUNCATED);
  uint8_t frame[512];
  size_t head = mqr_message_head(frame, 7, 1000, 2, stored.len);
  assert_true(head <= MQR_MESSAGE_HEADER_MAX);
  memcpy(frame + head, stored.data, stored.len);
  uint32_t body = 0;
  assert_int_equal(mqr_frame_peek(frame, head + stored.len, 1 << 20, &body), 1);
  assert_int_equal(body, head + stored.len - 4);
  uint8_t mem[1024];
  mqr_avro_arena_t arena = {mem, sizeof mem, 0};
  mqr_frame_t m;
  if (mqr_frame_decode(frame + 4, body, &m, &arena, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(m.type, MQR_FRAME_MESSAGE);
  assert_int_equal(m.u.message.subscription, 7);
  assert_int_equal(m.u.message.delivery, 1000);
  assert_int_equal(m.u.message.delivery_count, 2);
  assert_int_equal(m.u.message.message_id, 42);
  assert_true(mqr_str_eq(m.u.message.address, MQR_STR("news.eu")) && m.u.message.durable);
  assert_true(m.u.message.priority == 3 && m.u.message.timestamp == 123 && m.u.message.expiration == 456);
  check_typed(m.u.message.properties.keys, m.u.message.properties.values, m.u.message.properties.count);
  assert_true(mqr_str_eq(m.u.message.body, MQR_STR("body bytes")));

  /* Not a Send; cut anywhere; bytes left over. */
  mqr_frame_t ack = {MQR_FRAME_ACK, {.ack = {1, 2, false, 0}}};
  mqr_avro_buf_t a;
  mqr_avro_buf_init_growable(&a);
  assert_int_equal(mqr_frame_encode(&ack, &a, NULL), 0);
  assert_int_equal(mqr_frame_send_view(a.data + 4, a.len - 4, &v, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "a ACK frame, not SEND"));
  for (size_t n = 0; n < b.len - 4; n++) assert_true(mqr_frame_send_view(b.data + 4, n, &v, NULL) < 0);
  assert_int_equal(mqr_avro_buf_reserve(&b, 1), 0);
  b.data[b.len] = 0;
  assert_int_equal(mqr_frame_send_view(b.data + 4, b.len - 3, &v, &err), MQR_EBADDATA);
  assert_int_equal(mqr_frame_decode(b.data + 4, b.len - 3, &m, &arena, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "1 bytes after the SEND frame"));
  /* A priority out of 0-9, a property branch out of range, a string property that is
   * not UTF-8: refused by the view, naming what. */
  b.len = 0;
  f.u.send.priority = 10;
  assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
  assert_int_equal(mqr_frame_send_view(b.data + 4, b.len - 4, &v, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "priority 10"));
  f.u.send.priority = 4;
  mqr_value_t bad = {MQR_VALUE_STRING, {.s = {"\xff", 1}}};
  f.u.send.properties = (mqr_avro_map_t){keys, &bad, 1};
  b.len = 0;
  assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
  assert_int_equal(mqr_frame_send_view(b.data + 4, b.len - 4, &v, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "not valid UTF-8"));
  f.u.send.properties = (mqr_avro_map_t){keys, vals, 1};
  b.len = 0;
  assert_int_equal(mqr_frame_encode(&f, &b, NULL), 0);
  uint8_t *branch = memmem(b.data, b.len, "k1", 2) + 2; /* the value's branch byte */
  *branch = 2 * 8;
  assert_int_equal(mqr_frame_send_view(b.data + 4, b.len - 4, &v, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "branch 8"));
  mqr_avro_buf_free(&a);
  mqr_avro_buf_free(&b);
  mqr_avro_buf_free(&stored);
}

static void test_hostile_frames(void **state) {
  (void)state;
  const uint8_t huge[] = {0x7f, 0xff, 0xff, 0xff, 0};
  uint32_t n;
  assert_int_equal(mqr_frame_peek(huge, sizeof huge, 1 << 20, &n), MQR_ELIMIT);
  mqr_frame_t f;
  uint8_t mem[64];
  mqr_avro_arena_t arena = {mem, sizeof mem, 0};
  const uint8_t unknown_type[] = {0x40}; /* branch 32 */
  assert_int_equal(mqr_frame_decode(unknown_type, 1, &f, &arena, NULL), MQR_EBADDATA);
  const uint8_t negative_type[] = {0x01};
  assert_int_equal(mqr_frame_decode(negative_type, 1, &f, &arena, NULL), MQR_EBADDATA);
  /* A Send whose properties claim more entries than the arena holds. */
  mqr_frame_t s = {
      MQR_FRAME_SEND,
      {.send = {MQR_STR("a"), 0, false, MQR_STR(""), 0, 4, 0, 0, MQR_STR(""), {keys, vals, 2}, MQR_STR("")}}};
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  assert_int_equal(mqr_frame_encode(&s, &b, NULL), 0);
  uint8_t tiny[8];
  mqr_avro_arena_t small = {tiny, sizeof tiny, 0};
  assert_int_equal(mqr_frame_decode(b.data + 4, b.len - 4, &f, &small, NULL), MQR_ENOSPC);
  /* Random bytes never crash the decoder or the send view. */
  uint32_t x = 12345;
  uint8_t junk[64];
  for (int round = 0; round < 20000; round++) {
    size_t len = (size_t)(x % sizeof junk);
    for (size_t i = 0; i < len; i++) junk[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
    arena.used = 0;
    (void)mqr_frame_decode(junk, len, &f, &arena, NULL);
    mqr_send_view_t v;
    (void)mqr_frame_send_view(junk, len, &v, NULL);
    x = x * 1103515245u + 12345u;
  }
  mqr_avro_buf_free(&b);
}

/* The one table of frames (MQR_FRAME_TYPES) names frame.avsc's records in the union's
 * order: the enum, names and codec binding made from it match the published schema. */
static void test_frame_table_matches_schema(void **state) {
  (void)state;
  static const char *const records[] = {
#define REC(e, name, rec, member) #rec,
      MQR_FRAME_TYPES(REC)
#undef REC
  };
  assert_int_equal(sizeof records / sizeof records[0], MQR_FRAME_COUNT);
  mqr_str_t text = mqr_protocol_schema_text();
  char *t = strndup(text.ptr, text.len);
  const char *at = t;
  for (int i = 0; i < MQR_FRAME_COUNT; i++) {
    char needle[80];
    snprintf(needle, sizeof needle, "\n  {\"type\": \"record\", \"name\": \"%s\",", records[i]);
    const char *hit = strstr(at, needle);
    if (hit == NULL) fail_msg("branch %d: record %s is not next in frame.avsc", i, records[i]);
    /* No other top-level record (one indented as a union branch) before this one. */
    const char *other = strstr(at, "\n  {\"type\": \"record\", \"name\": ");
    assert_ptr_equal(other, hit);
    at = hit + 1;
  }
  assert_null(strstr(at, "\n  {\"type\": \"record\", \"name\": \"")); /* and none after the last */
  free(t);
  assert_non_null(mqr_protocol_schema());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_frame_round_trips),
      cmocka_unit_test(test_frame_table_matches_schema),
      cmocka_unit_test(test_send_to_delivery),
      cmocka_unit_test(test_hostile_frames),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
