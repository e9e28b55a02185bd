/* Queues the config made, and what happens to them when a later config no longer lists
 * them (docs/durability.md). A durable queue of the config has a TOPOLOGY record, as one
 * made at run time does, flagged as the config's: a restart on a config without it makes
 * it again from the record, with its durable messages. Then Artemis's address settings
 * decide, at a restart as at a reload (SIGHUP): config-delete-queues OFF (the default)
 * keeps the queue until it is deleted explicitly (management, `mqr queue delete`);
 * FORCE deletes it, its messages with it; config-delete-addresses FORCE does the same
 * for the queues of an address the config no longer lists, and the address. */
#include <stdio.h>

#include "durable.h"

typedef void (*report_fn)(void *ctx, bool applied, const char *line);

/* A queue of the config: its record is (re)written when it has none, or an older one. */
static void mark(mqr__bq_t *bq, uint32_t gen) {
  if (!bq->configured) bq->topo_stale = true;
  bq->from_config = bq->configured = true;
  bq->config_gen = gen;
}

static int mark_address(mqr_address_t *a, void *arg) {
  mqr_broker_t *b = arg;
  for (uint32_t i = 0; i < mqr_address_queue_count(a); i++) {
    mqr__bq_t *bq = mqr__bq_of(b, mqr_address_queue(a, i));
    if (bq == NULL) return MQR_ENOMEM;
    mark(bq, b->config_gen);
  }
  return 0;
}

int mqr__configured_start(mqr_broker_t *b) {
  /* The router was just built from the config: every queue in it is the config's. */
  return mqr_router_foreach_address(&b->router, mark_address, b);
}

static void say(mqr_broker_t *b, report_fn fn, void *ctx, bool applied, const char *line) {
  if (fn)
    fn(ctx, applied, line);
  else
    mqr__log(b, applied ? MQR_LOG_INFO : MQR_LOG_WARN, "%s", line);
}

/* bq's queue, which the config no longer lists: kept (OFF) or deleted (FORCE). */
static void gone(mqr_broker_t *b, mqr__bq_t *bq, bool address_listed, report_fn fn, void *ctx) {
  bq->from_config = false;
  mqr_queue_t *q = bq->q;
  const mqr_address_settings_t *s = mqr_address_settings(mqr_queue_address(q));
  bool force = s->config_delete_queues || (!address_listed && s->config_delete_addresses);
  const char *why = s->config_delete_queues ? "config-delete-queues: FORCE" : "config-delete-addresses: FORCE";
  mqr_str_t name = mqr_queue_name(q), addr = mqr_address_name(mqr_queue_address(q));
  uint64_t n = bq->store.depth + bq->in_flight + bq->held + bq->scheduled + mqr__pager_backlog(bq);
  char line[600];
  if (!force) {
    snprintf(line, sizeof line,
             "queue '%.*s' (address '%.*s') is gone from the config: kept, with its %llu messages "
             "(config-delete-queues: OFF; `mqr queue delete %.*s` deletes it)",
             (int)name.len, name.ptr, (int)addr.len, addr.ptr, (unsigned long long)n, (int)name.len, name.ptr);
    say(b, fn, ctx, false, line);
    return;
  }
  char *copy = mqr_malloc(name.len + 1); /* the name goes with the queue */
  if (copy == NULL) return;
  memcpy(copy, name.ptr, name.len);
  mqr_error_t err;
  int rc = mqr_broker_delete_queue(b, mqr_str_n(copy, name.len), &err);
  if (rc == 0)
    snprintf(line, sizeof line, "queue '%.*s' is gone from the config: deleted, with its %llu messages (%s)",
             (int)name.len, copy, (unsigned long long)n, why);
  else
    snprintf(line, sizeof line, "queue '%.*s' is gone from the config but is kept (%s): %s", (int)name.len, copy, why,
             err.message);
  mqr_free(copy);
  say(b, fn, ctx, rc == 0, line);
}

/* The queues the config made that it no longer lists (config_gen behind). A decision
 * deletes at most that queue (and an address with no queue left), so the next one is
 * read before it. */
