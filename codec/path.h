/* Where a parser or binder is inside a schema or datum, for error messages:
 * `fields[3].type.items`, `a[2]`, `b<u.Inner>.c`. One fixed buffer, no allocation; a
 * path too long for it is cut. */
#ifndef MQR_CODEC_PATH_H
#define MQR_CODEC_PATH_H

#include "mqr/common.h"

typedef struct {
  char buf[512];
  size_t len;
} mqr__path_t;

/* Appends a step, printf-style; one that does not start with '[' or '<' is joined with a
 * '.'. Returns the mark to give mqr__path_pop. */
size_t mqr__path_push(mqr__path_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void mqr__path_pop(mqr__path_t *p, size_t mark) {
  p->len = mark;
  p->buf[mark] = '\0';
}

/* The path, or `empty` at the top. */
static inline const char *mqr__path_str(const mqr__path_t *p, const char *empty) { return p->len ? p->buf : empty; }

#endif
