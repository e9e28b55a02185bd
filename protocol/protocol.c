/* The native protocol's frames (include/mqr/protocol.h, docs/protocol.md): the frame
 * schema compiled once per process, a struct codec over mqr_frame_t, and the two pieces
 * of the broker's hot path that must not decode what they only pass on: the view of a
 * Send, and the head of a delivery. */
#include "mqr/protocol.h"

#include <pthread.h>
#include <stddef.h>

#include "binary.h"
#include "schema_int.h"

extern const char mqr__frame_schema[];
extern const size_t mqr__frame_schema_len;

/* ---- C descriptions of the frame records ------------------------------------------- */

#define F(type, field, ctype)                                                                                          \
  { #field, offsetof(type, field), &ctype }
#define RECORD(name, type, fields)                                                                                     \
  static const mqr_avro_ctype_t name = {                                                                               \
      MQR_AVRO_C_RECORD, sizeof(type), fields, sizeof fields / sizeof fields[0], NULL, NULL, 0, 0}

/* A property's value: the union's branch is mqr_value_t's type, its value the union u. */
_Static_assert(sizeof(mqr_value_type_t) == sizeof(int32_t), "mqr_value_t's type is the union's int32_t branch");
static const mqr_avro_ctype_t *const value_branches[MQR_VALUE_TYPE_COUNT] = {NULL,
                                                                             &mqr_avro_c_bool,
                                                                             &mqr_avro_c_int32,
                                                                             &mqr_avro_c_int64,
                                                                             &mqr_avro_c_float,
                                                                             &mqr_avro_c_double,
                                                                             &mqr_avro_c_str,
                                                                             &mqr_avro_c_str};
static const mqr_avro_ctype_t value_t = {MQR_AVRO_C_UNION,     sizeof(mqr_value_t),     NULL, 0, NULL, value_branches,
                                         MQR_VALUE_TYPE_COUNT, offsetof(mqr_value_t, u)};
static const mqr_avro_ctype_t props_map = {MQR_AVRO_C_MAP, sizeof(mqr_avro_map_t), NULL, 0, &value_t, NULL, 0, 0};

static const mqr_avro_cfield_t connect_f[] = {
    F(mqr_frame_connect_t, version, mqr_avro_c_int32), F(mqr_frame_connect_t, client_id, mqr_avro_c_str),
    F(mqr_frame_connect_t, max_frame, mqr_avro_c_int32), F(mqr_frame_connect_t, mechanism, mqr_avro_c_str),
    F(mqr_frame_connect_t, response, mqr_avro_c_str)};
RECORD(connect_t, mqr_frame_connect_t, connect_f);
static const mqr_avro_cfield_t connected_f[] = {
    F(mqr_frame_connected_t, version, mqr_avro_c_int32), F(mqr_frame_connected_t, server, mqr_avro_c_str),
    F(mqr_frame_connected_t, session, mqr_avro_c_int64), F(mqr_frame_connected_t, max_frame, mqr_avro_c_int32)};
RECORD(connected_t, mqr_frame_connected_t, connected_f);
static const mqr_avro_cfield_t send_f[] = {
    F(mqr_frame_send_t, address, mqr_avro_c_str),     F(mqr_frame_send_t, routing_type, mqr_avro_c_int32),
    F(mqr_frame_send_t, durable, mqr_avro_c_bool),    F(mqr_frame_send_t, duplicate_id, mqr_avro_c_str),
    F(mqr_frame_send_t, receipt, mqr_avro_c_int64),   F(mqr_frame_send_t, priority, mqr_avro_c_int32),
    F(mqr_frame_send_t, timestamp, mqr_avro_c_int64), F(mqr_frame_send_t, expiration, mqr_avro_c_int64),
    F(mqr_frame_send_t, user_id, mqr_avro_c_str),     F(mqr_frame_send_t, properties, props_map),
    F(mqr_frame_send_t, body, mqr_avro_c_str)};
RECORD(send_t, mqr_frame_send_t, send_f);
static const mqr_avro_cfield_t receipt_f[] = {F(mqr_frame_receipt_t, receipt, mqr_avro_c_int64),
                                              F(mqr_frame_receipt_t, status, mqr_avro_c_int32),
                                              F(mqr_frame_receipt_t, queues, mqr_avro_c_int32)};
RECORD(receipt_t, mqr_frame_receipt_t, receipt_f);
static const mqr_avro_cfield_t subscribe_f[] = {
    F(mqr_frame_subscribe_t, subscription, mqr_avro_c_int64), F(mqr_frame_subscribe_t, target, mqr_avro_c_str),
    F(mqr_frame_subscribe_t, routing_type, mqr_avro_c_int32), F(mqr_frame_subscribe_t, queue, mqr_avro_c_str),
    F(mqr_frame_subscribe_t, credit, mqr_avro_c_int32),       F(mqr_frame_subscribe_t, selector, mqr_avro_c_str)};
RECORD(subscribe_t, mqr_frame_subscribe_t, subscribe_f);
static const mqr_avro_cfield_t subscribed_f[] = {F(mqr_frame_subscribed_t, subscription, mqr_avro_c_int64),
                                                 F(mqr_frame_subscribed_t, queue, mqr_avro_c_str)};
RECORD(subscribed_t, mqr_frame_subscribed_t, subscribed_f);
static const mqr_avro_cfield_t message_f[] = {F(mqr_frame_message_t, subscription, mqr_avro_c_int64),
                                              F(mqr_frame_message_t, delivery, mqr_avro_c_int64),
                                              F(mqr_frame_message_t, delivery_count, mqr_avro_c_int32),
                                              F(mqr_frame_message_t, message_id, mqr_avro_c_int64),
                                              F(mqr_frame_message_t, address, mqr_avro_c_str),
                                              F(mqr_frame_message_t, routing_type, mqr_avro_c_int32),
                                              F(mqr_frame_message_t, durable, mqr_avro_c_bool),
                                              F(mqr_frame_message_t, priority, mqr_avro_c_int32),
                                              F(mqr_frame_message_t, timestamp, mqr_avro_c_int64),
                                              F(mqr_frame_message_t, expiration, mqr_avro_c_int64),
                                              F(mqr_frame_message_t, user_id, mqr_avro_c_str),
                                              F(mqr_frame_message_t, properties, props_map),
                                              F(mqr_frame_message_t, body, mqr_avro_c_str)};
RECORD(message_t, mqr_frame_message_t, message_f);
static const mqr_avro_cfield_t ack_f[] = {
    F(mqr_frame_ack_t, subscription, mqr_avro_c_int64), F(mqr_frame_ack_t, delivery, mqr_avro_c_int64),
    F(mqr_frame_ack_t, cumulative, mqr_avro_c_bool), F(mqr_frame_ack_t, receipt, mqr_avro_c_int64)};
RECORD(ack_t, mqr_frame_ack_t, ack_f);
static const mqr_avro_cfield_t credit_f[] = {F(mqr_frame_credit_t, subscription, mqr_avro_c_int64),
                                             F(mqr_frame_credit_t, messages, mqr_avro_c_int32)};
RECORD(credit_t, mqr_frame_credit_t, credit_f);
static const mqr_avro_cfield_t unsubscribe_f[] = {F(mqr_frame_unsubscribe_t, subscription, mqr_avro_c_int64)};
RECORD(unsubscribe_t, mqr_frame_unsubscribe_t, unsubscribe_f);
static const mqr_avro_cfield_t query_f[] = {F(mqr_frame_query_t, query, mqr_avro_c_int64)};
RECORD(query_t, mqr_frame_query_t, query_f);
static const mqr_avro_cfield_t address_info_f[] = {
    F(mqr_frame_address_info_t, name, mqr_avro_c_str), F(mqr_frame_address_info_t, routing_types, mqr_avro_c_str),
    F(mqr_frame_address_info_t, routed, mqr_avro_c_int64), F(mqr_frame_address_info_t, unrouted, mqr_avro_c_int64),
    F(mqr_frame_address_info_t, size_bytes, mqr_avro_c_int64)};
RECORD(address_info_t, mqr_frame_address_info_t, address_info_f);
static const mqr_avro_cfield_t queue_info_f[] = {F(mqr_frame_queue_info_t, name, mqr_avro_c_str),
                                                 F(mqr_frame_queue_info_t, address, mqr_avro_c_str),
                                                 F(mqr_frame_queue_info_t, routing_type, mqr_avro_c_int32),
                                                 F(mqr_frame_queue_info_t, depth, mqr_avro_c_int64),
                                                 F(mqr_frame_queue_info_t, in_flight, mqr_avro_c_int64),
                                                 F(mqr_frame_queue_info_t, consumers, mqr_avro_c_int32),
                                                 F(mqr_frame_queue_info_t, enqueued, mqr_avro_c_int64),
                                                 F(mqr_frame_queue_info_t, acknowledged, mqr_avro_c_int64),
                                                 F(mqr_frame_queue_info_t, paused, mqr_avro_c_bool)};
RECORD(queue_info_t, mqr_frame_queue_info_t, queue_info_f);
static const mqr_avro_ctype_t address_infos = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &address_info_t, NULL, 0, 0};
static const mqr_avro_ctype_t queue_infos = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &queue_info_t, NULL, 0, 0};
static const mqr_avro_cfield_t query_result_f[] = {
    F(mqr_frame_query_result_t, query, mqr_avro_c_int64), F(mqr_frame_query_result_t, addresses, address_infos),
    F(mqr_frame_query_result_t, queues, queue_infos), F(mqr_frame_query_result_t, connections, mqr_avro_c_int32),
    F(mqr_frame_query_result_t, dropped, mqr_avro_c_int64)};
