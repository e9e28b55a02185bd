/* Diverted copies (Artemis's DivertImpl.route): for each divert a route picked, and each
 * of its forwarding addresses, a new message made from the send's: its address the
 * forwarding address, its routing type as the divert says (STRIP: none, PASS: the
 * send's, or ANYCAST / MULTICAST), its expiration the send's as its address set it, and
 * its origin stamped on it (_AMQ_ORIG_ADDRESS, _AMQ_ORIG_MESSAGE_ID, _AMQ_ORIG_QUEUE the
 * divert's name; a copy of a copy keeps the first origin). An embedder's transformer may
 * change it or drop it. It is then sent as any send is (its address's diverts apply in
 * turn, up to MQR__DIVERT_DEPTH levels).
 *
 * Copies go before the send's own message is stored: their journal records come first
 * and the send's answer waits for theirs (they share its producer), so a receipt for a
 * durable send means its durable copies are durable too. A copy that cannot be sent is
 * logged; the send itself is not refused for it. The copy's tail is made in a buffer of
 * its level, kept: a diverted send allocates nothing once warm (a transformer's copy
 * aside, which is decoded into arrays of its level, also kept). */
#include <stdio.h>

#include "broker_int.h"

struct mqr__transformer_s {
  char *name;
  size_t len;
  mqr_broker_transform_fn fn;
  void *arg;
};

int mqr_broker_set_transformer(mqr_broker_t *b, mqr_str_t divert, mqr_broker_transform_fn fn, void *arg) {
  for (uint32_t i = 0; i < b->n_transformers; i++) {
    struct mqr__transformer_s *t = &b->transformers[i];
    if (t->len != divert.len || memcmp(t->name, divert.ptr, divert.len) != 0) continue;
    if (fn) {
      t->fn = fn;
      t->arg = arg;
    } else {
      mqr_free(t->name);
      *t = b->transformers[--b->n_transformers];
    }
    return 0;
  }
  if (fn == NULL) return 0;
  struct mqr__transformer_s *nt = mqr_realloc(b->transformers, (b->n_transformers + 1) * sizeof *nt);
  if (nt == NULL) return MQR_ENOMEM;
  b->transformers = nt;
  char *name = mqr_malloc(divert.len + 1);
  if (name == NULL) return MQR_ENOMEM;
  if (divert.len) memcpy(name, divert.ptr, divert.len);
  name[divert.len] = 0;
  nt[b->n_transformers++] = (struct mqr__transformer_s){name, divert.len, fn, arg};
  return 0;
}

static const struct mqr__transformer_s *transformer_of(const mqr_broker_t *b, mqr_str_t name) {
  for (uint32_t i = 0; i < b->n_transformers; i++)
    if (b->transformers[i].len == name.len && memcmp(b->transformers[i].name, name.ptr, name.len) == 0)
      return &b->transformers[i];
  return NULL;
}

void mqr__divert_free(mqr_broker_t *b) {
  for (uint32_t i = 0; i < b->n_transformers; i++) mqr_free(b->transformers[i].name);
  mqr_free(b->transformers);
  b->transformers = NULL;
  b->n_transformers = 0;
  for (uint32_t i = 0; i < MQR__SEND_DEPTH; i++) {
    struct mqr__routebuf_s *rb = &b->route[i];
    mqr_free(rb->q);
    mqr_free(rb->d);
    mqr_free(rb->copy);
    mqr_free(rb->made);
    mqr_free(rb->keys);
    mqr_free(rb->values);
    memset(rb, 0, sizeof *rb);
  }
}

static void copy_answered(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r;
  if (status)
    mqr__log(arg, MQR_LOG_WARN, "a diverted copy was not sent: %s", err ? err->message : mqr_strerror(status));
}

static bool room(void **p, size_t *cap, size_t need, size_t each) {
  if (need <= *cap) return true;
  size_t ncap = *cap ? *cap : 256 / each + 1;
  while (ncap < need) ncap *= 2;
  void *np = mqr_realloc(*p, ncap * each);
  if (np == NULL) return false;
  *p = np;
  *cap = ncap;
  return true;
}

