/* MQTT packets as a server reads and writes them (heads/mqtt/packet.h), each rule of the MQTT 3.1.1
 * and 5.0 specifications the decoder enforces, with the reason code it answers: packets
 * are built here byte by byte. */
#include "testutil.h"

#include "../../heads/mqtt/packet.h"

typedef struct {
  uint8_t b[2048];
  size_t n;
} pk_t;

static void put(pk_t *p, const void *d, size_t n) {
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void u8(pk_t *p, uint8_t v) { p->b[p->n++] = v; }
static void u16(pk_t *p, uint16_t v) {
  u8(p, (uint8_t)(v >> 8));
  u8(p, (uint8_t)v);
}
static void u32(pk_t *p, uint32_t v) {
  u16(p, (uint16_t)(v >> 16));
  u16(p, (uint16_t)v);
}
static void vbi(pk_t *p, uint32_t v) {
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    u8(p, (uint8_t)(b | (v ? 0x80 : 0)));
  } while (v);
}
static void str(pk_t *p, const char *s) { /* a length-prefixed string (NUL-free) */
  u16(p, (uint16_t)strlen(s));
  put(p, s, strlen(s));
}
static void strn(pk_t *p, const char *s, size_t n) {
  u16(p, (uint16_t)n);
  put(p, s, n);
}

/* The packet: first byte, remaining length, body. */
static pk_t pkt;
static const uint8_t *packet(uint8_t first, const pk_t *body) {
  pkt.n = 0;
  u8(&pkt, first);
  vbi(&pkt, (uint32_t)body->n);
  put(&pkt, body->b, body->n);
  return pkt.b;
}

static mqr__mqtt_packet_t got;
static uint8_t reason;
static mqr_error_t err;

/* Decodes first+body at level: the return code. */
static int decode(uint8_t first, const pk_t *body, uint8_t level) {
  packet(first, body);
  return mqr__mqtt_decode(pkt.b, pkt.n, level, &got, &reason, &err);
}

#define REFUSED(rc, code, text)                                                                                        \
  do {                                                                                                                 \
    assert_int_equal((rc), MQR_EPROTOCOL);                                                                             \
    assert_int_equal(reason, (code));                                                                                  \
    if (strstr(err.message, (text)) == NULL) fail_msg("'%s' does not say '%s'", err.message, (text));                  \
  } while (0)

static void test_remaining_length(void **state) {
  (void)state;
  size_t total = 0;
  static const uint8_t one[] = {0xC0, 0x00}, part[] = {0x30, 0xFF, 0xFF}, five[] = {0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01},
                       longest[] = {0x30, 0xFF, 0xFF, 0xFF, 0x7F}, padded[] = {0x30, 0x80, 0x00};
  assert_int_equal(mqr__mqtt_peek(one, 1, 1024, &total, NULL), 0);
  assert_int_equal(mqr__mqtt_peek(one, 2, 1024, &total, NULL), 1);
  assert_int_equal(total, 2);
  assert_int_equal(mqr__mqtt_peek(part, 3, UINT32_MAX, &total, NULL), 0); /* more length bytes to come */
  assert_int_equal(mqr__mqtt_peek(five, 6, UINT32_MAX, &total, &err), MQR_EPROTOCOL);
  assert_int_equal(mqr__mqtt_peek(longest, 5, UINT32_MAX, &total, NULL), 0);
  assert_int_equal(total, 5 + 268435455u); /* the largest there is */
  assert_int_equal(mqr__mqtt_peek(longest, 5, 1 << 20, &total, &err), MQR_ELIMIT);
  assert_non_null(strstr(err.message, "at most 1048576"));
  assert_int_equal(mqr__mqtt_peek(padded, 3, 1024, &total, &err), MQR_EPROTOCOL); /* not in its fewest bytes */
}

static void connect_head(pk_t *b, uint8_t level, uint8_t flags) {
  str(b, "MQTT");
  u8(b, level);
  u8(b, flags);
  u16(b, 30);
}

