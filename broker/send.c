/* doSend, the one send path of every protocol head: route, account the address's bytes
 * (max-size-bytes and address-full-policy), store the message once, enqueue it on every
 * queue it reached, dispatch. Allocates nothing once warm: the route writes into an
 * array kept for it, the message comes from its size class's free list, entries from a
 * pool, and a queue's and an address's state are made once, on first use. */
#include <stdio.h>

#include "../common/ascii.h"
#include "broker_int.h"

/* ---- doSend -------------------------------------------------------------------------------- */

/* A durable message to a durable queue, with a journal: its records go first, and it is
 * enqueued once they are durable. */
static bool journaled(const mqr_broker_t *b, const mqr__send_t *s, const mqr_route_result_t *res) {
  if (!s->durable || b->persist == NULL) return false;
  for (uint32_t i = 0; i < res->count; i++)
    if (mqr__queue_journaled(res->queues[i])) return true;
  return false;
}

static int send_routed(mqr_broker_t *b, struct mqr__routebuf_s *rb, const mqr__send_t *s, mqr_broker_receipt_t *r,
                       mqr__acct_t **blocked, mqr_error_t *err);

/* A send in progress has its level's route arrays (a send from a consumer's callback, or
 * a diverted copy, is one level deeper). Their queues, addresses and diverts stay in
 * memory until the outermost send is done, whatever the callbacks delete meanwhile
 * (mqr_router_hold): a deleted one is skipped. */
static int send_now(mqr_broker_t *b, const mqr__send_t *s, mqr_broker_receipt_t *r, mqr__acct_t **blocked,
                    mqr_error_t *err) {
  if (b->route_depth >= MQR__SEND_DEPTH)
    return mqr_error_set(err, MQR_ELIMIT, "sends nested more than %d deep (callbacks that send)", MQR__SEND_DEPTH);
  if (b->route_depth == 0) mqr_router_hold(&b->router);
  struct mqr__routebuf_s *rb = &b->route[b->route_depth++];
  int rc = send_routed(b, rb, s, r, blocked, err);
  if (--b->route_depth == 0) mqr_router_release(&b->router);
  return rc;
}

/* The route's queues that callbacks during the diverted copies' sends left. */
static void drop_removed(mqr_route_result_t *res) {
  uint32_t n = 0;
  if (mqr_address_removed(res->address)) {
    res->count = 0;
    return;
  }
  for (uint32_t i = 0; i < res->count; i++)
    if (!mqr_queue_removed(res->queues[i])) res->queues[n++] = res->queues[i];
  res->count = n;
}

