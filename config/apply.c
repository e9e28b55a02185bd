/* Building a router from a config, and applying a reloaded config to a live router
 * (config_int.h). */

#include "config_int.h"

static void queue_config(const cfg_address_t *a, const cfg_queue_t *q, mqr_queue_config_t *qc) {
  mqr_queue_config_init(qc, mqr_str(q->name), mqr_str(a->name), q->type);
  qc->durable = q->durable;
  qc->enabled = q->enabled;
  qc->purge_on_no_consumers = q->purge_on_no_consumers;
  qc->max_consumers = q->max_consumers;
  qc->filter = mqr_str(q->filter);
  qc->exclusive = q->exclusive;
  qc->last_value_key = mqr_str(q->last_value_key);
  qc->group_first_key = mqr_str(q->group_first_key);
  qc->non_destructive = q->non_destructive;
  qc->ring_size = q->ring_size;
  qc->group_buckets = q->group_buckets;
  qc->group_rebalance = q->group_rebalance;
  qc->consumers_before_dispatch = q->consumers_before_dispatch;
  qc->delay_before_dispatch = q->delay_before_dispatch;
}

int mqr__cfg_build(const mqr_config_t *cfg, mqr_router_t *r, mqr_diags_t *diags, mqr_error_t *err) {
  int rc = mqr_router_init(r, &cfg->wildcard), first = 0;
  if (rc) return mqr_error_set(err, rc, "bad wildcard syntax");
  mqr_error_t e;
#define REFUSED(line, col)                                                                                             \
  do {                                                                                                                 \
    if (rc == MQR_ENOMEM || diags == NULL) {                                                                           \
      mqr_error_set_at(err, rc, cfg->file, (line), (col), "%s", e.message);                                            \
      mqr_router_close(r);                                                                                             \
      return rc;                                                                                                       \
    }                                                                                                                  \
    mqr__cfg_diags_add_error(diags, rc, cfg->file, (line), (col), e.message);                                          \
    if (!first) first = rc;                                                                                            \
  } while (0)
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    const cfg_settings_t *s = &cfg->settings[i];
    if ((rc = mqr_router_add_address_settings(r, mqr_str(s->match), &s->s, &e)) != 0) REFUSED(s->line, s->column);
  }
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    const cfg_address_t *a = &cfg->addresses[i];
    if ((rc = mqr_router_add_address(r, mqr_str(a->name), a->types, 0, NULL, &e)) != 0) {
      if (rc == MQR_EADDREXISTS) snprintf(e.message, sizeof e.message, "address '%s' is defined twice", a->name);
      REFUSED(a->line, a->column);
      continue;
    }
    for (uint32_t k = 0; k < a->n_queues; k++) {
      const cfg_queue_t *q = &a->queues[k];
      mqr_queue_config_t qc;
      queue_config(a, q, &qc);
      if ((rc = mqr_router_add_queue(r, &qc, NULL, &e)) != 0) REFUSED(q->line, q->column);
    }
  }
  for (uint32_t i = 0; i < cfg->n_diverts; i++)
    if ((rc = mqr__cfg_add_divert(cfg, i, r, &e)) != 0) REFUSED(cfg->diverts[i].line, cfg->diverts[i].column);
#undef REFUSED
  if (first) mqr_router_close(r);
  return first;
}

int mqr_config_build_router(const mqr_config_t *cfg, mqr_router_t *r, mqr_error_t *err) {
  return mqr__cfg_build(cfg, r, NULL, err);
}

/* ---- applying a reloaded config to a live router ---------------------------------- */

__attribute__((format(printf, 4, 5))) static void report(mqr_config_report_fn fn, void *ctx, bool applied,
                                                         const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (fn) fn(ctx, applied, line);
}

