/* MQTT control packets the server sends (packet.h): each packet's body length is known
 * before it is written (the properties counted first), so that the fixed header's
 * remaining length goes first and the bytes are written once. */
#include <string.h>

#include "packet.h"

typedef struct {
  uint8_t *out; /* NULL: counting */
  size_t n;     /* bytes put */
} wr_t;

static void put(wr_t *w, const void *d, size_t n) {
  if (w->out && n) memcpy(w->out + w->n, d, n);
  w->n += n;
}
static void b1(wr_t *w, uint8_t v) { put(w, &v, 1); }
static void b2(wr_t *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
  put(w, b, 2);
}
static void b4(wr_t *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  put(w, b, 4);
}
static void vbi(wr_t *w, uint32_t v) {
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    b1(w, (uint8_t)(b | (v ? 0x80 : 0)));
  } while (v);
}
static size_t vbi_len(size_t v) { return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : 4; }
static void str(wr_t *w, mqr_str_t s) {
  b2(w, (uint16_t)s.len);
  put(w, s.ptr, s.len);
}

/* The properties' bytes, in identifier order, then the arrays'. */
static void props_body(wr_t *w, const mqr__mqtt_out_props_t *o) {
  const mqr__mqtt_props_t *p = o->props;
  if (p) {
    for (uint32_t id = 1; id < 64; id++) {
      if (!MQR__MQTT_HAS(p, id) || id == 0x26 || id == 0x0B) continue;
      b1(w, (uint8_t)id);
      switch (id) {
      case 0x01: b1(w, p->payload_format); break;
      case 0x02: b4(w, p->message_expiry); break;
      case 0x03: str(w, p->content_type); break;
      case 0x08: str(w, p->response_topic); break;
      case 0x09: str(w, p->correlation_data); break;
      case 0x11: b4(w, p->session_expiry); break;
      case 0x12: str(w, p->assigned_client_id); break;
      case 0x13: b2(w, p->server_keep_alive); break;
      case 0x15: str(w, p->auth_method); break;
      case 0x16: str(w, p->auth_data); break;
      case 0x17: b1(w, p->request_problem); break;
      case 0x18: b4(w, p->will_delay); break;
      case 0x19: b1(w, p->request_response); break;
      case 0x1A: str(w, p->response_info); break;
      case 0x1C: str(w, p->server_reference); break;
      case 0x1F: str(w, p->reason); break;
      case 0x21: b2(w, p->receive_max); break;
      case 0x22: b2(w, p->topic_alias_max); break;
      case 0x23: b2(w, p->topic_alias); break;
      case 0x24: b1(w, p->max_qos); break;
      case 0x25: b1(w, p->retain_available); break;
      case 0x27: b4(w, p->max_packet); break;
      case 0x28: b1(w, p->wildcard_available); break;
      case 0x29: b1(w, p->sub_id_available); break;
      case 0x2A: b1(w, p->shared_available); break;
      default: w->n--; /* not a property: the identifier taken back */
      }
    }
  }
  for (uint32_t i = 0; i < o->n_users; i++) {
    b1(w, 0x26);
    str(w, o->user_keys[i]);
    str(w, o->user_values[i]);
  }
  for (uint32_t i = 0; i < o->n_sub_ids; i++) {
    b1(w, 0x0B);
    vbi(w, o->sub_ids[i]);
  }
}

/* The bytes of o's properties (NULL: none), without their length. */
static size_t props_len(const mqr__mqtt_out_props_t *o) {
  wr_t c = {NULL, 0};
  if (o) props_body(&c, o);
  return c.n;
}

/* A property block of len bytes, with its length. */
static size_t block(size_t len) { return vbi_len(len) + len; }

static void props(wr_t *w, const mqr__mqtt_out_props_t *o, size_t len) {
  vbi(w, (uint32_t)len);
  if (o) props_body(w, o);
}

/* Starts a packet whose body (all but extra bytes sent after it) is body bytes: its fixed
 * header into out, when the packet but extra fits in cap; else false, with *total the
 * length it needs. */
