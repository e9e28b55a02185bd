/* What comes back unacknowledged (its consumer went): Artemis's QueueImpl.checkRedelivery.
 *
 *   - A message whose delivery count has reached its address's max-delivery-attempts goes
 *     to the dead-letter address (move.c: its origin stamped on it, the address and a
 *     queue made first when auto-create-dead-letter-resources says so), or is dropped,
 *     with a warning, when there is none.
 *   - Otherwise, with a redelivery-delay, it waits redelivery-delay * multiplier^(count
 *     - 1) ms (at most max-redelivery-delay) out of the queue, then goes back to its head.
 *
 * The waiting entries are a min-heap by due time (uv_now), with one timer for the first. */
#include <math.h>
#include <stdio.h>

#include "durable.h"

/* What waits on the heap: an entry (a redelivery out of its delay, a scheduled message),
 * or a queue's or an address's event (no entry). */
enum { HELD_REDELIVERY, HELD_SCHEDULED, HELD_GATE, HELD_AUTO_DELETE_QUEUE, HELD_AUTO_DELETE_ADDRESS };

struct mqr__held_s {
  uint64_t due; /* uv_now ms */
  mqr__entry_t *e;
  mqr__bq_t *bq;
  uint8_t kind;
  char *address; /* HELD_AUTO_DELETE_ADDRESS: its name (a copy: it may go meanwhile) */
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

/* Sends e's message to the dead-letter address (move.c), logged with why; true when e is
 * done with. */
static bool dead_letter(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const char *why) {
  const mqr_address_settings_t *s = settings_of(bq);
  mqr__move_t to = {.why = why,
                    .address = s->dead_letter_address,
                    .auto_create = s->auto_create_dead_letter_resources,
                    .prefix = s->dead_letter_queue_prefix,
                    .suffix = s->dead_letter_queue_suffix};
  return mqr__move(b, bq, e, &to);
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
static bool hold(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, uint64_t delay, uint8_t kind, char *address) {
  if (b->n_held == b->cap_held) {
    uint32_t ncap = b->cap_held ? 2 * b->cap_held : 16;
    held_t *nh = mqr_realloc(b->held, ncap * sizeof *nh);
    if (nh == NULL) return false;
    b->held = nh;
    b->cap_held = ncap;
  }
  uv_update_time(b->loop); /* the loop's clock may be a pass old */
  b->held[b->n_held] = (held_t){uv_now(b->loop) + delay, e, bq, kind, address};
  sift_up(b->held, b->n_held++);
  if (kind == HELD_SCHEDULED)
    bq->scheduled++;
  else if (kind == HELD_REDELIVERY)
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
    switch (h.kind) {
    case HELD_GATE: /* a queue's delay before dispatch is out */
      mqr__gate_delay_out(h.bq);
      mqr__dispatch(h.bq);
      continue;
    case HELD_AUTO_DELETE_QUEUE: mqr__auto_delete_queue(b, h.bq, false); continue;
    case HELD_AUTO_DELETE_ADDRESS:
      mqr__auto_delete_address(b, mqr_str(h.address), false);
      mqr_free(h.address);
      continue;
    case HELD_SCHEDULED: h.bq->scheduled--; break;
    default: h.bq->held--; break;
    }
    /* Back at the head, as Artemis's ScheduledDeliveryHandler puts both kinds. */
    h.bq->store.ops->push_front(&h.bq->store, h.e);
    mqr__dispatch(h.bq); /* may send: the heap may change under it, and is read again */
  }
  if (b->n_held && !b->closing) uv_timer_start(&b->redeliver_timer, due_cb, b->held[0].due - now, 0);
}

/* e to the dead-letter address and done with (true), or kept (false: the move failed). */
static bool killed(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const char *why) {
  if (!dead_letter(b, bq, e, why)) return false;
  bq->killed++;
  bq->bytes -= e->msg->len;
  if (e->jbq) mqr__durable_removed(b, e);
  release(b, e);
  return true;
}

bool mqr__redeliver_dead(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const char *why) {
  mqr__bq_pin(bq); /* (the dead-letter send's callbacks may delete the queue) */
  if (!killed(b, bq, e, why)) bq->store.ops->push_front(&bq->store, e); /* kept: back at the head */
  return mqr__bq_unpin(b, bq);
}

bool mqr__redeliver_pinned(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *taken) {
  mqr__bq_pin(bq); /* (dead-letter sends' callbacks may delete the queue) */
  mqr__redeliver_run(b, bq, taken);
  return mqr__bq_unpin(b, bq);
}

void mqr__redeliver_run(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *taken) {
  while (taken) {
    mqr__entry_t *e = taken;
    taken = e->next;
    e->next = e->prev = NULL;
    const mqr_address_settings_t *s = settings_of(bq);
    if (exhausted(s, e)) {
      if (killed(b, bq, e, "reached max-delivery-attempts")) continue;
    } else {
      uint64_t delay = delay_of(s, e->delivery_count);
      if (hold(b, bq, e, delay, HELD_REDELIVERY, NULL)) {
        /* Journaled: a restart holds it too, until the same time. */
        if (e->jbq && b->dur) mqr__durable_held(b, e, mqr__wall_ms() + (int64_t)delay);
        continue;
      }
    }
    bq->store.ops->push_front(&bq->store, e); /* kept: back at the head (not in order: rare) */
  }
}

/* ---- scheduled messages ------------------------------------------------------------------- */

/* The message's schedule, read from its properties once (recovered and paged messages). */
static int64_t scheduled_of(mqr__msg_t *m) {
  if (m->scheduled >= 0) return m->scheduled;
  m->scheduled = 0;
  mqr_stored_view_t sv;
  mqr_tail_view_t t;
  if (mqr_message_read_stored(m->data, m->len, &sv, NULL) != 0 ||
      mqr_message_read_headers(sv.tail, sv.tail_len, &t, NULL) != 0)
    return 0;
  mqr_props_iter_t it;
  mqr_props_iter_init(&it, t.props, t.props_len);
  mqr_str_t k;
  mqr_value_t v;
  while (mqr_props_next(&it, &k, &v) == 1)
    if (mqr_str_eq(k, MQR_STR(MQR_PROP_SCHEDULED)))
      m->scheduled = v.type == MQR_VALUE_LONG ? v.u.l : v.type == MQR_VALUE_INT ? v.u.i : 0;
  return m->scheduled;
}

bool mqr__schedule(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  int64_t at = scheduled_of(e->msg);
  if (at <= 0) return false;
  int64_t now = mqr__wall_ms();
  /* One ms more: the clocks are read to the ms, and the delivery must not come early. */
  return at > now && hold(b, bq, e, (uint64_t)(at - now) + 1, HELD_SCHEDULED, NULL);
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

uint64_t mqr__redeliver_drop_queue(mqr_broker_t *b, mqr__bq_t *bq, bool journal, bool queue_goes) {
  uint32_t k = 0;
  uint64_t n = 0;
  for (uint32_t i = 0; i < b->n_held; i++) {
    if (b->held[i].bq != bq || b->held[i].kind == HELD_AUTO_DELETE_ADDRESS) {
      b->held[k++] = b->held[i];
      continue;
    }
    if (b->held[i].e == NULL) { /* a queue's event: kept by a purge, gone with its queue */
      if (!queue_goes) b->held[k++] = b->held[i];
      continue;
    }
    if (journal && b->held[i].e->jbq) mqr__durable_removed(b, b->held[i].e);
    bq->bytes -= b->held[i].e->msg->len;
    release(b, b->held[i].e);
    n++;
  }
  b->n_held = k;
  for (uint32_t i = k / 2; i-- > 0;) sift_down(b->held, b->n_held, i);
  bq->held = bq->scheduled = 0;
  return n;
}

void mqr__hold_gate(mqr_broker_t *b, mqr__bq_t *bq, uint64_t delay) { hold(b, bq, NULL, delay, HELD_GATE, NULL); }

int64_t mqr__held_until(mqr_broker_t *b, const mqr__entry_t *e) {
  for (uint32_t i = 0; i < b->n_held; i++)
    if (b->held[i].e == e && b->held[i].kind == HELD_REDELIVERY) {
      uv_update_time(b->loop);
      uint64_t now = uv_now(b->loop);
      return mqr__wall_ms() + (b->held[i].due > now ? (int64_t)(b->held[i].due - now) : 0);
    }
  return 0;
}

bool mqr__hold_redelivery(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, uint64_t delay) {
  return hold(b, bq, e, delay, HELD_REDELIVERY, NULL);
}

void mqr__hold_auto_delete(mqr_broker_t *b, mqr__bq_t *bq, mqr_str_t address, uint64_t delay) {
  char *name = NULL;
  if (bq == NULL && (name = mqr_malloc(address.len + 1)) != NULL) {
    memcpy(name, address.ptr, address.len);
    name[address.len] = 0;
  }
  if ((bq || name) && !hold(b, bq, NULL, delay, bq ? HELD_AUTO_DELETE_QUEUE : HELD_AUTO_DELETE_ADDRESS, name))
    mqr_free(name); /* no room: it stays (as it would without auto-delete) */
}

void mqr__redeliver_free(mqr_broker_t *b) {
  for (uint32_t i = 0; i < b->n_held; i++) {
    if (b->held[i].e) release(b, b->held[i].e);
    mqr_free(b->held[i].address);
  }
  mqr_free(b->held);
  b->held = NULL;
  b->n_held = b->cap_held = 0;
}