RECORD(query_result_t, mqr_frame_query_result_t, query_result_f);
static const mqr_avro_cfield_t error_f[] = {
    F(mqr_frame_error_t, code, mqr_avro_c_int32), F(mqr_frame_error_t, name, mqr_avro_c_str),
    F(mqr_frame_error_t, text, mqr_avro_c_str), F(mqr_frame_error_t, receipt, mqr_avro_c_int64),
    F(mqr_frame_error_t, fatal, mqr_avro_c_bool)};
RECORD(error_t, mqr_frame_error_t, error_f);
static const mqr_avro_cfield_t disconnect_f[] = {F(mqr_frame_disconnect_t, reason, mqr_avro_c_str)};
RECORD(disconnect_t, mqr_frame_disconnect_t, disconnect_f);
static const mqr_avro_cfield_t ping_f[] = {F(mqr_frame_ping_t, token, mqr_avro_c_int64)};
RECORD(ping_t, mqr_frame_ping_t, ping_f);
static const mqr_avro_cfield_t pong_f[] = {F(mqr_frame_pong_t, token, mqr_avro_c_int64)};
RECORD(pong_t, mqr_frame_pong_t, pong_f);
static const mqr_avro_ctype_t strings = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_str, NULL, 0, 0};
static const mqr_avro_cfield_t manage_f[] = {F(mqr_frame_manage_t, request, mqr_avro_c_int64),
                                             F(mqr_frame_manage_t, operation, mqr_avro_c_str),
                                             F(mqr_frame_manage_t, args, strings)};
