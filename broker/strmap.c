/* Keys (bytes) to values, for a queue's last-value keys and message groups, and MQTT's
 * topic aliases: open
 * addressing, linear probing, at most half full, FNV-1a hashes. A key stays when its
 * value goes (NULL), so a steady set of keys allocates nothing; when keys fill the table
 * it is rebuilt without the ones that have no value, and each value that moves is told
 * its new slot. */
#include "strmap.h"

static uint64_t hash_of(mqr_str_t k) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < k.len; i++) h = (h ^ (uint8_t)k.ptr[i]) * 0x100000001b3ull;
  return h;
}

bool mqr__smap_init(mqr__smap_t *m) {
  m->slots = mqr_calloc(16, sizeof *m->slots);
  m->mask = 15;
  m->used = 0;
  return m->slots != NULL;
}

void mqr__smap_free(mqr__smap_t *m) {
  for (uint32_t i = 0; m->slots && i <= m->mask; i++) mqr_free(m->slots[i].key);
  mqr_free(m->slots);
  m->slots = NULL;
}

static uint32_t probe(const mqr__smap_t *m, mqr_str_t key, uint64_t h) {
  for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
    const mqr__smap_slot_t *s = &m->slots[i];
    if (s->key == NULL || (s->hash == h && s->len == key.len && memcmp(s->key, key.ptr, key.len) == 0)) return i;
  }
}

int64_t mqr__smap_find(const mqr__smap_t *m, mqr_str_t key) {
  uint32_t i = probe(m, key, hash_of(key));
  return m->slots[i].key ? (int64_t)i : -1;
}

/* Room for one more key. false: out of memory. */
static bool reserve(mqr__smap_t *m, void (*moved)(void *val, uint32_t slot)) {
  if (2 * (m->used + 1) <= m->mask + 1) return true;
  uint32_t held = 0;
  for (uint32_t i = 0; i <= m->mask; i++) held += m->slots[i].val != NULL;
  uint32_t n = m->mask + 1;
  while (2 * (held + 1) > n / 2) n *= 2;
  mqr__smap_slot_t *ns = mqr_calloc(n, sizeof *ns);
  if (ns == NULL) return false;
  for (uint32_t i = 0; i <= m->mask; i++) {
    mqr__smap_slot_t *s = &m->slots[i];
    if (s->key == NULL) continue;
    if (s->val == NULL) {
      mqr_free(s->key);
      continue;
    }
    uint32_t j = (uint32_t)s->hash & (n - 1);
    while (ns[j].key) j = (j + 1) & (n - 1);
    ns[j] = *s;
    if (moved) moved(s->val, j);
  }
  mqr_free(m->slots);
  m->slots = ns;
  m->mask = n - 1;
  m->used = held;
  return true;
}

int64_t mqr__smap_slot(mqr__smap_t *m, mqr_str_t key, void (*moved)(void *val, uint32_t slot)) {
  int64_t found = mqr__smap_find(m, key);
  if (found >= 0) return found;
  if (!reserve(m, moved)) return -1;
  uint64_t h = hash_of(key);
  uint32_t i = probe(m, key, h);
  mqr__smap_slot_t *s = &m->slots[i];
  if ((s->key = mqr_malloc(key.len ? key.len : 1)) == NULL) return -1;
  if (key.len) memcpy(s->key, key.ptr, key.len);
  s->len = (uint32_t)key.len;
  s->hash = h;
  s->val = NULL;
  m->used++;
  return i;
}
