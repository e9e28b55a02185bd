/* Keys (bytes) to values (strmap.c): a helper of the broker's, which core.h gives the
 * heads too (MQTT's topic aliases). */
#ifndef MQR_BROKER_STRMAP_H
#define MQR_BROKER_STRMAP_H

#include "mqr/common.h"

typedef struct {
  char *key; /* NULL: an empty slot */
  uint32_t len;
  uint64_t hash;
  void *val; /* NULL: the key has no value now (it stays, until a rebuild drops it) */
} mqr__smap_slot_t;

typedef struct {
  mqr__smap_slot_t *slots;
  uint32_t mask, used;
} mqr__smap_t;

bool mqr__smap_init(mqr__smap_t *m); /* false: out of memory */
void mqr__smap_free(mqr__smap_t *m);
/* The slot of key, or -1. */
int64_t mqr__smap_find(const mqr__smap_t *m, mqr_str_t key);
/* The slot of key, made (value NULL) when new; -1: out of memory. Making one may rebuild
 * the table: moved (may be NULL) is told each value's new slot. */
int64_t mqr__smap_slot(mqr__smap_t *m, mqr_str_t key, void (*moved)(void *val, uint32_t slot));

#endif