static void test_connect(void **state) {
  (void)state;
  /* 3.1.1: clean session, a QoS 1 retained will, user and password */
  pk_t b = {0};
  connect_head(&b, 4, 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80);
  str(&b, "client-1");
  str(&b, "will/topic");
  strn(&b, "bye\0!", 5);
  str(&b, "user");
  strn(&b, "p\xffw", 3); /* binary data: any bytes */
  assert_int_equal(decode(0x10, &b, 0), 0);
  mqr__mqtt_connect_t *c = &got.u.connect;
  assert_int_equal(got.type, MQR__MQTT_CONNECT);
  assert_int_equal(c->level, 4);
  assert_true(c->clean && c->will && c->will_retain && c->has_user && c->has_password);
  assert_int_equal(c->will_qos, 1);
  assert_int_equal(c->keep_alive, 30);
  assert_true(c->client_id.len == 8 && memcmp(c->client_id.ptr, "client-1", 8) == 0);
  assert_true(c->will_payload.len == 5 && c->password.len == 3);
  /* 5.0: properties, will properties, user properties read back in order */
  b.n = 0;
  connect_head(&b, 5, 0x02 | 0x04);
  pk_t pr = {0};
  u8(&pr, 0x11), u32(&pr, 3600);
  u8(&pr, 0x26), str(&pr, "k1"), str(&pr, "v1");
  u8(&pr, 0x21), u16(&pr, 20);
  u8(&pr, 0x26), str(&pr, "k2"), str(&pr, "v2");
  vbi(&b, (uint32_t)pr.n), put(&b, pr.b, pr.n);
  str(&b, "");
  pk_t wp = {0};
  u8(&wp, 0x18), u32(&wp, 5);
  u8(&wp, 0x03), str(&wp, "text/plain");
  vbi(&b, (uint32_t)wp.n), put(&b, wp.b, wp.n);
  str(&b, "w");
  str(&b, "payload");
  assert_int_equal(decode(0x10, &b, 0), 0);
  c = &got.u.connect;
  assert_int_equal(c->level, 5);
  assert_true(MQR__MQTT_HAS(&got.props, 0x11) && got.props.session_expiry == 3600);
  assert_int_equal(got.props.receive_max, 20);
  assert_int_equal(got.props.n_users, 2);
  size_t at = 0;
  mqr_str_t k, v;
  assert_int_equal(mqr__mqtt_user_next(&got.props, &at, &k, &v), 1);
  assert_true(k.len == 2 && memcmp(k.ptr, "k1", 2) == 0 && memcmp(v.ptr, "v1", 2) == 0);
  assert_int_equal(mqr__mqtt_user_next(&got.props, &at, &k, &v), 1); /* past the receive maximum between */
  assert_true(memcmp(k.ptr, "k2", 2) == 0 && memcmp(v.ptr, "v2", 2) == 0);
  assert_int_equal(mqr__mqtt_user_next(&got.props, &at, &k, &v), 0);
  assert_int_equal(c->client_id.len, 0);
  assert_int_equal(c->will_props.will_delay, 5);
  assert_true(c->will_props.content_type.len == 10);
  /* 5.0 allows a password without a user name */
  b.n = 0;
  connect_head(&b, 5, 0x40);
  u8(&b, 0);
  str(&b, "c");
  str(&b, "pw");
  assert_int_equal(decode(0x10, &b, 0), 0);
}

