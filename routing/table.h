/* A name -> object table: open addressing, linear probing, backward-shift deletion (no
 * tombstones), power-of-two capacity, load kept at or under 3/4.
 *
 * Invariant: every entry sits in the probe run that starts at (hash & mask) and no empty
 * slot lies between that home slot and the entry. A slot is empty when val is NULL. The
 * key is a view of bytes the object owns (its name), so a probe that misses compares a
 * hash in the slot and never touches the object. */
#ifndef MQR_ROUTING_TABLE_H
#define MQR_ROUTING_TABLE_H

#include "mqr/routing.h"

typedef struct {
  uint64_t hash;
  const char *key;
  size_t len;
  void *val;
} mqr__slot_t;

/* FNV-1a, 64 bits. */
static inline uint64_t mqr__hash(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
  return h;
}

void mqr__table_init(mqr__table_t *t);
void mqr__table_free(mqr__table_t *t);
/* Makes room for one more entry, so that the next insert cannot fail. 0 or MQR_ENOMEM
 * (table unchanged). */
int mqr__table_reserve(mqr__table_t *t);
/* Inserts; the key must be absent and room reserved. */
void mqr__table_insert(mqr__table_t *t, uint64_t hash, const char *key, size_t len, void *val);
void *mqr__table_find(const mqr__table_t *t, uint64_t hash, const char *key, size_t len);
/* Removes the entry for key; returns its value or NULL. */
void *mqr__table_remove(mqr__table_t *t, uint64_t hash, const char *key, size_t len);

#endif
