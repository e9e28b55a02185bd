/* Management, as Artemis's AddressControl and QueueControl: addresses and queues made and
 * deleted at run time, a queue paused and resumed, browsed, its messages moved to another
 * queue, its consumers listed (mqr/broker.h). The native protocol's MANAGE frame
 * (heads/native/manage.c), the HTTP API (heads/http/api.c) and `mqr address|queue` call
 * these. None is on the send path. */
#include <stdio.h>
#include <stdlib.h>

#include "durable.h"

int mqr_broker_create_address(mqr_broker_t *b, mqr_str_t name, mqr_routing_set_t types, mqr_error_t *err) {
  if (mqr_routing_set_is_empty(types)) return mqr_error_set(err, MQR_EINVAL, "an address needs a routing type");
  mqr_address_t *a;
  int rc = mqr_router_add_address(&b->router, name, types, 0, &a, err);
  if (rc || b->dur == NULL) return rc;
  /* Recorded, so that a restart makes it again (Artemis persists an address it is asked
   * to make). */
  mqr__acct_t *acct = mqr__acct_of(b, a);
  rc = acct ? mqr__durable_address_made(b, acct) : MQR_ENOMEM;
  if (rc) {
    if (acct) mqr__acct_drop(b, acct);
    mqr_router_remove_address(&b->router, name, false, NULL);
    return mqr_error_set(err, rc, "address '%.*s' is not made: %s", (int)name.len, name.ptr,
                         rc == MQR_EIO ? "the journal cannot record it" : mqr_strerror(rc));
  }
  return 0;
}

int mqr_broker_delete_address(mqr_broker_t *b, mqr_str_t name, bool force, mqr_error_t *err) {
  mqr_address_t *a = mqr_router_find_address(&b->router, name);
  if (a == NULL) return mqr_error_set(err, MQR_ENOADDR, "address '%.*s' does not exist", (int)name.len, name.ptr);
  uint32_t n = mqr_address_queue_count(a);
  if (n && !force)
    return mqr_error_set(err, MQR_EADDRHASQUEUES, "address '%.*s' has %u queue(s) (force deletes them)", (int)name.len,
                         name.ptr, n);
  for (uint32_t i = 0; i < n; i++)
    if (mqr_queue_consumer_count(mqr_address_queue(a, i))) {
      mqr_str_t qn = mqr_queue_name(mqr_address_queue(a, i));
      return mqr_error_set(err, MQR_EQUEUEINUSE, "address '%.*s': queue '%.*s' has consumers", (int)name.len, name.ptr,
                           (int)qn.len, qn.ptr);
    }
  mqr__acct_t *acct = mqr_address_data(a);
  if (acct && (acct->pager || acct->n_blocked))
    return mqr_error_set(err, MQR_EQUEUEINUSE, "address '%.*s' still pages or has producers waiting", (int)name.len,
                         name.ptr);
  /* Its queues, last first (each deletion changes the list). The name is copied: a
   * deletion may take an auto-created address with its last queue. */
  char *copy = mqr_malloc(name.len + 1);
  if (copy == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  memcpy(copy, name.ptr, name.len);
  copy[name.len] = 0;
  name = mqr_str_n(copy, name.len);
  int rc = 0;
  while (rc == 0 && (a = mqr_router_find_address(&b->router, name)) != NULL && mqr_address_queue_count(a)) {
    mqr_queue_t *q = mqr_address_queue(a, mqr_address_queue_count(a) - 1);
    rc = mqr_broker_delete_queue(b, mqr_queue_name(q), err);
  }
  if (rc == 0 && (a = mqr_router_find_address(&b->router, name)) != NULL) {
    if ((acct = mqr_address_data(a)) != NULL) {
      /* Its deleted queues' messages wait in the graveyard with this account on them:
       * released first (an address's deletion is rare; this is the one place it waits). */
      if (acct->bytes) mqr__grave_drain(b);
      if ((rc = mqr__durable_address_deleted(b, acct)) != 0) {
        mqr_free(copy);
        return mqr_error_set(err, rc, "address '%.*s' is kept: the journal cannot record its deletion", (int)name.len,
                             name.ptr);
      }
      mqr__acct_drop(b, acct);
    }
    rc = mqr_router_remove_address(&b->router, name, false, err);
  }
  mqr_free(copy);
  return rc;
}

int mqr_broker_create_queue(mqr_broker_t *b, const mqr_queue_config_t *cfg, mqr_error_t *err) {
  mqr_queue_t *q;
  int rc = mqr_router_add_queue(&b->router, cfg, &q, err);
  if (rc) return rc;
  /* Its state now: a durable queue is recorded in the journal as it is made. */
  mqr__bq_t *bq = mqr__bq_of(b, q);
  if (bq && b->clustered && (rc = mqr__replicate_serves(b, bq, err)) != 0) {
    mqr__queue_drop(b, bq); /* a replicated address's queues are made where its group is led */
    return rc;
  }
  if (bq == NULL || (mqr__queue_journaled(q) && b->dur && bq->jfile == 0 && !bq->replicated_topo)) {
    bool nomem = bq == NULL;
    if (bq)
      mqr__queue_drop(b, bq);
    else
      mqr_router_remove_queue(&b->router, cfg->name, NULL);
    return nomem
               ? mqr_error_set(err, MQR_ENOMEM, "out of memory making queue '%.*s'", (int)cfg->name.len, cfg->name.ptr)
               : mqr_error_set(err, MQR_EIO, "queue '%.*s' is not made: the journal cannot record it",
                               (int)cfg->name.len, cfg->name.ptr);
  }
  return 0;
}

static mqr__bq_t *queue_of(mqr_broker_t *b, mqr_str_t name, mqr_error_t *err) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, name);
  if (q == NULL) {
    mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)name.len, name.ptr);
    return NULL;
  }
  mqr__bq_t *bq = mqr__bq_of(b, q);
  if (bq == NULL) mqr_error_set(err, MQR_ENOMEM, "out of memory");
  return bq;
}