static void test_connect_refused(void **state) {
  (void)state;
  pk_t b = {0};
  str(&b, "MQIsdp"), u8(&b, 3), u8(&b, 2), u16(&b, 0), str(&b, "c");
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_BAD_VERSION, "level 3");
  b.n = 0;
  connect_head(&b, 6, 2), str(&b, "c");
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_BAD_VERSION, "only MQTT 4");
  static const struct {
    uint8_t level, flags;
    const char *says;
    uint8_t code;
  } flags[] = {
      {4, 0x03, "reserved flag", MQR__MQTT_MALFORMED},    {4, 0x1C, "will QoS 3", MQR__MQTT_MALFORMED},
      {4, 0x20, "without a will", MQR__MQTT_MALFORMED},   {4, 0x08, "without a will", MQR__MQTT_MALFORMED},
      {4, 0x40, "password without", MQR__MQTT_MALFORMED},
  };
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    b.n = 0;
    connect_head(&b, flags[i].level, flags[i].flags);
    str(&b, "c");
    REFUSED(decode(0x10, &b, 0), flags[i].code, flags[i].says);
  }
  /* the client id: UTF-8, no U+0000 */
  b.n = 0;
  connect_head(&b, 4, 2), strn(&b, "a\xc3", 2);
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_MALFORMED, "not UTF-8");
  b.n = 0;
  connect_head(&b, 4, 2), strn(&b, "a\0b", 3);
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_MALFORMED, "U+0000");
  /* bytes after the end, a reserved fixed-header flag, a will topic with a wildcard */
  b.n = 0;
  connect_head(&b, 4, 2), str(&b, "c"), u8(&b, 0);
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_MALFORMED, "1 bytes after");
  b.n = 0;
  connect_head(&b, 4, 2), str(&b, "c");
  REFUSED(decode(0x11, &b, 0), MQR__MQTT_MALFORMED, "reserved flags");
  b.n = 0;
  connect_head(&b, 4, 0x06), str(&b, "c"), str(&b, "a/+"), str(&b, "x");
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_PROTOCOL_ERROR, "wildcard");
  /* 5.0 properties: one CONNECT may not carry, one twice, a zero receive maximum */
  static const uint8_t bad_props[][8] = {
      {3, 0x23, 0, 1},       /* topic alias */
      {0},                   /* session expiry twice: below */
      {3, 0x21, 0, 0},       /* receive maximum 0 */
      {2, 0x17, 2},          /* request problem information 2 */
      {5, 0x27, 0, 0, 0, 0}, /* maximum packet size 0 */
  };
  const char *says[] = {"may not carry property 0x23", "given twice", "receive maximum 0", "not 0 or 1",
                        "maximum packet size 0"};
  for (size_t i = 0; i < 5; i++) {
    b.n = 0;
    connect_head(&b, 5, 2);
    if (i == 1) {
      static const uint8_t twice[] = {10, 0x11, 0, 0, 0, 1, 0x11, 0, 0, 0, 2};
      put(&b, twice, sizeof twice);
    } else {
      put(&b, bad_props[i], (size_t)bad_props[i][0] + 1);
    }
    str(&b, "c");
    REFUSED(decode(0x10, &b, 0), MQR__MQTT_PROTOCOL_ERROR, says[i]);
  }
  /* properties longer than the packet */
  b.n = 0;
  connect_head(&b, 5, 2), u8(&b, 100), str(&b, "c");
  REFUSED(decode(0x10, &b, 0), MQR__MQTT_MALFORMED, "longer than the packet");
}

