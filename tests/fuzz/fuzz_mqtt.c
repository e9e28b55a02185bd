/* libFuzzer: MQTT packets as the MQTT head reads them (heads/mqtt/packet.h). The first
 * byte picks the level the connection speaks (none yet, 3.1.1 or 5.0); the rest is a
 * client's stream, read packet by packet. Each packet is measured or refused; each is
 * decoded or refused with a 5.0 reason code and a message; what is decoded lies inside
 * the packet, its strings are UTF-8 without U+0000, and walking its subscriptions and
 * user properties finds as many as the decoder counted; a PUBLISH or an ack written again
 * by the server's encoder reads back the same. */
#include <string.h>

#include "../../heads/mqtt/packet.h"
#include "fuzz_check.h"

static bool inside(mqr_str_t s, const uint8_t *p, size_t n) {
  return s.len == 0 || ((const uint8_t *)s.ptr >= p && (const uint8_t *)s.ptr + s.len <= p + n);
}

static bool text_ok(mqr_str_t s) {
  return mqr_utf8_check(s.ptr, s.len) == s.len && !(s.len && memchr(s.ptr, 0, s.len));
}

static void props_ok(const mqr__mqtt_props_t *pr, const uint8_t *p, size_t n) {
  FUZZ_CHECK(inside(pr->content_type, p, n) && inside(pr->response_topic, p, n) && inside(pr->reason, p, n));
  FUZZ_CHECK(text_ok(pr->content_type) && text_ok(pr->response_topic) && text_ok(pr->reason));
  size_t at = 0;
  uint32_t users = 0;
  mqr_str_t k, v;
  while (mqr__mqtt_user_next(pr, &at, &k, &v) == 1) {
    FUZZ_CHECK(inside(k, p, n) && inside(v, p, n) && text_ok(k) && text_ok(v));
    users++;
  }
  FUZZ_CHECK(users == pr->n_users);
  if (MQR__MQTT_HAS(pr, 0x21)) FUZZ_CHECK(pr->receive_max != 0);
  if (MQR__MQTT_HAS(pr, 0x0B)) FUZZ_CHECK(pr->subscription_id != 0);
}

