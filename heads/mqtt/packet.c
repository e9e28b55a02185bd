/* MQTT control packets read (packet.h): the fixed header, then each packet's variable
 * header, 5.0 properties and payload, with the checks the specifications put on each.
 * Section numbers are the 5.0 specification's unless marked 3.1.1. */
#include <string.h>

#include "packet.h"

typedef struct {
  const uint8_t *p, *end;
  uint8_t reason;
  mqr_error_t *err;
} rd_t;

/* A refusal: the 5.0 reason code kept for the caller, the message in its error. */
#define FAIL(r, code, ...) ((r)->reason = (code), mqr_error_set((r)->err, MQR_EPROTOCOL, __VA_ARGS__))
#define MALFORMED(r, ...) FAIL((r), MQR__MQTT_MALFORMED, __VA_ARGS__)
#define PROTOCOL(r, ...) FAIL((r), MQR__MQTT_PROTOCOL_ERROR, __VA_ARGS__)

static const char *const type_names[] = {"reserved", "CONNECT",  "CONNACK",    "PUBLISH", "PUBACK",      "PUBREC",
                                         "PUBREL",   "PUBCOMP",  "SUBSCRIBE",  "SUBACK",  "UNSUBSCRIBE", "UNSUBACK",
                                         "PINGREQ",  "PINGRESP", "DISCONNECT", "AUTH"};

/* ---- the fixed header (2.1) ----------------------------------------------------------------- */

/* A Variable Byte Integer (1.5.5) at p[0..n): its bytes (1-4), 0 when more are needed,
 * -1 when it runs past four bytes or is not in its fewest bytes. */
static int varint(const uint8_t *p, size_t n, uint32_t *v) {
  uint32_t x = 0;
  for (int i = 0; i < 4; i++) {
    if ((size_t)i >= n) return 0;
    x |= (uint32_t)(p[i] & 0x7F) << (7 * i);
    if (!(p[i] & 0x80)) {
      if (i > 0 && p[i] == 0) return -1; /* a longer form than needed */
      *v = x;
      return i + 1;
    }
  }
  return -1;
}

int mqr__mqtt_peek(const uint8_t *buf, size_t n, uint32_t max, size_t *total, mqr_error_t *err) {
  if (n < 2) return 0;
  uint32_t rem;
  int k = varint(buf + 1, n - 1, &rem);
  if (k < 0) return mqr_error_set(err, MQR_EPROTOCOL, "a remaining length that is not a Variable Byte Integer");
  if (k == 0) return 0;
  *total = 1 + (size_t)k + rem;
  if (*total > max) return mqr_error_set(err, MQR_ELIMIT, "a packet of %zu bytes: at most %u", *total, max);
  return n >= *total;
}

/* ---- the data types (1.5) ------------------------------------------------------------------- */

static int need(rd_t *r, size_t k, const char *what) {
  if ((size_t)(r->end - r->p) < k) return MALFORMED(r, "the packet ends inside its %s", what);
  return 0;
}

static int u8(rd_t *r, uint8_t *v, const char *what) {
  int rc = need(r, 1, what);
  if (rc == 0) *v = *r->p++;
  return rc;
}

static int u16(rd_t *r, uint16_t *v, const char *what) {
  int rc = need(r, 2, what);
  if (rc) return rc;
  *v = (uint16_t)(r->p[0] << 8 | r->p[1]);
  r->p += 2;
  return 0;
}

static int u32(rd_t *r, uint32_t *v, const char *what) {
  int rc = need(r, 4, what);
  if (rc) return rc;
  *v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
  r->p += 4;
  return 0;
}

static int vbi(rd_t *r, uint32_t *v, const char *what) {
  int k = varint(r->p, (size_t)(r->end - r->p), v);
  if (k <= 0) return MALFORMED(r, "the %s is not a Variable Byte Integer", what);
  r->p += k;
  return 0;
}

static int binary(rd_t *r, mqr_str_t *s, const char *what) {
  uint16_t n;
  int rc = u16(r, &n, what);
  if (rc == 0) rc = need(r, n, what);
  if (rc) return rc;
  *s = (mqr_str_t){(const char *)r->p, n};
  r->p += n;
  return 0;
}