static void test_publish(void **state) {
  (void)state;
  pk_t b = {0};
  str(&b, "a/b"), put(&b, "hi", 2);
  assert_int_equal(decode(0x31, &b, 4), 0); /* QoS 0, retained */
  assert_true(got.u.publish.retain && got.u.publish.qos == 0 && got.u.publish.payload.len == 2);
  b.n = 0;
  str(&b, "a/b"), u16(&b, 7), put(&b, "x", 1);
  assert_int_equal(decode(0x3C, &b, 4), 0); /* QoS 2, DUP */
  assert_true(got.u.publish.dup && got.u.publish.qos == 2 && got.packet_id == 7);
  REFUSED(decode(0x36, &b, 4), MQR__MQTT_MALFORMED, "QoS 3");
  b.n = 0;
  str(&b, "a"), put(&b, "x", 1);
  REFUSED(decode(0x38, &b, 4), MQR__MQTT_MALFORMED, "DUP set at QoS 0");
  b.n = 0;
  str(&b, "a/#");
  REFUSED(decode(0x30, &b, 4), MQR__MQTT_PROTOCOL_ERROR, "no wildcards");
  b.n = 0;
  str(&b, "a"), u16(&b, 0);
  REFUSED(decode(0x32, &b, 4), MQR__MQTT_MALFORMED, "packet identifier 0");
  b.n = 0;
  str(&b, "");
  REFUSED(decode(0x30, &b, 4), MQR__MQTT_PROTOCOL_ERROR, "empty topic name");
  /* 5.0: an empty topic with a topic alias; properties; no subscription identifier */
  b.n = 0;
  str(&b, ""), u8(&b, 13), u8(&b, 0x23), u16(&b, 3), u8(&b, 0x02), u32(&b, 60), u8(&b, 0x01), u8(&b, 1), u8(&b, 0x09),
      u16(&b, 0);
  put(&b, "body", 4);
  assert_int_equal(decode(0x30, &b, 5), 0);
  assert_true(got.props.topic_alias == 3 && got.props.message_expiry == 60 && got.props.payload_format == 1);
  assert_true(MQR__MQTT_HAS(&got.props, 0x09) && got.props.correlation_data.len == 0);
  assert_true(got.u.publish.payload.len == 4);
  b.n = 0;
  str(&b, "t"), u8(&b, 2), u8(&b, 0x0B), u8(&b, 1);
  REFUSED(decode(0x30, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "may not carry property 0x0B");
  b.n = 0;
  str(&b, "t"), u8(&b, 3), u8(&b, 0x23), u16(&b, 0);
  REFUSED(decode(0x30, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "topic alias 0");
  /* before CONNECT */
  b.n = 0;
  str(&b, "t");
  REFUSED(decode(0x30, &b, 0), MQR__MQTT_PROTOCOL_ERROR, "before CONNECT");
}

static void test_acks(void **state) {
  (void)state;
  pk_t b = {0};
  u16(&b, 9);
  for (uint8_t t = MQR__MQTT_PUBACK; t <= MQR__MQTT_PUBCOMP; t++) {
    uint8_t first = (uint8_t)(t << 4 | (t == MQR__MQTT_PUBREL ? 2 : 0));
    assert_int_equal(decode(first, &b, 4), 0);
    assert_int_equal(got.packet_id, 9);
    REFUSED(decode((uint8_t)(t << 4 | (t == MQR__MQTT_PUBREL ? 0 : 2)), &b, 4), MQR__MQTT_MALFORMED, "reserved flags");
  }
  u8(&b, 0x10);
  REFUSED(decode(0x40, &b, 4), MQR__MQTT_MALFORMED, "after its end"); /* 3.1.1: two bytes */
  assert_int_equal(decode(0x40, &b, 5), 0);                           /* 5.0: no matching subscribers */
  assert_int_equal(got.reason, 0x10);
  REFUSED(decode(0x62, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "reason code 0x10"); /* not a PUBREL's */
  u8(&b, 5), u8(&b, 0x1F), str(&b, "ok");
  assert_int_equal(decode(0x50, &b, 5), 0);
  assert_true(got.props.reason.len == 2);
  b.n = 0;
  u16(&b, 0);
  REFUSED(decode(0x40, &b, 4), MQR__MQTT_MALFORMED, "packet identifier 0");
}

static void test_subscribe(void **state) {
  (void)state;
  pk_t b = {0};
  u16(&b, 1);
  str(&b, "a/+/c"), u8(&b, 1);
  str(&b, "#"), u8(&b, 2);
  str(&b, "$share/g/x/#"), u8(&b, 0);
  assert_int_equal(decode(0x82, &b, 4), 0);
  assert_int_equal(got.u.subs.n, 3);
  size_t at = 0;
  mqr__mqtt_sub_t s;
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 1);
  assert_true(s.filter.len == 5 && s.qos == 1);
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 1);
  assert_true(s.filter.len == 1 && s.qos == 2);
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 1);
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 0);
  REFUSED(decode(0x80, &b, 4), MQR__MQTT_MALFORMED, "reserved flags");
  static const char *const bad[] = {"a/#/b", "a+", "a/b#", "", "$share//x", "$share/g", "$share/g+/x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    b.n = 0;
    u16(&b, 1), str(&b, bad[i]), u8(&b, 0);
    REFUSED(decode(0x82, &b, 4), MQR__MQTT_PROTOCOL_ERROR, "");
  }
  /* options: 3.1.1 has only QoS; 5.0 no local, retain as published, retain handling */
  b.n = 0;
  u16(&b, 1), str(&b, "t"), u8(&b, 0x04);
  REFUSED(decode(0x82, &b, 4), MQR__MQTT_MALFORMED, "reserved option bits");
  b.n = 0;
  u16(&b, 1), u8(&b, 2), u8(&b, 0x0B), u8(&b, 5), str(&b, "t"), u8(&b, 0x2D);
  assert_int_equal(decode(0x82, &b, 5), 0);
  at = 0;
  mqr__mqtt_sub_next(&got, &at, &s);
  assert_true(s.qos == 1 && s.no_local && s.retain_as_published && s.retain_handling == 2);
  assert_int_equal(got.props.subscription_id, 5);
  b.n = 0;
  u16(&b, 1), u8(&b, 0), str(&b, "t"), u8(&b, 0x30);
  REFUSED(decode(0x82, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "retain handling 3");
  b.n = 0;
  u16(&b, 1), u8(&b, 0), str(&b, "$share/g/t"), u8(&b, 0x04);
  REFUSED(decode(0x82, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "no local on a shared");
  b.n = 0;
  u16(&b, 1), u8(&b, 2), u8(&b, 0x0B), u8(&b, 0), str(&b, "t"), u8(&b, 0);
  REFUSED(decode(0x82, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "subscription identifier 0");
  b.n = 0;
  u16(&b, 1);
  REFUSED(decode(0x82, &b, 4), MQR__MQTT_PROTOCOL_ERROR, "no topic filter");
  /* UNSUBSCRIBE: filters only */
  b.n = 0;
  u16(&b, 4), str(&b, "a/b"), str(&b, "c/#");
  assert_int_equal(decode(0xA2, &b, 4), 0);
  assert_int_equal(got.u.subs.n, 2);
  at = 0;
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 1);
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 1);
  assert_true(s.filter.len == 3 && memcmp(s.filter.ptr, "c/#", 3) == 0);
  assert_int_equal(mqr__mqtt_sub_next(&got, &at, &s), 0);
}

