/* Dispatch: a queue's waiting messages to its consumers, round-robin, within their
 * credit and while their heads say they are ready; the in-flight list and index of each
 * consumer; acknowledgements and credit. Protocol-neutral: a delivery goes through the
 * consumer's ops (core.h). */
#include "durable.h"

static void unlink_unacked(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->unacked_head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->unacked_tail = e->prev;
}

/* e (on a replicated queue) was delivered, and that delivery's count is not committed
 * yet: it waits, so that a new leader never delivers it with a lower count. */
static inline bool count_pending(mqr__bq_t *bq, const mqr__entry_t *e) {
  if (e->useq == 0) return false;
  mqr_broker_t *b = bq->consumers[0]->b; /* (called with consumers only) */
  return b->persist && b->persist->update_pending(b, bq, e->useq);
}

/* Whether c refused the message with this id for good. */
static bool refuses(const mqr_broker_consumer_t *c, int64_t id) {
  for (uint32_t i = 0; i < c->n_refused; i++)
    if (c->refused[i] == id) return true;
  return false;
}

static bool can_take(const mqr_broker_consumer_t *c, const mqr__entry_t *head) {
  return c->credit > 0 && !c->closing && c->ops->ready(c) && head->msg->id != c->too_big &&
         (c->n_refused == 0 || !refuses(c, head->msg->id));
}

/* Hands e, out of the store, to c (whose index has room): 0, or the head's refusal with
 * everything undone and e out of the store still. */
static int hand_over(mqr__bq_t *bq, mqr_broker_consumer_t *c, mqr__entry_t *e) {
  e->delivery = c->next_delivery++;
  e->delivery_count++;
  e->prev = c->unacked_tail;
  e->next = NULL;
  if (c->unacked_tail)
    c->unacked_tail->next = e;
  else
    c->unacked_head = e;
  c->unacked_tail = e;
  mqr__idx_put(c, e);
  c->credit--;
  bq->in_flight += !e->copy;
  /* The delivery count goes to the journal first: after a crash, the redelivery counts
   * this one. */
  if (e->jbq) mqr__durable_delivering(c->b, e);
  int rc = c->ops->deliver(c, e);
  if (rc != 0) {
    /* Nothing delivered. MQR_ENOMEM (no room to write it, or to decode it for the
     * callback): the next dispatch (a send, an ack, credit) tries again. MQR_ELIMIT (it
     * can never go to this consumer: longer than the max_frame its client declared,
     * say): the message is held for a consumer that can take it, and this one is told
     * once and skips it while it is at the head. */
    unlink_unacked(c, e);
    mqr__idx_del(c, e->delivery);
    c->next_delivery--;
    e->delivery_count--;
    if (e->jbq) mqr__durable_delivering(c->b, e);
    c->credit++;
    bq->in_flight -= !e->copy;
  }
  return rc;
}

/* The head's refusal for good: c skips e from now on. */
static void refused(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  c->too_big = e->msg->id;
  c->ops->refused(c, e);
}

/* An expired message is never delivered: true when e (out of the store) was, and went
 * (to the expiry address, or dropped); false: deliver it. */
static bool expire_now(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  if (mqr__msg_expiration(e->msg) == 0) return false; /* the clock is read only for one that may */
  int64_t now = mqr__wall_ms();
  if (!mqr__msg_expired(e->msg, now)) return false;
  if (mqr__expire(b, bq, e, now)) return true;
  return false; /* it could not go: delivered after all, as Artemis does when its move fails */
}

/* With consumer priorities: the consumer that takes a message, from the highest
 * priority level that has one that accepts it, round-robin within the level (Artemis's
 * consumer-priority: a lower level gets messages only when the higher ones have no credit
 * or decline them). */
typedef bool (*accept_fn)(mqr_broker_consumer_t *c, void *ctx);
static mqr_broker_consumer_t *by_priority(mqr__bq_t *bq, accept_fn ok, void *ctx) {
  uint32_t n = bq->n_consumers;
  for (uint32_t s = 0; s < n;) {
    uint32_t e = s + 1;
    while (e < n && bq->consumers[e]->priority == bq->consumers[s]->priority) e++;
    uint32_t len = e - s, start = bq->consumers[s]->level_rr % len;
    for (uint32_t k = 0; k < len; k++) {
      mqr_broker_consumer_t *c = bq->consumers[s + (start + k) % len];
      if (ok(c, ctx)) {
        bq->consumers[s]->level_rr = (start + k + 1) % len;
        return c;
      }
    }
    s = e;
  }
  return NULL;
}

