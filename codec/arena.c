#include "arena.h"

void mqr__arena_free(mqr__arena_t *a) {
  while (a->top) {
    mqr__chunk_t *c = a->top;
    a->top = c->prev;
    mqr_free(c);
  }
  a->bytes = 0;
}

void *mqr__arena_alloc(mqr__arena_t *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  mqr__chunk_t *c = a->top;
  if (c == NULL || c->cap - c->used < n) {
    size_t cap = n > 4000 ? n : 4000;
    if (c && c->cap * 2 > cap && c->cap < (1u << 20)) cap = c->cap * 2;
    mqr__chunk_t *nc = mqr_malloc(sizeof *nc + cap);
    if (nc == NULL) return NULL;
    nc->prev = c;
    nc->cap = cap;
    nc->used = 0;
    a->top = c = nc;
  }
  void *p = (char *)c->data + c->used;
  c->used += n;
  a->bytes += n;
  memset(p, 0, n);
  return p;
}

char *mqr__arena_strdup(mqr__arena_t *a, const char *s, size_t n) {
  char *d = mqr__arena_alloc(a, n + 1);
  if (d == NULL) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  return d;
}