static bool start(wr_t *w, uint8_t *out, size_t cap, uint8_t first, size_t body, size_t extra, size_t *total) {
  size_t rem = body + extra;
  *total = 1 + vbi_len(rem) + body;
  if (*total > cap) return false;
  *w = (wr_t){out, 0};
  b1(w, first);
  vbi(w, (uint32_t)rem);
  return true;
}

size_t mqr__mqtt_put_connack(uint8_t *out, size_t cap, uint8_t level, bool session_present, uint8_t code,
                             const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  wr_t w;
  if (!start(&w, out, cap, MQR__MQTT_CONNACK << 4, 2 + (level == 5 ? block(plen) : 0), 0, &total)) return total;
  b1(&w, session_present);
  b1(&w, code);
  if (level == 5) props(&w, o, plen);
  return w.n;
}

size_t mqr__mqtt_put_publish(uint8_t *out, size_t cap, uint8_t level, const mqr__mqtt_publish_t *m, uint16_t packet_id,
                             size_t payload_len, const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  size_t body = 2 + m->topic.len + (m->qos ? 2 : 0) + (level == 5 ? block(plen) : 0);
  uint8_t first = (uint8_t)(MQR__MQTT_PUBLISH << 4 | (m->dup ? 8 : 0) | (m->qos & 3) << 1 | (m->retain ? 1 : 0));
  wr_t w;
  if (!start(&w, out, cap, first, body, payload_len, &total)) return total;
  str(&w, m->topic);
  if (m->qos) b2(&w, packet_id);
  if (level == 5) props(&w, o, plen);
  return w.n;
}

/* What follows an ack's packet identifier, or a DISCONNECT's fixed header (5.0): the
 * reason code, left out when it is success with no properties (3.4.2.1), then the
 * properties, left out when there are none. */
static size_t reason_len(uint8_t reason, size_t plen) { return reason || plen ? 1 + (plen ? block(plen) : 0) : 0; }

static void reason_put(wr_t *w, uint8_t reason, const mqr__mqtt_out_props_t *o, size_t plen) {
  if (!reason && !plen) return;
  b1(w, reason);
  if (plen) props(w, o, plen);
}

size_t mqr__mqtt_put_ack(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                         uint8_t reason, const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  uint8_t first = (uint8_t)(type << 4 | (type == MQR__MQTT_PUBREL ? 2 : 0));
  wr_t w;
  if (!start(&w, out, cap, first, 2 + (level == 5 ? reason_len(reason, plen) : 0), 0, &total)) return total;
  b2(&w, packet_id);
  if (level == 5) reason_put(&w, reason, o, plen);
  return w.n;
}

size_t mqr__mqtt_put_suback(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                            const uint8_t *codes, uint32_t n, const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  bool with_codes = type == MQR__MQTT_SUBACK || level == 5; /* a 3.1.1 UNSUBACK has none */
  wr_t w;
  if (!start(&w, out, cap, (uint8_t)(type << 4), 2 + (level == 5 ? block(plen) : 0) + (with_codes ? n : 0), 0, &total))
    return total;
  b2(&w, packet_id);
  if (level == 5) props(&w, o, plen);
  if (with_codes) put(&w, codes, n);
  return w.n;
}

size_t mqr__mqtt_put_pingresp(uint8_t *out, size_t cap) {
  size_t total;
  wr_t w;
  return start(&w, out, cap, MQR__MQTT_PINGRESP << 4, 0, 0, &total) ? w.n : total;
}

size_t mqr__mqtt_put_disconnect(uint8_t *out, size_t cap, uint8_t reason, const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  wr_t w;
  if (!start(&w, out, cap, MQR__MQTT_DISCONNECT << 4, reason_len(reason, plen), 0, &total)) return total;
  reason_put(&w, reason, o, plen);
  return w.n;
}

size_t mqr__mqtt_put_auth(uint8_t *out, size_t cap, uint8_t reason, const mqr__mqtt_out_props_t *o) {
  size_t plen = props_len(o), total;
  wr_t w;
  if (!start(&w, out, cap, MQR__MQTT_AUTH << 4, reason_len(reason, plen), 0, &total)) return total;
  reason_put(&w, reason, o, plen);
  return w.n;
}