/* A UTF-8 Encoded String (1.5.4): well-formed, and no U+0000 (MUST close). */
static int string(rd_t *r, mqr_str_t *s, const char *what) {
  int rc = binary(r, s, what);
  if (rc) return rc;
  if (mqr_utf8_check(s->ptr, s->len) != s->len) return MALFORMED(r, "the %s is not UTF-8", what);
  if (s->len && memchr(s->ptr, 0, s->len)) return MALFORMED(r, "the %s holds U+0000", what);
  return 0;
}

/* ---- properties (2.2.2) --------------------------------------------------------------------- */

enum { T_BYTE, T_U16, T_U32, T_VBI, T_STR, T_BIN, T_PAIR, T_NONE };

static int prop_type(uint32_t id) {
  switch (id) {
  case 0x01:
  case 0x17:
  case 0x19:
  case 0x24:
  case 0x25:
  case 0x28:
  case 0x29:
  case 0x2A: return T_BYTE;
  case 0x13:
  case 0x21:
  case 0x22:
  case 0x23: return T_U16;
  case 0x02:
  case 0x11:
  case 0x18:
  case 0x27: return T_U32;
  case 0x0B: return T_VBI;
  case 0x03:
  case 0x08:
  case 0x12:
  case 0x15:
  case 0x1A:
  case 0x1C:
  case 0x1F: return T_STR;
  case 0x09:
  case 0x16: return T_BIN;
  case 0x26: return T_PAIR;
  default: return T_NONE;
  }
}

#define B(id) (1ull << (id))
/* What each packet a client sends may carry (2.2.2.2's table), and a will (3.1.3.2). */
#define P_CONNECT (B(0x11) | B(0x21) | B(0x27) | B(0x22) | B(0x19) | B(0x17) | B(0x26) | B(0x15) | B(0x16))
#define P_WILL (B(0x18) | B(0x01) | B(0x02) | B(0x03) | B(0x08) | B(0x09) | B(0x26))
#define P_PUBLISH (B(0x01) | B(0x02) | B(0x23) | B(0x08) | B(0x09) | B(0x26) | B(0x03)) /* no 0x0B from a client */
#define P_ACK (B(0x1F) | B(0x26))
#define P_SUBSCRIBE (B(0x0B) | B(0x26))
#define P_UNSUBSCRIBE B(0x26)
#define P_DISCONNECT (B(0x11) | B(0x1F) | B(0x26) | B(0x1C))
#define P_AUTH (B(0x15) | B(0x16) | B(0x1F) | B(0x26))