static bool key_is(mqr_str_t k, const char *lit) { return k.len == strlen(lit) && memcmp(k.ptr, lit, k.len) == 0; }

/* The copy as an in-process message, for a transformer: its properties decoded into the
 * level's arrays. */
static int decode(struct mqr__routebuf_s *rb, const uint8_t *tail, size_t len, mqr_broker_message_t *m) {
  mqr_tail_view_t tv;
  if (mqr_message_read_tail(tail, len, &tv, NULL) != 0) return MQR_EBADDATA;
  mqr_props_iter_t it;
  mqr_str_t k;
  mqr_value_t v;
  size_t n = 0;
  int rc;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  while ((rc = mqr_props_next(&it, &k, &v)) == 1) n++;
  if (rc < 0) return rc;
  size_t kcap = rb->kv_cap, vcap = rb->kv_cap;
  if (!room((void **)&rb->keys, &kcap, n + 1, sizeof *rb->keys) ||
      !room((void **)&rb->values, &vcap, n + 1, sizeof *rb->values))
    return MQR_ENOMEM;
  rb->kv_cap = kcap < vcap ? kcap : vcap;
  n = 0;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  while (mqr_props_next(&it, &rb->keys[n], &rb->values[n]) == 1) n++;
  m->priority = tv.priority;
  m->timestamp = tv.timestamp;
  m->expiration = tv.expiration;
  m->user_id = tv.user_id;
  m->property_keys = rb->keys;
  m->property_values = rb->values;
  m->n_properties = n;
  m->body = tv.body;
  return 0;
}

/* A copy sent, one divert level deeper; a refusal is logged (the send goes on). */
static void send_copy(mqr_broker_t *b, const mqr_divert_t *d, const mqr__send_t *copy) {
  mqr_broker_receipt_t r;
  mqr_error_t err;
  b->divert_level++;
  int rc = mqr__do_send(b, copy, &r, NULL, &err);
  b->divert_level--;
  if (rc != 0 && rc != MQR__PENDING)
    mqr__log(b, MQR_LOG_WARN, "divert '%.*s': the copy to '%.*s' was not sent: %s", (int)mqr_divert_name(d).len,
             mqr_divert_name(d).ptr, (int)copy->address.len, copy->address.ptr, err.message);
}

/* A copy's send of s: to to as rt, answered to copy_answered. */
static void copy_of(mqr__send_t *copy, const mqr__send_t *s, mqr_str_t to, int rt, mqr_broker_t *b) {
  mqr__send_init(copy);
  copy->address = to;
  copy->routing_type = rt;
  copy->durable = s->durable;
  copy->duplicate_id = s->duplicate_id;
  copy->scheduled = s->scheduled;
  copy->group = s->group;
  copy->producer = s->producer;
  copy->fn = copy_answered;
  copy->fn_arg = b;
}