int mqr_broker_queue_served(mqr_broker_t *b, mqr_str_t name, mqr_error_t *err) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, name);
  if (q == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)name.len, name.ptr);
  mqr__bq_t *bq = mqr_queue_data(q);
  return bq && b->clustered ? mqr__replicate_serves(b, bq, err) : 0;
}

int mqr_broker_pause_queue(mqr_broker_t *b, mqr_str_t name, bool paused, bool persist, mqr_error_t *err) {
  mqr__bq_t *bq = queue_of(b, name, err);
  if (bq == NULL) return err ? err->code : MQR_ENOQUEUE;
  bool was = bq->paused;
  bq->paused = paused;
  /* Recorded when asked, or when a recorded pause is lifted (so that it stays lifted). */
  if ((persist || (!paused && bq->pause_kept)) && b->dur) {
    int rc = mqr__durable_queue_state(b, bq);
    if (rc) {
      bq->paused = was;
      return mqr_error_set(err, rc, "queue '%.*s': the journal cannot record its state", (int)name.len, name.ptr);
    }
  }
  mqr__log(b, MQR_LOG_INFO, "queue '%.*s' %s%s", (int)name.len, name.ptr, paused ? "paused" : "resumed",
           persist && b->dur ? " (recorded)" : "");
  if (!paused) mqr__dispatch(bq);
  return 0;
}

/* A stored message as a Message frame, decoded (subscription and delivery 0). */
static int as_frame(const mqr__entry_t *e, mqr_frame_t *f, uint8_t **frame, uint8_t **arena) {
  uint8_t head[MQR_MESSAGE_HEADER_MAX];
  size_t hl = mqr_message_head(head, 0, 0, e->delivery_count, e->msg->len), n = hl + e->msg->len;
  size_t cap = 16 * n + 1024; /* room for any frame this long (inproc.c) */
  *frame = mqr_malloc(n);
  *arena = mqr_malloc(cap);
  if (*frame == NULL || *arena == NULL) return MQR_ENOMEM;
  memcpy(*frame, head, hl);
  memcpy(*frame + hl, e->msg->data, e->msg->len);
  mqr_avro_arena_t ar = {*arena, cap, 0};
  return mqr_frame_decode(*frame + MQR_FRAME_HEADER, n - MQR_FRAME_HEADER, f, &ar, NULL);
}