static bool same(mqr_str_t a, mqr_str_t b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* pk (a PUBLISH or an ack, decoded at level) written by the encoder and read again. */
static void again(const mqr__mqtt_packet_t *pk, uint8_t level) {
  static uint8_t out[8192];
  static mqr_str_t uk[4096], uv[4096];
  uint32_t nu = 0;
  size_t at = 0;
  while (nu < 4096 && mqr__mqtt_user_next(&pk->props, &at, &uk[nu], &uv[nu]) == 1) nu++;
  mqr__mqtt_out_props_t o = {&pk->props, uk, uv, nu, NULL, 0};
  size_t n;
  if (pk->type == MQR__MQTT_PUBLISH) {
    size_t pl = pk->u.publish.payload.len;
    n = mqr__mqtt_put_publish(out, sizeof out, level, &pk->u.publish, pk->packet_id, pl, &o);
    FUZZ_CHECK(n + pl <= sizeof out);
    if (pl) memcpy(out + n, pk->u.publish.payload.ptr, pl);
    n += pl;
  } else {
    n = mqr__mqtt_put_ack(out, sizeof out, level, pk->type, pk->packet_id, pk->reason, &o);
    FUZZ_CHECK(n <= sizeof out);
  }
  mqr__mqtt_packet_t q;
  uint8_t reason;
  mqr_error_t err;
  FUZZ_CHECK(mqr__mqtt_decode(out, n, level, &q, &reason, &err) == 0);
  FUZZ_CHECK(q.type == pk->type && q.packet_id == pk->packet_id && q.reason == pk->reason);
  FUZZ_CHECK(q.props.have == pk->props.have && q.props.n_users == nu);
  FUZZ_CHECK(q.props.message_expiry == pk->props.message_expiry && q.props.topic_alias == pk->props.topic_alias);
  FUZZ_CHECK(same(q.props.content_type, pk->props.content_type) && same(q.props.reason, pk->props.reason));
  FUZZ_CHECK(same(q.props.correlation_data, pk->props.correlation_data));
  at = 0;
  mqr_str_t k, v;
  for (uint32_t i = 0; i < nu; i++) {
    FUZZ_CHECK(mqr__mqtt_user_next(&q.props, &at, &k, &v) == 1);
    FUZZ_CHECK(same(k, uk[i]) && same(v, uv[i]));
  }
  if (pk->type == MQR__MQTT_PUBLISH) {
    FUZZ_CHECK(same(q.u.publish.topic, pk->u.publish.topic) && same(q.u.publish.payload, pk->u.publish.payload));
    FUZZ_CHECK(q.u.publish.qos == pk->u.publish.qos && q.u.publish.dup == pk->u.publish.dup &&
               q.u.publish.retain == pk->u.publish.retain);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const uint8_t levels[] = {0, 4, 5};
  uint8_t level = levels[data[0] % 3];
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  while (n) {
    size_t total = 0;
    mqr_error_t err;
    int rc = mqr__mqtt_peek(p, n, 4096, &total, &err);
    if (rc == 0) break;
    if (rc < 0) {
      FUZZ_CHECK((rc == MQR_EPROTOCOL || rc == MQR_ELIMIT) && err.message[0]);
      break;
    }
    FUZZ_CHECK(total >= 2 && total <= n);
    mqr__mqtt_packet_t pk;
    uint8_t reason = 0xFF;
    rc = mqr__mqtt_decode(p, total, level, &pk, &reason, &err);
    if (rc) {
      FUZZ_CHECK(rc == MQR_EPROTOCOL && err.message[0]);
      FUZZ_CHECK(reason == MQR__MQTT_MALFORMED || reason == MQR__MQTT_PROTOCOL_ERROR ||
                 reason == MQR__MQTT_BAD_VERSION);
      break;
    }
    FUZZ_CHECK(reason == 0);
    props_ok(&pk.props, p, total);
    switch (pk.type) {
    case MQR__MQTT_CONNECT:
      FUZZ_CHECK(pk.u.connect.level == 4 || pk.u.connect.level == 5);
      FUZZ_CHECK(text_ok(pk.u.connect.client_id) && inside(pk.u.connect.client_id, p, total));
      FUZZ_CHECK(pk.u.connect.will_qos < 3);
      if (pk.u.connect.will) {
        FUZZ_CHECK(text_ok(pk.u.connect.will_topic) && pk.u.connect.will_topic.len > 0);
        props_ok(&pk.u.connect.will_props, p, total);
      }
      level = pk.u.connect.level; /* what the rest of the stream speaks */
      break;
    case MQR__MQTT_PUBLISH:
      FUZZ_CHECK(pk.u.publish.qos < 3 && text_ok(pk.u.publish.topic));
      FUZZ_CHECK(inside(pk.u.publish.payload, p, total) && (pk.u.publish.qos == 0 || pk.packet_id != 0));
      FUZZ_CHECK(!memchr(pk.u.publish.topic.ptr ? pk.u.publish.topic.ptr : "", '#', pk.u.publish.topic.len));
      again(&pk, level);
      break;
    case MQR__MQTT_PUBACK:
    case MQR__MQTT_PUBREC:
    case MQR__MQTT_PUBREL:
    case MQR__MQTT_PUBCOMP: again(&pk, level); break;
    case MQR__MQTT_SUBSCRIBE:
    case MQR__MQTT_UNSUBSCRIBE: {
      size_t at = 0;
      uint32_t k = 0;
      mqr__mqtt_sub_t s;
      while (mqr__mqtt_sub_next(&pk, &at, &s) == 1) {
        FUZZ_CHECK(s.filter.len > 0 && inside(s.filter, p, total) && text_ok(s.filter));
        FUZZ_CHECK(s.qos < 3 && s.retain_handling < 3);
        k++;
      }
      FUZZ_CHECK(k == pk.u.subs.n && k > 0 && pk.packet_id != 0);
      break;
    }
    default: FUZZ_CHECK(pk.type != MQR__MQTT_CONNACK && pk.type != MQR__MQTT_SUBACK);
    }
    p += total;
    n -= total;
  }
  return 0;
}