static int props(rd_t *r, uint64_t allowed, mqr__mqtt_props_t *pr, const char *in) {
  *pr = (mqr__mqtt_props_t){0};
  uint32_t len;
  int rc = vbi(r, &len, "property length");
  if (rc) return rc;
  if ((size_t)(r->end - r->p) < len) return MALFORMED(r, "%s: properties longer than the packet", in);
  rd_t s = {r->p, r->p + len, 0, r->err};
  r->p += len;
  while (s.p < s.end) {
    uint32_t id;
    if ((rc = vbi(&s, &id, "property identifier")) != 0) break;
    int t = prop_type(id);
    if (t == T_NONE || id >= 64 || !(allowed >> id & 1)) {
      rc = PROTOCOL(&s, "%s may not carry property 0x%02X", in, id);
      break;
    }
    if (id != 0x26 && MQR__MQTT_HAS(pr, id)) {
      rc = PROTOCOL(&s, "%s: property 0x%02X given twice", in, id);
      break;
    }
    pr->have |= B(id);
    uint8_t b = 0;
    uint16_t h = 0;
    uint32_t w = 0;
    mqr_str_t sv = {NULL, 0}, k;
    switch (t) {
    case T_BYTE: rc = u8(&s, &b, "property"); break;
    case T_U16: rc = u16(&s, &h, "property"); break;
    case T_U32: rc = u32(&s, &w, "property"); break;
    case T_VBI: rc = vbi(&s, &w, "subscription identifier"); break;
    case T_STR: rc = string(&s, &sv, "property"); break;
    case T_BIN: rc = binary(&s, &sv, "property"); break;
    default:
      if (pr->n_users == 0) pr->users = s.p - 1;
      rc = string(&s, &k, "user property's name");
      if (rc == 0) rc = string(&s, &sv, "user property's value");
      pr->n_users++;
      pr->users_len = (size_t)(s.p - pr->users);
      break;
    }
    if (rc) break;
    switch (id) {
    case 0x01:
    case 0x17:
    case 0x19:
      if (b > 1) rc = PROTOCOL(&s, "%s: property 0x%02X is %u, not 0 or 1", in, id, b);
      if (id == 0x01) pr->payload_format = b;
      if (id == 0x17) pr->request_problem = b;
      if (id == 0x19) pr->request_response = b;
      break;
    case 0x02: pr->message_expiry = w; break;
    case 0x03: pr->content_type = sv; break;
    case 0x08: pr->response_topic = sv; break;
    case 0x09: pr->correlation_data = sv; break;
    case 0x0B:
      if (w == 0) rc = PROTOCOL(&s, "%s: subscription identifier 0", in);
      pr->subscription_id = w;
      break;
    case 0x11: pr->session_expiry = w; break;
    case 0x15: pr->auth_method = sv; break;
    case 0x16: pr->auth_data = sv; break;
    case 0x18: pr->will_delay = w; break;
    case 0x1C: pr->server_reference = sv; break;
    case 0x1F: pr->reason = sv; break;
    case 0x21:
      if (h == 0) rc = PROTOCOL(&s, "%s: receive maximum 0", in);
      pr->receive_max = h;
      break;
    case 0x22: pr->topic_alias_max = h; break;
    case 0x23:
      if (h == 0) rc = PROTOCOL(&s, "%s: topic alias 0", in);
      pr->topic_alias = h;
      break;
    case 0x27:
      if (w == 0) rc = PROTOCOL(&s, "%s: maximum packet size 0", in);
      pr->max_packet = w;
      break;
    default: break;
    }
    if (rc) break;
  }
  if (rc) r->reason = s.reason;
  return rc;
}

int mqr__mqtt_user_next(const mqr__mqtt_props_t *p, size_t *at, mqr_str_t *k, mqr_str_t *v) {
  /* the block from the first user property's identifier: other properties between them */
  while (*at < p->users_len) {
    const uint8_t *q = p->users + *at, *end = p->users + p->users_len;
    uint32_t id = *q++; /* identifiers below 128 are one byte */
    int t = prop_type(id);
    size_t n = 0;
    switch (t) {
    case T_BYTE: n = 1; break;
    case T_U16: n = 2; break;
    case T_U32: n = 4; break;
    case T_VBI:
      while (q + n < end && (q[n] & 0x80)) n++;
      n++;
      break;
    case T_STR:
    case T_BIN: n = 2 + (size_t)(q[0] << 8 | q[1]); break;
    default: {
      size_t kl = (size_t)(q[0] << 8 | q[1]);
      size_t vl = (size_t)(q[2 + kl] << 8 | q[3 + kl]);
      *k = (mqr_str_t){(const char *)q + 2, kl};
      *v = (mqr_str_t){(const char *)q + 4 + kl, vl};
      *at = (size_t)(q + 4 + kl + vl - p->users);
      return 1;
    }
    }
    *at = (size_t)(q + n - p->users);
  }
  return 0;
}

/* ---- topics (4.7) --------------------------------------------------------------------------- */

/* A Topic Filter: each level is '#' (the last), '+', or holds neither. */
static bool filter_levels_ok(const char *f, size_t n) {
  if (n == 0) return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && f[i] != '/') continue;
    size_t len = i - start;
    const char *lv = f + start;
    if (memchr(lv, '#', len) && (len != 1 || i != n)) return false;
    if (memchr(lv, '+', len) && len != 1) return false;
    start = i + 1;
  }
  return true;
}