int64_t mqr_broker_browse(mqr_broker_t *b, mqr_str_t name, uint32_t max, mqr_broker_browse_fn fn, void *arg,
                          mqr_error_t *err) {
  mqr__bq_t *bq = queue_of(b, name, err);
  if (bq == NULL) return err ? err->code : MQR_ENOQUEUE;
  int64_t n = 0;
  /* The callback may not change the queue (it is told so); a change seen is a stop. */
  uint64_t removals = bq->store.removals;
  for (mqr__entry_t *e = bq->store.ops->peek(&bq->store); e && (max == 0 || n < max);
       e = bq->store.ops->next(&bq->store, e)) {
    uint8_t *frame = NULL, *arena = NULL;
    mqr_frame_t f;
    int rc = as_frame(e, &f, &frame, &arena);
    if (rc == 0) {
      fn(arg, &f.u.message);
      n++;
    }
    mqr_free(frame);
    mqr_free(arena);
    if (rc == MQR_ENOMEM)
      return mqr_error_set(err, MQR_ENOMEM, "out of memory browsing '%.*s'", (int)name.len, name.ptr);
    if (bq->store.removals != removals) break;
  }
  return n;
}

/* A move of many messages (mqr_broker_move_messages): the entries taken out of their
 * queue, moved MOVE_SLICE at a time, the first slice in the call and the rest in the
 * loop's idle phase, so that a move of 100,000 does not hold the loop. The queue stays
 * pinned until the last has gone. */
#define MOVE_SLICE 1024

struct mqr__mover_s {
  mqr__bq_t *bq;
  mqr__entry_t *head; /* linked by next */
  char *fq;           /* the target, address::queue */
  mqr__move_t mv;
  uint64_t moved, failed;
  struct mqr__mover_s *next;
};

/* Moves up to n of m's entries; an entry whose copy cannot be sent goes back to its queue. */
static void move_some(mqr_broker_t *b, struct mqr__mover_s *m, uint32_t n) {
  for (; n && m->head; n--) {
    mqr__entry_t *e = m->head;
    m->head = e->next;
    e->next = NULL;
    if (m->failed == 0 && mqr__move(b, m->bq, e, &m->mv)) {
      m->bq->acked++; /* it left the queue as an acknowledged message does */
      m->bq->bytes -= e->msg->len;
      if (e->jbq) mqr__durable_removed(b, e);
      mqr__msg_release(b, e->msg);
      mqr__pool_put(&b->entries, e);
      m->moved++;
    } else {
      m->failed++;
      m->bq->store.ops->push(&m->bq->store, e); /* kept, behind what stays */
    }
  }
}

static void mover_done(mqr_broker_t *b, struct mqr__mover_s *m) {
  if (m->failed)
    mqr__log(b, MQR_LOG_WARN, "move to '%s': %llu messages could not be moved (%llu were); they stay in '%.*s'", m->fq,
             (unsigned long long)m->failed, (unsigned long long)m->moved, (int)mqr_queue_name(m->bq->q).len,
             mqr_queue_name(m->bq->q).ptr);
  mqr__dispatch(m->bq);
  mqr__bq_unpin(b, m->bq);
  mqr_free(m->fq);
  mqr_free(m);
}

bool mqr__movers_step(mqr_broker_t *b) {
  struct mqr__mover_s *m = b->movers;
  if (m == NULL) return false;
  move_some(b, m, MOVE_SLICE);
  if (m->head == NULL) {
    b->movers = m->next;
    mover_done(b, m);
  }
  return b->movers != NULL;
}