static bool same_str(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

bool mqr__cfg_listener_same(const mqr_listener_config_t *a, const mqr_listener_config_t *b) {
  const mqr_tls_config_t *ta = &a->tls, *tb = &b->tls;
  if (ta->enabled != tb->enabled || ta->client_auth != tb->client_auth || ta->min_version != tb->min_version ||
      !same_str(ta->cert, tb->cert) || !same_str(ta->key, tb->key) || !same_str(ta->ca, tb->ca) ||
      !same_str(ta->ciphers, tb->ciphers))
    return false;
  if (strcmp(a->name, b->name) || strcmp(a->host, b->host) || a->port != b->port || a->max_frame != b->max_frame ||
      a->handshake_timeout_ms != b->handshake_timeout_ms || a->idle_timeout_ms != b->idle_timeout_ms ||
      a->max_connections != b->max_connections || a->prefixes.count != b->prefixes.count ||
      a->protocols != b->protocols || memcmp(a->options, b->options, sizeof a->options) != 0)
    return false;
  for (uint32_t i = 0; i < a->prefixes.count; i++)
    if (!mqr_str_eq(a->prefixes.items[i].text, b->prefixes.items[i].text) ||
        a->prefixes.items[i].type != b->prefixes.items[i].type)
      return false;
  return true;
}

int mqr_config_apply(const mqr_config_t *cfg, const mqr_config_t *old, mqr_router_t *r, mqr_config_report_fn fn,
                     void *ctx, mqr_error_t *err) {
  int rc;
  mqr_error_t e;
  if (memcmp(&cfg->wildcard, &old->wildcard, sizeof cfg->wildcard) != 0)
    report(fn, ctx, false, "wildcard-addresses changed: not applied until a restart");
  bool listeners_same = cfg->n_listeners == old->n_listeners;
  for (uint32_t i = 0; listeners_same && i < cfg->n_listeners; i++)
    listeners_same = mqr__cfg_listener_same(&cfg->listeners[i].pub, &old->listeners[i].pub);
  if (!listeners_same) report(fn, ctx, false, "listeners changed: not applied until a restart");
  /* Settings: the new set replaces the old. */
  for (uint32_t i = 0; i < old->n_settings; i++) {
    bool kept = false;
    for (uint32_t k = 0; k < cfg->n_settings && !kept; k++)
      kept = strcmp(cfg->settings[k].match, old->settings[i].match) == 0;
    if (!kept) {
      mqr_router_remove_address_settings(r, mqr_str(old->settings[i].match));
      report(fn, ctx, true, "address-settings '%s' removed", old->settings[i].match);
    }
  }
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    const cfg_settings_t *st = &cfg->settings[i];
    if ((rc = mqr_router_add_address_settings(r, mqr_str(st->match), &st->s, &e)) != 0)
      return mqr_error_set_at(err, rc, cfg->file, st->line, st->column, "%s", e.message);
  }
  /* Addresses and queues: what is new is made; nothing is removed. */
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    const cfg_address_t *a = &cfg->addresses[i];
    mqr_address_t *live = mqr_router_find_address(r, mqr_str(a->name));
    if (live == NULL) {
      if ((rc = mqr_router_add_address(r, mqr_str(a->name), a->types, 0, NULL, &e)) != 0)
        return mqr_error_set_at(err, rc, cfg->file, a->line, a->column, "%s", e.message);
      report(fn, ctx, true, "address '%s' added", a->name);
    } else {
      mqr_routing_set_t have = mqr_address_routing_types(live);
      for (int t = 0; t < 2; t++) {
        if (mqr_routing_set_contains(a->types, t) && !mqr_routing_set_contains(have, t)) {
          if ((rc = mqr_router_add_routing_type(r, mqr_str(a->name), t, &e)) != 0)
            return mqr_error_set_at(err, rc, cfg->file, a->line, a->column, "%s", e.message);
          report(fn, ctx, true, "address '%s' gained %s", a->name, mqr_routing_type_name(t));
        } else if (!mqr_routing_set_contains(a->types, t) && mqr_routing_set_contains(have, t)) {
          report(fn, ctx, false, "address '%s' keeps %s: removing a routing type needs a restart", a->name,
                 mqr_routing_type_name(t));
        }
      }
    }
    for (uint32_t k = 0; k < a->n_queues; k++) {
      const cfg_queue_t *q = &a->queues[k];
      mqr_queue_t *lq = mqr_router_find_queue(r, mqr_str(q->name));
      if (lq == NULL) {
        mqr_queue_config_t qc;
        queue_config(a, q, &qc);
        if ((rc = mqr_router_add_queue(r, &qc, NULL, &e)) != 0)
          return mqr_error_set_at(err, rc, cfg->file, q->line, q->column, "%s", e.message);
        report(fn, ctx, true, "queue '%s' added to address '%s'", q->name, a->name);
        continue;
      }
      if (!mqr_str_eq(mqr_address_name(mqr_queue_address(lq)), mqr_str(a->name)) ||
          mqr_queue_routing_type(lq) != q->type || mqr_queue_durable(lq) != q->durable ||
          mqr_queue_max_consumers(lq) != q->max_consumers ||
          mqr_queue_purge_on_no_consumers(lq) != q->purge_on_no_consumers || mqr_queue_exclusive(lq) != q->exclusive ||
          mqr_queue_ring_size(lq) != q->ring_size || mqr_queue_group_buckets(lq) != q->group_buckets ||
          mqr_queue_group_rebalance(lq) != q->group_rebalance ||
          mqr_queue_consumers_before_dispatch(lq) != q->consumers_before_dispatch ||
          mqr_queue_delay_before_dispatch(lq) != q->delay_before_dispatch ||
          !mqr_str_eq(mqr_queue_last_value_key(lq), mqr_str(q->last_value_key)) ||
          !mqr_str_eq(mqr_queue_group_first_key(lq), mqr_str(q->group_first_key)) ||
          mqr_queue_non_destructive(lq) != q->non_destructive)
        report(fn, ctx, false, "queue '%s' changed: only 'enabled' applies without a restart", q->name);
      if (mqr_queue_enabled(lq) != q->enabled) {
        mqr_queue_set_enabled(lq, q->enabled);
        report(fn, ctx, true, "queue '%s' %s", q->name, q->enabled ? "enabled" : "disabled");
      }
    }
  }
  if ((rc = mqr__cfg_apply_diverts(cfg, old, r, fn, ctx, err)) != 0) return rc;
  /* What the old config listed and this one does not: the caller's, under the address
   * settings config-delete-queues and config-delete-addresses (a broker holds their
   * messages). */
  return 0;
}