static void test_ping_disconnect_auth(void **state) {
  (void)state;
  pk_t b = {0};
  assert_int_equal(decode(0xC0, &b, 4), 0);
  assert_int_equal(got.type, MQR__MQTT_PINGREQ);
  assert_int_equal(decode(0xE0, &b, 4), 0);
  u8(&b, 0);
  REFUSED(decode(0xC0, &b, 4), MQR__MQTT_MALFORMED, "after its end");
  REFUSED(decode(0xE0, &b, 4), MQR__MQTT_MALFORMED, "after its end"); /* 3.1.1 DISCONNECT has no reason */
  b.n = 0;
  u8(&b, 0x04), u8(&b, 5), u8(&b, 0x11), u32(&b, 0);
  assert_int_equal(decode(0xE0, &b, 5), 0); /* disconnect with will message, session expiry 0 */
  assert_true(got.reason == 0x04 && MQR__MQTT_HAS(&got.props, 0x11));
  REFUSED(decode(0xF0, &b, 4), MQR__MQTT_MALFORMED, "AUTH in MQTT 3.1.1");
  REFUSED(decode(0xF0, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "AUTH: reason code 0x04");
  b.n = 0;
  u8(&b, 0x18), u8(&b, 8), u8(&b, 0x15), str(&b, "SCRAM");
  assert_int_equal(decode(0xF0, &b, 5), 0);
  assert_true(got.props.auth_method.len == 5);
  /* what only a server sends, and the reserved types */
  b.n = 0;
  u8(&b, 0), u8(&b, 0);
  REFUSED(decode(0x20, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "may not send CONNACK");
  REFUSED(decode(0x00, &b, 5), MQR__MQTT_PROTOCOL_ERROR, "may not send reserved");
}

/* What the server writes: read back by the decoder where a client may send the same
 * packet (PUBLISH, the acks), and byte for byte against the specifications' layouts. */
static void test_written(void **state) {
  (void)state;
  uint8_t out[512];
  /* PUBLISH, 5.0, with properties, user properties and two subscription identifiers */
  mqr__mqtt_props_t pr = {.have = 1ull << 0x02 | 1ull << 0x03 | 1ull << 0x09,
                          .message_expiry = 30,
                          .content_type = mqr_str("text/plain"),
                          .correlation_data = {"\0c", 2}};
  mqr_str_t uk[] = {mqr_str("a"), mqr_str("a")}, uv[] = {mqr_str("1"), mqr_str("2")};
  uint32_t ids[] = {7, 300};
  mqr__mqtt_out_props_t o = {&pr, uk, uv, 2, ids, 2};
  mqr__mqtt_publish_t m = {.qos = 1, .retain = true, .topic = mqr_str("a/b")};
  size_t need = mqr__mqtt_put_publish(out, 4, 5, &m, 9, 5, &o);
  assert_true(need > 4);
  assert_int_equal(mqr__mqtt_put_publish(out, sizeof out, 5, &m, 9, 5, &o), need); /* too small: nothing written */
  memcpy(out + need, "hello", 5);
  /* a client may not send subscription identifiers: the decoder refuses them (so the
   * packet is right up to them) */
  assert_int_equal(mqr__mqtt_decode(out, need + 5, 5, &got, &reason, &err), MQR_EPROTOCOL);
  assert_non_null(strstr(err.message, "0x0B"));
  o.n_sub_ids = 0;
  need = mqr__mqtt_put_publish(out, sizeof out, 5, &m, 9, 5, &o);
  memcpy(out + need, "hello", 5);
  assert_int_equal(mqr__mqtt_decode(out, need + 5, 5, &got, &reason, &err), 0);
  assert_true(got.u.publish.qos == 1 && got.u.publish.retain && got.packet_id == 9);
  assert_true(got.u.publish.payload.len == 5 && memcmp(got.u.publish.payload.ptr, "hello", 5) == 0);
  assert_true(got.props.message_expiry == 30 && got.props.content_type.len == 10 &&
              got.props.correlation_data.len == 2);
  assert_int_equal(got.props.n_users, 2);
  /* 3.1.1: no properties */
  need = mqr__mqtt_put_publish(out, sizeof out, 4, &m, 9, 0, &o);
  static const uint8_t p311[] = {0x33, 7, 0, 3, 'a', '/', 'b', 0, 9};
  assert_int_equal(need, sizeof p311);
  assert_memory_equal(out, p311, sizeof p311);
  /* acks: 5.0 leaves out a success code without properties */
  static const uint8_t puback[] = {0x40, 2, 0, 9}, pubrel[] = {0x62, 2, 0, 9}, pubrec[] = {0x50, 3, 0, 9, 0x10};
  assert_int_equal(mqr__mqtt_put_ack(out, sizeof out, 5, MQR__MQTT_PUBACK, 9, 0, NULL), 4);
  assert_memory_equal(out, puback, 4);
  assert_int_equal(mqr__mqtt_put_ack(out, sizeof out, 4, MQR__MQTT_PUBREL, 9, 0, NULL), 4);
  assert_memory_equal(out, pubrel, 4);
  mqr__mqtt_out_props_t none = {0};
  assert_int_equal(mqr__mqtt_put_ack(out, sizeof out, 5, MQR__MQTT_PUBREC, 9, 0x10, &none), 5); /* code, no props */
  assert_memory_equal(out, pubrec, 5);
  mqr__mqtt_props_t why = {.have = 1ull << 0x1F, .reason = mqr_str("no")};
  mqr__mqtt_out_props_t ow = {&why, NULL, NULL, 0, NULL, 0};
  size_t n = mqr__mqtt_put_ack(out, sizeof out, 5, MQR__MQTT_PUBREC, 9, 0x10, &ow);
  assert_int_equal(mqr__mqtt_decode(out, n, 5, &got, &reason, &err), 0);
  assert_true(got.reason == 0x10 && got.props.reason.len == 2);
  /* CONNACK: 3.1.1 two bytes; 5.0 with properties */
  static const uint8_t ca311[] = {0x20, 2, 1, 0}, ca5[] = {0x20, 8, 0, 0, 5, 0x21, 0, 10, 0x24, 1};
  assert_int_equal(mqr__mqtt_put_connack(out, sizeof out, 4, true, 0, NULL), 4);
  assert_memory_equal(out, ca311, 4);
  mqr__mqtt_props_t caps = {.have = 1ull << 0x21 | 1ull << 0x24, .receive_max = 10, .max_qos = 1};
  mqr__mqtt_out_props_t oc = {&caps, NULL, NULL, 0, NULL, 0};
  assert_int_equal(mqr__mqtt_put_connack(out, sizeof out, 5, false, 0, &oc), sizeof ca5);
  assert_memory_equal(out, ca5, sizeof ca5);
  /* SUBACK, UNSUBACK (3.1.1: no codes), PINGRESP, DISCONNECT */
  static const uint8_t codes[] = {0, 1, 0x80};
  static const uint8_t sa311[] = {0x90, 5, 0, 4, 0, 1, 0x80}, sa5[] = {0x90, 6, 0, 4, 0, 0, 1, 0x80},
                       ua311[] = {0xB0, 2, 0, 4}, ua5[] = {0xB0, 4, 0, 4, 0, 0x11}, pr_[] = {0xD0, 0},
                       dc[] = {0xE0, 1, 0x8E};
  assert_int_equal(mqr__mqtt_put_suback(out, sizeof out, 4, MQR__MQTT_SUBACK, 4, codes, 3, NULL), sizeof sa311);
  assert_memory_equal(out, sa311, sizeof sa311);
  assert_int_equal(mqr__mqtt_put_suback(out, sizeof out, 5, MQR__MQTT_SUBACK, 4, codes, 3, NULL), sizeof sa5);
  assert_memory_equal(out, sa5, sizeof sa5);
  assert_int_equal(mqr__mqtt_put_suback(out, sizeof out, 4, MQR__MQTT_UNSUBACK, 4, codes, 3, NULL), sizeof ua311);
  assert_memory_equal(out, ua311, sizeof ua311);
  static const uint8_t nosub[] = {0x11};
  assert_int_equal(mqr__mqtt_put_suback(out, sizeof out, 5, MQR__MQTT_UNSUBACK, 4, nosub, 1, NULL), sizeof ua5);
  assert_memory_equal(out, ua5, sizeof ua5);
  assert_int_equal(mqr__mqtt_put_pingresp(out, sizeof out), 2);
  assert_memory_equal(out, pr_, 2);
  assert_int_equal(mqr__mqtt_put_disconnect(out, sizeof out, 0x8E, NULL), 3); /* session taken over */
  assert_memory_equal(out, dc, 3);
  /* a remaining length of two bytes: a payload of 200 */
  mqr__mqtt_publish_t big = {.topic = mqr_str("t")};
  n = mqr__mqtt_put_publish(out, sizeof out, 4, &big, 0, 200, NULL);
  assert_true(n == 6 && out[1] == (0x80 | ((3 + 200) & 0x7F)) && out[2] == (3 + 200) >> 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remaining_length),
      cmocka_unit_test(test_connect),
      cmocka_unit_test(test_connect_refused),
      cmocka_unit_test(test_publish),
      cmocka_unit_test(test_acks),
      cmocka_unit_test(test_subscribe),
      cmocka_unit_test(test_ping_disconnect_auth),
      cmocka_unit_test(test_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