RECORD(manage_t, mqr_frame_manage_t, manage_f);
static const mqr_avro_ctype_t rows = {MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &props_map, NULL, 0, 0};
static const mqr_avro_cfield_t manage_result_f[] = {
    F(mqr_frame_manage_result_t, request, mqr_avro_c_int64), F(mqr_frame_manage_result_t, code, mqr_avro_c_int32),
    F(mqr_frame_manage_result_t, text, mqr_avro_c_str), F(mqr_frame_manage_result_t, count, mqr_avro_c_int64),
    F(mqr_frame_manage_result_t, rows, rows)};
RECORD(manage_result_t, mqr_frame_manage_result_t, manage_result_f);
static const mqr_avro_cfield_t auth_f[] = {F(mqr_frame_auth_t, data, mqr_avro_c_str)};
RECORD(auth_t, mqr_frame_auth_t, auth_f);
static const mqr_avro_cfield_t redirect_f[] = {F(mqr_frame_redirect_t, receipt, mqr_avro_c_int64),
                                               F(mqr_frame_redirect_t, node, mqr_avro_c_int64),
                                               F(mqr_frame_redirect_t, url, mqr_avro_c_str)};
RECORD(redirect_t, mqr_frame_redirect_t, redirect_f);
static const mqr_avro_cfield_t nack_f[] = {F(mqr_frame_nack_t, subscription, mqr_avro_c_int64),
                                           F(mqr_frame_nack_t, delivery, mqr_avro_c_int64),
                                           F(mqr_frame_nack_t, counted, mqr_avro_c_bool)};
RECORD(nack_t, mqr_frame_nack_t, nack_f);

/* Each branch's C description is named for its member (connect_t, ...). */
static const mqr_avro_ctype_t *const branches[MQR_FRAME_COUNT] = {
#define BRANCH(e, name, rec, member) &member##_t,
    MQR_FRAME_TYPES(BRANCH)
#undef BRANCH
};
static const mqr_avro_ctype_t frame_t = {MQR_AVRO_C_UNION, sizeof(mqr_frame_t),     NULL, 0, NULL, branches,
                                         MQR_FRAME_COUNT,  offsetof(mqr_frame_t, u)};

/* ---- the compiled schema, once per process ----------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static mqr_avro_schema_t *schema;
static mqr_avro_codec_t *codec;

static mqr_error_t compile_err; /* why it failed: a binding mistake says so, not "out of memory" */

