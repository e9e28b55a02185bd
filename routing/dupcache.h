/* Duplicate-id cache of one address: the last `cap` ids in a ring, with a chained hash
 * index over the ring. One allocation at creation; adding and checking never allocate.
 *
 * Invariant: entries[(head + i) % cap] for i < count are the ids in arrival order
 * (oldest first); each is on exactly one bucket chain, the one for hash & mask.
 * Ids are compared by length and bytes; an id longer than MQR__DUP_INLINE bytes is
 * compared by its length, its first MQR__DUP_INLINE bytes and a 64-bit hash of the
 * whole (docs/routing.md). */
#ifndef MQR_ROUTING_DUPCACHE_H
#define MQR_ROUTING_DUPCACHE_H

#include "mqr/common.h"

#define MQR__DUP_INLINE 64

typedef struct {
  uint64_t hash;
  uint32_t next; /* next entry on the bucket chain, UINT32_MAX ends */
  uint32_t len;
  uint8_t bytes[MQR__DUP_INLINE];
} mqr__dup_entry_t;

typedef struct mqr__dupcache_s {
  uint32_t cap, count, head, mask;
  uint32_t *buckets;
  mqr__dup_entry_t *entries;
} mqr__dupcache_t;

/* A cache of cap (> 0) ids, or NULL when out of memory. */
mqr__dupcache_t *mqr__dupcache_create(uint32_t cap);
void mqr__dupcache_destroy(mqr__dupcache_t *c);
/* true when id is in the cache; otherwise adds it (evicting the oldest when full) and
 * returns false. */
bool mqr__dupcache_check_add(mqr__dupcache_t *c, mqr_str_t id);

#endif
