/* A bump arena: chunks from mqr_malloc, freed all at once. What a parsed schema and a
 * JSON document are made of, so that tearing one down is one walk over a few chunks.
 *
 * Invariant: `used` bytes of the newest chunk are handed out; older chunks are full. */
#ifndef MQR_CODEC_ARENA_H
#define MQR_CODEC_ARENA_H

#include "mqr/common.h"

typedef struct mqr__chunk_s {
  struct mqr__chunk_s *prev;
  size_t cap, used;
  max_align_t data[];
} mqr__chunk_t;

typedef struct {
  mqr__chunk_t *top;
  size_t bytes; /* handed out, for limits */
} mqr__arena_t;

static inline void mqr__arena_init(mqr__arena_t *a) {
  a->top = NULL;
  a->bytes = 0;
}

void mqr__arena_free(mqr__arena_t *a);
/* n bytes aligned for any type, zeroed; NULL when out of memory. */
void *mqr__arena_alloc(mqr__arena_t *a, size_t n);
/* A NUL-terminated copy of n bytes. */
char *mqr__arena_strdup(mqr__arena_t *a, const char *s, size_t n);

#endif
