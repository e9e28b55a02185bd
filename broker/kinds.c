/* Queue kinds, as Artemis has them:
 *
 *   exclusive    one consumer at a time, the first, takes every message; when it goes,
 *                the next (dispatch.c reads bq->exclusive).
 *   ring         at most ring-size messages, waiting and in flight: a new one past it
 *                takes the place of the oldest waiting one, which is acknowledged
 *                (RingQueueImpl, AckReason.REPLACED).
 *   groups       the messages of one group (_AMQ_GROUP_ID) go to one consumer, the one
 *                the group's first message went to, while it is there (Artemis's message
 *                grouping): a group, or with group-buckets its bucket, maps to its
 *                consumer; a consumer going frees its groups; with group-rebalance a
 *                consumer coming frees them all; group-buckets 0 turns groups off.
 *   consumers-before-dispatch (and delay-before-dispatch): nothing is dispatched until
 *                that many consumers are there, or the delay after the first is out
 *                (QueueImpl.canDispatch); with no consumer left, it waits again.
 *   last-value   a message whose last-value property matches that of a waiting message
 *                takes its place in the queue, the older one acknowledged
 *                (LastValueQueue); a message that comes back from a consumer while a
 *                newer one with its key waits is acknowledged too.
 *
 * A last-value queue keeps its keys in a map (strmap.c) of key bytes -> the waiting entry
 * that holds the key; the entry knows its slot (e->lv_slot), so that leaving the store
 * clears it in O(1), and a steady set of keys allocates nothing. */
#include <stdio.h>

#include "durable.h"

struct mqr__lvq_s {
  mqr__smap_t keys; /* key bytes -> the waiting entry holding it */
  mqr_str_t prop;
};

bool mqr__kinds_init(mqr__bq_t *bq) {
  bq->exclusive = mqr_queue_exclusive(bq->q);
  bq->ring_size = mqr_queue_ring_size(bq->q);
  bq->group_buckets = mqr_queue_group_buckets(bq->q);
  bq->group_rebalance = mqr_queue_group_rebalance(bq->q);
  bq->consumers_before_dispatch = mqr_queue_consumers_before_dispatch(bq->q);
  bq->delay_before_dispatch = mqr_queue_delay_before_dispatch(bq->q);
  bq->gate_open = bq->consumers_before_dispatch <= 0;
  if (mqr_queue_non_destructive(bq->q)) bq->store.nd = bq;
  mqr_str_t prop = mqr_queue_last_value_key(bq->q);
  if (prop.len == 0) return true;
  struct mqr__lvq_s *l = mqr_calloc(1, sizeof *l);
  if (l == NULL || !mqr__smap_init(&l->keys)) {
    mqr_free(l);
    return false;
  }
  l->prop = prop; /* the router's copy: lives as long as the queue */
  bq->store.lvq = l;
  return true;
}

void mqr__kinds_free(mqr__bq_t *bq) {
  mqr__smap_free(&bq->groups);
  struct mqr__lvq_s *l = bq->store.lvq;
  if (l == NULL) return;
  mqr__smap_free(&l->keys);
  mqr_free(l);
  bq->store.lvq = NULL;
}

void mqr__lvq_left(struct mqr__lvq_s *l, mqr__entry_t *e) {
  if (l && e->lv_slot && e->lv_slot - 1 <= l->keys.mask && l->keys.slots[e->lv_slot - 1].val == e)
    l->keys.slots[e->lv_slot - 1].val = NULL;
  e->lv_slot = 0;
}

static void moved(void *val, uint32_t slot) { ((mqr__entry_t *)val)->lv_slot = slot + 1; }

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

/* e's message replaced old: old is acknowledged (AckReason.REPLACED). */
static void replaced(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *old) {
  bq->acked++;
  bq->bytes -= old->msg->len;
  if (old->jbq) mqr__durable_removed(b, old);
  mqr__msg_release(b, old->msg);
  mqr__pool_put(&b->entries, old);
}