/* One copy to address `to`. */
static void forward(mqr_broker_t *b, const mqr__send_t *s, const mqr_divert_t *d, mqr_str_t to, int rt,
                    const uint8_t *tail, size_t tail_len, const mqr_tail_edit_t *edit) {
  struct mqr__routebuf_s *rb = &b->route[b->route_depth]; /* the copy's level */
  size_t need = mqr_message_edit_tail_bound(tail_len, edit), len = 0;
  mqr_error_t err;
  if (!room((void **)&rb->copy, &rb->copy_cap, need, 1)) {
    mqr__log(b, MQR_LOG_WARN, "divert '%.*s': out of memory copying a message", (int)mqr_divert_name(d).len,
             mqr_divert_name(d).ptr);
    return;
  }
  if (mqr_message_edit_tail(tail, tail_len, edit, rb->copy, &len, &err) != 0) return;
  mqr__send_t copy;
  copy_of(&copy, s, to, rt, b);
  copy.tail = rb->copy; /* the group is not in this tail: found again from the stored bytes */
  copy.tail_len = len;
  mqr_tail_t made;
  const struct mqr__transformer_s *tf = b->n_transformers ? transformer_of(b, mqr_divert_name(d)) : NULL;
  if (tf) {
    mqr_broker_message_t m = {
        .address = to, .routing_type = rt, .durable = s->durable, .duplicate_id = s->duplicate_id};
    if (decode(rb, rb->copy, len, &m) != 0) {
      mqr__log(b, MQR_LOG_WARN, "divert '%.*s': a copy that does not read", (int)mqr_divert_name(d).len,
               mqr_divert_name(d).ptr);
      return;
    }
    if (tf->fn(tf->arg, mqr_divert_name(d), &m) != 0) return; /* dropped by the transformer */
    mqr__send_t t;
    if (mqr__send_from_message(&m, &made, &t, &err) != 0) {
      mqr__log(b, MQR_LOG_WARN, "divert '%.*s': the transformer's copy is refused: %s", (int)mqr_divert_name(d).len,
               mqr_divert_name(d).ptr, err.message);
      return;
    }
    t.producer = copy.producer;
    t.fn = copy.fn;
    t.fn_arg = copy.fn_arg;
    copy = t;
  }
  send_copy(b, d, &copy);
}

/* An in-process send's copy, made as an in-process message: its properties and the
 * origin's (set over ones of the same name) in the arrays of the copy's level, no tail
 * written and read again. */
static void forward_made(mqr_broker_t *b, const mqr__send_t *s, const mqr_divert_t *d, mqr_str_t to, int rt,
                         const mqr_tail_edit_t *edit) {
  struct mqr__routebuf_s *rb = &b->route[b->route_depth]; /* the copy's level */
  const mqr_tail_t *t = s->made;
  size_t kcap = rb->kv_cap, vcap = rb->kv_cap;
  if (!room((void **)&rb->keys, &kcap, t->n + edit->n, sizeof *rb->keys) ||
      !room((void **)&rb->values, &vcap, t->n + edit->n, sizeof *rb->values)) {
    mqr__log(b, MQR_LOG_WARN, "divert '%.*s': out of memory copying a message", (int)mqr_divert_name(d).len,
             mqr_divert_name(d).ptr);
    return;
  }
  rb->kv_cap = kcap < vcap ? kcap : vcap;
  size_t n = t->n;
  if (n) {
    memcpy(rb->keys, t->keys, n * sizeof *rb->keys);
    memcpy(rb->values, t->values, n * sizeof *rb->values);
  }
  for (size_t e = 0; e < edit->n; e++) {
    size_t i = 0;
    while (i < n && !mqr_str_eq(rb->keys[i], edit->keys[e])) i++;
    rb->keys[i] = edit->keys[e];
    rb->values[i] = edit->values[e];
    if (i == n) n++;
  }
  mqr_tail_t made = *t;
  made.keys = rb->keys;
  made.values = rb->values;
  made.n = n;
  if (edit->set_expiration) made.expiration = edit->expiration;
  mqr__send_t copy;
  copy_of(&copy, s, to, rt, b);
  copy.made = &made;
  send_copy(b, d, &copy);
}

static bool expiry_adjusts(const mqr_address_settings_t *st) {
  return st->expiry_delay >= 0 || st->min_expiry_delay >= 0 || st->max_expiry_delay >= 0;
}

