#include "cellpool.h"

void mqr__cellpool_init(mqr__cellpool_t *p) { memset(p, 0, sizeof *p); }

void mqr__cellpool_free(mqr__cellpool_t *p) {
  for (uint32_t i = 0; i < p->n_chunks; i++) mqr_free(p->chunks[i]);
  mqr_free(p->chunks);
  mqr__cellpool_init(p);
}

int mqr__cellpool_reserve(mqr__cellpool_t *p) {
  if (p->free_list != NULL) return 0;
  if (p->n_chunks == p->cap_chunks) {
    uint32_t ncap = p->cap_chunks ? p->cap_chunks * 2 : 4;
    void *c = mqr_realloc(p->chunks, ncap * sizeof *p->chunks);
    if (c == NULL) return MQR_ENOMEM;
    p->chunks = c;
    p->cap_chunks = ncap;
  }
  /* The allocator promises 16-byte alignment at most: take a cell's worth of slack. */
  char *chunk = mqr_malloc(MQR__CELLPOOL_CHUNK + MQR__CELL_SIZE);
  if (chunk == NULL) return MQR_ENOMEM;
  p->chunks[p->n_chunks++] = chunk;
  char *cell = (char *)(((uintptr_t)chunk + MQR__CELL_SIZE - 1) & ~(uintptr_t)(MQR__CELL_SIZE - 1));
  /* Thread the cells so that they are handed out in address order. */
  for (char *c = cell + MQR__CELLPOOL_CHUNK - MQR__CELL_SIZE; c >= cell; c -= MQR__CELL_SIZE) {
    *(void **)c = p->free_list;
    p->free_list = c;
  }
  return 0;
}

void *mqr__cellpool_get(mqr__cellpool_t *p) {
  void *c = p->free_list;
  p->free_list = *(void **)c;
  return c;
}

void mqr__cellpool_put(mqr__cellpool_t *p, void *cell) {
  *(void **)cell = p->free_list;
  p->free_list = cell;
}
