/* Duplicate-id cache of one address: the last ids in a ring, with a chained hash index
 * over the ring. It starts small and doubles as ids arrive, up to the address's
 * id-cache-size, while the router's budget for all its caches allows (a cache that may
 * not grow keeps the ids it has room for, evicting the oldest). Checking never
 * allocates; growing is amortised over the ids that filled the ring.
 *
 * Invariant: entries[(head + i) % cap] for i < count are the ids in arrival order
 * (oldest first); each is on exactly one bucket chain, the one for hash & mask.
 * Ids are compared by length and bytes; an id longer than MQR__DUP_INLINE bytes is
 * compared by its length, its first MQR__DUP_INLINE bytes and a 64-bit hash of the
 * whole (docs/routing.md). */
#ifndef MQR_ROUTING_DUPCACHE_H
#define MQR_ROUTING_DUPCACHE_H

#include "mqr/routing.h"

/* What a router's duplicate-id caches may hold together, and hold now (bytes). */
typedef struct {
  size_t used, limit;
} mqr__dupbudget_t;

#define MQR__DUP_INLINE 64
#define MQR__DUP_FIRST 16 /* ids a new cache has room for */

typedef struct {
  uint64_t hash;
  uint32_t next; /* next entry on the bucket chain, UINT32_MAX ends */
  uint32_t len;
  uint8_t bytes[MQR__DUP_INLINE];
} mqr__dup_entry_t;

typedef struct mqr__dupcache_s {
  uint32_t cap, max, count, head, mask;
  size_t bytes; /* what the cache holds, counted in the router's budget */
  uint32_t *buckets;
  mqr__dup_entry_t *entries;
} mqr__dupcache_t;

/* A cache of up to max (> 0) ids in *out: 0, MQR_ELIMIT (the budget, mqr/routing.h, has
 * no room for even a small one), MQR_ENOMEM, MQR_EINVAL (max out of range). */
int mqr__dupcache_create(uint32_t max, mqr__dupbudget_t *budget, mqr__dupcache_t **out);
void mqr__dupcache_destroy(mqr__dupcache_t *c, mqr__dupbudget_t *budget);
/* true when id is in the cache; otherwise adds it (growing, or evicting the oldest) and
 * returns false. */
bool mqr__dupcache_check_add(mqr__dupcache_t *c, mqr_str_t id, mqr__dupbudget_t *budget);

#endif
