/* Queue kinds, as Artemis has them:
 *
 *   exclusive    one consumer at a time, the first, takes every message; when it goes,
 *                the next (dispatch.c reads bq->exclusive).
 *   ring         at most ring-size messages, waiting and in flight: a new one past it
 *                takes the place of the oldest waiting one, which is acknowledged
 *                (RingQueueImpl, AckReason.REPLACED).
 *   last-value   a message whose last-value property matches that of a waiting message
 *                takes its place in the queue, the older one acknowledged
 *                (LastValueQueue); a message that comes back from a consumer while a
 *                newer one with its key waits is acknowledged too.
 *
 * A last-value queue keeps its keys in an open-addressing table (linear probing, at most
 * half full) of key bytes -> the waiting entry that holds the key (NULL while none does);
 * the entry knows its slot (e->lv_slot), so that leaving the store clears it in O(1).
 * Keys stay when their holder goes, so a steady set of keys allocates nothing; the table
 * is rebuilt without the unheld keys when they fill it. */
#include <stdio.h>

#include "durable.h"

typedef struct {
  char *key; /* NULL: empty */
  uint32_t len;
  uint64_t hash;
  mqr__entry_t *holder; /* the waiting entry with this key; NULL: none now */
} lv_slot_t;

struct mqr__lvq_s {
  lv_slot_t *slots;
  uint32_t mask; /* slots - 1 */
  uint32_t used; /* slots with a key */
  mqr_str_t prop;
};

static uint64_t hash_of(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
  return h;
}

bool mqr__kinds_init(mqr__bq_t *bq) {
  bq->exclusive = mqr_queue_exclusive(bq->q);
  bq->ring_size = mqr_queue_ring_size(bq->q);
  mqr_str_t prop = mqr_queue_last_value_key(bq->q);
  if (prop.len == 0) return true;
  struct mqr__lvq_s *l = mqr_calloc(1, sizeof *l);
  if (l == NULL || (l->slots = mqr_calloc(16, sizeof *l->slots)) == NULL) {
    mqr_free(l);
    return false;
  }
  l->mask = 15;
  l->prop = prop; /* the router's copy: lives as long as the queue */
  bq->store.lvq = l;
  return true;
}

void mqr__kinds_free(mqr__bq_t *bq) {
  struct mqr__lvq_s *l = bq->store.lvq;
  if (l == NULL) return;
  for (uint32_t i = 0; i <= l->mask; i++) mqr_free(l->slots[i].key);
  mqr_free(l->slots);
  mqr_free(l);
  bq->store.lvq = NULL;
}

void mqr__lvq_left(struct mqr__lvq_s *l, mqr__entry_t *e) {
  if (l && e->lv_slot && e->lv_slot - 1 <= l->mask && l->slots[e->lv_slot - 1].holder == e)
    l->slots[e->lv_slot - 1].holder = NULL;
  e->lv_slot = 0;
}

/* The message's key: its last-value property, as bytes (a string's or bytes' own, with
 * the type first; a number or boolean as text). false: it has none. */
static bool key_of(const struct mqr__lvq_s *l, const mqr__msg_t *m, char *buf, size_t cap, mqr_str_t *key) {
  mqr_stored_view_t sv;
  mqr_tail_view_t t;
  if (mqr_message_read_stored(m->data, m->len, &sv, NULL) != 0 ||
      mqr_message_read_headers(sv.tail, sv.tail_len, &t, NULL) != 0)
    return false;
  mqr_props_iter_t it;
  mqr_props_iter_init(&it, t.props, t.props_len);
  mqr_str_t k;
  mqr_value_t v;
  while (mqr_props_next(&it, &k, &v) == 1) {
    if (!mqr_str_eq(k, l->prop) || v.type == MQR_VALUE_NULL) continue;
    buf[0] = (char)v.type;
    if (v.type == MQR_VALUE_STRING || v.type == MQR_VALUE_BYTES) {
      if (v.u.s.len + 1 > cap) return false; /* longer than a key may be: no key */
      memcpy(buf + 1, v.u.s.ptr, v.u.s.len);
      *key = mqr_str_n(buf, v.u.s.len + 1);
    } else {
      size_t n = mqr_value_format(&v, buf + 1, cap - 1);
      *key = mqr_str_n(buf, 1 + (n < cap - 1 ? n : cap - 2));
    }
    return true;
  }
  return false;
}