static void compile_once(void) {
  mqr_avro_schema_t *s = NULL;
  mqr_avro_codec_t *c = NULL;
  if (mqr_avro_schema_parse(mqr__frame_schema, mqr__frame_schema_len, &s, &compile_err) != 0) return;
  if (s->root->type != MQR_AVRO_UNION || s->root->n != MQR_FRAME_COUNT) {
    mqr_error_set(&compile_err, MQR_EINVAL, "frame.avsc has %u branches, MQR_FRAME_TYPES %d", (unsigned)s->root->n,
                  MQR_FRAME_COUNT);
    mqr_avro_schema_destroy(s);
    return;
  }
  if (mqr_avro_codec_compile(s, &frame_t, &c, &compile_err) != 0) {
    mqr_avro_schema_destroy(s);
    return;
  }
  schema = s;
  codec = c;
}

const mqr_avro_schema_t *mqr_protocol_schema(void) {
  pthread_once(&once, compile_once);
  return schema;
}

mqr_str_t mqr_protocol_schema_text(void) { return mqr_str_n(mqr__frame_schema, mqr__frame_schema_len); }

const char *mqr_frame_type_name(int type) {
  static const char *const names[MQR_FRAME_COUNT] = {
#define NAME(e, name, rec, member) name,
      MQR_FRAME_TYPES(NAME)
#undef NAME
  };
  return type >= 0 && type < MQR_FRAME_COUNT ? names[type] : "?";
}

static int not_ready(mqr_error_t *err) {
  if (compile_err.code == 0) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling the protocol's schema");
  return mqr_error_set(err, compile_err.code, "the protocol's schema: %s", compile_err.message);
}

/* ---- frames ------------------------------------------------------------------------- */

int mqr_frame_encode(const mqr_frame_t *f, mqr_avro_buf_t *out, mqr_error_t *err) {
  if (mqr_protocol_schema() == NULL) return not_ready(err);
  size_t start = out->len;
  int rc = mqr_avro_buf_reserve(out, MQR_FRAME_HEADER);
  if (rc) return mqr_error_set(err, rc, "%s writing a frame", mqr_strerror(rc));
  out->len += MQR_FRAME_HEADER;
  if ((rc = mqr_avro_encode(codec, f, out, NULL, err)) != 0) {
    out->len = start;
    return rc;
  }
  size_t n = out->len - start - MQR_FRAME_HEADER;
  if (n > UINT32_MAX) {
    out->len = start;
    return mqr_error_set(err, MQR_ELIMIT, "a frame of %zu bytes", n);
  }
  uint8_t *h = out->data + start;
  h[0] = (uint8_t)(n >> 24), h[1] = (uint8_t)(n >> 16), h[2] = (uint8_t)(n >> 8), h[3] = (uint8_t)n;
  return 0;
}

int mqr_frame_peek(const uint8_t *in, size_t len, uint32_t max, uint32_t *body_len) {
  if (len < MQR_FRAME_HEADER) return 0;
  uint32_t n = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
  if (n > max) return MQR_ELIMIT;
  *body_len = n;
  return len - MQR_FRAME_HEADER >= n ? 1 : 0;
}

int mqr_frame_decode(const uint8_t *body, size_t len, mqr_frame_t *f, mqr_avro_arena_t *arena, mqr_error_t *err) {
  if (mqr_protocol_schema() == NULL) return not_ready(err);
  size_t used = 0;
  int rc = mqr_avro_decode(codec, body, len, &used, f, arena, err);
  if (rc) return rc;
  if (used != len)
    return mqr_error_set(err, MQR_EBADDATA, "%zu bytes after the %s frame's datum", len - used,
                         mqr_frame_type_name(f->type));
  return 0;
}

/* ---- the send path ------------------------------------------------------------------ */

static int get_str(mqr__rd_t *r, mqr_str_t *out) {
  size_t n = 0;
  int rc = mqr__get_len(r, &n);
  if (rc) return rc;
  *out = mqr_str_n((const char *)r->p, n);
  r->p += n;
  return 0;
}

/* A string that must be UTF-8 (Avro's strings are; a reader of the frames the broker
 * passes it on in would fail on one that is not). */
static int get_utf8(mqr__rd_t *r, mqr_str_t *out, const char *what) {
  const uint8_t *at = r->p;
  int rc = get_str(r, out);
  if (rc) return rc;
  size_t bad = mqr_utf8_check(out->ptr, out->len);
  if (bad == out->len) return 0;
  r->p = at;
  return mqr__rd_fail(r, MQR_EBADDATA, "the %s is not valid UTF-8 (byte %zu of %zu is 0x%02x)", what, bad, out->len,
                      (uint8_t)out->ptr[bad]);
}

