/* The broker's life: creating it (the router from the config, the listeners), the loop
 * pass that writes what callbacks gathered, reload, and closing it. The send path is
 * send.c, dispatch and acknowledgements dispatch.c, subscriptions and sessions
 * subscribe.c, in-process consumers inproc.c, statistics stats.c; the connection layer
 * is ../net, the protocol heads ../heads. */
#include <stdio.h>

#include "auth.h"
#include "durable.h"

/* ---- the embedding API --------------------------------------------------------------------- */

/* Writes gathered in a loop pass leave at the start of the next (the idle phase, which
 * also keeps the poll from blocking while something waits). */
static void free_broker(mqr_broker_t *b);

static void idle_cb(uv_idle_t *h) {
  mqr_broker_t *b = h->data;
  bool more = mqr__server_flush(b);
  if (mqr__grave_step(b)) more = true;  /* a slice of what deleted queues left */
  if (mqr__movers_step(b)) more = true; /* and of the moves under way */
  if (!more) {
    uv_idle_stop(&b->idle);
    b->idle_on = false;
  }
}

int mqr_broker_create(uv_loop_t *loop, const mqr_broker_options_t *opt, mqr_broker_t **out, mqr_error_t *err) {
  int rc = mqr_broker_register_protocols();
  if (rc) return mqr_error_set(err, rc, "the broker's protocols cannot be registered with the config loader");
  mqr_broker_t *b = mqr_calloc(1, sizeof *b);
  if (b == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory creating the broker");
  b->loop = loop;
  b->idle_fn = idle_cb;
  b->last_handle_fn = free_broker;
  if (opt) b->opt = *opt;
  if (b->opt.server_name == NULL) b->opt.server_name = "mqrd";
  if (b->opt.max_credit == 0) b->opt.max_credit = 65536;
  if (b->opt.max_pending_write == 0) b->opt.max_pending_write = 4u << 20;
  mqr__pool_init(&b->entries, sizeof(mqr__entry_t), 1u << 16);
  mqr__pool_init(&b->consumers, sizeof(mqr_broker_consumer_t), 1024);
  mqr__session_init(b, &b->inproc, NULL);
  b->config = b->opt.config;
  if (b->config == NULL) {
    mqr_error_t items[4];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 4);
    if ((rc = mqr_config_load_default(&b->own_config, &d)) != 0) {
      mqr_error_set(err, rc, "the embedded config: %s", d.count ? items[0].message : mqr_strerror(rc));
      mqr_free(b);
      return rc;
    }
    b->config = b->own_config;
  }
  b->global_max = mqr_config_global_max_size(b->config);
  if ((rc = mqr_config_build_router(b->config, &b->router, err)) != 0) {
    mqr_config_destroy(b->own_config);
    mqr_free(b);
    return rc;
  }
  uv_idle_init(loop, &b->idle);
  b->idle.data = b;
  mqr__redeliver_init(b);
  mqr__expiry_init(b);
  b->open_handles = 3; /* the idle handle, the redelivery timer, the expiry scan's */
  mqr_router_set_create_check(&b->router, mqr__access_create);
  if ((rc = mqr__sec_open(b, err)) != 0) { /* the users file, the security-settings */
    mqr_broker_close(b, NULL, NULL);
    return rc;
  }
  /* The config's queues are the config's to make again at each start (configured.c);
   * then what the journal holds. */
  if (mqr__configured_start(b) != 0) {
    mqr_error_set(err, MQR_ENOMEM, "out of memory creating the broker");
    mqr_broker_close(b, NULL, NULL);
    return MQR_ENOMEM;
  }
  /* The listeners bind first: a start that fails on a port in use leaves no journal
   * behind. No connection is taken before the loop runs, after the journal is open. */
  if ((b->opt.listen && (rc = mqr__server_listen(b, err)) != 0) || (rc = mqr__durable_open(b, err)) != 0 ||
      (b->opt.listen && (rc = mqr__server_ready(b, err)) != 0)) {
    mqr_broker_close(b, NULL, NULL);
    return rc;
  }
  mqr__configured_recovered(b); /* the config's queues recorded; those it no longer lists, kept or deleted */
  b->started = true;
  b->started_ns = uv_hrtime();
  *out = b;
  return 0;
}

