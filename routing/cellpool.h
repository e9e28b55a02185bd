/* A pool of 128-byte cells, each at a 128-byte boundary, carved from 64 KiB chunks.
 *
 * It keeps the addresses' blocks (the bind line and the key line with the name) dense, side by
 * side in a few chunks, so that a router of 10,000 addresses reads 1.25 MiB of them
 * rather than 10,000 scattered allocations with their headers and alignment slack.
 *
 * Invariant: every cell is either in use or on the free list (linked through its first
 * word); chunks are given back only by mqr__cellpool_free, so a freed cell's memory
 * stays valid for the pool's life. */
#ifndef MQR_ROUTING_CELLPOOL_H
#define MQR_ROUTING_CELLPOOL_H

#include "mqr/routing.h"

/* The pool. */
typedef struct {
  void *free_list;
  void **chunks;
  uint32_t n_chunks, cap_chunks;
} mqr__cellpool_t;

#define MQR__CELL_SIZE 128u
#define MQR__CELLPOOL_CHUNK 65536u

void mqr__cellpool_init(mqr__cellpool_t *p);
void mqr__cellpool_free(mqr__cellpool_t *p);
/* Makes sure the next mqr__cellpool_get cannot fail. 0 or MQR_ENOMEM (pool unchanged). */
int mqr__cellpool_reserve(mqr__cellpool_t *p);
/* A cell; room must have been reserved. */
void *mqr__cellpool_get(mqr__cellpool_t *p);
void mqr__cellpool_put(mqr__cellpool_t *p, void *cell);

#endif