/* One property value: its branch, then what the branch holds. */
static int get_value(mqr__rd_t *r, mqr_value_t *v, bool check) {
  int32_t branch = 0;
  int rc = mqr__get_int(r, &branch);
  if (rc) return rc;
  if (branch < 0 || branch >= MQR_VALUE_TYPE_COUNT)
    return mqr__rd_fail(r, MQR_EBADDATA, "property value branch %d out of range", branch);
  v->type = (mqr_value_type_t)branch;
  switch (v->type) {
  case MQR_VALUE_NULL: v->u.l = 0; return 0;
  case MQR_VALUE_BOOL:
    if ((rc = mqr__need(r, 1)) != 0) return rc;
    if (*r->p > 1) return mqr__rd_fail(r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r->p);
    v->u.b = *r->p++;
    return 0;
  case MQR_VALUE_INT: return mqr__get_int(r, &v->u.i);
  case MQR_VALUE_LONG: return mqr__get_long(r, &v->u.l);
  case MQR_VALUE_FLOAT:
    if ((rc = mqr__need(r, 4)) != 0) return rc;
    memcpy(&v->u.f, r->p, 4); /* Avro's floats are little-endian, as this machine */
    r->p += 4;
    return 0;
  case MQR_VALUE_DOUBLE:
    if ((rc = mqr__need(r, 8)) != 0) return rc;
    memcpy(&v->u.d, r->p, 8);
    r->p += 8;
    return 0;
  case MQR_VALUE_STRING: return check ? get_utf8(r, &v->u.s, "property value") : get_str(r, &v->u.s);
  default: return get_str(r, &v->u.s);
  }
}

/* The headers of a tail, the priority checked. */
static int get_headers(mqr__rd_t *r, mqr_tail_view_t *h, bool check) {
  int rc = mqr__get_int(r, &h->priority);
  if (rc) return rc;
  if (h->priority < 0 || h->priority > MQR_PRIORITY_MAX)
    return mqr__rd_fail(r, MQR_EBADDATA, "priority %d is not 0-%d", h->priority, MQR_PRIORITY_MAX);
  if ((rc = mqr__get_long(r, &h->timestamp)) != 0) return rc;
  if ((rc = mqr__get_long(r, &h->expiration)) != 0) return rc;
  return check ? get_utf8(r, &h->user_id, "user id") : get_str(r, &h->user_id);
}

/* A tail's properties (a map of typed values), walked: every key and string UTF-8; the
 * schedule, when one is there, into *scheduled. */
static int check_props(mqr__rd_t *r, int64_t *scheduled, mqr_str_t *group) {
  uint64_t count = 0;
  int rc;
  static const mqr_str_t sched = {MQR_PROP_SCHEDULED, sizeof MQR_PROP_SCHEDULED - 1};
  while ((rc = mqr__get_count(r, 2, &count)) == 0 && count) {
    for (uint64_t i = 0; i < count; i++) {
      mqr_str_t k;
      mqr_value_t v;
      if ((rc = get_utf8(r, &k, "property key")) != 0) return rc;
      if ((rc = get_value(r, &v, true)) != 0) return rc;
      if (k.len == sched.len && memcmp(k.ptr, sched.ptr, sched.len) == 0)
        *scheduled = v.type == MQR_VALUE_LONG ? v.u.l : v.type == MQR_VALUE_INT ? v.u.i : 0;
      else if (k.len == sizeof MQR_PROP_GROUP - 1 && memcmp(k.ptr, MQR_PROP_GROUP, k.len) == 0)
        *group = v.type == MQR_VALUE_STRING ? v.u.s : mqr_str_n(NULL, 0);
    }
  }
  return rc;
}