static bool takes_head(mqr_broker_consumer_t *c, void *ctx) { return can_take(c, ctx); }

/* ---- non-destructive queues ----------------------------------------------------------------- */

void mqr__nd_removed(mqr__bq_t *bq, const mqr__entry_t *e) {
  for (uint32_t i = 0; i < bq->n_consumers; i++)
    if (bq->consumers[i]->nd_at == e) bq->consumers[i]->nd_at = e->prev;
}

/* Artemis's non-destructive queue: every consumer is given every message, in order, from
 * where it stands (a store entry; its removal moves it back), as a copy of the entry; the
 * message stays in the store, and its acknowledgement only ends the delivery. */
static void dispatch_nd(mqr__bq_t *bq) {
  if (bq->pcursors && bq->n_consumers) mqr__pager_fill(bq);
  for (uint32_t i = 0; i < bq->n_consumers; i++) {
    mqr_broker_consumer_t *c = bq->consumers[i];
    mqr_broker_t *b = c->b;
    for (;;) {
      mqr__entry_t *e = c->nd_at ? bq->store.ops->next(&bq->store, c->nd_at) : bq->store.ops->peek(&bq->store);
      if (e == NULL || !can_take(c, e)) break;
      if (mqr__msg_may_expire(e->msg) && mqr__msg_expired(e->msg, mqr__wall_ms())) {
        bq->store.ops->remove(&bq->store, e);         /* (its consumers' places move back) */
        if (!mqr__expire(b, bq, e, mqr__wall_ms())) { /* it could not go: it stays, tried again later */
          bq->store.ops->insert_before(&bq->store, e, c->nd_at ? c->nd_at->next : bq->store.head);
          break;
        }
        continue;
      }
      c->nd_at = e;
      if (c->selector) {
        uint32_t n;
        const mqr_value_t *v = mqr__msg_values(b, e->msg, &n);
        bool match = mqr_filter_matches(c->selector, v, n);
        mqr__msg_values_clear(b);
        if (!match) continue;
      }
      mqr__entry_t *copy = mqr__pool_take(&b->entries);
      if (copy == NULL || !mqr__idx_reserve(c)) {
        mqr__pool_put(&b->entries, copy);
        c->nd_at = e->prev; /* the next dispatch tries it again */
        return;
      }
      *copy = (mqr__entry_t){NULL, NULL, e->msg, 0, 0, 0, NULL, NULL, true, 0};
      e->msg->refs++;
      int rc = hand_over(bq, c, copy);
      if (rc != 0) {
        mqr__msg_release(b, copy->msg);
        mqr__pool_put(&b->entries, copy);
        if (rc == MQR_ELIMIT) {
          refused(c, e);
          continue; /* skipped, for this consumer */
        }
        c->nd_at = e->prev;
        bq->again = false;
        return;
      }
    }
  }
}

/* Consumers without selectors: the head of the queue to the next consumer round-robin
 * that can take it. */
static void dispatch_head(mqr__bq_t *bq) {
  for (;;) {
    /* A queue with paged messages reads them back as it runs low (pager.c). */
    if (bq->pcursors && bq->n_consumers) mqr__pager_fill(bq);
    if (!bq->store.depth || !bq->n_consumers) break;
    mqr_broker_consumer_t *c = NULL;
    const mqr__entry_t *head = bq->store.ops->peek(&bq->store);
    if (count_pending(bq, head)) break; /* (dispatched again once it commits) */
    if (bq->exclusive) bq->rr = 0;      /* the first consumer, alone */
    if (bq->priorities && !bq->exclusive)
      c = by_priority(bq, takes_head, (void *)head);
    else
      for (uint32_t k = 0; k < (bq->exclusive ? 1 : bq->n_consumers) && c == NULL; k++) {
        mqr_broker_consumer_t *cand = bq->consumers[(bq->rr + k) % bq->n_consumers];
        if (can_take(cand, head)) {
          c = cand;
          bq->rr = (bq->rr + k + 1) % bq->n_consumers;
        }
      }
    if (c == NULL || !mqr__idx_reserve(c)) break; /* no room to index it: the next dispatch tries */
    mqr__entry_t *e = bq->store.ops->pop(&bq->store);
    if (mqr__msg_may_expire(e->msg) && expire_now(c->b, bq, e)) continue;
    int rc = hand_over(bq, c, e);
    if (rc != 0) {
      bq->store.ops->push_front(&bq->store, e);
      if (rc == MQR_ELIMIT) {
        refused(c, e);
        continue;
      }
      bq->again = false;
      break;
    }
  }
}

