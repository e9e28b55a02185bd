#include "path.h"

#include <stdarg.h>
#include <stdio.h>

size_t mqr__path_push(mqr__path_t *p, const char *fmt, ...) {
  size_t mark = p->len, cap = sizeof p->buf;
  if (p->len && p->len < cap - 1 && fmt[0] != '[' && fmt[0] != '<') p->buf[p->len++] = '.';
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(p->buf + p->len, cap - p->len, fmt, ap);
  va_end(ap);
  if (n > 0) p->len += (size_t)n;
  if (p->len >= cap) p->len = cap - 1;
  return mark;
}
