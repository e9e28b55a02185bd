/* An AMQP message to the broker's, and back (amqp.h; docs/protocols.md's table).
 *
 * In: the header's durable and priority, its ttl (or the properties' absolute expiry
 * time) as the expiration, the application-properties as typed properties, group-id as
 * _AMQ_GROUP_ID, the message annotations x-opt-delivery-time and x-opt-delivery-delay as
 * the scheduled delivery time, and the body: a data section or an amqp-value of binary or
 * string is the body's bytes; any other body (an amqp-value of another type, amqp-sequence
 * sections) is its encoding. How the body came is kept, as Artemis keeps it, in the
 * property JMS_AMQP_ORIGINAL_ENCODING, so that an AMQP consumer gets the body as it was
 * sent. Out: the same, the other way, with the delivery count. */
#include <proton/codec.h>
#include <stdio.h>
#include <string.h>

#include "amqp.h"

/* The properties section's fields as properties: Artemis's core names for them (its
 * AmqpCoreConverter), content-type as the other heads name it. */
#define PROP_MESSAGE_ID "JMSMessageID"
#define PROP_CORRELATION_ID "JMSCorrelationID"
#define PROP_SUBJECT "JMSType"
#define PROP_REPLY_TO "JMSReplyTo"
#define PROP_CONTENT_TYPE "content-type"
/* The message annotations as they came (encoded), for AMQP consumers; a bytes property,
 * so that STOMP and MQTT consumers are not given it. */
#define ANNOTATIONS "JMS_AMQP_MESSAGE_ANNOTATIONS"

/* JMS_AMQP_ORIGINAL_ENCODING's values, as Artemis's AMQPMessageSupport numbers them. */
#define ENCODING "JMS_AMQP_ORIGINAL_ENCODING"
enum { ENC_DATA = 2, ENC_SEQUENCE = 3, ENC_VALUE_STRING = 5, ENC_VALUE_BINARY = 6, ENC_VALUE_OTHER = 7 };

/* d (from its start) encoded into *buf (grown as it needs): 0 with the bytes in *out (empty
 * for an empty d), MQR_ENOMEM or MQR_EBADDATA. */
static int encode(pn_data_t *d, uint8_t **buf, size_t *cap, mqr_str_t *out) {
  pn_data_rewind(d);
  *out = mqr_str_n("", 0);
  if (pn_data_size(d) == 0) return 0;
  for (;;) {
    ssize_t len = *cap ? pn_data_encode(d, (char *)*buf, *cap) : PN_OVERFLOW;
    if (len >= 0) {
      *out = mqr_str_n((const char *)*buf, (size_t)len);
      return 0;
    }
    if (len != PN_OVERFLOW) return MQR_EBADDATA;
    size_t c = *cap ? *cap * 2 : 4096;
    uint8_t *p = mqr_realloc(*buf, c);
    if (p == NULL) return MQR_ENOMEM;
    *buf = p, *cap = c;
  }
}

int mqr__amqp_grow(amqp_t *a, size_t n) {
  if (n <= a->cap) return 0;
  size_t cap = a->cap ? a->cap : 4096;
  while (cap < n) cap *= 2;
  uint8_t *p = mqr_realloc(a->buf, cap);
  if (p == NULL) return MQR_ENOMEM;
  a->buf = p, a->cap = cap;
  return 0;
}

static mqr_str_t bytes_str(pn_bytes_t b) { return mqr_str_n(b.start ? b.start : "", b.size); }

/* The value at data's current node as a property value; false: a type properties do not
 * take (lists, maps, arrays, described values, uuids: left out). */
static bool value_of(pn_data_t *d, mqr_value_t *v) {
  switch (pn_data_type(d)) {
  case PN_NULL: *v = mqr_value_null(); return true;
  case PN_BOOL: *v = mqr_value_bool(pn_data_get_bool(d)); return true;
  case PN_UBYTE: *v = mqr_value_int(pn_data_get_ubyte(d)); return true;
  case PN_BYTE: *v = mqr_value_int(pn_data_get_byte(d)); return true;
  case PN_USHORT: *v = mqr_value_int(pn_data_get_ushort(d)); return true;
  case PN_SHORT: *v = mqr_value_int(pn_data_get_short(d)); return true;
  case PN_UINT: *v = mqr_value_long(pn_data_get_uint(d)); return true;
  case PN_INT: *v = mqr_value_int(pn_data_get_int(d)); return true;
  case PN_CHAR: *v = mqr_value_int((int32_t)pn_data_get_char(d)); return true;
  case PN_ULONG: *v = mqr_value_long((int64_t)pn_data_get_ulong(d)); return true;
  case PN_LONG: *v = mqr_value_long(pn_data_get_long(d)); return true;
  case PN_TIMESTAMP: *v = mqr_value_long(pn_data_get_timestamp(d)); return true;
  case PN_FLOAT: *v = mqr_value_float(pn_data_get_float(d)); return true;
  case PN_DOUBLE: *v = mqr_value_double(pn_data_get_double(d)); return true;
  case PN_BINARY: *v = mqr_value_bytes(bytes_str(pn_data_get_binary(d))); return true;
  case PN_STRING: *v = mqr_value_string(bytes_str(pn_data_get_string(d))); return true;
  case PN_SYMBOL: *v = mqr_value_string(bytes_str(pn_data_get_symbol(d))); return true;
  default: return false;
  }
}