static void free_broker(mqr_broker_t *b) {
  mqr__movers_free(b);
  mqr__grave_drain(b);
  mqr__redeliver_free(b);
  while (b->queues) {
    mqr__bq_t *bq = b->queues;
    b->queues = bq->next;
    mqr__entry_t *e;
    while ((e = bq->store.ops->pop(&bq->store)) != NULL) {
      mqr__msg_release(b, e->msg);
      mqr__pool_put(&b->entries, e);
    }
    for (uint32_t i = 0; i < bq->n_consumers; i++) { /* in-process consumers left subscribed */
      mqr_broker_consumer_t *c = bq->consumers[i];
      while (c->unacked_head) {
        mqr__entry_t *u = c->unacked_head;
        c->unacked_head = u->next;
        mqr__msg_release(b, u->msg);
        mqr__pool_put(&b->entries, u);
      }
      mqr__idx_clear(c);
      mqr_free(c->refused);
      mqr__pool_put(&b->consumers, c);
    }
    mqr_queue_set_data(bq->q, NULL);
    mqr__kinds_free(bq);
    mqr_free(bq->consumers);
    mqr_free(bq);
  }
  while (b->accts) {
    mqr__acct_t *a = b->accts;
    b->accts = a->next;
    mqr_address_set_data(a->address, NULL);
    mqr_free(a->blocked);
    mqr_free(a);
  }
  mqr__durable_free(b);
  mqr__sec_free(b);
  mqr_router_close(&b->router);
  mqr__divert_free(b);
  mqr__pool_free(&b->entries);
  mqr__server_free(b);
  mqr__pool_free(&b->consumers);
  mqr__msg_pools_free(b);
  for (uint32_t d = 0; d < MQR__DELIVER_DEPTH; d++) {
    mqr_free(b->deliver[d].frame);
    mqr_free(b->deliver[d].arena);
  }
  mqr_config_destroy(b->own_config);
  void (*cb)(void *) = b->close_cb;
  void *arg = b->close_arg;
  mqr_free(b);
  if (cb) cb(arg);
}

static void idle_closed(uv_handle_t *h) { mqr__broker_handle_closed(h->data); }

void mqr_broker_close(mqr_broker_t *b, void (*cb)(void *arg), void *arg) {
  if (b->closing) return;
  b->closing = true;
  b->close_cb = cb;
  b->close_arg = arg;
  uint64_t kept = b->dur ? b->dur->live_msgs : 0, replicated = 0, waiting = mqr__durable_waiting(b->dur);
  for (mqr__bq_t *bq = b->dur && b->dur->cluster ? b->queues : NULL; bq; bq = bq->next)
    if (mqr__replicate_group(b, bq) >= 0) replicated += bq->store.depth + bq->in_flight;
  uint64_t accounted = kept + replicated + waiting;
  if (!b->started)
    ;
  else if (b->dur && b->dur->cluster)
    mqr__log(b, MQR_LOG_INFO,
             "closing: %llu durable messages stay in the journal (%s), %llu on replicated queues in the cluster, "
             "%llu not yet committed (their senders are told the broker closed); %llu non-durable messages (or on "
             "non-durable queues) go with the broker",
             (unsigned long long)kept, b->dur->dir, (unsigned long long)replicated, (unsigned long long)waiting,
             (unsigned long long)(b->stats.messages > accounted ? b->stats.messages - accounted : 0));
  else if (b->dur)
    mqr__log(b, MQR_LOG_INFO,
             "closing: %llu durable messages stay in the journal (%s); %llu non-durable messages (or on "
             "non-durable queues) go with the broker",
             (unsigned long long)kept, b->dur->dir, (unsigned long long)(b->stats.messages - kept));
  else
    mqr__log(b, MQR_LOG_INFO, "closing: %llu messages (%llu bytes) held in memory go with the broker (no persistence)",
             (unsigned long long)b->stats.messages, (unsigned long long)b->stats.bytes);
  mqr__server_close(b);  /* listeners and connections: each closed handle counts down */
  mqr__sec_close(b);     /* answers delayed after failed authentications are not waited for */
  mqr__durable_close(b); /* sends waiting for their fdatasync finish first */
  uv_idle_stop(&b->idle);
  uv_close((uv_handle_t *)&b->idle, idle_closed);
  mqr__redeliver_close(b);
  mqr__expiry_close(b);
}

