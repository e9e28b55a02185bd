/* What comes back unacknowledged (its consumer went): Artemis's QueueImpl.checkRedelivery.
 *
 *   - A message whose delivery count has reached its address's max-delivery-attempts goes
 *     to the dead-letter address, as a new message with _AMQ_ORIG_ADDRESS,
 *     _AMQ_ORIG_QUEUE, _AMQ_ORIG_ROUTING_TYPE and _AMQ_ORIG_MESSAGE_ID set, routed as a
 *     send with no routing type; the dead-letter address and a queue for the original
 *     address are made first when auto-create-dead-letter-resources says so. Without a
 *     dead-letter address (or with one that does not exist and is not to be made) the
 *     message is dropped, with a warning.
 *   - Otherwise, with a redelivery-delay, it waits redelivery-delay * multiplier^(count
 *     - 1) ms (at most max-redelivery-delay) out of the queue, then goes back to its head.
 *
 * The waiting entries are a min-heap by due time (uv_now), with one timer for the first. */
#include <math.h>
#include <stdio.h>

#include "durable.h"

struct mqr__held_s {
  uint64_t due;
  mqr__entry_t *e;
  mqr__bq_t *bq;
};
typedef struct mqr__held_s held_t;

static const mqr_address_settings_t *settings_of(const mqr__bq_t *bq) {
  return mqr_address_settings(mqr_queue_address(bq->q));
}

static bool exhausted(const mqr_address_settings_t *s, const mqr__entry_t *e) {
  return s->max_delivery_attempts > 0 && e->delivery_count >= s->max_delivery_attempts;
}

bool mqr__redeliver_take(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  if (b->closing) return false; /* the broker going is no failure of the message's */
  const mqr_address_settings_t *s = settings_of(bq);
  return exhausted(s, e) || s->redelivery_delay > 0;
}

/* ---- the heap of entries waiting out their delay ---------------------------------------- */

static void swap(held_t *h, uint32_t i, uint32_t j) {
  held_t t = h[i];
  h[i] = h[j];
  h[j] = t;
}