static void sweep(mqr_broker_t *b, const mqr_config_t *cfg, report_fn fn, void *ctx) {
  for (mqr__bq_t *bq = b->queues, *next; bq; bq = next) {
    next = bq->next;
    if (bq->configured && (!bq->from_config || bq->config_gen != b->config_gen))
      gone(b, bq, mqr_config_has_address(cfg, mqr_address_name(mqr_queue_address(bq->q))), fn, ctx);
  }
}

/* Records what lacks one (or has an older one) of the config's durable queues. */
static void record(mqr_broker_t *b, report_fn fn, void *ctx) {
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
    if (bq->from_config && bq->topo_stale && mqr__durable_queue_record(b, bq) != 0) {
      char line[600];
      mqr_str_t name = mqr_queue_name(bq->q);
      snprintf(line, sizeof line,
               "journal: queue '%.*s' could not be recorded: a config without it would not find its messages",
               (int)name.len, name.ptr);
      say(b, fn, ctx, false, line);
    }
}

void mqr__configured_recovered(mqr_broker_t *b) {
  if (b->dur == NULL) return;
  record(b, NULL, NULL);
  sweep(b, b->config, NULL, NULL);
}

typedef struct {
  mqr_broker_t *b;
  mqr__smap_t listed; /* the new config's addresses */
  report_fn fn;
  void *ctx;
} reload_walk_t;

static int mark_listed(void *arg, mqr_str_t queue, mqr_str_t address) {
  (void)address;
  reload_walk_t *w = arg;
  mqr_queue_t *q = mqr_router_find_queue(&w->b->router, queue);
  if (q == NULL) return 0;
  mqr__bq_t *bq = mqr__bq_of(w->b, q);
  if (bq == NULL) return MQR_ENOMEM;
  mark(bq, w->b->config_gen);
  return 0;
}

static int list_address(void *arg, mqr_str_t address) {
  reload_walk_t *w = arg;
  int64_t slot = mqr__smap_slot(&w->listed, address, NULL);
  if (slot < 0) return MQR_ENOMEM;
  w->listed.slots[slot].val = w;
  return 0;
}

/* An address of the old config the new one does not list, under config-delete-addresses
 * FORCE: deleted with its queues. */
static int drop_address(void *arg, mqr_str_t address) {
  reload_walk_t *w = arg;
  mqr_broker_t *b = w->b;
  int64_t slot = mqr__smap_find(&w->listed, address);
  if (slot >= 0 && w->listed.slots[slot].val) return 0;
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  if (a == NULL || !mqr_address_settings(a)->config_delete_addresses) return 0;
  char line[600];
  mqr_error_t err;
  int rc = mqr_broker_delete_address(b, address, true, &err);
  if (rc == 0)
    snprintf(line, sizeof line,
             "address '%.*s' is gone from the config: deleted with its queues "
             "(config-delete-addresses: FORCE)",
             (int)address.len, address.ptr);
  else
    snprintf(line, sizeof line, "address '%.*s' is gone from the config but is kept: %s", (int)address.len, address.ptr,
             err.message);
  say(b, w->fn, w->ctx, rc == 0, line);
  return 0;
}

void mqr__configured_reload(mqr_broker_t *b, const mqr_config_t *old, const mqr_config_t *cfg,
                            void (*fn)(void *ctx, bool applied, const char *line), void *ctx) {
  reload_walk_t w = {b, {0}, fn, ctx};
  b->config_gen++;
  if (!mqr__smap_init(&w.listed) || mqr_config_foreach_queue(cfg, mark_listed, &w) != 0 ||
      mqr_config_foreach_address(cfg, list_address, &w) != 0) {
    fn(ctx, false, "out of memory applying the config's queues: none is deleted");
    for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
      if (bq->from_config) bq->config_gen = b->config_gen;
    mqr__smap_free(&w.listed);
    return;
  }
  record(b, fn, ctx);
  sweep(b, cfg, fn, ctx);
  mqr_config_foreach_address(old, drop_address, &w);
  mqr__smap_free(&w.listed);
}