void mqr__lvq_push(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  struct mqr__lvq_s *l = bq->store.lvq;
  char buf[256];
  mqr_str_t key;
  int64_t i;
  e->lv_slot = 0;
  if (!key_of(l, e->msg, buf, sizeof buf, &key) || (i = mqr__smap_slot(&l->keys, key, moved)) < 0) {
    bq->store.ops->push(&bq->store, e); /* no key (or no room for it): a plain message */
    return;
  }
  mqr__entry_t *old = l->keys.slots[i].val;
  if (old && bq->store.nd) {
    /* Non-destructive: at the tail, so that every consumer (each at its own place) is
     * given the newer value, as Artemis moves a replaced, delivered value to the tail. */
    bq->store.ops->remove(&bq->store, old); /* clears the slot; consumers on it move back */
    bq->store.ops->push(&bq->store, e);
    replaced(b, bq, old);
  } else if (old) { /* in its place */
    bq->store.ops->insert_before(&bq->store, e, old);
    bq->store.ops->remove(&bq->store, old); /* clears the slot */
    replaced(b, bq, old);
  } else {
    bq->store.ops->push(&bq->store, e);
  }
  l->keys.slots[i].val = e;
  e->lv_slot = (uint32_t)i + 1;
}

bool mqr__lvq_returned(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  struct mqr__lvq_s *l = bq->store.lvq;
  char buf[256];
  mqr_str_t key;
  e->lv_slot = 0;
  if (l == NULL || !key_of(l, e->msg, buf, sizeof buf, &key)) return false;
  int64_t i = mqr__smap_find(&l->keys, key);
  if (i >= 0 && l->keys.slots[i].val) { /* a newer value waits: this one is done */
    replaced(b, bq, e);
    return true;
  }
  if (i >= 0) { /* it holds its key again, at the head where it goes */
    l->keys.slots[i].val = e;
    e->lv_slot = (uint32_t)i + 1;
  }
  return false;
}

void mqr__ring_trim(mqr_broker_t *b, mqr__bq_t *bq) {
  while (bq->store.depth && bq->store.depth + bq->in_flight > (uint64_t)bq->ring_size) {
    mqr__entry_t *old = bq->store.ops->pop(&bq->store);
    replaced(b, bq, old);
  }
}

/* ---- message groups ------------------------------------------------------------------------ */

mqr_str_t mqr__msg_group(mqr__msg_t *m) {
  if (m->group_len == UINT32_MAX) { /* read once from its bytes */
    m->group_len = 0;
    mqr_stored_view_t sv;
    mqr_tail_view_t t;
    if (mqr_message_read_stored(m->data, m->len, &sv, NULL) == 0 &&
        mqr_message_read_headers(sv.tail, sv.tail_len, &t, NULL) == 0) {
      mqr_props_iter_t it;
      mqr_props_iter_init(&it, t.props, t.props_len);
      mqr_str_t k;
      mqr_value_t v;
      while (mqr_props_next(&it, &k, &v) == 1)
        if (mqr_str_eq(k, MQR_STR(MQR_PROP_GROUP)) && v.type == MQR_VALUE_STRING && v.u.s.len) {
          m->group_off = (uint32_t)((const uint8_t *)v.u.s.ptr - m->data);
          m->group_len = (uint32_t)v.u.s.len;
        }
    }
  }
  return mqr_str_n((const char *)m->data + m->group_off, m->group_len);
}

void mqr__group_note(mqr__bq_t *bq, mqr__entry_t *e) {
  if (bq->group_buckets == 0 || mqr__msg_group(e->msg).len == 0) return;
  if (bq->groups.slots == NULL && !mqr__smap_init(&bq->groups)) return; /* no room: no groups */
  bq->grouping = true;
}

