/* MQTT control packets the server sends (packet.h): each written twice by one function,
 * once to count its bytes (the remaining length comes first), once into the buffer. */
#include <string.h>

#include "packet.h"

typedef struct {
  uint8_t *out;
  size_t n, cap; /* bytes put; out holds cap (0: counting) */
} wr_t;

static void put(wr_t *w, const void *d, size_t n) {
  if (w->n + n <= w->cap && n) memcpy(w->out + w->n, d, n);
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
static size_t vbi_len(uint32_t v) { return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : 4; }
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

static size_t props_len(const mqr__mqtt_out_props_t *o) {
  wr_t c = {NULL, 0, 0};
  if (o) props_body(&c, o);
  return c.n;
}

static void props(wr_t *w, const mqr__mqtt_out_props_t *o, size_t len) {
  vbi(w, (uint32_t)len);
  if (o && w->cap)
    props_body(w, o);
  else
    w->n += len;
}

/* The packet of first byte and body: body(w, arg) is called to count, then to write. */
typedef void (*body_fn)(wr_t *w, const void *arg);

static size_t packet(uint8_t *out, size_t cap, uint8_t first, size_t extra, body_fn body, const void *arg) {
  wr_t c = {NULL, 0, 0};
  body(&c, arg);
  size_t rem = c.n + extra, total = 1 + vbi_len((uint32_t)rem) + c.n;
  if (total > cap) return total;
  wr_t w = {out, 0, cap};
  b1(&w, first);
  vbi(&w, (uint32_t)rem);
  body(&w, arg);
  return w.n;
}

/* ---- CONNACK -------------------------------------------------------------------------------- */

typedef struct {
  uint8_t level, code;
  bool present;
  const mqr__mqtt_out_props_t *o;
  size_t plen;
} connack_t;

static void connack_body(wr_t *w, const void *arg) {
  const connack_t *a = arg;
  b1(w, a->present);
  b1(w, a->code);
  if (a->level == 5) props(w, a->o, a->plen);
}

size_t mqr__mqtt_put_connack(uint8_t *out, size_t cap, uint8_t level, bool session_present, uint8_t code,
                             const mqr__mqtt_out_props_t *o) {
  connack_t a = {level, code, session_present, o, props_len(o)};
  return packet(out, cap, (uint8_t)(MQR__MQTT_CONNACK << 4), 0, connack_body, &a);
}

/* ---- PUBLISH -------------------------------------------------------------------------------- */

typedef struct {
  uint8_t level;
  const mqr__mqtt_publish_t *m;
  uint16_t id;
  const mqr__mqtt_out_props_t *o;
  size_t plen;
} publish_t;

static void publish_body(wr_t *w, const void *arg) {
  const publish_t *a = arg;
  str(w, a->m->topic);
  if (a->m->qos) b2(w, a->id);
  if (a->level == 5) props(w, a->o, a->plen);
}

size_t mqr__mqtt_put_publish(uint8_t *out, size_t cap, uint8_t level, const mqr__mqtt_publish_t *m, uint16_t packet_id,
                             size_t payload_len, const mqr__mqtt_out_props_t *o) {
  publish_t a = {level, m, packet_id, o, props_len(o)};
  uint8_t first = (uint8_t)(MQR__MQTT_PUBLISH << 4 | (m->dup ? 8 : 0) | (m->qos & 3) << 1 | (m->retain ? 1 : 0));
  return packet(out, cap, first, payload_len, publish_body, &a);
}

/* ---- acknowledgements ----------------------------------------------------------------------- */

typedef struct {
  uint8_t level, reason;
  uint16_t id;
  const mqr__mqtt_out_props_t *o;
  size_t plen;
  const uint8_t *codes;
  uint32_t n;
  bool suback;
} ack_t;

static void ack_body(wr_t *w, const void *arg) {
  const ack_t *a = arg;
  b2(w, a->id);
  if (a->level != 5) return;
  if (a->reason == 0 && a->plen == 0) return; /* 3.4.2.1: left out */
  b1(w, a->reason);
  if (a->plen) props(w, a->o, a->plen);
}

size_t mqr__mqtt_put_ack(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                         uint8_t reason, const mqr__mqtt_out_props_t *o) {
  ack_t a = {level, reason, packet_id, o, props_len(o), NULL, 0, false};
  return packet(out, cap, (uint8_t)(type << 4 | (type == MQR__MQTT_PUBREL ? 2 : 0)), 0, ack_body, &a);
}

static void suback_body(wr_t *w, const void *arg) {
  const ack_t *a = arg;
  b2(w, a->id);
  if (a->level == 5) props(w, a->o, a->plen);
  if (a->suback || a->level == 5) put(w, a->codes, a->n);
}

size_t mqr__mqtt_put_suback(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                            const uint8_t *codes, uint32_t n, const mqr__mqtt_out_props_t *o) {
  ack_t a = {level, 0, packet_id, o, props_len(o), codes, n, type == MQR__MQTT_SUBACK};
  return packet(out, cap, (uint8_t)(type << 4), 0, suback_body, &a);
}

static void empty_body(wr_t *w, const void *arg) {
  (void)w;
  (void)arg;
}

size_t mqr__mqtt_put_pingresp(uint8_t *out, size_t cap) {
  return packet(out, cap, (uint8_t)(MQR__MQTT_PINGRESP << 4), 0, empty_body, NULL);
}

static void disconnect_body(wr_t *w, const void *arg) {
  const ack_t *a = arg;
  if (a->reason == 0 && a->plen == 0) return;
  b1(w, a->reason);
  if (a->plen) props(w, a->o, a->plen);
}

size_t mqr__mqtt_put_disconnect(uint8_t *out, size_t cap, uint8_t reason, const mqr__mqtt_out_props_t *o) {
  ack_t a = {5, reason, 0, o, props_len(o), NULL, 0, false};
  return packet(out, cap, (uint8_t)(MQR__MQTT_DISCONNECT << 4), 0, disconnect_body, &a);
}