int mqr_frame_send_view(const uint8_t *body, size_t len, mqr_send_view_t *v, mqr_error_t *err) {
  if (mqr_protocol_schema() == NULL) return not_ready(err);
  mqr__rd_t r = mqr__rd_init(body, len, err);
  int32_t type = 0, rt = 0;
  int64_t receipt = 0;
  int rc = mqr__get_int(&r, &type);
  if (rc) return rc;
  if (type != MQR_FRAME_SEND) return mqr__rd_fail(&r, MQR_EBADDATA, "a %s frame, not SEND", mqr_frame_type_name(type));
  if ((rc = get_utf8(&r, &v->address, "address")) != 0) return rc;
  if ((rc = mqr__get_int(&r, &rt)) != 0) return rc;
  if (rt < 0 || rt > MQR_PROTO_RT_MULTICAST) return mqr__rd_fail(&r, MQR_EBADDATA, "routing type %d out of range", rt);
  if ((rc = mqr__need(&r, 1)) != 0) return rc;
  if (*r.p > 1) return mqr__rd_fail(&r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r.p);
  v->durable = *r.p++;
  if ((rc = get_utf8(&r, &v->duplicate_id, "duplicate id")) != 0) return rc;
  if ((rc = mqr__get_long(&r, &receipt)) != 0) return rc;
  v->routing_type = rt;
  v->receipt = receipt;
  v->tail = r.p;
  mqr_tail_view_t h;
  if ((rc = get_headers(&r, &h, true)) != 0) return rc;
  v->scheduled = 0;
  v->group = mqr_str_n(NULL, 0);
  if ((rc = check_props(&r, &v->scheduled, &v->group)) != 0) return rc;
  size_t blen = 0;
  if ((rc = mqr__get_len(&r, &blen)) != 0) return rc;
  r.p += blen;
  if (r.p != r.end)
    return mqr__rd_fail(&r, MQR_EBADDATA, "%zu bytes after the SEND frame's datum", (size_t)(r.end - r.p));
  v->body_len = blen;
  v->tail_len = (size_t)(r.end - v->tail);
  return 0;
}

static size_t str_size(mqr_str_t s) { return mqr__varint_size(mqr__zigzag64((int64_t)s.len)) + s.len; }

static inline uint8_t *put_str(uint8_t *p, mqr_str_t s) {
  if (s.len < 64) { /* the common case: one length byte, an inline copy */
    *p++ = (uint8_t)(s.len << 1);
    return mqr__copy_short(p, s.ptr, s.len);
  }
  p = mqr__put_long(p, (int64_t)s.len);
  memcpy(p, s.ptr, s.len);
  return p + s.len;
}

size_t mqr_message_stored_size(int64_t message_id, mqr_str_t address, size_t tail_len) {
  return mqr__varint_size(mqr__zigzag64(message_id)) + str_size(address) + 1 + 1 + tail_len;
}

size_t mqr_message_write_stored(uint8_t *out, int64_t message_id, mqr_str_t address, int routing_type, bool durable,
                                const uint8_t *tail, size_t tail_len) {
  uint8_t *p = mqr__put_long(out, message_id);
  p = put_str(p, address);
  p = mqr__put_int(p, routing_type); /* 0-2: one byte */
  *p++ = durable ? 1 : 0;
  if (tail_len) mqr__copy_short(p, tail, tail_len);
  return (size_t)(p + tail_len - out);
}

int mqr_message_read_stored(const uint8_t *stored, size_t len, mqr_stored_view_t *out, mqr_error_t *err) {
  mqr__rd_t r = mqr__rd_init(stored, len, err);
  int rc = mqr__get_long(&r, &out->message_id);
  if (rc == 0) rc = get_str(&r, &out->address);
  if (rc == 0) rc = mqr__get_int(&r, &out->routing_type);
  if (rc == 0) rc = mqr__need(&r, 1);
  if (rc) return rc;
  if (*r.p > 1) return mqr__rd_fail(&r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r.p);
  out->durable = *r.p++;
  out->tail = r.p;
  out->tail_len = (size_t)(r.end - r.p);
  return 0;
}

int mqr_frame_message_stored(const uint8_t *body, size_t len, mqr_str_t *out) {
  mqr__rd_t r = mqr__rd_init(body, len, NULL);
  int32_t type = 0, count;
  int64_t subscription, delivery;
  int rc = mqr__get_int(&r, &type);
  if (rc == 0 && type != MQR_FRAME_MESSAGE) return MQR_EBADDATA;
  if (rc == 0) rc = mqr__get_long(&r, &subscription);
  if (rc == 0) rc = mqr__get_long(&r, &delivery);
  if (rc == 0) rc = mqr__get_int(&r, &count);
  if (rc) return rc;
  *out = mqr_str_n((const char *)r.p, (size_t)(r.end - r.p));
  return 0;
}

static size_t value_size(const mqr_value_t *v) {
  switch (v->type) {
  case MQR_VALUE_BOOL: return 2;
  case MQR_VALUE_INT: return 1 + mqr__varint_size(mqr__zigzag32(v->u.i));
  case MQR_VALUE_LONG: return 1 + mqr__varint_size(mqr__zigzag64(v->u.l));
  case MQR_VALUE_FLOAT: return 5;
  case MQR_VALUE_DOUBLE: return 9;
  case MQR_VALUE_STRING:
  case MQR_VALUE_BYTES: return 1 + str_size(v->u.s);
  default: return 1;
  }
}

