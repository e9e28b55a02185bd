/* The broker's loop, as every part of the core and the heads use it: work for the next
 * pass (the idle handle, whose callback broker.c sets), the handles that count until
 * the broker may be freed, and the accessors core.h gives the heads. A leaf: it calls
 * nothing of the broker's but through the two functions broker.c gives it. */
#include "broker_int.h"

void mqr__broker_wake(mqr_broker_t *b) {
  if (b->idle_on || b->closing) return;
  b->idle_on = true;
  uv_idle_start(&b->idle, b->idle_fn);
}

void mqr__broker_handle_opened(mqr_broker_t *b) { b->open_handles++; }

/* A handle of the broker's closed: the last one frees it. */
void mqr__broker_handle_closed(mqr_broker_t *b) {
  if (--b->open_handles == 0 && b->closing) b->last_handle_fn(b);
}

uv_loop_t *mqr__loop(const mqr_broker_t *b) { return b->loop; }

uint64_t mqr__uptime_s(const mqr_broker_t *b) { return b->started ? (uv_hrtime() - b->started_ns) / 1000000000ull : 0; }
const mqr_broker_options_t *mqr__options(const mqr_broker_t *b) { return &b->opt; }
const mqr_config_t *mqr__config(const mqr_broker_t *b) { return b->config; }
bool mqr__closing(const mqr_broker_t *b) { return b->closing; }
bool mqr__has_journal(const mqr_broker_t *b) { return b->dur != NULL; }
struct mqr__net_s **mqr__net_slot(const mqr_broker_t *b) {
  return (struct mqr__net_s **)&b->net;
}
