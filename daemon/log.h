/* mqrd's log lines on stderr: text ("2026-12-05T01:31:14.625Z INFO  message") or one JSON
 * object per line for log shippers (docs/observability.md). */
#ifndef MQRD_LOG_H
#define MQRD_LOG_H

#include <stdbool.h>

#include "mqr/broker.h"

/* The level and format lines are written at: what mqrd's options and config say. */
void mqrd_log_set(mqr_log_level_t level, bool json);
mqr_log_level_t mqrd_log_level(void);
/* An mqr_log_fn (ctx unused): the line written now, whole, if its level is kept. */
void mqrd_log_line(void *ctx, mqr_log_level_t level, const char *line);

#endif