/* A filter, or a shared subscription $share/{ShareName}/{filter} (4.8.2). */
static int filter_ok(rd_t *r, mqr_str_t f, bool *shared) {
  static const char share[] = "$share/";
  *shared = f.len >= sizeof share - 1 && memcmp(f.ptr, share, sizeof share - 1) == 0;
  if (*shared) {
    const char *name = f.ptr + sizeof share - 1, *end = f.ptr + f.len;
    const char *slash = memchr(name, '/', (size_t)(end - name));
    if (slash == NULL || slash == name || memchr(name, '+', (size_t)(slash - name)) ||
        memchr(name, '#', (size_t)(slash - name)))
      return PROTOCOL(r, "'%.*s' is not $share/{ShareName}/{filter}", (int)f.len, f.ptr);
    if (!filter_levels_ok(slash + 1, (size_t)(end - slash - 1)))
      return PROTOCOL(r, "the filter of '%.*s' is not a topic filter", (int)f.len, f.ptr);
    return 0;
  }
  if (!filter_levels_ok(f.ptr, f.len))
    return PROTOCOL(r, "'%.*s' is not a topic filter ('#' last and alone in its level, '+' alone)", (int)f.len, f.ptr);
  return 0;
}

/* ---- the packets ---------------------------------------------------------------------------- */

static int end_of(rd_t *r, const char *in) {
  if (r->p != r->end) return MALFORMED(r, "%s: %zu bytes after its end", in, (size_t)(r->end - r->p));
  return 0;
}

static int connect(rd_t *r, mqr__mqtt_packet_t *p) {
  mqr_str_t name;
  uint8_t level, flags;
  int rc = string(r, &name, "protocol name");
  if (rc == 0) rc = u8(r, &level, "protocol level");
  if (rc) return rc;
  if (!(name.len == 4 && memcmp(name.ptr, "MQTT", 4) == 0) || (level != 4 && level != 5))
    return FAIL(r, MQR__MQTT_BAD_VERSION, "protocol '%.*s' level %u: only MQTT 4 (3.1.1) and 5 (5.0)",
                (int)(name.len > 16 ? 16 : name.len), name.ptr, level);
  mqr__mqtt_connect_t *c = &p->u.connect;
  c->level = level;
  if ((rc = u8(r, &flags, "connect flags")) != 0 || (rc = u16(r, &c->keep_alive, "keep alive")) != 0) return rc;
  if (flags & 1) return MALFORMED(r, "CONNECT: the reserved flag is set");
  c->clean = flags >> 1 & 1;
  c->will = flags >> 2 & 1;
  c->will_qos = flags >> 3 & 3;
  c->will_retain = flags >> 5 & 1;
  c->has_password = flags >> 6 & 1;
  c->has_user = flags >> 7 & 1;
  if (c->will_qos == 3) return MALFORMED(r, "CONNECT: will QoS 3");
  if (!c->will && (c->will_qos || c->will_retain)) return MALFORMED(r, "CONNECT: will QoS or retain without a will");
  if (level == 4 && c->has_password && !c->has_user)
    return MALFORMED(r, "CONNECT: a password without a user name (3.1.1)");
  if (level == 5 && (rc = props(r, P_CONNECT, &p->props, "CONNECT")) != 0) return rc;
  if ((rc = string(r, &c->client_id, "client identifier")) != 0) return rc;
  if (c->will) {
    if (level == 5 && (rc = props(r, P_WILL, &c->will_props, "the will")) != 0) return rc;
    if ((rc = string(r, &c->will_topic, "will topic")) != 0) return rc;
    if (c->will_topic.len == 0 || memchr(c->will_topic.ptr, '+', c->will_topic.len) ||
        memchr(c->will_topic.ptr, '#', c->will_topic.len))
      return PROTOCOL(r, "CONNECT: the will topic is empty or has a wildcard");
    if ((rc = binary(r, &c->will_payload, "will payload")) != 0) return rc;
  }
  if (c->has_user && (rc = string(r, &c->user, "user name")) != 0) return rc;
  if (c->has_password && (rc = binary(r, &c->password, "password")) != 0) return rc;
  return end_of(r, "CONNECT");
}