/* Whether any consumer could take a message now. */
static bool any_ready(const mqr__bq_t *bq) {
  for (uint32_t k = 0; k < bq->n_consumers; k++) {
    const mqr_broker_consumer_t *c = bq->consumers[k];
    if (c->credit > 0 && !c->closing && c->ops->ready(c)) return true;
  }
  return false;
}

/* by_priority's test with selectors: the message's values read once, for the first. */
typedef struct {
  mqr_broker_t *b;
  const mqr__entry_t *e;
  const mqr_value_t *values;
  uint32_t n;
} selective_t;

static bool takes_selective(mqr_broker_consumer_t *c, void *ctx) {
  selective_t *x = ctx;
  if (!can_take(c, x->e)) return false;
  if (c->selector == NULL) return true;
  if (x->values == NULL) x->values = mqr__msg_values(x->b, x->e->msg, &x->n);
  return mqr_filter_matches(c->selector, x->values, x->n);
}

/* The consumer, round-robin, that takes e: one that can take it now and whose selector
 * (if any) matches it. The message's values are read once, for the first selector. */
static mqr_broker_consumer_t *pick_selective(mqr__bq_t *bq, const mqr__entry_t *e, bool *first) {
  mqr_broker_t *b = bq->consumers[0]->b;
  const mqr_value_t *values = NULL;
  uint32_t n = 0;
  mqr_broker_consumer_t *c = NULL;
  /* A group's message goes to its group's consumer, or waits for it. */
  mqr_str_t group = bq->grouping ? mqr__msg_group(e->msg) : mqr_str_n(NULL, 0);
  mqr_broker_consumer_t *owner = group.len ? mqr__group_owner(bq, group) : NULL;
  if (owner) {
    if (!can_take(owner, e)) return NULL;
    if (owner->selector) {
      values = mqr__msg_values(b, e->msg, &n);
      bool match = mqr_filter_matches(owner->selector, values, n);
      mqr__msg_values_clear(b);
      if (!match) return NULL;
    }
    return owner;
  }
  if (bq->exclusive) bq->rr = 0; /* the first consumer, alone */
  if (bq->priorities && !bq->exclusive) {
    selective_t x = {b, e, NULL, 0};
    c = by_priority(bq, takes_selective, &x);
    values = x.values;
  } else {
    for (uint32_t k = 0; k < (bq->exclusive ? 1 : bq->n_consumers) && c == NULL; k++) {
      mqr_broker_consumer_t *cand = bq->consumers[(bq->rr + k) % bq->n_consumers];
      if (!can_take(cand, e)) continue;
      if (cand->selector) {
        if (values == NULL) values = mqr__msg_values(b, e->msg, &n);
        if (!mqr_filter_matches(cand->selector, values, n)) continue;
      }
      c = cand;
      bq->rr = (bq->rr + k + 1) % bq->n_consumers;
    }
  }
  if (values) mqr__msg_values_clear(b);
  if (c && group.len) {
    mqr__group_assign(bq, group, c);
    *first = true; /* the first of its group this consumer gets */
  }
  return c;
}

/* Some consumers have selectors: a message no consumer matches stays where it is, and
 * those after it go on (Artemis's consumer filters). One walk from the head; it starts
 * again from the head when a delivery callback took entries out of the store. */