void mqr__divert_forward(mqr_broker_t *b, const mqr__send_t *s, const mqr_route_result_t *res, int routing_type,
                         int64_t id) {
  if (b->divert_level >= MQR__DIVERT_DEPTH || b->route_depth >= MQR__SEND_DEPTH) {
    mqr__log(b, MQR_LOG_WARN, "diverts chained deeper than %d levels at '%.*s': no further copies", MQR__DIVERT_DEPTH,
             (int)mqr_address_name(res->address).len, mqr_address_name(res->address).ptr);
    return;
  }
  /* Its origin (the first one, when it is a copy already) and its expiration. */
  bool keep_origin = false, keep_queue = false;
  int64_t expiration;
  const uint8_t *tail = s->tail;
  size_t tail_len = s->tail_len;
  if (tail) {
    mqr_tail_view_t tv;
    if (mqr_message_read_headers(tail, tail_len, &tv, NULL) != 0) return;
    mqr_props_iter_t it;
    mqr_str_t k;
    mqr_value_t v;
    mqr_props_iter_init(&it, tv.props, tv.props_len);
    while (mqr_props_next(&it, &k, &v) == 1) {
      keep_origin |= key_is(k, "_AMQ_ORIG_MESSAGE_ID");
      keep_queue |= key_is(k, "_AMQ_ORIG_QUEUE");
    }
    expiration = tv.expiration;
  } else {
    for (size_t i = 0; i < s->made->n; i++) {
      keep_origin |= key_is(s->made->keys[i], "_AMQ_ORIG_MESSAGE_ID");
      keep_queue |= key_is(s->made->keys[i], "_AMQ_ORIG_QUEUE");
    }
    expiration = s->made->expiration;
  }
  mqr_str_t keys[3] = {MQR_STR("_AMQ_ORIG_ADDRESS"), MQR_STR("_AMQ_ORIG_MESSAGE_ID"), MQR_STR("_AMQ_ORIG_QUEUE")};
  mqr_value_t values[3] = {mqr_value_string(mqr_address_name(res->address)), mqr_value_long(id),
                           mqr_value_string(mqr_str_n(NULL, 0))};
  mqr_tail_edit_t edit = {keep_origin ? keys + 2 : keys, keep_origin ? values + 2 : values,
                          (keep_origin ? 0 : 2) + (keep_queue ? 0 : 1), false, 0};
  /* Its expiration as its address set it (expiry-delay and the bounds). */
  const mqr_address_settings_t *st = mqr_address_settings(res->address);
  if (expiry_adjusts(st)) {
    int64_t exp = mqr__expiry_at_send(st, expiration, mqr__wall_ms());
    if (exp != expiration) edit.set_expiration = true, edit.expiration = exp;
  }
  for (uint32_t i = 0; i < res->divert_count; i++) {
    const mqr_divert_t *d = res->diverts[i];
    if (mqr_divert_removed(d)) continue; /* by a callback of an earlier copy */
    values[2] = mqr_value_string(mqr_divert_name(d));
    int rt = MQR_ROUTING_NONE;
    switch (mqr_divert_routing_type(d)) {
    case MQR_DIVERT_PASS: rt = routing_type; break;
    case MQR_DIVERT_ANYCAST: rt = MQR_ANYCAST; break;
    case MQR_DIVERT_MULTICAST: rt = MQR_MULTICAST; break;
    default: break;
    }
    bool transformed = b->n_transformers && transformer_of(b, mqr_divert_name(d));
    if (tail == NULL && transformed) {
      /* The send's tail, written once for the transformer's path (not in this level's
       * copy buffer: a transformer's copy being sent has views into it). */
      struct mqr__routebuf_s *own = &b->route[b->route_depth - 1];
      tail_len = mqr_message_tail_size(s->made);
      if (!room((void **)&own->made, &own->made_cap, tail_len, 1)) {
        mqr__log(b, MQR_LOG_WARN, "out of memory copying a diverted message");
        return;
      }
      tail_len = mqr_message_write_tail(own->made, s->made);
      tail = own->made;
    }
    for (uint32_t f = 0; f < mqr_divert_forward_count(d) && !mqr_divert_removed(d); f++) {
      if (tail == NULL)
        forward_made(b, s, d, mqr_divert_forward(d, f), rt, &edit);
      else
        forward(b, s, d, mqr_divert_forward(d, f), rt, tail, tail_len, &edit);
    }
  }
}
