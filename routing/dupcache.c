#include "dupcache.h"

#include "table.h"

#define END UINT32_MAX

mqr__dupcache_t *mqr__dupcache_create(uint32_t cap) {
  if (cap == 0 || cap > (1u << 28)) return NULL;
  uint32_t nb = 1;
  while (nb < cap) nb <<= 1;
  size_t bytes = sizeof(mqr__dupcache_t) + (size_t)nb * sizeof(uint32_t) + (size_t)cap * sizeof(mqr__dup_entry_t) + 8;
  mqr__dupcache_t *c = mqr_malloc(bytes);
  if (c == NULL) return NULL;
  c->cap = cap;
  c->count = 0;
  c->head = 0;
  c->mask = nb - 1;
  c->buckets = (uint32_t *)(c + 1);
  uintptr_t e = (uintptr_t)(c->buckets + nb);
  c->entries = (mqr__dup_entry_t *)((e + 7) & ~(uintptr_t)7);
  for (uint32_t i = 0; i < nb; i++) c->buckets[i] = END;
  return c;
}

void mqr__dupcache_destroy(mqr__dupcache_t *c) { mqr_free(c); }

static bool same(const mqr__dup_entry_t *e, uint64_t hash, mqr_str_t id) {
  size_t n = id.len < MQR__DUP_INLINE ? id.len : MQR__DUP_INLINE;
  return e->hash == hash && e->len == id.len && memcmp(e->bytes, id.ptr, n) == 0;
}

static void unlink_entry(mqr__dupcache_t *c, uint32_t idx) {
  uint32_t *link = &c->buckets[c->entries[idx].hash & c->mask];
  while (*link != idx) link = &c->entries[*link].next;
  *link = c->entries[idx].next;
}

bool mqr__dupcache_check_add(mqr__dupcache_t *c, mqr_str_t id) {
  uint64_t h = mqr__hash(id.ptr, id.len);
  for (uint32_t i = c->buckets[h & c->mask]; i != END; i = c->entries[i].next)
    if (same(&c->entries[i], h, id)) return true;
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
