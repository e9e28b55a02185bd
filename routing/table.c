#include "table.h"

void mqr__table_init(mqr__table_t *t, uint32_t key_off, uint32_t bytes_off) {
  t->slots = NULL;
  t->mask = 0;
  t->count = 0;
  t->key_off = key_off;
  t->bytes_off = bytes_off;
}

void mqr__table_free(mqr__table_t *t) {
  mqr_free(t->slots);
  mqr__table_init(t, t->key_off, t->bytes_off);
}

static void place(mqr__slot_t *slots, uint32_t mask, const mqr__slot_t *e) {
  uint32_t i = (uint32_t)e->hash & mask;
  while (slots[i].val != NULL) i = (i + 1) & mask;
  slots[i] = *e;
}

int mqr__table_reserve(mqr__table_t *t) {
  uint32_t cap = t->slots ? t->mask + 1 : 0;
  if ((uint64_t)(t->count + 1) * 4 <= (uint64_t)cap * 3) return 0;
  uint32_t ncap = cap ? cap * 2 : 16;
  if (ncap < cap) return MQR_ENOMEM;
  mqr__slot_t *ns = mqr_calloc(ncap, sizeof *ns);
  if (ns == NULL) return MQR_ENOMEM;
  mqr__slot_t *old = t->slots;
  for (uint32_t i = 0; i < cap; i++)
    if (old[i].val != NULL) place(ns, ncap - 1, &old[i]);
  mqr_free(old);
  t->slots = ns;
  t->mask = ncap - 1;
  return 0;
}

void mqr__table_insert(mqr__table_t *t, uint64_t hash, void *val) {
  mqr__slot_t e = {hash, val};
  place(t->slots, t->mask, &e);
  t->count++;
}

void *mqr__table_remove(mqr__table_t *t, uint64_t hash, const char *key, size_t len) {
  if (t->count == 0) return NULL;
  mqr__slot_t *s = t->slots;
  uint32_t mask = t->mask, hole = (uint32_t)hash & mask;
  for (;; hole = (hole + 1) & mask) {
    if (s[hole].val == NULL) return NULL;
    if (s[hole].hash == hash && mqr__table_key_is(t, s[hole].val, key, len)) break;
  }
  void *val = s[hole].val;
  /* Backward shift: pull later entries of the run into the hole when the hole lies
   * between their home slot and where they sit. */
  for (uint32_t j = (hole + 1) & mask; s[j].val != NULL; j = (j + 1) & mask) {
    uint32_t home = (uint32_t)s[j].hash & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      s[hole] = s[j];
      hole = j;
    }
  }
  s[hole].val = NULL;
  t->count--;
  return val;
}