/* A long (or timestamp, or other integer) at data's current node; false: none. */
static bool long_of(pn_data_t *d, int64_t *out) {
  mqr_value_t v;
  if (!value_of(d, &v)) return false;
  if (v.type == MQR_VALUE_LONG)
    *out = v.u.l;
  else if (v.type == MQR_VALUE_INT)
    *out = v.u.i;
  else
    return false;
  return true;
}

/* A message-id or correlation-id (a string, ulong, uuid or binary) as text: a view of a
 * string, else written into buf; false: none. */
static bool id_text(pn_data_t *d, char *buf, size_t cap, mqr_str_t *out) {
  pn_data_rewind(d);
  if (!pn_data_next(d)) return false;
  switch (pn_data_type(d)) {
  case PN_STRING: *out = bytes_str(pn_data_get_string(d)); return true;
  case PN_ULONG: snprintf(buf, cap, "%llu", (unsigned long long)pn_data_get_ulong(d)); break;
  case PN_UUID: {
    pn_uuid_t u = pn_data_get_uuid(d);
    const uint8_t *b = (const uint8_t *)u.bytes;
    snprintf(buf, cap, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    break;
  }
  case PN_BINARY: {
    pn_bytes_t v = pn_data_get_binary(d);
    size_t k = 0;
    for (size_t i = 0; i < v.size && k + 3 < cap; i++)
      k += (size_t)snprintf(buf + k, cap - k, "%02x", (uint8_t)v.start[i]);
    buf[k] = 0;
    break;
  }
  default: return false;
  }
  *out = mqr_str(buf);
  return true;
}

static int from_message(amqp_t *a, amqp_in_t *in, mqr_error_t *err) {
  pn_message_t *msg = a->msg;
  mqr_broker_message_t *m = &in->m;
  size_t n = 0;
  m->durable = pn_message_is_durable(msg);
  m->priority = pn_message_get_priority(msg);
  if (m->priority > MQR_PRIORITY_MAX) m->priority = MQR_PRIORITY_MAX;
  m->timestamp = in->now_ms;
  pn_millis_t ttl = pn_message_get_ttl(msg);
  pn_timestamp_t expiry = pn_message_get_expiry_time(msg);
  m->expiration = ttl ? in->now_ms + (int64_t)ttl : expiry > 0 ? expiry : 0;
  /* application-properties */
  pn_data_t *d = pn_message_properties(msg);
  pn_data_rewind(d);
  if (pn_data_next(d) && pn_data_type(d) == PN_MAP) {
    pn_data_enter(d);
    while (pn_data_next(d)) {
      if (pn_data_type(d) != PN_STRING) {
        pn_data_exit(d);
        return mqr_error_set(err, MQR_EINVAL, "an application-properties key must be a string");
      }
      mqr_str_t key = bytes_str(pn_data_get_string(d));
      if (!pn_data_next(d)) break;
      if (!value_of(d, &in->values[n])) continue; /* (not a simple type: left out) */
      if (n == MQR__AMQP_MAX_PROPS) {
        pn_data_exit(d);
        return mqr_error_set(err, MQR_ELIMIT, "a message has at most %d application-properties", MQR__AMQP_MAX_PROPS);
      }
      in->keys[n++] = key;
    }
    pn_data_exit(d);
  }
  const char *group = pn_message_get_group_id(msg);
  if (group && *group) {
    in->keys[n] = MQR_STR(MQR_PROP_GROUP);
    in->values[n++] = mqr_value_string(mqr_str(group));
  }
  /* the properties section: as the JMS names Artemis gives them (content-type as the
   * other heads name it) */
  mqr_str_t id;
  if (id_text(pn_message_id(msg), in->ids[0], sizeof in->ids[0], &id)) {
    in->keys[n] = MQR_STR(PROP_MESSAGE_ID);
    in->values[n++] = mqr_value_string(id);
  }
  if (id_text(pn_message_correlation_id(msg), in->ids[1], sizeof in->ids[1], &id)) {
    in->keys[n] = MQR_STR(PROP_CORRELATION_ID);
    in->values[n++] = mqr_value_string(id);
  }
  static const struct {
    const char *name;
    const char *(*get)(pn_message_t *);
  } text[] = {{PROP_SUBJECT, pn_message_get_subject},
              {PROP_REPLY_TO, pn_message_get_reply_to},
              {PROP_CONTENT_TYPE, pn_message_get_content_type}};
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
    const char *v = text[i].get(msg);
    if (v == NULL || *v == 0) continue;
    in->keys[n] = mqr_str(text[i].name);
    in->values[n++] = mqr_value_string(mqr_str(v));
  }
  pn_bytes_t user = pn_message_get_user_id(msg);
  m->user_id = user.size && mqr_utf8_check(user.start, user.size) == user.size ? bytes_str(user) : mqr_str_n("", 0);
  /* message annotations: the scheduled delivery time, as Artemis reads them */
  d = pn_message_annotations(msg);
  pn_data_rewind(d);
  if (pn_data_next(d) && pn_data_type(d) == PN_MAP) {
    pn_data_enter(d);
    while (pn_data_next(d)) {
      pn_bytes_t key = pn_data_type(d) == PN_SYMBOL ? pn_data_get_symbol(d) : pn_bytes_null;
      int64_t x;
      if (!pn_data_next(d)) break;
      bool time = key.size == 19 && memcmp(key.start, "x-opt-delivery-time", 19) == 0;
      bool delay = key.size == 20 && memcmp(key.start, "x-opt-delivery-delay", 20) == 0;
      if ((time || delay) && long_of(d, &x) && x > 0) {
        in->keys[n] = MQR_STR(MQR_PROP_SCHEDULED);
        in->values[n++] = mqr_value_long(time ? x : in->now_ms + x);
      }
    }
    pn_data_exit(d);
    /* kept whole, for AMQP consumers (Qpid JMS reads its message type and destination
     * from x-opt-jms-*) */
    mqr_str_t enc;
    if (encode(d, &a->abuf, &a->acap, &enc) != 0) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
    if (enc.len) {
      in->keys[n] = MQR_STR(ANNOTATIONS);
      in->values[n++] = mqr_value_bytes(enc);
    }
  }
  /* the body */
  d = pn_message_body(msg);
  pn_data_rewind(d);
  int encoding = ENC_DATA;
  m->body = mqr_str_n("", 0);
  if (in->direct) {
    m->body = in->body, encoding = in->encoding;
  } else if (pn_data_next(d)) {
    pn_type_t t = pn_data_type(d);
    bool inferred = pn_message_is_inferred(msg);
    if (t == PN_BINARY && inferred) {
      m->body = bytes_str(pn_data_get_binary(d));
    } else if (t == PN_BINARY) {
      m->body = bytes_str(pn_data_get_binary(d)), encoding = ENC_VALUE_BINARY;
    } else if (t == PN_STRING && !inferred) {
      m->body = bytes_str(pn_data_get_string(d)), encoding = ENC_VALUE_STRING;
    } else { /* kept as its encoding */
      int rc = encode(d, &a->buf, &a->cap, &m->body);
      if (rc) return mqr_error_set(err, rc, rc == MQR_ENOMEM ? "out of memory" : "a body that cannot be encoded again");
      encoding = inferred ? ENC_SEQUENCE : ENC_VALUE_OTHER;
    }
  }
  if (encoding != ENC_DATA) {
    in->keys[n] = MQR_STR(ENCODING);
    in->values[n++] = mqr_value_int(encoding);
  }
  m->property_keys = in->keys;
  m->property_values = in->values;
  m->n_properties = n;
  return 0;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The length of the section at p[0..n) when it is one that comes before the body (header,
 * delivery or message annotations, properties, application-properties: a list or a map
 * under its short descriptor), read from its size; 0 otherwise. Its content is Proton's to
 * decode: this only finds where the body begins. */
static size_t head_section(const uint8_t *p, size_t n) {
  if (n < 4 || p[0] != 0x00 || p[1] != 0x53 || p[2] < 0x70 || p[2] > 0x74) return 0;
  switch (p[3]) {
  case 0x45: return 4; /* list0 */
  case 0xc0:
  case 0xc1: return n >= 5 && (size_t)p[4] <= n - 5 ? 5 + (size_t)p[4] : 0;
  case 0xd0:
  case 0xd1: return n >= 8 && be32(p + 4) <= n - 8 ? 8 + (size_t)be32(p + 4) : 0;
  default: return 0;
  }
}

/* Whether p[0..n), the rest of the message, is one body section the broker takes as bytes
 * (a data section, or an amqp-value of binary or string) and nothing after it: then its
 * bytes are viewed where they are, not copied through Proton's data. */
static bool direct_body(const uint8_t *p, size_t n, mqr_str_t *body, int *encoding) {
  if (n < 5 || p[0] != 0x00 || p[1] != 0x53 || (p[2] != 0x75 && p[2] != 0x77)) return false;
  size_t h, len;
  switch (p[3]) {
  case 0xa0: /* vbin8, str8-utf8 */
  case 0xa1: h = 5, len = p[4]; break;
  case 0xb0: /* vbin32, str32-utf8 */
  case 0xb1:
    if (n < 8) return false;
    h = 8, len = be32(p + 4);
    break;
  default: return false;
  }
  if (len != n - h) return false; /* (more sections after it: Proton's) */
  bool text = p[3] & 1;
  if (p[2] == 0x75 && text) return false; /* (a data section holds binary) */
  *encoding = p[2] == 0x75 ? ENC_DATA : text ? ENC_VALUE_STRING : ENC_VALUE_BINARY;
  *body = mqr_str_n((const char *)p + h, len);
  return true;
}

int mqr__amqp_decode(amqp_t *a, const uint8_t *bytes, size_t len, amqp_in_t *in, mqr_error_t *err) {
  size_t off = 0, k;
  while (off < len && (k = head_section(bytes + off, len - off)) > 0) off += k;
  in->direct = off < len && direct_body(bytes + off, len - off, &in->body, &in->encoding);
  size_t n = in->direct ? off : len;
  pn_message_clear(a->msg); /* (Proton's decode sets only the sections that came) */
  if (len == 0 || (n > 0 && pn_message_decode(a->msg, (const char *)bytes, n) != 0))
    return mqr_error_set(err, MQR_EBADDATA, "the transfer is not an AMQP message");
  return from_message(a, in, err);
}

/* A property of the stored message as an application-property (or the group-id). */
static void put_property(pn_message_t *msg, pn_data_t *props, mqr_str_t key, const mqr_value_t *v) {
  pn_data_put_string(props, pn_bytes(key.len, key.ptr));
  switch (v->type) {
  case MQR_VALUE_BOOL: pn_data_put_bool(props, v->u.b); break;
  case MQR_VALUE_INT: pn_data_put_int(props, v->u.i); break;
  case MQR_VALUE_LONG: pn_data_put_long(props, v->u.l); break;
  case MQR_VALUE_FLOAT: pn_data_put_float(props, v->u.f); break;
  case MQR_VALUE_DOUBLE: pn_data_put_double(props, v->u.d); break;
  case MQR_VALUE_STRING: pn_data_put_string(props, pn_bytes(v->u.s.len, v->u.s.ptr)); break;
  case MQR_VALUE_BYTES: pn_data_put_binary(props, pn_bytes(v->u.s.len, v->u.s.ptr)); break;
  default: pn_data_put_null(props); break;
  }
  (void)msg;
}

/* A string property that is a field of the message's (the group-id, the properties
 * section's): set there (buf: room for its text) and true; false: an application property. */
static bool field(pn_message_t *msg, mqr_str_t key, mqr_str_t v, char *buf) {
#define F(name) name, sizeof name - 1
  static const struct {
    const char *name;
    size_t len;
    int (*set)(pn_message_t *, const char *); /* NULL: an id, set as a string */
    pn_data_t *(*id)(pn_message_t *);
  } fields[] = {
      {F(MQR_PROP_GROUP), pn_message_set_group_id, NULL}, {F(PROP_SUBJECT), pn_message_set_subject, NULL},
      {F(PROP_REPLY_TO), pn_message_set_reply_to, NULL},  {F(PROP_CONTENT_TYPE), pn_message_set_content_type, NULL},
      {F(PROP_MESSAGE_ID), NULL, pn_message_id},          {F(PROP_CORRELATION_ID), NULL, pn_message_correlation_id}};
#undef F
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (!mqr_str_eq(key, mqr_str_n(fields[i].name, fields[i].len))) continue;
    if (fields[i].set) { /* (Proton takes NUL-terminated text: copied only for a field) */
      memcpy(buf, v.ptr, v.len);
      buf[v.len] = 0;
      fields[i].set(msg, buf);
    } else {
      pn_data_t *d = fields[i].id(msg);
      pn_data_clear(d);
      pn_data_put_string(d, pn_bytes(v.len, v.ptr));
    }
    return true;
  }
  return false;
}

