#include "dupcache.h"

#include "table.h"

#define END UINT32_MAX

static size_t size_of(uint32_t cap, uint32_t nb) {
  return (size_t)nb * sizeof(uint32_t) + (size_t)cap * sizeof(mqr__dup_entry_t) + 8;
}

static uint32_t buckets_for(uint32_t cap) {
  uint32_t nb = 1;
  while (nb < cap) nb <<= 1;
  return nb;
}

/* The arrays for cap ids: one allocation, the buckets first. */
static void *arrays(uint32_t cap, uint32_t **buckets, mqr__dup_entry_t **entries) {
  uint32_t nb = buckets_for(cap);
  void *mem = mqr_malloc(size_of(cap, nb));
  if (mem == NULL) return NULL;
  *buckets = mem;
  uintptr_t e = (uintptr_t)(*buckets + nb);
  *entries = (mqr__dup_entry_t *)((e + 7) & ~(uintptr_t)7);
  for (uint32_t i = 0; i < nb; i++) (*buckets)[i] = END;
  return mem;
}

int mqr__dupcache_create(uint32_t max, mqr__dupbudget_t *budget, mqr__dupcache_t **out) {
  if (max == 0 || max > (1u << 28)) return MQR_EINVAL;
  uint32_t cap = max < MQR__DUP_FIRST ? max : MQR__DUP_FIRST;
  size_t bytes = sizeof(mqr__dupcache_t) + size_of(cap, buckets_for(cap));
  if (budget->used + bytes > budget->limit) return MQR_ELIMIT;
  mqr__dupcache_t *c = mqr_malloc(sizeof *c);
  if (c == NULL) return MQR_ENOMEM;
  if (arrays(cap, &c->buckets, &c->entries) == NULL) {
    mqr_free(c);
    return MQR_ENOMEM;
  }
  c->cap = cap;
  c->max = max;
  c->count = c->head = 0;
  c->mask = buckets_for(cap) - 1;
  c->bytes = bytes;
  budget->used += bytes;
  *out = c;
  return 0;
}

void mqr__dupcache_destroy(mqr__dupcache_t *c, mqr__dupbudget_t *budget) {
  if (c == NULL) return;
  budget->used -= c->bytes;
  mqr_free(c->buckets);
  mqr_free(c);
}

static bool same(const mqr__dup_entry_t *e, uint64_t hash, mqr_str_t id) {
  size_t n = id.len < MQR__DUP_INLINE ? id.len : MQR__DUP_INLINE;
  return e->hash == hash && e->len == id.len && memcmp(e->bytes, id.ptr, n) == 0;
}

static void unlink_entry(mqr__dupcache_t *c, uint32_t idx) {
  uint32_t *link = &c->buckets[c->entries[idx].hash & c->mask];
  while (*link != idx) link = &c->entries[*link].next;
  *link = c->entries[idx].next;
}

/* A full ring twice as big (up to max), when the budget and memory allow: the ids move
 * over oldest first, to 0..count. false: it stays as it was. */
static bool grow(mqr__dupcache_t *c, mqr__dupbudget_t *budget) {
  uint32_t cap = c->cap > c->max / 2 ? c->max : c->cap * 2;
  uint32_t nb = buckets_for(cap);
  size_t bytes = sizeof *c + size_of(cap, nb);
  if (budget->used - c->bytes + bytes > budget->limit) return false;
  uint32_t *buckets;
  mqr__dup_entry_t *entries;
  if (arrays(cap, &buckets, &entries) == NULL) return false;
  for (uint32_t i = 0; i < c->count; i++) {
    uint32_t from = c->head + i;
    if (from >= c->cap) from -= c->cap;
    entries[i] = c->entries[from];
    entries[i].next = buckets[entries[i].hash & (nb - 1)];
    buckets[entries[i].hash & (nb - 1)] = i;
  }
  mqr_free(c->buckets);
  c->buckets = buckets;
  c->entries = entries;
  c->cap = cap;
  c->mask = nb - 1;
  c->head = 0;
  budget->used = budget->used - c->bytes + bytes;
  c->bytes = bytes;
  return true;
}

bool mqr__dupcache_check_add(mqr__dupcache_t *c, mqr_str_t id, mqr__dupbudget_t *budget) {
  uint64_t h = mqr__hash(id.ptr, id.len);
  for (uint32_t i = c->buckets[h & c->mask]; i != END; i = c->entries[i].next)
    if (same(&c->entries[i], h, id)) return true;
  if (c->count == c->cap && c->cap < c->max) grow(c, budget);
  uint32_t idx;
  if (c->count == c->cap) {
    idx = c->head;
    unlink_entry(c, idx);
    c->head = c->head + 1 == c->cap ? 0 : c->head + 1;
  } else {
    idx = c->head + c->count;
    if (idx >= c->cap) idx -= c->cap;
    c->count++;
  }
  mqr__dup_entry_t *e = &c->entries[idx];
  e->hash = h;
  e->len = (uint32_t)id.len;
  memcpy(e->bytes, id.ptr, id.len < MQR__DUP_INLINE ? id.len : MQR__DUP_INLINE);
  e->next = c->buckets[h & c->mask];
  c->buckets[h & c->mask] = idx;
  return false;
}
