/* Expired messages, as Artemis's: a message whose expiration (ms since the epoch, set by
 * its sender or by the address's expiry delays at the send) has passed is never
 * delivered. Dispatch checks the message it is about to deliver; a scan of every queue
 * every expiry_scan_ms finds the others. An expired message goes to the expiry address
 * (move.c: _AMQ_ACTUAL_EXPIRY stamped, its expiration cleared), or is dropped. Nothing
 * of this runs on the send path but the expiry delays of an address that sets them. */
#include <time.h>

#include "durable.h"

int64_t mqr__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool mqr__msg_expired(mqr__msg_t *m, int64_t now) { return mqr__msg_expiration(m) != 0 && m->expiration <= now; }

int64_t mqr__msg_expiration(mqr__msg_t *m) {
  if (m->expiration < 0) { /* read once from its bytes */
    mqr_stored_view_t sv;
    mqr_tail_view_t t;
    m->expiration = 0;
    if (mqr_message_read_stored(m->data, m->len, &sv, NULL) == 0 &&
        mqr_message_read_headers(sv.tail, sv.tail_len, &t, NULL) == 0 && t.expiration > 0)
      m->expiration = t.expiration;
  }
  return m->expiration;
}

bool mqr__expire(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, int64_t now) {
  const mqr_address_settings_t *s = mqr_address_settings(mqr_queue_address(bq->q));
  mqr__move_t to = {.why = "expired",
                    .address = s->expiry_address,
                    .auto_create = s->auto_create_expiry_resources,
                    .prefix = s->expiry_queue_prefix,
                    .suffix = s->expiry_queue_suffix,
                    .expired = true,
                    .now = now};
  if (!mqr__move(b, bq, e, &to)) return false;
  bq->expired++;
  bq->bytes -= e->msg->len;
  if (e->jbq) mqr__durable_removed(b, e);
  mqr__msg_release(b, e->msg);
  mqr__pool_put(&b->entries, e);
  return true;
}

/* Artemis's PostOfficeImpl.applyExpiryDelay. */
int64_t mqr__expiry_at_send(const mqr_address_settings_t *s, int64_t expiration, int64_t now) {
  if (s->expiry_delay >= 0) return expiration == 0 ? now + s->expiry_delay : expiration;
  if (s->max_expiry_delay >= 0 && (expiration == 0 || expiration > now + s->max_expiry_delay))
    return now + s->max_expiry_delay;
  if (s->min_expiry_delay >= 0 && expiration != 0 && expiration < now + s->min_expiry_delay)
    return now + s->min_expiry_delay;
  return expiration;
}

/* ---- the scan ------------------------------------------------------------------------------ */

/* The expired entries of bq's store, taken out of it (linked by next, in queue order). */
static mqr__entry_t *take_expired(mqr__bq_t *bq, int64_t now) {
  mqr__entry_t *first = NULL, **last = &first;
  for (mqr__entry_t *e = bq->store.ops->peek(&bq->store), *next; e; e = next) {
    next = bq->store.ops->next(&bq->store, e);
    if (!mqr__msg_may_expire(e->msg) || !mqr__msg_expired(e->msg, now)) continue;
    bq->store.ops->remove(&bq->store, e);
    e->next = NULL;
    *last = e;
    last = &e->next;
  }
  return first;
}

static void scan_cb(uv_timer_t *t) {
  mqr_broker_t *b = t->data;
  int64_t now = mqr__wall_ms();
  for (mqr__bq_t *bq = b->queues, *next; bq; bq = next) {
    mqr__entry_t *list = take_expired(bq, now);
    mqr__bq_pin(bq); /* the sends' callbacks may delete it, or the next */
    while (list) {   /* each may send: to a queue of this list, even, which is walked no more */
      mqr__entry_t *e = list;
      list = e->next;
      e->next = NULL;
      if (!mqr__expire(b, bq, e, now)) bq->store.ops->push_front(&bq->store, e);
    }
    next = bq->next;
    mqr__bq_unpin(b, bq);
  }
}

void mqr__expiry_init(mqr_broker_t *b) {
  uv_timer_init(b->loop, &b->expiry_timer);
  b->expiry_timer.data = b;
  uint64_t period = b->opt.expiry_scan_ms                  ? b->opt.expiry_scan_ms
                    : mqr_config_expiry_scan_ms(b->config) ? mqr_config_expiry_scan_ms(b->config)
                                                           : 30000;
  uv_timer_start(&b->expiry_timer, scan_cb, period, period);
  uv_unref((uv_handle_t *)&b->expiry_timer); /* it keeps no loop alive on its own */
}

static void timer_closed(uv_handle_t *h) { mqr__broker_handle_closed(h->data); }

void mqr__expiry_close(mqr_broker_t *b) {
  uv_timer_stop(&b->expiry_timer);
  uv_close((uv_handle_t *)&b->expiry_timer, timer_closed);
}