static void dispatch_selective(mqr__bq_t *bq) {
  if (bq->pcursors && bq->n_consumers) mqr__pager_fill(bq);
  mqr__entry_t *e = bq->store.ops->peek(&bq->store);
  while (e && bq->n_consumers && any_ready(bq)) {
    if (count_pending(bq, e)) break; /* (dispatched again once it commits; those after it wait, in order) */
    bool first = false;
    mqr_broker_consumer_t *c = pick_selective(bq, e, &first);
    mqr__entry_t *next = bq->store.ops->next(&bq->store, e);
    if (c == NULL) {
      e = next;
      continue;
    }
    if (!mqr__idx_reserve(c)) break;
    bq->store.ops->remove(&bq->store, e);
    if (mqr__msg_may_expire(e->msg) && expire_now(c->b, bq, e)) {
      e = bq->store.ops->peek(&bq->store); /* it may have sent: from the head again */
      continue;
    }
    uint64_t removals = bq->store.removals;
    if (first) c->group_first = mqr_queue_group_first_key(bq->q); /* empty without a key */
    int rc = hand_over(bq, c, e);
    c->group_first = mqr_str_n(NULL, 0);
    if (rc != 0) {
      bq->store.ops->insert_before(&bq->store, e, bq->store.removals == removals ? next : bq->store.head);
      if (rc == MQR_ELIMIT) {
        refused(c, e);
        continue; /* e again, for the others */
      }
      bq->again = false;
      break;
    }
    if (bq->store.removals != removals) next = bq->store.ops->peek(&bq->store);
    e = next;
  }
}

void mqr__dispatch(mqr__bq_t *bq) { (void)mqr__dispatch_gone(bq); }

bool mqr__dispatch_gone(mqr__bq_t *bq) {
  if (bq == NULL || bq->paused) return false;
  if (bq->dispatching) { /* a delivery callback acked or granted credit: go round again */
    bq->again = true;
    return false;
  }
  if (bq->consumers_before_dispatch > 0 && !mqr__gate(bq)) return false;
  bq->dispatching = true;
  do {
    bq->again = false;
    if (bq->store.nd)
      dispatch_nd(bq);
    else if (bq->n_selective || bq->grouping || bq->n_refusing)
      dispatch_selective(bq);
    else
      dispatch_head(bq);
  } while (bq->again);
  bq->dispatching = false;
  /* Consumers that went during the callbacks go now (the last of a temporary queue takes
   * the queue with it: then there is nothing more to look at). */
  for (uint32_t i = 0; i < bq->n_consumers; i++)
    if (bq->consumers[i]->closing) {
      if (mqr__consumer_close(bq->consumers[i])) return true;
      i = (uint32_t)-1; /* the array changed: from the start */
    }
  return false;
}

/* ---- acknowledgements and credit ------------------------------------------------------------ */

static void acked(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  mqr_broker_t *b = c->b;
  unlink_unacked(c, e);
  mqr__idx_del(c, e->delivery);
  if (!e->copy) { /* a non-destructive queue's delivery: its message stays */
    c->bq->acked++;
    c->bq->bytes -= e->msg->len;
    c->bq->in_flight--;
  }
  if (e->jbq) mqr__durable_removed(b, e);
  mqr__msg_release(b, e->msg);
  mqr__pool_put(&b->entries, e);
}

void mqr__consumer_forget_unacked(mqr_broker_consumer_t *c) {
  while (c->unacked_head) acked(c, c->unacked_head);
}

int mqr_broker_ack(mqr_broker_consumer_t *c, int64_t delivery, bool cumulative) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return MQR_ENOTFOUND;
  if (cumulative)
    while (c->unacked_head != e) acked(c, c->unacked_head);
  acked(c, e);
  return 0;
}

uint32_t mqr__consumer_ack(mqr_broker_consumer_t *c, int64_t delivery, bool cumulative) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return 0;
  uint32_t n = 1;
  if (cumulative)
    for (mqr__entry_t *x = c->unacked_head; x != e; x = x->next) n++;
  mqr_broker_ack(c, delivery, cumulative);
  return n;
}

int mqr__consumer_ack_answer(mqr_broker_consumer_t *k, mqr__producer_t *p, int64_t token, uint32_t n,
                             mqr_error_t *err) {
  mqr_broker_t *b = k->b;
  if (b->persist == NULL) return 0;
  mqr__send_t s;
  mqr__send_init(&s);
  s.producer = p;
  s.token = token;
  int rc = b->clustered && k->bq ? b->persist->acked(b, k->bq, &s, n, err) : 0;
  if (rc) return rc;
  mqr_broker_receipt_t r = {0, n, 0};
  return b->persist->answer(b, &s, 0, &r, NULL); /* (after the producer's earlier answers) */
}