static uint8_t *put_value(uint8_t *p, const mqr_value_t *v) {
  int t = v->type >= 0 && v->type < MQR_VALUE_TYPE_COUNT ? v->type : MQR_VALUE_NULL;
  *p++ = (uint8_t)(t << 1); /* the branch: 0-7, one zigzag byte */
  switch (t) {
  case MQR_VALUE_BOOL: *p++ = v->u.b ? 1 : 0; return p;
  case MQR_VALUE_INT: return mqr__put_int(p, v->u.i);
  case MQR_VALUE_LONG: return mqr__put_long(p, v->u.l);
  case MQR_VALUE_FLOAT: memcpy(p, &v->u.f, 4); return p + 4;
  case MQR_VALUE_DOUBLE: memcpy(p, &v->u.d, 8); return p + 8;
  case MQR_VALUE_STRING:
  case MQR_VALUE_BYTES: return put_str(p, v->u.s);
  default: return p;
  }
}

size_t mqr_message_tail_size(const mqr_tail_t *t) {
  size_t size = mqr__varint_size(mqr__zigzag32(t->priority)) + mqr__varint_size(mqr__zigzag64(t->timestamp)) +
                mqr__varint_size(mqr__zigzag64(t->expiration)) + str_size(t->user_id) + 1 + str_size(t->body);
  if (t->n) size += mqr__varint_size(mqr__zigzag64((int64_t)t->n));
  for (size_t i = 0; i < t->n; i++) size += str_size(t->keys[i]) + value_size(&t->values[i]);
  return size;
}

size_t mqr_message_write_tail(uint8_t *out, const mqr_tail_t *t) {
  uint8_t *p = mqr__put_int(out, t->priority);
  p = mqr__put_long(p, t->timestamp);
  p = mqr__put_long(p, t->expiration);
  p = put_str(p, t->user_id);
  if (t->n) p = mqr__put_long(p, (int64_t)t->n);
  for (size_t i = 0; i < t->n; i++) {
    p = put_str(p, t->keys[i]);
    p = put_value(p, &t->values[i]);
  }
  *p++ = 0;
  p = put_str(p, t->body);
  return (size_t)(p - out);
}

int mqr_message_read_tail(const uint8_t *tail, size_t len, mqr_tail_view_t *out, mqr_error_t *err) {
  mqr__rd_t r = mqr__rd_init(tail, len, err);
  int rc = get_headers(&r, out, false);
  if (rc) return rc;
  out->props = r.p;
  uint64_t count = 0;
  while ((rc = mqr__get_count(&r, 2, &count)) == 0 && count) {
    for (uint64_t i = 0; i < count; i++) {
      mqr_str_t k;
      mqr_value_t v;
      if ((rc = get_str(&r, &k)) != 0 || (rc = get_value(&r, &v, false)) != 0) return rc;
    }
  }
  if (rc) return rc;
  /* The walk's bounds are the rest of the tail, as the readers' that checked it: a block's
   * byte size need only fit in what follows it. The walk stops at the map's end. */
  out->props_len = (size_t)(r.end - out->props);
  return get_str(&r, &out->body);
}

int mqr_message_read_headers(const uint8_t *tail, size_t len, mqr_tail_view_t *out, mqr_error_t *err) {
  mqr__rd_t r = mqr__rd_init(tail, len, err);
  int rc = get_headers(&r, out, false);
  if (rc) return rc;
  out->props = r.p;
  out->props_len = (size_t)(r.end - r.p);
  out->body = mqr_str_n(NULL, 0);
  return 0;
}

size_t mqr_message_edit_tail_bound(size_t len, const mqr_tail_edit_t *edit) {
  size_t n = len + 10 + 10; /* a longer expiration, a longer block count */
  for (size_t i = 0; i < edit->n; i++) n += str_size(edit->keys[i]) + value_size(&edit->values[i]);
  return n;
}

static bool replaced(const mqr_tail_edit_t *edit, mqr_str_t key) {
  for (size_t i = 0; i < edit->n; i++)
    if (mqr_str_eq(edit->keys[i], key)) return true;
  return false;
}