void mqr__movers_free(mqr_broker_t *b) {
  while (b->movers) {
    struct mqr__mover_s *m = b->movers;
    b->movers = m->next;
    while (m->head) { /* back to their queue, which the broker then frees with the rest */
      mqr__entry_t *e = m->head;
      m->head = e->next;
      e->next = NULL;
      m->bq->store.ops->push(&m->bq->store, e);
    }
    m->bq->pins--;
    mqr_free(m->fq);
    mqr_free(m);
  }
}

int64_t mqr_broker_move_messages(mqr_broker_t *b, mqr_str_t from, mqr_str_t filter, mqr_str_t to, mqr_error_t *err) {
  mqr__bq_t *bq = queue_of(b, from, err);
  if (bq == NULL) return err ? err->code : MQR_ENOQUEUE;
  mqr_queue_t *tq = mqr_router_find_queue(&b->router, to);
  if (tq == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)to.len, to.ptr);
  if (tq == bq->q) return mqr_error_set(err, MQR_EINVAL, "a queue's messages cannot move to itself");
  mqr_filter_t *f = NULL;
  int rc = mqr_router_compile_filter(&b->router, filter, &f, err);
  if (rc) return rc;
  struct mqr__mover_s *m = mqr_calloc(1, sizeof *m);
  /* To `to` alone: its address::queue. */
  mqr_str_t an = mqr_address_name(mqr_queue_address(tq)), qn = mqr_queue_name(tq);
  char *fq = m ? mqr_malloc(an.len + 3 + qn.len) : NULL;
  if (fq == NULL) {
    mqr_free(m);
    mqr_filter_free(f);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  }
  memcpy(fq, an.ptr, an.len);
  memcpy(fq + an.len, "::", 2);
  memcpy(fq + an.len + 2, qn.ptr, qn.len);
  fq[an.len + 2 + qn.len] = 0;
  m->bq = bq;
  m->fq = fq;
  m->mv = (mqr__move_t){.why = "moved", .address = mqr_str_n(fq, an.len + 2 + qn.len)};
  /* The matching entries, taken out first (a copy may come back to this queue's address). */
  int64_t n = 0;
  mqr__entry_t **last = &m->head;
  for (mqr__entry_t *e = bq->store.ops->peek(&bq->store), *next; e; e = next) {
    next = bq->store.ops->next(&bq->store, e);
    if (f) {
      uint32_t nv;
      const mqr_value_t *v = mqr__msg_values(b, e->msg, &nv);
      bool match = mqr_filter_matches(f, v, nv);
      mqr__msg_values_clear(b);
      if (!match) continue;
    }
    bq->store.ops->remove(&bq->store, e);
    e->next = NULL;
    *last = e;
    last = &e->next;
    n++;
  }
  mqr_filter_free(f);
  mqr__bq_pin(bq); /* the copies' callbacks may delete it; it stays until the last is moved */
  move_some(b, m, MOVE_SLICE);
  if (m->failed) { /* the first slice could not go: nothing more is tried, and the call says so */
    move_some(b, m, UINT32_MAX);
    int64_t moved = (int64_t)m->moved;
    mover_done(b, m);
    return mqr_error_set(err, MQR_EIO, "a message could not be moved (%lld moved before it)", (long long)moved);
  }
  if (m->head == NULL) {
    mover_done(b, m);
    return n;
  }
  struct mqr__mover_s **at = &b->movers; /* the rest, in the idle phase, after the moves before it */
  while (*at) at = &(*at)->next;
  *at = m;
  mqr__broker_wake(b);
  return n;
}

int64_t mqr_broker_list_consumers(mqr_broker_t *b, mqr_str_t queue,
                                  void (*fn)(void *arg, const mqr_broker_consumer_info_t *c), void *arg,
                                  mqr_error_t *err) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, queue);
  if (q == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)queue.len, queue.ptr);
  mqr__bq_t *bq = mqr_queue_data(q);
  uint32_t n = bq ? bq->n_consumers : 0;
  for (uint32_t i = 0; i < n; i++) {
    const mqr_broker_consumer_t *c = bq->consumers[i];
    mqr_broker_consumer_info_t info = {c->session && c->session != &b->inproc ? c->session->id : 0,
                                       c->subscription,
                                       c->credit,
                                       0,
                                       c->next_delivery - 1,
                                       c->selector ? mqr_filter_text(c->selector) : mqr_str_n("", 0)};
    for (const mqr__entry_t *e = c->unacked_head; e; e = e->next) info.in_flight++;
    fn(arg, &info);
  }
  return n;
}

