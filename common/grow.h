/* Growing an array by doubling: a private helper of mqr's libraries, included from
 * common/ (not installed). */
#ifndef MQR_COMMON_GROW_H
#define MQR_COMMON_GROW_H

#include "mqr/common.h"

/* Makes room in *p (capacity *cap items of size bytes) for need items, doubling from 16.
 * False: out of memory, nothing changed. */
static inline bool mqr__grow_size(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = mqr_realloc(*p, n * size);
  if (q == NULL) return false;
  *p = q;
  *cap = n;
  return true;
}

/* The same for a 32-bit capacity. */
static inline bool mqr__grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
  size_t c = *cap;
  if (!mqr__grow_size(p, &c, need, size)) return false;
  *cap = (uint32_t)c;
  return true;
}

#endif