static void sift_up(held_t *h, uint32_t i) {
  while (i > 0 && h[(i - 1) / 2].due > h[i].due) {
    swap(h, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static void sift_down(held_t *h, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && h[l].due < h[m].due) m = l;
    if (r < n && h[r].due < h[m].due) m = r;
    if (m == i) return;
    swap(h, i, m);
    i = m;
  }
}

static void release(mqr_broker_t *b, mqr__entry_t *e) {
  mqr__msg_release(b, e->msg);
  mqr__pool_put(&b->entries, e);
}

/* ---- dead letters ------------------------------------------------------------------------- */

/* The queue for messages of address orig on the dead-letter address: made (with the
 * address, MULTICAST) when missing. Its filter picks orig's messages, as Artemis's. */
static void make_dead_letter_resources(mqr_broker_t *b, const mqr_address_settings_t *s, mqr_str_t orig) {
  mqr_router_t *r = &b->router;
  mqr_str_t dla = s->dead_letter_address;
  if (mqr_router_find_address(r, dla) == NULL &&
      mqr_router_add_address(r, dla, mqr_routing_set_of(MQR_MULTICAST), MQR_ADDRESS_AUTO_CREATED, NULL, NULL) != 0)
    return;
  size_t nlen = s->dead_letter_queue_prefix.len + orig.len + s->dead_letter_queue_suffix.len;
  char *name = mqr_malloc(nlen + 1), *filter = mqr_malloc(2 * orig.len + 32);
  if (name && filter) {
    memcpy(name, s->dead_letter_queue_prefix.ptr, s->dead_letter_queue_prefix.len);
    memcpy(name + s->dead_letter_queue_prefix.len, orig.ptr, orig.len);
    memcpy(name + s->dead_letter_queue_prefix.len + orig.len, s->dead_letter_queue_suffix.ptr,
           s->dead_letter_queue_suffix.len);
    size_t f = (size_t)snprintf(filter, 32, "_AMQ_ORIG_ADDRESS = '");
    for (size_t i = 0; i < orig.len; i++) { /* a quote in a literal is doubled */
      if (orig.ptr[i] == '\'') filter[f++] = '\'';
      filter[f++] = orig.ptr[i];
    }
    filter[f++] = '\'';
    if (mqr_router_find_queue(r, mqr_str_n(name, nlen)) == NULL) {
      mqr_queue_config_t cfg;
      mqr_queue_config_init(&cfg, mqr_str_n(name, nlen), dla, MQR_MULTICAST);
      cfg.filter = mqr_str_n(filter, f);
      cfg.auto_created = true;
      cfg.auto_create_address = true;
      mqr_error_t err;
      if (mqr_router_add_queue(r, &cfg, NULL, &err) != 0)
        mqr__log(b, MQR_LOG_WARN, "dead-letter queue '%.*s' on '%.*s' not made: %s", (int)nlen, name, (int)dla.len,
                 dla.ptr, err.message);
    }
  }
  mqr_free(name);
  mqr_free(filter);
}

/* Sends e's message to the dead-letter address; true when e is done with (sent, or
 * dropped for want of a dead-letter address), false when it must go back to its queue
 * (the send failed: no memory, or the journal cannot write). */
static bool dead_letter(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  const mqr_address_settings_t *s = settings_of(bq);
  mqr_str_t qn = mqr_queue_name(bq->q);
  mqr_stored_view_t sv;
  if (mqr_message_read_stored(e->msg->data, e->msg->len, &sv, NULL) != 0) return true; /* cannot be: dropped */
  mqr_str_t dla = s->dead_letter_address;
  if (dla.len && s->auto_create_dead_letter_resources) make_dead_letter_resources(b, s, sv.address);
  if (dla.len == 0 || mqr_router_find_address(&b->router, dla) == NULL) {
    mqr__log(b, MQR_LOG_WARN, "message %lld on queue '%.*s' reached max-delivery-attempts (%d) and is dropped: %s",
             (long long)sv.message_id, (int)qn.len, qn.ptr, s->max_delivery_attempts,
             dla.len ? "its dead-letter address does not exist" : "no dead-letter-address is set");
    return true;
  }
  static const mqr_str_t keys[4] = {MQR_STR("_AMQ_ORIG_ADDRESS"), MQR_STR("_AMQ_ORIG_QUEUE"),
                                    MQR_STR("_AMQ_ORIG_ROUTING_TYPE"), MQR_STR("_AMQ_ORIG_MESSAGE_ID")};
  int rt = mqr_proto_rt_to_routing(sv.routing_type);
  mqr_value_t values[4] = {mqr_value_string(sv.address), mqr_value_string(qn), mqr_value_int(rt),
                           mqr_value_long(sv.message_id)};
  mqr_tail_edit_t edit = {keys, values, rt == MQR_ROUTING_NONE ? 2 : 4, false, 0};
  if (rt == MQR_ROUTING_NONE) { /* no routing type to stamp: the id takes its place */
    values[2] = values[3];
    static const mqr_str_t keys3[3] = {MQR_STR("_AMQ_ORIG_ADDRESS"), MQR_STR("_AMQ_ORIG_QUEUE"),
                                       MQR_STR("_AMQ_ORIG_MESSAGE_ID")};
    edit.keys = keys3;
    edit.n = 3;
  }
  size_t cap = mqr_message_edit_tail_bound(sv.tail_len, &edit), len = 0;
  uint8_t *tail = mqr_malloc(cap);
  mqr_error_t err;
  int rc = tail ? mqr_message_edit_tail(sv.tail, sv.tail_len, &edit, tail, &len, &err) : MQR_ENOMEM;
  if (rc == 0) {
    mqr__send_t send = {
        .address = dla, .routing_type = MQR_ROUTING_NONE, .durable = sv.durable, .tail = tail, .tail_len = len};
    mqr_broker_receipt_t r;
    rc = mqr__do_send(b, &send, &r, NULL, &err); /* the message is copied: tail may go */
    if (rc == MQR__PENDING) rc = 0;
    if (rc == 0 && r.queues == 0)
      mqr__log(b, MQR_LOG_WARN,
               "message %lld from queue '%.*s' went to dead-letter address '%.*s', which no queue took",
               (long long)sv.message_id, (int)qn.len, qn.ptr, (int)dla.len, dla.ptr);
  }
  mqr_free(tail);
  if (rc != 0) {
    mqr__log(b, MQR_LOG_WARN, "message %lld on queue '%.*s' could not go to dead-letter address '%.*s' (%s): kept",
             (long long)sv.message_id, (int)qn.len, qn.ptr, (int)dla.len, dla.ptr, mqr_err_name(rc));
    return false;
  }
  return true;
}

/* ---- redelivery delays ---------------------------------------------------------------------- */

static uint64_t delay_of(const mqr_address_settings_t *s, int32_t count) {
  double d = (double)s->redelivery_delay * pow(s->redelivery_multiplier, count > 0 ? count - 1 : 0);
  double max = (double)s->max_redelivery_delay;
  if (max > 0 && d > max) d = max;
  return d >= 9e15 ? (uint64_t)9e15 : (uint64_t)d;
}

static void due_cb(uv_timer_t *t);

/* Holds e until its delay is out; false when there is no room to (it goes back now). */
static bool hold(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, uint64_t delay) {
  if (b->n_held == b->cap_held) {
    uint32_t ncap = b->cap_held ? 2 * b->cap_held : 16;
    held_t *nh = mqr_realloc(b->held, ncap * sizeof *nh);
    if (nh == NULL) return false;
    b->held = nh;
    b->cap_held = ncap;
  }
  uv_update_time(b->loop); /* the loop's clock may be a pass old */
  b->held[b->n_held] = (held_t){uv_now(b->loop) + delay, e, bq};
  sift_up(b->held, b->n_held++);
  bq->held++;
  if (!b->closing) uv_timer_start(&b->redeliver_timer, due_cb, b->held[0].due - uv_now(b->loop), 0);
  return true;
}

static void due_cb(uv_timer_t *t) {
  mqr_broker_t *b = t->data;
  uint64_t now = uv_now(b->loop);
  while (b->n_held && b->held[0].due <= now) {
    held_t h = b->held[0];
    b->held[0] = b->held[--b->n_held];
    sift_down(b->held, b->n_held, 0);
    h.bq->held--;
    h.bq->store.ops->push_front(&h.bq->store, h.e);
    mqr__dispatch(h.bq); /* may send: the heap may change under it, and is read again */
  }
  if (b->n_held && !b->closing) uv_timer_start(&b->redeliver_timer, due_cb, b->held[0].due - now, 0);
}

void mqr__redeliver_run(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *taken) {
  while (taken) {
    mqr__entry_t *e = taken;
    taken = e->next;
    e->next = e->prev = NULL;
    const mqr_address_settings_t *s = settings_of(bq);
    if (exhausted(s, e)) {
      if (dead_letter(b, bq, e)) {
        bq->killed++;
        if (e->jbq) mqr__durable_removed(b, e);
        release(b, e);
        continue;
      }
    } else if (hold(b, bq, e, delay_of(s, e->delivery_count))) {
      continue;
    }
    bq->store.ops->push_front(&bq->store, e); /* kept: back at the head (not in order: rare) */
  }
}

/* ---- life ------------------------------------------------------------------------------------ */

void mqr__redeliver_init(mqr_broker_t *b) {
  uv_timer_init(b->loop, &b->redeliver_timer);
  b->redeliver_timer.data = b;
}

static void timer_closed(uv_handle_t *h) { mqr__broker_handle_closed(((mqr_broker_t *)h->data)); }

void mqr__redeliver_close(mqr_broker_t *b) {
  uv_timer_stop(&b->redeliver_timer);
  uv_close((uv_handle_t *)&b->redeliver_timer, timer_closed);
}

uint64_t mqr__redeliver_drop_queue(mqr_broker_t *b, mqr__bq_t *bq, bool journal) {
  uint32_t k = 0;
  uint64_t n = 0;
  for (uint32_t i = 0; i < b->n_held; i++) {
    if (b->held[i].bq != bq) {
      b->held[k++] = b->held[i];
      continue;
    }
    if (journal && b->held[i].e->jbq) mqr__durable_removed(b, b->held[i].e);
    release(b, b->held[i].e);
    n++;
  }
  b->n_held = k;
  for (uint32_t i = k / 2; i-- > 0;) sift_down(b->held, b->n_held, i);
  bq->held = 0;
  return n;
}

void mqr__redeliver_free(mqr_broker_t *b) {
  for (uint32_t i = 0; i < b->n_held; i++) release(b, b->held[i].e);
  mqr_free(b->held);
  b->held = NULL;
  b->n_held = b->cap_held = 0;
}