uint64_t mqr_broker_purge(mqr_broker_t *b, mqr_queue_t *q) {
  mqr__bq_t *bq = mqr_queue_data(q);
  uint64_t n = 0;
  for (mqr__entry_t *e; bq && (e = bq->store.ops->pop(&bq->store)) != NULL; n++) {
    bq->acked++; /* it left the queue as an acknowledged message does */
    bq->bytes -= e->msg->len;
    if (e->jbq) mqr__durable_removed(b, e);
    mqr__grave_put(b, e); /* released in slices (grave.c) */
  }
  mqr__grave_step(b);                      /* the first slice now: a small purge is done at once */
  if (bq && (bq->held || bq->scheduled)) { /* and those waiting out a delay or their schedule */
    uint64_t h = mqr__redeliver_drop_queue(b, bq, true, false);
    bq->acked += h;
    n += h;
  }
  return n;
}

static bool arg_is(mqr_str_t a, const char *lit) { return mqr_str_eq(a, mqr_str(lit)); }

int mqr__queue_option(mqr_queue_config_t *qc, mqr_str_t k, mqr_str_t v, mqr_error_t *err) {
  bool t = arg_is(v, "true"), f = arg_is(v, "false");
  char num[32];
  snprintf(num, sizeof num, "%.*s", (int)(v.len < 31 ? v.len : 31), v.ptr);
  char *end;
  long long n = strtoll(num, &end, 10);
  bool is_num = v.len && v.len < 31 && *end == 0;
#define BOOL(name, field)                                                                                              \
  if (arg_is(k, name)) {                                                                                               \
    if (!t && !f) return mqr_error_set(err, MQR_EINVAL, "%s must be true or false", name);                             \
    qc->field = t;                                                                                                     \
    return 0;                                                                                                          \
  }
#define NUM(name, field, min, max)                                                                                     \
  if (arg_is(k, name)) {                                                                                               \
    if (!is_num || n < (min) || n > (max))                                                                             \
      return mqr_error_set(err, MQR_EINVAL, "%s must be an integer from %lld to %lld", name, (long long)(min),         \
                           (long long)(max));                                                                          \
    qc->field = n;                                                                                                     \
    return 0;                                                                                                          \
  }
  BOOL("durable", durable)
  BOOL("purge-on-no-consumers", purge_on_no_consumers)
  BOOL("enabled", enabled)
  BOOL("exclusive", exclusive)
  BOOL("group-rebalance", group_rebalance)
  BOOL("non-destructive", non_destructive)
  BOOL("auto-create-address", auto_create_address)
  NUM("max-consumers", max_consumers, -1, INT32_MAX)
  NUM("ring-size", ring_size, -1, INT64_MAX)
  NUM("group-buckets", group_buckets, -1, INT32_MAX)
  NUM("consumers-before-dispatch", consumers_before_dispatch, 0, INT32_MAX)
  NUM("delay-before-dispatch", delay_before_dispatch, -1, INT64_MAX)
#undef BOOL
#undef NUM
  if (arg_is(k, "filter")) return qc->filter = v, 0;
  if (arg_is(k, "last-value-key")) return qc->last_value_key = v, 0;
  if (arg_is(k, "group-first-key")) return qc->group_first_key = v, 0;
  return mqr_error_set(
      err, MQR_EINVAL,
      "unknown queue option '%.*s' (durable, filter, max-consumers, purge-on-no-consumers, enabled, "
      "exclusive, last-value-key, ring-size, group-buckets, group-rebalance, group-first-key, non-destructive, "
      "consumers-before-dispatch, delay-before-dispatch, auto-create-address)",
      (int)k.len, k.ptr);
}