static int send_routed(mqr_broker_t *b, struct mqr__routebuf_s *rb, const mqr__send_t *s, mqr_broker_receipt_t *r,
                       mqr__acct_t **blocked, mqr_error_t *err) {
  /* A listener's prefix, taken off once: it decides the routing type the router uses and
   * the message carries, as in Artemis. */
  mqr_str_t address = s->address;
  int eff = s->routing_type;
  mqr_prefixes_strip(s->prefixes, &address, &eff);
  /* Queue filters read the message's values only when the route meets one. */
  size_t tail_len = s->tail ? s->tail_len : mqr_message_tail_size(s->made);
  mqr__send_fill_t fill = {b, s, address, tail_len};
  int rc = s->who ? mqr__access_send(b, s, address, err) : 0; /* SEND, before anything is routed */
  if (rc) return rc;
  mqr_route_request_t req = {address, eff, s->duplicate_id, NULL, mqr__fill_send, &fill};
  mqr_route_result_t res = {rb->q, rb->cap, 0, 0, 0, 0, NULL, rb->d, rb->dcap, 0, 0};
  rc = mqr_router_route(&b->router, &req, &res, err);
  for (int grow = 0; rc == MQR_ENOSPC && grow < 2; grow++) { /* the topology grew: bigger arrays */
    if (res.needed > rb->cap) {
      uint32_t ncap = res.needed + 16;
      mqr_queue_t **t = mqr_realloc(rb->q, ncap * sizeof *t);
      if (t == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory routing a send");
      rb->q = t;
      rb->cap = ncap;
    }
    if (res.divert_needed > rb->dcap) {
      uint32_t ncap = res.divert_needed + 4;
      mqr_divert_t **d = mqr_realloc(rb->d, ncap * sizeof *d);
      if (d == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory routing a send");
      rb->d = d;
      rb->dcap = ncap;
    }
    res = (mqr_route_result_t){rb->q, rb->cap, 0, 0, 0, 0, NULL, rb->d, rb->dcap, 0, 0};
    rc = mqr_router_route(&b->router, &req, &res, err);
  }
  if (rc) return rc;
  if (r) *r = (mqr_broker_receipt_t){(int)res.status, 0, 0};
  int64_t id = 0;
  if (res.divert_count) { /* the copies first: their records come before this message's */
    id = ++b->next_message_id;
    uint64_t drops = b->queue_drops;
    mqr__divert_forward(b, s, &res, eff, id);
    if (b->queue_drops != drops || mqr_address_removed(res.address)) drop_removed(&res);
  }
  /* No queue here takes it: on a node that does not lead a replicated address's group,
   * the leader's may (subscriptions other nodes' consumers are fed from). */
  int unbound = 0;
  if (res.count == 0 && (!b->clustered || (unbound = b->persist->serves_address(b, res.address, err)) == 0)) return 0;

  mqr__acct_t *acct = mqr__acct_of(b, res.address);
  if (acct == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory routing a send");
  /* PAGE with persistence: once full, the address's messages go to its page files, in
   * order, until its queues have read them all back (pager.c). Without persistence PAGE
   * acts as BLOCK. */
  bool page = acct->policy == MQR_FULL_PAGE && b->persist && b->persist->page_wants(b, acct);
  if (!page && mqr__full(b, acct)) {
    mqr_str_t an = mqr_address_name(res.address);
    bool own = mqr__acct_over(acct);
    if (acct->policy == MQR_FULL_DROP) {
      b->stats.dropped++;
      if (r) r->status = MQR_RECEIPT_DROPPED;
      return 0;
    }
    if (acct->policy == MQR_FULL_FAIL || blocked == NULL)
      return own ? mqr_error_set(err, MQR_EFULL, "address '%.*s' is full (%lld of max-size-bytes %lld)", (int)an.len,
                                 an.ptr, (long long)acct->bytes, (long long)acct->max)
                 : mqr_error_set(err, MQR_EFULL,
                                 "the broker is full (%llu bytes of global-max-size %lld held): address '%.*s' refuses",
                                 (unsigned long long)b->stats.bytes, (long long)b->global_max, (int)an.len, an.ptr);
    if (!own) b->global_blocked = true;
    *blocked = acct; /* BLOCK: take this one, then the producer pauses */
  }

  /* The message, stored once: the Message frame's stored part, written into room for
   * its largest size (varints at their longest) and then measured. */
  mqr_str_t addr = mqr_address_name(res.address);
  /* The address's expiry delays may change the expiration it leaves with (the rare path:
   * the tail is written again). */
  mqr_tail_edit_t exp_edit = {NULL, NULL, 0, false, 0};
  mqr_tail_t made;
  const mqr_tail_t *src = s->made;
  if (acct->expiry_adjust) {
    int64_t was = 0;
    if (s->tail) {
      mqr_tail_view_t tv;
      if (mqr_message_read_headers(s->tail, s->tail_len, &tv, NULL) == 0) was = tv.expiration;
    } else {
      was = s->made->expiration;
    }
    int64_t now = mqr__wall_ms(), to = mqr__expiry_at_send(mqr_address_settings(res.address), was, now);
    if (to != was && s->tail) {
      exp_edit.set_expiration = true;
      exp_edit.expiration = to;
      tail_len = mqr_message_edit_tail_bound(s->tail_len, &exp_edit);
    } else if (to != was) {
      made = *s->made;
      made.expiration = to;
      src = &made;
      tail_len = mqr_message_tail_size(src);
    }
  }
  size_t bound = 10 + 10 + addr.len + 2 + tail_len;
  if (id == 0) id = ++b->next_message_id;
  mqr__msg_t *m = mqr__msg_alloc(b, bound);
  if (m == NULL) {
    if (bound > mqr__msg_class_size(MQR__MSG_CLASSES - 1))
      return mqr_error_set(err, MQR_ELIMIT, "a message of %zu bytes is more than the broker stores", bound);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory storing a message");
  }
  m->id = id;
  m->scheduled = s->scheduled;
  /* Its group, where its bytes will be: known for a SEND frame's tail stored as it is. */
  m->group_off = 0;
  m->group_len = s->group.len == 0 ? 0 : UINT32_MAX;
  if (s->group.len && s->tail && !exp_edit.set_expiration && (const uint8_t *)s->group.ptr >= s->tail &&
      (const uint8_t *)s->group.ptr < s->tail + s->tail_len) {
    m->group_off = (uint32_t)(mqr_message_stored_size(id, addr, 0) + (size_t)((const uint8_t *)s->group.ptr - s->tail));
    m->group_len = (uint32_t)s->group.len;
  }
  int rt = mqr_proto_rt_from_routing(eff);
  size_t len;
  if (exp_edit.set_expiration) {
    len = mqr_message_write_stored(m->data, id, addr, rt, s->durable, NULL, 0);
    size_t tl = 0;
    if (mqr_message_edit_tail(s->tail, s->tail_len, &exp_edit, m->data + len, &tl, NULL) != 0)
      tl = (size_t)(mqr_message_write_stored(m->data, id, addr, rt, s->durable, s->tail, s->tail_len) - len);
    len += tl;
  } else if (s->tail) {
    len = mqr_message_write_stored(m->data, id, addr, rt, s->durable, s->tail, s->tail_len);
  } else {
    len = mqr_message_write_stored(m->data, id, addr, rt, s->durable, NULL, 0);
    len += mqr_message_write_tail(m->data + len, src);
  }
  m->len = (uint32_t)len;
  b->stats.messages++; /* and back down in mqr__msg_release */
  b->stats.bytes += len;
  if (page) {
    if (r) {
      r->queues = res.count;
      r->message_id = id;
    }
    int prc = b->persist->page(b, acct, m, res.queues, res.count, s, r, s->durable, err);
    mqr__msg_release(b, (m->refs = 1, m)); /* the page record has its bytes */
    return prc;
  }
  if (journaled(b, s, &res)) { /* counted in its address now: it takes memory while it waits */
    m->acct = acct;
    acct->bytes += m->len;
    if (r) {
      r->queues = res.count;
      r->message_id = id;
    }
    return b->persist->send(b, m, res.queues, res.count, s, r, err);
  }

  if (b->clustered) { /* (a non-durable message to a replicated queue: only where it is served) */
    int refused = unbound ? unbound : b->persist->serves(b, res.queues, res.count, err);
    if (refused) {
      if (r) {
        r->queues = res.count;
        r->message_id = id;
      }
      m->refs = 1;
      return b->persist->forward(b, m, s, r, refused);
    }
  }
  uint32_t taken = 0;
  for (uint32_t i = 0; i < res.count; i++) {
    mqr__bq_t *bq = mqr__bq_of(b, res.queues[i]);
    mqr__entry_t *e = bq ? mqr__pool_take(&b->entries) : NULL;
    if (e == NULL) {
      if (m->refs == 0) mqr__msg_release(b, (m->refs = 1, m));
      return mqr_error_set(err, MQR_ENOMEM, "out of memory enqueueing a message (%u of %u queues took it)", taken,
                           res.count);
    }
    *e = (mqr__entry_t){NULL, NULL, m, 0, 0, 0, NULL, NULL, false, 0};
    m->refs++;
    mqr__enqueue(b, bq, e);
    bq->enqueued++;
    bq->bytes += m->len;
    taken++;
  }
  m->acct = acct;
  acct->bytes += m->len;
  if (r) {
    r->queues = taken;
    r->message_id = id;
  }
  for (uint32_t i = 0; i < res.count; i++) mqr__dispatch(mqr_queue_data(res.queues[i]));
  return 0;
}

int mqr__do_send(mqr_broker_t *b, const mqr__send_t *s, mqr_broker_receipt_t *r, mqr__acct_t **blocked,
                 mqr_error_t *err) {
  mqr_broker_receipt_t mine;
  if (r == NULL) r = &mine;
  mqr_error_t own;
  if (err == NULL) err = &own;
  int rc = send_now(b, s, r, blocked, err);
  if (rc == MQR__PENDING) return rc;
  /* An answer ready now waits for the same producer's earlier ones. */
  return s->producer && s->producer->pending && b->persist ? b->persist->answer(b, s, rc, r, err) : rc;
}

/* UTF-8; a short ASCII string (most keys and values) without a call */
static inline bool utf8(mqr_str_t s) {
  return (s.len <= 16 && mqr__ascii16(s.ptr, s.len)) || mqr_utf8_check(s.ptr, s.len) == s.len;
}

/* An in-process message, checked as a SEND frame is: its tail is made from t. */
int mqr__send_from_message(const mqr_broker_message_t *m, mqr_tail_t *t, mqr__send_t *s, mqr_error_t *err) {
  *t = (mqr_tail_t){m->priority,      m->timestamp,       m->expiration,   m->user_id,
                    m->property_keys, m->property_values, m->n_properties, m->body};
  mqr__send_init(s);
  s->address = m->address;
  s->routing_type = m->routing_type;
  s->durable = m->durable;
  s->duplicate_id = m->duplicate_id;
  s->made = t;
  if (m->priority < 0 || m->priority > MQR_PRIORITY_MAX)
    return mqr_error_set(err, MQR_EINVAL, "priority %d is not 0-%d", (int)m->priority, MQR_PRIORITY_MAX);
  if (!utf8(m->user_id)) return mqr_error_set(err, MQR_EINVAL, "the user id is not UTF-8");
  for (size_t i = 0; i < m->n_properties; i++) {
    const mqr_value_t *v = &m->property_values[i];
    if (!utf8(m->property_keys[i]) || (v->type == MQR_VALUE_STRING && !utf8(v->u.s)))
      return mqr_error_set(err, MQR_EINVAL, "property %zu: a string that is not UTF-8", i);
    if ((unsigned)v->type >= MQR_VALUE_TYPE_COUNT)
      return mqr_error_set(err, MQR_EINVAL, "property %zu: type %d out of range", i, (int)v->type);
    if (m->property_keys[i].len == sizeof MQR_PROP_SCHEDULED - 1 &&
        memcmp(m->property_keys[i].ptr, MQR_PROP_SCHEDULED, sizeof MQR_PROP_SCHEDULED - 1) == 0)
      s->scheduled = v->type == MQR_VALUE_LONG ? v->u.l : v->type == MQR_VALUE_INT ? v->u.i : 0;
    else if (m->property_keys[i].len == sizeof MQR_PROP_GROUP - 1 &&
             memcmp(m->property_keys[i].ptr, MQR_PROP_GROUP, sizeof MQR_PROP_GROUP - 1) == 0 &&
             v->type == MQR_VALUE_STRING)
      s->group = v->u.s;
  }
  return 0;
}

int mqr_broker_send(mqr_broker_t *b, const mqr_broker_message_t *m, mqr_broker_receipt_t *receipt, mqr_error_t *err) {
  mqr_tail_t t;
  mqr__send_t s;
  int rc = mqr__send_from_message(m, &t, &s, err);
  if (rc) return rc;
  rc = mqr__do_send(b, &s, receipt, NULL, err);
  return rc == MQR__PENDING ? 0 : rc;
}

void mqr_broker_send_async(mqr_broker_t *b, const mqr_broker_message_t *m, mqr_broker_sent_fn cb, void *arg) {
  mqr_tail_t t;
  mqr__send_t s;
  mqr_broker_receipt_t r = {0, 0, 0};
  mqr_error_t err;
  int rc = mqr__send_from_message(m, &t, &s, &err);
  s.producer = &b->inproc.producer;
  s.fn = cb;
  s.fn_arg = arg;
  /* A message refused here is answered in its turn, after earlier sends. */
  if (rc == 0)
    rc = mqr__do_send(b, &s, &r, NULL, &err);
  else if (s.producer->pending && b->persist)
    rc = b->persist->answer(b, &s, rc, &r, &err);
  if (rc != MQR__PENDING) cb(arg, rc, &r, rc ? &err : NULL);
}
