#include "table.h"

const uint8_t mqr__no_tags[MQR__TAG_WINDOW]; /* a table without slots: a window of zeros */

void mqr__table_init(mqr__table_t *t, uint32_t key_off, uint32_t bytes_off) {
  t->slots = NULL;
  t->tags = (uint8_t *)mqr__no_tags;
  t->mem = NULL;
  t->mask = 0;
  t->count = 0;
  t->key_off = key_off;
  t->bytes_off = bytes_off;
}

void mqr__table_free(mqr__table_t *t) {
  mqr_free(t->mem);
  mqr__table_init(t, t->key_off, t->bytes_off);
}

/* Tag j, and its copy past the end: the first 15 tags repeat after the last, so that the
 * window of a home slot near the end sees the run that wraps round. */
static inline void put_tag(uint8_t *tags, uint32_t mask, uint32_t j, uint8_t v) {
  tags[j] = v;
  if (j < MQR__TAG_WINDOW - 1) tags[mask + 1 + j] = v;
}

static void place(mqr__slot_t *slots, uint8_t *tags, uint32_t mask, const mqr__slot_t *e, uint8_t tag) {
  uint32_t i = e->hash & mask;
  while (slots[i].val != NULL) i = (i + 1) & mask;
  slots[i] = *e;
  put_tag(tags, mask, i, tag);
}

int mqr__table_reserve(mqr__table_t *t) {
  uint32_t cap = t->slots ? t->mask + 1 : 0;
  if ((uint64_t)(t->count + 1) * 4 <= (uint64_t)cap * 3) return 0;
  uint32_t ncap = cap ? cap * 2 : 16;
  if (ncap < cap || ncap > UINT32_MAX / 64) return MQR_ENOMEM;
  /* Slots, then tags. One slot's worth of slack in front: the allocator promises
   * 16-byte alignment, a slot wants 32 so that it never straddles two cache lines. */
  void *mem = mqr_calloc(1, ((size_t)ncap + 1) * sizeof(mqr__slot_t) + ncap + MQR__TAG_WINDOW);
  if (mem == NULL) return MQR_ENOMEM;
  mqr__slot_t *ns = (mqr__slot_t *)(((uintptr_t)mem + sizeof(mqr__slot_t) - 1) & ~(uintptr_t)(sizeof(mqr__slot_t) - 1));
  uint8_t *nt = (uint8_t *)(ns + ncap);
  mqr__slot_t *old = t->slots;
  for (uint32_t i = 0; i < cap; i++)
    if (old[i].val != NULL) place(ns, nt, ncap - 1, &old[i], t->tags[i]);
  mqr_free(t->mem);
  t->mem = mem;
  t->slots = ns;
  t->tags = nt;
  t->mask = ncap - 1;
  return 0;
}

void mqr__table_insert(mqr__table_t *t, const mqr__key_t *k, void *val, uint8_t aux0, uint8_t aux1) {
  mqr__slot_t e = {k->a, k->b, val, (uint32_t)k->hash, (uint16_t)k->len, {aux0, aux1}};
  place(t->slots, t->tags, t->mask, &e, mqr__tag(k->hash));
  t->count++;
}

bool mqr__slot_key_is(const mqr__table_t *t, const mqr__slot_t *s, const char *ptr, size_t len) {
  const mqr_str_t *key = (const mqr_str_t *)((const char *)s->val + t->key_off);
  return key->len == len && memcmp((const char *)s->val + t->bytes_off, ptr, len) == 0;
}

mqr__slot_t *mqr__table_probe(const mqr__table_t *t, const mqr__key_t *k) {
  mqr__slot_t *s = t->slots;
  if (s == NULL) return NULL;
  for (uint32_t i = (uint32_t)k->hash & t->mask;; i = (i + 1) & t->mask) {
    if (s[i].val == NULL) return NULL;
    if (mqr__slot_is(t, &s[i], k)) return &s[i];
  }
}

void *mqr__table_remove(mqr__table_t *t, const mqr__key_t *k) {
  mqr__slot_t *hit = mqr__table_slot(t, k);
  if (hit == NULL) return NULL;
  mqr__slot_t *s = t->slots;
  uint8_t *tg = t->tags;
  uint32_t mask = t->mask, hole = (uint32_t)(hit - s);
  void *val = hit->val;
  /* Backward shift: pull later entries of the run into the hole when the hole lies
   * between their home slot and where they sit. */
  for (uint32_t j = (hole + 1) & mask; s[j].val != NULL; j = (j + 1) & mask) {
    uint32_t home = s[j].hash & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      s[hole] = s[j];
      put_tag(tg, mask, hole, tg[j]);
      hole = j;
    }
  }
  memset(&s[hole], 0, sizeof s[hole]);
  put_tag(tg, mask, hole, 0);
  t->count--;
  return val;
}

bool mqr__table_check(const mqr__table_t *t) {
  const mqr__slot_t *s = t->slots;
  if (s == NULL) return t->count == 0;
  uint32_t n = 0;
  for (uint32_t j = 0; j <= t->mask; j++) {
    if ((s[j].val == NULL) != (t->tags[j] == 0)) return false;
    if (j < MQR__TAG_WINDOW - 1 && t->tags[t->mask + 1 + j] != t->tags[j]) return false;
    if (s[j].val == NULL) continue;
    n++;
    for (uint32_t i = s[j].hash & t->mask; i != j; i = (i + 1) & t->mask) /* no hole before it */
      if (s[i].val == NULL) return false;
  }
  return n == t->count;
}