mqr_router_t *mqr_broker_router(mqr_broker_t *b) { return &b->router; }

/* ---- reload -------------------------------------------------------------------------------- */

typedef struct {
  mqr_broker_t *b;
  uint32_t skipped;
} reload_t;

static void reload_report(void *ctx, bool applied, const char *line) {
  reload_t *x = ctx;
  mqr__log(x->b, applied ? MQR_LOG_INFO : MQR_LOG_WARN, "reload: %s", line);
  if (!applied) x->skipped++;
}

/* Whether two persistence sections differ: the journal is opened once, at start. */
static bool persistence_differs(const mqr_persistence_config_t *a, const mqr_persistence_config_t *c) {
  bool dirs = (a->directory == NULL) != (c->directory == NULL) ||
              (a->directory && c->directory && strcmp(a->directory, c->directory) != 0);
  return a->enabled != c->enabled || dirs || a->journal_file_size != c->journal_file_size ||
         a->journal_min_files != c->journal_min_files || a->journal_pool_files != c->journal_pool_files ||
         a->journal_buffer_timeout_ns != c->journal_buffer_timeout_ns ||
         a->journal_buffer_size != c->journal_buffer_size || a->journal_sync != c->journal_sync ||
         a->journal_compact_min_files != c->journal_compact_min_files ||
         a->journal_compact_percentage != c->journal_compact_percentage;
}

int mqr_broker_reload(mqr_broker_t *b, const mqr_config_t *cfg, uint32_t *skipped, mqr_error_t *err) {
  reload_t x = {b, 0};
  if (persistence_differs(mqr_config_persistence(b->config), mqr_config_persistence(cfg)))
    reload_report(&x, false, "persistence changed: the journal keeps its settings until a restart");
  const mqr_cluster_config_t *was = mqr_config_cluster(b->config), *now = mqr_config_cluster(cfg);
  if (was->enabled != now->enabled || (was->enabled && (was->node_id != now->node_id || was->groups != now->groups ||
                                                        was->n_peers != now->n_peers || strcmp(was->bind, now->bind))))
    reload_report(&x, false, "cluster changed: the cluster keeps its settings until a restart");
  int rc = mqr_config_apply(cfg, b->config, &b->router, reload_report, &x, err);
  /* Accounts take the settings as they now resolve; producers paused on a limit that grew
   * may go on. */
  b->global_max = mqr_config_global_max_size(cfg);
  bool global_room = b->global_max < 0 || (int64_t)b->stats.bytes < b->global_max;
  if (global_room) b->global_blocked = false;
  for (mqr__acct_t *a = b->accts; a; a = a->next) {
    mqr__acct_settings(a);
    bool blocks = a->policy == MQR_FULL_BLOCK || (a->policy == MQR_FULL_PAGE && b->dur == NULL);
    if (a->n_blocked && ((global_room && (a->max < 0 || a->bytes < a->max)) || !blocks)) mqr__acct_release(a);
  }
  if (rc == 0) {
    mqr__sec_reload(b, cfg); /* the users file and settings again (the old kept on an error) */
    mqr__server_reload(b);   /* the listeners' TLS certificates and keys again */
    mqr__configured_reload(b, b->config, cfg, reload_report, &x);
    b->config = cfg;
    if (b->own_config && cfg != b->own_config) {
      mqr_config_destroy(b->own_config);
      b->own_config = NULL;
    }
  }
  if (skipped) *skipped = x.skipped;
  return rc;
}