int mqr_message_edit_tail(const uint8_t *tail, size_t len, const mqr_tail_edit_t *edit, uint8_t *out, size_t *out_len,
                          mqr_error_t *err) {
  mqr_tail_view_t t;
  int rc = mqr_message_read_tail(tail, len, &t, err);
  if (rc) return rc;
  /* Which of the properties stay: counted, then copied as they are encoded. */
  uint64_t kept = 0;
  mqr_props_iter_t it;
  mqr_str_t key;
  mqr_value_t v;
  mqr_props_iter_init(&it, t.props, t.props_len);
  while ((rc = mqr_props_next(&it, &key, &v)) == 1) kept += !replaced(edit, key);
  if (rc < 0) return mqr_error_set(err, rc, "a tail whose properties do not read");
  uint8_t *p = mqr__put_int(out, t.priority);
  p = mqr__put_long(p, t.timestamp);
  p = mqr__put_long(p, edit->set_expiration ? edit->expiration : t.expiration);
  p = put_str(p, t.user_id);
  if (kept + edit->n) p = mqr__put_long(p, (int64_t)(kept + edit->n));
  mqr_props_iter_init(&it, t.props, t.props_len);
  while (mqr_props_next(&it, &key, &v) == 1) /* written again: never longer than they came */
    if (!replaced(edit, key)) {
      p = put_str(p, key);
      p = put_value(p, &v);
    }
  for (size_t i = 0; i < edit->n; i++) {
    p = put_str(p, edit->keys[i]);
    p = put_value(p, &edit->values[i]);
  }
  *p++ = 0;
  p = put_str(p, t.body);
  *out_len = (size_t)(p - out);
  return 0;
}

int mqr_props_next(mqr_props_iter_t *it, mqr_str_t *key, mqr_value_t *value) {
  mqr__rd_t r = mqr__rd_init(it->p, (size_t)(it->end - it->p), NULL);
  int rc;
  if (it->left == 0) {
    if (r.p == r.end) return 0;
    if ((rc = mqr__get_count(&r, 2, &it->left)) != 0) return rc;
    if (it->left == 0) {
      it->p = r.end; /* the map's end */
      return 0;
    }
  }
  if ((rc = get_str(&r, key)) != 0 || (rc = get_value(&r, value, false)) != 0) return rc;
  it->left--;
  it->p = r.p;
  return 1;
}

size_t mqr_message_head(uint8_t *out, int64_t subscription, int64_t delivery, int32_t delivery_count,
                        size_t stored_len) {
  uint8_t *p = out + MQR_FRAME_HEADER;
  p = mqr__put_int(p, MQR_FRAME_MESSAGE);
  p = mqr__put_long(p, subscription);
  p = mqr__put_long(p, delivery);
  p = mqr__put_int(p, delivery_count);
  size_t head = (size_t)(p - out), n = head - MQR_FRAME_HEADER + stored_len;
  out[0] = (uint8_t)(n >> 24), out[1] = (uint8_t)(n >> 16), out[2] = (uint8_t)(n >> 8), out[3] = (uint8_t)n;
  return head;
}

int mqr_frame_encode_send_stored(const uint8_t *stored, size_t len, mqr_str_t duplicate_id, int64_t receipt,
                                 mqr_avro_buf_t *out, mqr_error_t *err) {
  mqr_stored_view_t v;
  int rc = mqr_message_read_stored(stored, len, &v, err);
  if (rc) return rc;
  size_t body = mqr__varint_size(mqr__zigzag64(MQR_FRAME_SEND)) + str_size(v.address) +
                mqr__varint_size(mqr__zigzag64(v.routing_type)) + 1 + str_size(duplicate_id) +
                mqr__varint_size(mqr__zigzag64(receipt)) + v.tail_len;
  if (body > UINT32_MAX) return mqr_error_set(err, MQR_ELIMIT, "a frame of %zu bytes", body);
  if ((rc = mqr_avro_buf_reserve(out, MQR_FRAME_HEADER + body)) != 0)
    return mqr_error_set(err, rc, "%s writing a frame", mqr_strerror(rc));
  uint8_t *h = out->data + out->len, *p = h + MQR_FRAME_HEADER;
  h[0] = (uint8_t)(body >> 24), h[1] = (uint8_t)(body >> 16), h[2] = (uint8_t)(body >> 8), h[3] = (uint8_t)body;
  p = mqr__put_int(p, MQR_FRAME_SEND);
  p = put_str(p, v.address);
  p = mqr__put_int(p, v.routing_type);
  *p++ = v.durable ? 1 : 0;
  p = put_str(p, duplicate_id);
  p = mqr__put_long(p, receipt);
  memcpy(p, v.tail, v.tail_len);
  out->len += MQR_FRAME_HEADER + body;
  return 0;
}