void mqr__consumer_give_back(mqr_broker_consumer_t *c, mqr__entry_t *e, mqr__entry_t **taken) {
  mqr_broker_t *b = c->b;
  mqr__bq_t *bq = c->bq;
  unlink_unacked(c, e);
  mqr__idx_del(c, e->delivery);
  if (e->copy) { /* a non-destructive queue's: its message is still in the store */
    mqr__msg_release(b, e->msg);
    mqr__pool_put(&b->entries, e);
    return;
  }
  if (e->jbq && e->jbq->feed && mqr__feed_given_back(b, e)) return; /* (to the leader that fed it) */
  bq->in_flight--;
  if (mqr__redeliver_take(b, bq, e)) {
    e->next = *taken;
    *taken = e;
  } else if (!(bq->store.lvq && mqr__lvq_returned(b, bq, e))) {
    bq->store.ops->push_front(&bq->store, e);
  }
}

uint32_t mqr__consumer_nack(mqr_broker_consumer_t *c, int64_t delivery, bool cumulative) {
  mqr__entry_t *e = mqr__idx_find(c, delivery), *taken = NULL;
  if (e == NULL) return 0;
  mqr__bq_t *bq = c->bq;
  uint32_t n = 0;
  /* Newest first, so that each goes back in front of the one after it. */
  for (mqr__entry_t *x = e, *prev; x; x = prev, n++) {
    prev = cumulative ? x->prev : NULL;
    mqr__consumer_give_back(c, x, &taken);
  }
  if (taken && !mqr__redeliver_pinned(c->b, bq, taken)) return n;
  mqr__dispatch(bq);
  return n;
}

uint32_t mqr__consumer_reject(mqr_broker_consumer_t *c, int64_t delivery) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return 0;
  /* A non-destructive queue's copy has nothing to kill; a message fed from another node
   * is the leader's to count. */
  if (e->copy || (e->jbq && e->jbq->feed)) return mqr__consumer_nack(c, delivery, false);
  mqr__bq_t *bq = c->bq;
  unlink_unacked(c, e);
  mqr__idx_del(c, e->delivery);
  bq->in_flight--;
  if (mqr__redeliver_dead(c->b, bq, e, "was rejected by its consumer")) mqr__dispatch(bq);
  return 1;
}

uint32_t mqr__consumer_release(mqr_broker_consumer_t *c, int64_t delivery) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return 0;
  if (e->delivery_count > 0) e->delivery_count--; /* (a new leader may count it: higher, never lower) */
  c->credit = 0;                                  /* (it stops taking: not delivered straight back to it) */
  return mqr__consumer_nack(c, delivery, false);
}

uint32_t mqr__consumer_refuse(mqr_broker_consumer_t *c, int64_t delivery, bool counted) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return 0;
  /* (a non-destructive queue's consumer has gone past it; without memory, it is only given back) */
  if (!e->copy && !refuses(c, e->msg->id) &&
      (c->refused || (c->refused = mqr_malloc(MQR__REFUSED_MAX * sizeof *c->refused)) != NULL)) {
    if (c->n_refused == MQR__REFUSED_MAX) /* the oldest forgotten */
      memmove(c->refused, c->refused + 1, (MQR__REFUSED_MAX - 1) * sizeof *c->refused), c->n_refused--;
    else if (c->n_refused == 0)
      c->bq->n_refusing++; /* (the queue is walked past what it refused) */
    c->refused[c->n_refused++] = e->msg->id;
  }
  return counted ? mqr__consumer_nack(c, delivery, false) : mqr__consumer_release(c, delivery);
}

int64_t mqr__consumer_delivery_of(const mqr_broker_consumer_t *c, int64_t message_id) {
  for (const mqr__entry_t *e = c->unacked_head; e; e = e->next)
    if (e->msg->id == message_id) return e->delivery;
  return 0;
}

void mqr_broker_credit(mqr_broker_consumer_t *c, uint32_t n) {
  uint32_t max = c->b->opt.max_credit;
  c->credit = n > max - c->credit ? max : c->credit + n;
  if (c->bq->feed) mqr__feed_demand(c->bq); /* (fed from another node: it is asked for as much) */
  mqr__dispatch(c->bq);
}

void mqr__consumer_ready(mqr_broker_consumer_t *k) { mqr__dispatch(k->bq); }

void mqr__consumer_start(mqr_broker_consumer_t *k) { mqr__dispatch(k->bq); }
