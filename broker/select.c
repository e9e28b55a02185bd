/* Filters on messages: the values a queue filter or a consumer selector reads, set in
 * the router's vocabulary (mqr/filter.h) from a send as it is routed, or from a stored
 * message as it is dispatched. Headers are set from the message's fields; properties by
 * name, and only when some filter names a property at all. */
#include "broker_int.h"

static mqr_str_t durable_name(bool durable) { return durable ? MQR_STR("DURABLE") : MQR_STR("NON_DURABLE"); }

static const mqr_str_t group_id = {"_AMQ_GROUP_ID", 13};

/* The headers some filter names (the group id comes with the properties). */
static void fill_headers(mqr_filter_vocab_t *v, int32_t priority, int64_t timestamp, int64_t expiration,
                         mqr_str_t user_id, mqr_str_t address, bool durable, size_t size) {
  uint32_t used = mqr_filter_vocab_headers(v);
  if (used == 0) return;
#define USED(h) (used & (1u << (h)))
  if (USED(MQR_HDR_PRIORITY)) mqr_filter_vocab_set_header(v, MQR_HDR_PRIORITY, mqr_value_int(priority));
  if (USED(MQR_HDR_EXPIRATION)) mqr_filter_vocab_set_header(v, MQR_HDR_EXPIRATION, mqr_value_long(expiration));
  if (USED(MQR_HDR_DURABLE)) mqr_filter_vocab_set_header(v, MQR_HDR_DURABLE, mqr_value_string(durable_name(durable)));
  if (USED(MQR_HDR_TIMESTAMP)) mqr_filter_vocab_set_header(v, MQR_HDR_TIMESTAMP, mqr_value_long(timestamp));
  if (USED(MQR_HDR_SIZE))
    mqr_filter_vocab_set_header(v, MQR_HDR_SIZE, mqr_value_int(size > INT32_MAX ? INT32_MAX : (int32_t)size));
  if (USED(MQR_HDR_USERID) && user_id.len) mqr_filter_vocab_set_header(v, MQR_HDR_USERID, mqr_value_string(user_id));
  if (USED(MQR_HDR_ADDRESS)) mqr_filter_vocab_set_header(v, MQR_HDR_ADDRESS, mqr_value_string(address));
#undef USED
}

static void fill_property(mqr_filter_vocab_t *v, bool names, bool group, mqr_str_t key, mqr_value_t value) {
  if (group && value.type == MQR_VALUE_STRING && mqr_str_eq(key, group_id))
    mqr_filter_vocab_set_header(v, MQR_HDR_GROUPID, value);
  if (names) mqr_filter_vocab_set(v, key, value);
}

/* From an encoded tail (a SEND frame's, or a stored message's). Stored bytes were
 * checked when they came in; a tail that does not read sets headers only. */
static void fill_tail(mqr_filter_vocab_t *v, const uint8_t *tail, size_t len, mqr_str_t address, bool durable,
                      size_t size) {
  mqr_tail_view_t t;
  if (mqr_message_read_headers(tail, len, &t, NULL) != 0) return;
  fill_headers(v, t.priority, t.timestamp, t.expiration, t.user_id, address, durable, size);
  bool names = mqr_filter_vocab_names(v) != 0, group = (mqr_filter_vocab_headers(v) >> MQR_HDR_GROUPID) & 1;
  if (!names && !group) return;
  mqr_props_iter_t it;
  mqr_props_iter_init(&it, t.props, t.props_len);
  mqr_str_t key;
  mqr_value_t value;
  while (mqr_props_next(&it, &key, &value) == 1) fill_property(v, names, group, key, value);
}

void mqr__fill_send(void *ctx, mqr_filter_vocab_t *v) {
  const mqr__send_fill_t *f = ctx;
  const mqr__send_t *s = f->s;
  mqr_str_t address = f->address;
  size_t size = 0;
  if (mqr_filter_vocab_headers(v) & (1u << MQR_HDR_ADDRESS | 1u << MQR_HDR_SIZE)) {
    for (size_t i = 0; i + 1 < address.len; i++)
      if (address.ptr[i] == ':' && address.ptr[i + 1] == ':') {
        address.len = i; /* address::queue: the address */
        break;
      }
    size = mqr_message_stored_size(f->b->next_message_id + 1, address, f->tail_len);
  }
  if (s->tail) {
    fill_tail(v, s->tail, s->tail_len, address, s->durable, size);
    return;
  }
  const mqr_tail_t *t = s->made;
  fill_headers(v, t->priority, t->timestamp, t->expiration, t->user_id, address, s->durable, size);
  bool names = mqr_filter_vocab_names(v) != 0, group = (mqr_filter_vocab_headers(v) >> MQR_HDR_GROUPID) & 1;
  for (size_t i = 0; (names || group) && i < t->n; i++) fill_property(v, names, group, t->keys[i], t->values[i]);
}

const mqr_value_t *mqr__msg_values(mqr_broker_t *b, const mqr__msg_t *m, uint32_t *n) {
  mqr_filter_vocab_t *v = mqr_router_filter_vocab(&b->router); /* made when the selector was */
  mqr_stored_view_t sv;
  if (v == NULL) {
    static const mqr_value_t none[1];
    *n = 0;
    return none;
  }
  if (mqr_message_read_stored(m->data, m->len, &sv, NULL) == 0)
    fill_tail(v, sv.tail, sv.tail_len, sv.address, sv.durable, m->len);
  return mqr_filter_vocab_values(v, n);
}

void mqr__msg_values_clear(mqr_broker_t *b) {
  mqr_filter_vocab_t *v = mqr_router_filter_vocab(&b->router);
  if (v) mqr_filter_vocab_clear(v);
}