int64_t mqr__amqp_to_message(amqp_t *a, const mqr__msg_t *sm, int32_t delivery_count, int64_t now_ms, mqr_str_t *body) {
  mqr_stored_view_t sv;
  mqr_tail_view_t tv;
  if (mqr_message_read_stored(sm->data, sm->len, &sv, NULL) != 0 ||
      mqr_message_read_tail(sv.tail, sv.tail_len, &tv, NULL) != 0)
    return MQR_EBADDATA;
  pn_message_t *msg = a->msg;
  pn_message_clear(msg);
  pn_message_set_durable(msg, sv.durable);
  pn_message_set_priority(msg, (uint8_t)tv.priority);
  if (tv.expiration) pn_message_set_ttl(msg, tv.expiration > now_ms ? (pn_millis_t)(tv.expiration - now_ms) : 1);
  if (tv.expiration) pn_message_set_expiry_time(msg, tv.expiration);
  if (tv.timestamp) pn_message_set_creation_time(msg, tv.timestamp);
  pn_message_set_delivery_count(msg, delivery_count > 1 ? (uint32_t)delivery_count - 1 : 0);
  if (tv.user_id.len) pn_message_set_user_id(msg, pn_bytes(tv.user_id.len, tv.user_id.ptr));
  char text[512];
  if (sv.address.len < sizeof text) {
    memcpy(text, sv.address.ptr, sv.address.len);
    text[sv.address.len] = 0;
    pn_message_set_address(msg, text);
  }
  pn_data_t *props = pn_message_properties(msg);
  mqr_props_iter_t it;
  mqr_str_t key;
  mqr_value_t val;
  int encoding = ENC_DATA;
  bool any = false;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  while (mqr_props_next(&it, &key, &val) == 1) {
    if (mqr_str_eq(key, MQR_STR(ENCODING)) && val.type == MQR_VALUE_INT) {
      encoding = val.u.i;
      continue;
    }
    if (mqr_str_eq(key, MQR_STR(CONNECTION_ID))) continue;
    if (mqr_str_eq(key, MQR_STR(ANNOTATIONS)) && val.type == MQR_VALUE_BYTES) {
      if (pn_data_decode(pn_message_annotations(msg), val.u.s.ptr, val.u.s.len) < 0) return MQR_EBADDATA;
      continue;
    }
    if (val.type == MQR_VALUE_STRING && val.u.s.len < sizeof text && field(msg, key, val.u.s, text)) continue;
    if (!any) {
      pn_data_put_map(props);
      pn_data_enter(props);
      any = true;
    }
    put_property(msg, props, key, &val);
  }
  if (any) pn_data_exit(props);
  /* The body: one of bytes or text is written after the sections Proton encodes, as its
   * section's head here and its bytes where they are stored (*body); any other is
   * Proton's. */
  bool direct = encoding != ENC_SEQUENCE && encoding != ENC_VALUE_OTHER;
  if (!direct) {
    if (pn_data_decode(pn_message_body(msg), tv.body.ptr, tv.body.len) < 0) return MQR_EBADDATA;
    pn_message_set_inferred(msg, encoding == ENC_SEQUENCE);
  }
  *body = mqr_str_n("", 0);
  for (;;) {
    size_t size = a->cap > 8 ? a->cap - 8 : 0; /* (room for the body section's head) */
    int rc = size ? pn_message_encode(msg, (char *)a->buf, &size) : PN_OVERFLOW;
    if (rc == PN_OVERFLOW) {
      if (mqr__amqp_grow(a, a->cap ? a->cap * 2 : 4096)) return MQR_ENOMEM;
      continue;
    }
    if (rc != 0) return MQR_EBADDATA;
    if (!direct) return (int64_t)size;
    uint8_t *p = a->buf + size;
    bool is_text = encoding == ENC_VALUE_STRING;
    *p++ = 0x00, *p++ = 0x53, *p++ = encoding == ENC_DATA ? 0x75 : 0x77; /* data, amqp-value */
    if (tv.body.len < 256) {
      *p++ = is_text ? 0xa1 : 0xa0, *p++ = (uint8_t)tv.body.len;
    } else {
      uint32_t n = (uint32_t)tv.body.len;
      *p++ = is_text ? 0xb1 : 0xb0, *p++ = (uint8_t)(n >> 24), *p++ = (uint8_t)(n >> 16), *p++ = (uint8_t)(n >> 8);
      *p++ = (uint8_t)n;
    }
    *body = tv.body;
    return (int64_t)(p - a->buf);
  }
}