static int publish(rd_t *r, uint8_t level, mqr__mqtt_packet_t *p) {
  mqr__mqtt_publish_t *m = &p->u.publish;
  m->retain = p->flags & 1;
  m->qos = p->flags >> 1 & 3;
  m->dup = p->flags >> 3 & 1;
  if (m->qos == 3) return MALFORMED(r, "PUBLISH with QoS 3");
  if (m->qos == 0 && m->dup) return MALFORMED(r, "PUBLISH: DUP set at QoS 0");
  int rc = string(r, &m->topic, "topic name");
  if (rc) return rc;
  if (m->topic.len && (memchr(m->topic.ptr, '+', m->topic.len) || memchr(m->topic.ptr, '#', m->topic.len)))
    return PROTOCOL(r, "PUBLISH to '%.*s': a topic name has no wildcards", (int)m->topic.len, m->topic.ptr);
  if (m->qos) {
    if ((rc = u16(r, &p->packet_id, "packet identifier")) != 0) return rc;
    if (p->packet_id == 0) return MALFORMED(r, "PUBLISH: packet identifier 0");
  }
  if (level == 5 && (rc = props(r, P_PUBLISH, &p->props, "PUBLISH")) != 0) return rc;
  if (m->topic.len == 0 && !(level == 5 && MQR__MQTT_HAS(&p->props, 0x23)))
    return PROTOCOL(r, "PUBLISH: an empty topic name without a topic alias");
  m->payload = (mqr_str_t){(const char *)r->p, (size_t)(r->end - r->p)};
  r->p = r->end;
  return 0;
}

static bool ack_reason_ok(mqr__mqtt_type_t t, uint8_t c) {
  if (t == MQR__MQTT_PUBREL || t == MQR__MQTT_PUBCOMP) return c == 0x00 || c == 0x92;
  switch (c) {
  case 0x00:
  case 0x10:
  case 0x80:
  case 0x83:
  case 0x87:
  case 0x90:
  case 0x91:
  case 0x97:
  case 0x99: return true;
  default: return false;
  }
}

static int ack(rd_t *r, uint8_t level, mqr__mqtt_packet_t *p) {
  const char *in = type_names[p->type];
  int rc = u16(r, &p->packet_id, "packet identifier");
  if (rc) return rc;
  if (p->packet_id == 0) return MALFORMED(r, "%s: packet identifier 0", in);
  if (level == 5 && r->p < r->end) {
    if ((rc = u8(r, &p->reason, "reason code")) != 0) return rc;
    if (!ack_reason_ok(p->type, p->reason)) return PROTOCOL(r, "%s: reason code 0x%02X", in, p->reason);
    if (r->p < r->end && (rc = props(r, P_ACK, &p->props, in)) != 0) return rc;
  }
  return end_of(r, in);
}

static int subscribe(rd_t *r, uint8_t level, mqr__mqtt_packet_t *p, bool unsub) {
  const char *in = type_names[p->type];
  int rc = u16(r, &p->packet_id, "packet identifier");
  if (rc) return rc;
  if (p->packet_id == 0) return MALFORMED(r, "%s: packet identifier 0", in);
  if (level == 5 && (rc = props(r, unsub ? P_UNSUBSCRIBE : P_SUBSCRIBE, &p->props, in)) != 0) return rc;
  p->u.subs.list = r->p;
  p->u.subs.list_len = (size_t)(r->end - r->p);
  p->u.subs.n = 0;
  if (r->p == r->end) return PROTOCOL(r, "%s with no topic filter", in);
  while (r->p < r->end) {
    mqr_str_t f;
    bool shared;
    if ((rc = string(r, &f, "topic filter")) != 0 || (rc = filter_ok(r, f, &shared)) != 0) return rc;
    if (!unsub) {
      uint8_t o;
      if ((rc = u8(r, &o, "subscription options")) != 0) return rc;
      if ((o & 3) == 3) return MALFORMED(r, "SUBSCRIBE: QoS 3 for '%.*s'", (int)f.len, f.ptr);
      if (level == 4 && (o & 0xFC)) return MALFORMED(r, "SUBSCRIBE: reserved option bits set (3.1.1)");
      if (level == 5 && (o & 0xC0)) return MALFORMED(r, "SUBSCRIBE: reserved option bits set");
      if (level == 5 && (o >> 4 & 3) == 3) return PROTOCOL(r, "SUBSCRIBE: retain handling 3");
      if (level == 5 && shared && (o & 4)) return PROTOCOL(r, "SUBSCRIBE: no local on a shared subscription");
    }
    p->u.subs.n++;
  }
  return 0;
}

