/* The broker's log: a leaf every part of the core (and the heads) calls, which calls
 * nothing of the broker's. */
#include <stdarg.h>
#include <stdio.h>

#include "broker_int.h"

void mqr__log(mqr_broker_t *b, mqr_log_level_t level, const char *fmt, ...) {
  if (b->opt.log == NULL || level > b->opt.log_level) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  b->opt.log(b->opt.log_ctx, level, line);
}

void mqr_broker_set_log_level(mqr_broker_t *b, mqr_log_level_t level) { b->opt.log_level = level; }