/* The map's key of a group: the group, or its bucket's number. */
static mqr_str_t group_key(const mqr__bq_t *bq, mqr_str_t group, uint32_t *bucket) {
  if (bq->group_buckets <= 0) return group;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < group.len; i++) h = (h ^ (uint8_t)group.ptr[i]) * 0x100000001b3ull;
  *bucket = (uint32_t)(h % (uint64_t)bq->group_buckets);
  return mqr_str_n((const char *)bucket, sizeof *bucket);
}

/* Avro's zigzag varint. */
static uint8_t *put_varint(uint8_t *p, int64_t v) {
  uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
  while (z >= 0x80) *p++ = (uint8_t)(z | 0x80), z >>= 7;
  *p++ = (uint8_t)z;
  return p;
}

size_t mqr__group_first_block(const mqr__msg_t *m, mqr_str_t key, uint8_t *out, uint32_t *at) {
  mqr_stored_view_t sv;
  mqr_tail_view_t tv;
  if (key.len > 65535 || mqr_message_read_stored(m->data, m->len, &sv, NULL) != 0 ||
      mqr_message_read_headers(sv.tail, sv.tail_len, &tv, NULL) != 0)
    return 0;
  /* The map's closing zero count: where the walk stood when it found the end. */
  mqr_props_iter_t it;
  mqr_str_t k;
  mqr_value_t v;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  const uint8_t *end;
  int rc;
  do {
    end = it.p;
  } while ((rc = mqr_props_next(&it, &k, &v)) == 1);
  if (rc != 0) return 0;
  *at = (uint32_t)(end - m->data);
  /* A block of one entry: the key, then the union's boolean branch (1), true. */
  uint8_t tmp[16], *p = put_varint(tmp, 1);
  p = put_varint(p, (int64_t)key.len);
  size_t n = (size_t)(p - tmp) + key.len + 2;
  if (out == NULL) return n;
  memcpy(out, tmp, (size_t)(p - tmp));
  p = out + (p - tmp);
  memcpy(p, key.ptr, key.len);
  p += key.len;
  p = put_varint(p, MQR_VALUE_BOOL);
  *p++ = 1;
  return n;
}

mqr_broker_consumer_t *mqr__group_owner(mqr__bq_t *bq, mqr_str_t group) {
  uint32_t bucket;
  int64_t i = mqr__smap_find(&bq->groups, group_key(bq, group, &bucket));
  return i >= 0 ? bq->groups.slots[i].val : NULL;
}

void mqr__group_assign(mqr__bq_t *bq, mqr_str_t group, mqr_broker_consumer_t *c) {
  uint32_t bucket;
  int64_t i = mqr__smap_slot(&bq->groups, group_key(bq, group, &bucket), NULL);
  if (i >= 0) bq->groups.slots[i].val = c; /* out of memory: the group is not sticky */
}

void mqr__group_forget(mqr__bq_t *bq, const mqr_broker_consumer_t *c) {
  for (uint32_t i = 0; bq->groups.slots && i <= bq->groups.mask; i++)
    if (c == NULL || bq->groups.slots[i].val == c) bq->groups.slots[i].val = NULL;
}

/* ---- consumers before dispatch ------------------------------------------------------------- */

bool mqr__gate(mqr__bq_t *bq) {
  if (bq->gate_open) {
    if (bq->n_consumers || bq->consumers_before_dispatch <= 0) return true;
    bq->gate_open = false; /* every consumer went: wait again */
    return false;
  }
  if (bq->n_consumers >= (uint32_t)bq->consumers_before_dispatch) bq->gate_open = true;
  return bq->gate_open;
}

void mqr__gate_consumer_came(mqr_broker_t *b, mqr__bq_t *bq) {
  if (bq->gate_open || bq->n_consumers != 1 || bq->delay_before_dispatch < 0) return;
  mqr__hold_gate(b, bq, (uint64_t)bq->delay_before_dispatch);
}

void mqr__gate_delay_out(mqr__bq_t *bq) {
  if (bq->n_consumers) bq->gate_open = true;
}