int mqr__mqtt_sub_next(const mqr__mqtt_packet_t *p, size_t *at, mqr__mqtt_sub_t *s) {
  if (*at >= p->u.subs.list_len) return 0;
  const uint8_t *q = p->u.subs.list + *at;
  size_t n = (size_t)(q[0] << 8 | q[1]);
  *s = (mqr__mqtt_sub_t){.filter = {(const char *)q + 2, n}};
  *at += 2 + n;
  if (p->type == MQR__MQTT_SUBSCRIBE) {
    uint8_t o = q[2 + n];
    s->qos = o & 3;
    s->no_local = o >> 2 & 1;
    s->retain_as_published = o >> 3 & 1;
    s->retain_handling = o >> 4 & 3;
    *at += 1;
  }
  return 1;
}

static int disconnect_or_auth(rd_t *r, uint8_t level, mqr__mqtt_packet_t *p) {
  const char *in = type_names[p->type];
  if (level == 4) return end_of(r, in); /* 3.1.1: nothing after the fixed header */
  int rc = 0;
  if (r->p < r->end) {
    if ((rc = u8(r, &p->reason, "reason code")) != 0) return rc;
    if (p->type == MQR__MQTT_AUTH && p->reason != 0x00 && p->reason != 0x18 && p->reason != 0x19)
      return PROTOCOL(r, "AUTH: reason code 0x%02X", p->reason);
    if (r->p < r->end && (rc = props(r, p->type == MQR__MQTT_AUTH ? P_AUTH : P_DISCONNECT, &p->props, in)) != 0)
      return rc;
  }
  return end_of(r, in);
}

int mqr__mqtt_decode(const uint8_t *buf, size_t len, uint8_t level, mqr__mqtt_packet_t *p, uint8_t *reason,
                     mqr_error_t *err) {
  *p = (mqr__mqtt_packet_t){0};
  *reason = 0;
  rd_t r = {buf, buf + len, 0, err};
  uint32_t rem;
  int k = len >= 2 ? varint(buf + 1, len - 1, &rem) : 0;
  if (k <= 0 || 1 + (size_t)k + rem != len) {
    *reason = MQR__MQTT_MALFORMED;
    return mqr_error_set(err, MQR_EPROTOCOL, "not a whole MQTT packet");
  }
  r.p = buf + 1 + k;
  p->type = (mqr__mqtt_type_t)(buf[0] >> 4);
  p->flags = buf[0] & 0x0F;
  const char *in = type_names[p->type];
  int rc;
  /* the fixed header's flags (2.1.3): PUBLISH's its own, 0010 for PUBREL, SUBSCRIBE and
   * UNSUBSCRIBE, 0000 for the rest */
  uint8_t want =
      p->type == MQR__MQTT_PUBREL || p->type == MQR__MQTT_SUBSCRIBE || p->type == MQR__MQTT_UNSUBSCRIBE ? 2 : 0;
  if (p->type != MQR__MQTT_PUBLISH && p->flags != want)
    rc = MALFORMED(&r, "%s with flags %X: reserved flags must be %X", in, p->flags, want);
  else if (p->type != MQR__MQTT_CONNECT && level != 4 && level != 5)
    rc = PROTOCOL(&r, "%s before CONNECT", in);
  else
    switch (p->type) {
    case MQR__MQTT_CONNECT: rc = connect(&r, p); break;
    case MQR__MQTT_PUBLISH: rc = publish(&r, level, p); break;
    case MQR__MQTT_PUBACK:
    case MQR__MQTT_PUBREC:
    case MQR__MQTT_PUBREL:
    case MQR__MQTT_PUBCOMP: rc = ack(&r, level, p); break;
    case MQR__MQTT_SUBSCRIBE: rc = subscribe(&r, level, p, false); break;
    case MQR__MQTT_UNSUBSCRIBE: rc = subscribe(&r, level, p, true); break;
    case MQR__MQTT_PINGREQ: rc = end_of(&r, in); break;
    case MQR__MQTT_DISCONNECT: rc = disconnect_or_auth(&r, level, p); break;
    case MQR__MQTT_AUTH:
      rc = level == 5 ? disconnect_or_auth(&r, level, p) : MALFORMED(&r, "AUTH in MQTT 3.1.1");
      break;
    default: rc = PROTOCOL(&r, "a client may not send %s", in);
    }
  *reason = rc ? r.reason : 0;
  return rc;
}