static uint32_t find(const struct mqr__lvq_s *l, mqr_str_t key, uint64_t h) {
  for (uint32_t i = (uint32_t)h & l->mask;; i = (i + 1) & l->mask) {
    const lv_slot_t *s = &l->slots[i];
    if (s->key == NULL || (s->hash == h && s->len == key.len && memcmp(s->key, key.ptr, key.len) == 0)) return i;
  }
}

/* Room for one more key: the table grown, or rebuilt without the keys nobody holds. The
 * holders' slot numbers follow. false: out of memory. */
static bool reserve(struct mqr__lvq_s *l) {
  if (2 * (l->used + 1) <= l->mask + 1) return true;
  uint32_t held = 0;
  for (uint32_t i = 0; i <= l->mask; i++) held += l->slots[i].holder != NULL;
  uint32_t n = l->mask + 1;
  while (2 * (held + 1) > n / 2) n *= 2; /* half full at most, after the rebuild too */
  lv_slot_t *ns = mqr_calloc(n, sizeof *ns);
  if (ns == NULL) return false;
  for (uint32_t i = 0; i <= l->mask; i++) {
    lv_slot_t *s = &l->slots[i];
    if (s->key == NULL) continue;
    if (s->holder == NULL) {
      mqr_free(s->key);
      continue;
    }
    uint32_t j = (uint32_t)s->hash & (n - 1);
    while (ns[j].key) j = (j + 1) & (n - 1);
    ns[j] = *s;
    s->holder->lv_slot = j + 1;
  }
  mqr_free(l->slots);
  l->slots = ns;
  l->mask = n - 1;
  l->used = held;
  return true;
}

/* e's message replaced old: old is acknowledged (AckReason.REPLACED). */
static void replaced(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *old) {
  bq->acked++;
  if (old->jbq) mqr__durable_removed(b, old);
  mqr__msg_release(b, old->msg);
  mqr__pool_put(&b->entries, old);
}

void mqr__lvq_push(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  struct mqr__lvq_s *l = bq->store.lvq;
  char buf[256];
  mqr_str_t key;
  e->lv_slot = 0;
  if (!key_of(l, e->msg, buf, sizeof buf, &key) || !reserve(l)) { /* no key (or no room): a plain message */
    bq->store.ops->push(&bq->store, e);
    return;
  }
  uint64_t h = hash_of(key.ptr, key.len);
  uint32_t i = find(l, key, h);
  lv_slot_t *s = &l->slots[i];
  if (s->key == NULL) {
    if ((s->key = mqr_malloc(key.len)) == NULL) {
      bq->store.ops->push(&bq->store, e);
      return;
    }
    memcpy(s->key, key.ptr, key.len);
    s->len = (uint32_t)key.len;
    s->hash = h;
    s->holder = NULL;
    l->used++;
  }
  mqr__entry_t *old = s->holder;
  if (old) { /* in its place */
    bq->store.ops->insert_before(&bq->store, e, old);
    bq->store.ops->remove(&bq->store, old); /* clears the slot */
    replaced(b, bq, old);
  } else {
    bq->store.ops->push(&bq->store, e);
  }
  s = &l->slots[i];
  s->holder = e;
  e->lv_slot = i + 1;
}

bool mqr__lvq_returned(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  struct mqr__lvq_s *l = bq->store.lvq;
  char buf[256];
  mqr_str_t key;
  e->lv_slot = 0;
  if (l == NULL || !key_of(l, e->msg, buf, sizeof buf, &key)) return false;
  uint32_t i = find(l, key, hash_of(key.ptr, key.len));
  if (l->slots[i].key && l->slots[i].holder) { /* a newer value waits: this one is done */
    replaced(b, bq, e);
    return true;
  }
  if (l->slots[i].key) { /* it holds its key again, at the head where it goes */
    l->slots[i].holder = e;
    e->lv_slot = i + 1;
  }
  return false;
}

void mqr__ring_trim(mqr_broker_t *b, mqr__bq_t *bq) {
  while (bq->store.depth && bq->store.depth + bq->in_flight > (uint64_t)bq->ring_size) {
    mqr__entry_t *old = bq->store.ops->pop(&bq->store);
    replaced(b, bq, old);
  }
}
