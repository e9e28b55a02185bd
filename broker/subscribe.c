/* Subscriptions by the Artemis rules (a queue, address::queue, or an address with a
 * routing type, making the queue when allowed), consumers and the sessions that own them
 * (core.h): a head's client and everything it holds. */
#include <stdio.h>

#include <errno.h>
#include <stdlib.h>

#include "durable.h"

/* A made-up subscription queue name: the target, then a number unique in the broker. */
static mqr_str_t temp_name(mqr_broker_t *b, mqr_str_t target, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%.*s.sub-%lld", (int)(target.len > cap - 40 ? cap - 40 : target.len), target.ptr,
                   (long long)++b->next_session);
  return mqr_str_n(buf, (size_t)n);
}

/* Whether a (trimmed) filter text is the same as another. */
static bool same_filter(mqr_str_t a, mqr_str_t b) {
  while (a.len && (a.ptr[0] == ' ' || a.ptr[a.len - 1] == ' '))
    a = a.ptr[0] == ' ' ? mqr_str_n(a.ptr + 1, a.len - 1) : mqr_str_n(a.ptr, a.len - 1);
  while (b.len && (b.ptr[0] == ' ' || b.ptr[b.len - 1] == ' '))
    b = b.ptr[0] == ' ' ? mqr_str_n(b.ptr + 1, b.len - 1) : mqr_str_n(b.ptr, b.len - 1);
  return mqr_str_eq(a, b);
}

/* MQR__SUB_RENEW's subscription queue q found: kept when its filter is the selector (or
 * it is the config's), else made anew when it has no consumers, else refused. 0 with
 * *out NULL when q is gone; or an error. */
static int subscription_filter(mqr_broker_t *b, mqr_queue_t *q, mqr_str_t selector, mqr_queue_t **out,
                               mqr_error_t *err) {
  mqr__bq_t *bq = mqr_queue_data(q);
  *out = q;
  if ((bq && bq->configured) || same_filter(mqr_queue_filter(q), selector)) return 0;
  mqr_str_t name = mqr_queue_name(q);
  if (mqr_queue_consumer_count(q) || (bq && bq->pins))
    return mqr_error_set(err, MQR_EQUEUEINUSE,
                         "subscription '%.*s' has consumers with another selector: it cannot be made anew",
                         (int)name.len, name.ptr);
  if (bq == NULL) {
    *out = NULL;
    return mqr_router_remove_queue(&b->router, name, err);
  }
  int rc = mqr__durable_queue_deleted(b, bq);
  if (rc)
    return mqr_error_set(err, rc, "subscription '%.*s' with another selector is kept: %s", (int)name.len, name.ptr,
                         mqr_strerror(rc));
  mqr__queue_drop(b, bq);
  *out = NULL;
  return 0;
}

static int find_or_make_queue(mqr_broker_t *b, mqr__principal_t *who, mqr_str_t target, int rt, mqr_str_t queue,
                              unsigned flags, mqr_str_t selector, bool *filtered, bool *temporary, mqr_queue_t **out,
                              mqr_error_t *err) {
  *temporary = false;
  *filtered = false;
  mqr_str_t address = target, qname = queue;
  const char *sep = NULL;
  for (size_t i = 0; i + 1 < target.len; i++)
    if (target.ptr[i] == ':' && target.ptr[i + 1] == ':') {
      sep = target.ptr + i;
      break;
    }
  if (sep) { /* address::queue */
    address = mqr_str_n(target.ptr, (size_t)(sep - target.ptr));
    qname = mqr_str_n(sep + 2, target.len - address.len - 2);
  }
  if (rt == MQR_ROUTING_NONE) {
    mqr_queue_t *q = mqr_router_find_queue(&b->router, sep ? qname : target);
    if (q == NULL)
      return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)(sep ? qname : target).len,
                           (sep ? qname : target).ptr);
    if (sep && !mqr_str_eq(mqr_address_name(mqr_queue_address(q)), address))
      return mqr_error_set(err, MQR_EQUEUEADDR, "queue '%.*s' is not on address '%.*s'", (int)qname.len, qname.ptr,
                           (int)address.len, address.ptr);
    /* CONSUME on the queue's address, as Artemis checks a consumer. */
    if (!mqr__may(b, who, MQR_PERM_CONSUME, mqr_address_name(mqr_queue_address(q)), err)) return MQR_EPERM;
    *out = q;
    return 0;
  }
  /* CONSUME on the address subscribed to: a wildcard subscription's is checked as the
   * name it is (news.# needs a match that covers news.#, not one of news.eu alone). The
   * broker's own figures ($SYS.*, MQTT's $SYS/ topics) are read with BROWSE. */
  bool figures = address.len >= 5 && memcmp(address.ptr, "$SYS.", 5) == 0;
  if (!mqr__may(b, who, figures ? MQR_PERM_BROWSE : MQR_PERM_CONSUME, address, err)) return MQR_EPERM;
  char buf[512];
  bool wild = false; /* an ANYCAST queue for a consumer on a wildcard address */
  if (!sep) {
    /* ANYCAST: the address's queue of its own name. MULTICAST: a subscription queue. */
    if (rt == MQR_ANYCAST) {
      qname = address;
      /* On a wildcard address that queue would take a copy of every ANYCAST send to every
       * address it matches, for good: one made for a consumer goes with it. */
      wild = mqr_wildcard_is_pattern(mqr_router_wildcard(&b->router), address);
    } else if (qname.len == 0) {
      qname = temp_name(b, address, buf, sizeof buf);
      *temporary = true;
    }
  }
  mqr_queue_t *q = mqr_router_find_queue(&b->router, qname);
  bool sub = !sep && rt == MQR_MULTICAST && (flags & MQR__SUB_FILTER); /* the selector is the queue's filter */
  if (q) {
    if (!mqr_str_eq(mqr_address_name(mqr_queue_address(q)), address) || (int)mqr_queue_routing_type(q) != rt)
      return mqr_error_set(err, MQR_EQUEUEEXISTS, "queue '%.*s' exists on address '%.*s' as %s", (int)qname.len,
                           qname.ptr, (int)mqr_address_name(mqr_queue_address(q)).len,
                           mqr_address_name(mqr_queue_address(q)).ptr,
                           mqr_routing_type_name(mqr_queue_routing_type(q)));
    if (!sub) {
      *out = q;
      return 0;
    }
    mqr__bq_t *bq = mqr_queue_data(q);
    if (!(flags & MQR__SUB_RENEW)) { /* (STOMP: as it is, as Artemis takes it) */
      *filtered = true;
      *out = q;
      return 0;
    }
    int rc = subscription_filter(b, q, selector, out, err);
    if (rc || *out) {
      *filtered = rc == 0 && !(bq && bq->configured);
      return rc;
    }
  }
  mqr_address_settings_t st;
  mqr_router_resolve_settings(&b->router, address, &st);
  if (!st.auto_create_queues && !*temporary)
    return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist and auto-create-queues is off for '%.*s'",
                         (int)qname.len, qname.ptr, (int)address.len, address.ptr);
  *temporary |= wild || (flags & MQR__SUB_TEMPORARY);
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, qname, address, (mqr_routing_type_t)rt);
  mqr_queue_config_defaults(&cfg, &st);
  cfg.durable = !*temporary;
  if (sub) cfg.filter = selector, *filtered = true;
  /* A subscription queue the client named (a durable subscription: STOMP's, an MQTT
   * session's, address::queue) stays until it is unsubscribed by name, as Artemis makes
   * it; the others are the broker's (auto-delete takes them). */
  cfg.auto_created = rt == MQR_ANYCAST || *temporary || (flags & MQR__SUB_SHARED);
  cfg.auto_create_address = true;
  /* What the subscription makes: the queue (durable or not), and the address when it is
   * missing. */
  if (!mqr__may(b, who, cfg.durable ? MQR_PERM_CREATE_DURABLE_QUEUE : MQR_PERM_CREATE_NON_DURABLE_QUEUE, address, err))
    return MQR_EPERM;
  if (mqr_router_find_address(&b->router, address) == NULL && !mqr__may(b, who, MQR_PERM_CREATE_ADDRESS, address, err))
    return MQR_EPERM;
  return mqr_router_add_queue(&b->router, &cfg, out, err);
}

/* A target's parameters (Artemis's "queue?consumer-priority=50"): taken off *target.
 * consumer-priority is the one there is; another is refused. */
static int target_params(mqr_str_t *target, int32_t *priority, mqr_error_t *err) {
  const char *q = memchr(target->ptr, '?', target->len);
  if (q == NULL) return 0;
  mqr_str_t params = mqr_str_n(q + 1, target->len - (size_t)(q + 1 - target->ptr));
  target->len = (size_t)(q - target->ptr);
  while (params.len) {
    const char *amp = memchr(params.ptr, '&', params.len);
    mqr_str_t p = mqr_str_n(params.ptr, amp ? (size_t)(amp - params.ptr) : params.len);
    params = amp ? mqr_str_n(amp + 1, params.len - p.len - 1) : mqr_str_n(NULL, 0);
    static const char key[] = "consumer-priority=";
    if (p.len <= sizeof key - 1 || memcmp(p.ptr, key, sizeof key - 1) != 0)
      return mqr_error_set(err, MQR_EINVAL, "unknown target parameter '%.*s' (consumer-priority=N is known)",
                           (int)p.len, p.ptr);
    char num[16], *end;
    size_t n = p.len - (sizeof key - 1);
    if (n >= sizeof num) return mqr_error_set(err, MQR_EINVAL, "consumer-priority is not an int");
    memcpy(num, p.ptr + sizeof key - 1, n);
    num[n] = 0;
    errno = 0;
    long long v = strtoll(num, &end, 10);
    if (*end || errno || v < INT32_MIN || v > INT32_MAX)
      return mqr_error_set(err, MQR_EINVAL, "consumer-priority '%s' is not an int", num);
    *priority = (int32_t)v;
  }
  return 0;
}

/* Places c among bq's consumers: by priority, highest first, after those of its own. */
static void place(mqr__bq_t *bq, mqr_broker_consumer_t *c) {
  uint32_t i = bq->n_consumers;
  while (i > 0 && bq->consumers[i - 1]->priority < c->priority) i--;
  memmove(&bq->consumers[i + 1], &bq->consumers[i], (bq->n_consumers - i) * sizeof *bq->consumers);
  bq->consumers[i] = c;
  bq->n_consumers++;
  bq->priorities = bq->consumers[0]->priority != bq->consumers[bq->n_consumers - 1]->priority;
  for (uint32_t k = 0; k < bq->n_consumers; k++) bq->consumers[k]->level_rr = 0; /* levels changed: turns anew */
}

const char *mqr__session_leader_url(const mqr__session_t *s, uint64_t *node) {
  mqr_broker_t *b = s->b;
  return b->persist && b->clustered ? b->persist->leader_url(b, node) : NULL;
}

int mqr__session_subscribe(mqr__session_t *s, mqr_str_t target, int rt, mqr_str_t queue, unsigned flags,
                           mqr_str_t selector, uint32_t credit, int64_t subscription, const mqr__consumer_ops_t *ops,
                           void *ctx, mqr_broker_consumer_t **out, mqr_error_t *err) {
  mqr_broker_t *b = s->b;
  int32_t priority = 0;
  int prc = target_params(&target, &priority, err);
  if (prc) return prc;
  if (target.len == 0) return mqr_error_set(err, MQR_EINVAL, "a subscription needs a target");
  if (rt != MQR_ROUTING_NONE && rt != MQR_ANYCAST && rt != MQR_MULTICAST)
    return mqr_error_set(err, MQR_EBADROUTINGTYPE, "routing type %d", rt);
  /* The selector first: a bad one makes no queue. */
  mqr_filter_t *sel = NULL;
  mqr_error_t ferr;
  int rc = mqr_router_compile_filter(&b->router, selector, &sel, &ferr);
  if (rc) return mqr_error_set(err, rc, "selector: %s", ferr.message);
  bool temporary = false;
  mqr_queue_t *q = NULL;
  bool filtered;
  if ((rc = find_or_make_queue(b, s->who, target, rt, queue, flags, selector, &filtered, &temporary, &q, err)) != 0) {
    mqr_filter_free(sel);
    return rc;
  }
  if (filtered) { /* (the queue holds only what it matches) */
    mqr_filter_free(sel);
    sel = NULL;
  }
  mqr__bq_t *bq = mqr__bq_of(b, q);
  if (bq && bq->drop_pending) {
    mqr_filter_free(sel);
    return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' is being deleted", (int)mqr_queue_name(q).len,
                         mqr_queue_name(q).ptr);
  }
  if (bq && b->clustered && (rc = mqr__replicate_serves(b, bq, err)) != 0 &&
      !mqr__replicate_feedable(b, s ? s->who : NULL)) {
    mqr_filter_free(sel); /* a replicated queue is served by its group's leader (here through a feed) */
    if (temporary) mqr__queue_drop(b, bq);
    return rc;
  }
  mqr_broker_consumer_t *c = bq ? mqr__pool_get(&b->consumers) : NULL;
  bool room = c != NULL;
  if (room && bq->n_consumers == bq->cap_consumers) {
    uint32_t cap = bq->cap_consumers ? bq->cap_consumers * 2 : 4;
    mqr_broker_consumer_t **grown = mqr_realloc(bq->consumers, cap * sizeof *grown);
    room = grown != NULL; /* if not, the queue's consumers stay as they were */
    if (room) {
      bq->consumers = grown;
      bq->cap_consumers = cap;
    }
  }
  if (!room || (rc = mqr_queue_add_consumer(q)) != 0) {
    mqr_filter_free(sel);
    mqr__pool_put(&b->consumers, c);
    rc = !room ? mqr_error_set(err, MQR_ENOMEM, "out of memory subscribing")
               : mqr_error_set(err, rc, "queue '%.*s' has its %d consumers", (int)mqr_queue_name(q).len,
                               mqr_queue_name(q).ptr, mqr_queue_max_consumers(q));
    /* A subscription queue made for this consumer goes, with its state when it has one. */
    if (temporary && bq != NULL)
      mqr__queue_drop(b, bq);
    else if (temporary)
      mqr_router_remove_queue(&b->router, mqr_queue_name(q), NULL);
    return rc;
  }
  bq->temporary |= temporary;
  c->b = b;
  c->bq = bq;
  c->credit = credit > b->opt.max_credit ? b->opt.max_credit : credit;
  c->next_delivery = 1;
  c->subscription = subscription;
  c->ops = ops;
  c->ctx = ctx;
  c->selector = sel;
  bq->n_selective += sel != NULL;
  c->session = s;
  c->session_next = s->consumers;
  s->consumers = c;
  c->priority = priority;
  place(bq, c);
  bq->had_consumer = true;
  if (b->clustered) mqr__feed_consumers(b, bq);         /* (another node leads its group: fed from there) */
  if (bq->group_rebalance) mqr__group_forget(bq, NULL); /* every group is assigned again */
  if (bq->consumers_before_dispatch > 0) mqr__gate_consumer_came(b, bq);
  *out = c;
  return 0;
}

bool mqr__bq_unpin(mqr_broker_t *b, mqr__bq_t *bq) {
  if (--bq->pins || !bq->drop_pending) return true;
  mqr__queue_drop(b, bq);
  return false;
}

void mqr__queue_drop(mqr_broker_t *b, mqr__bq_t *bq) {
  if (bq->pins) {
    bq->drop_pending = true;
    return;
  }
  b->queue_drops++; /* a send in progress looks again at the queues it holds */
  mqr__redeliver_drop_queue(b, bq, true, true);
  mqr__durable_forget_queue(b, bq);
  mqr__pager_forget_queue(bq);
  mqr__entry_t *e;
  while ((e = bq->store.ops->pop(&bq->store)) != NULL) { /* their records now, their release in slices */
    if (e->jbq) mqr__durable_removed(b, e);
    mqr__grave_put(b, e);
  }
  mqr__grave_step(b); /* the first slice now: a small queue is gone at once */
  if (bq->prev)
    bq->prev->next = bq->next;
  else
    b->queues = bq->next;
  if (bq->next) bq->next->prev = bq->prev;
  mqr_free(bq->consumers);
  mqr__kinds_free(bq);
  mqr_queue_t *q = bq->q;
  mqr_queue_set_data(q, NULL);
  mqr_free(bq);
  mqr_router_remove_queue(&b->router, mqr_queue_name(q), NULL); /* the name is read before it goes */
}

int mqr_broker_delete_queue(mqr_broker_t *b, mqr_str_t name, mqr_error_t *err) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, name);
  if (q == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)name.len, name.ptr);
  if (mqr_queue_consumer_count(q))
    return mqr_error_set(err, MQR_EQUEUEINUSE, "queue '%.*s' has %u consumer(s)", (int)name.len, name.ptr,
                         mqr_queue_consumer_count(q));
  mqr__bq_t *bq = mqr_queue_data(q);
  if (bq == NULL) return mqr_router_remove_queue(&b->router, name, err);
  int rc = mqr__durable_queue_deleted(b, bq);
  if (rc)
    return mqr_error_set(err, rc, "queue '%.*s' is kept: %s", (int)name.len, name.ptr,
                         rc == MQR_EIO ? "the journal cannot write its deletion" : mqr_strerror(rc));
  mqr__queue_drop_then_address(b, bq); /* an address the broker made goes with its last queue */
  return 0;
}

/* Takes c off its session's list, once: a close deferred by dispatch comes back here
 * after its session (a connection's) may be gone. */
static void leave_session(mqr_broker_consumer_t *c) {
  if (c->session == NULL) return;
  for (mqr_broker_consumer_t **pp = &c->session->consumers; *pp; pp = &(*pp)->session_next)
    if (*pp == c) {
      *pp = c->session_next;
      break;
    }
  c->session = NULL;
  c->session_next = NULL;
}

bool mqr__consumer_close(mqr_broker_consumer_t *c) {
  mqr__bq_t *bq = c->bq;
  mqr_broker_t *b = c->b;
  leave_session(c);      /* at once: its session ends now, and its head goes */
  if (bq->dispatching) { /* from a delivery callback: when the dispatch loop is done */
    c->closing = true;
    return false;
  }
  /* Unacknowledged messages go back to the head of the queue, in their order; those that
   * reached max-delivery-attempts, or must wait a redelivery delay, are taken aside and
   * dealt with once the consumer is gone. */
  mqr__entry_t *taken = NULL;
  if (bq->temporary && bq->n_consumers == 1) {
    /* The last consumer of a queue made for it: the queue goes next, so what it had not
     * acknowledged goes with it, to the graveyard (released in slices), not back first. */
    for (mqr__entry_t *e = c->unacked_head, *next; e; e = next) {
      next = e->next;
      if (!e->copy) bq->in_flight--;
      if (e->jbq) mqr__durable_removed(b, e);
      mqr__grave_put(b, e);
    }
    c->unacked_head = c->unacked_tail = NULL;
  }
  for (mqr__entry_t *e = c->unacked_tail, *prev; e; e = prev) {
    prev = e->prev;
    mqr__consumer_give_back(c, e, &taken);
  }
  mqr__idx_clear(c);
  for (uint32_t i = 0; i < bq->n_consumers; i++)
    if (bq->consumers[i] == c) {
      memmove(&bq->consumers[i], &bq->consumers[i + 1], (bq->n_consumers - i - 1) * sizeof *bq->consumers);
      bq->n_consumers--;
      break;
    }
  if (bq->rr >= bq->n_consumers) bq->rr = 0;
  bq->priorities = bq->n_consumers && bq->consumers[0]->priority != bq->consumers[bq->n_consumers - 1]->priority;
  for (uint32_t k = 0; k < bq->n_consumers; k++) bq->consumers[k]->level_rr = 0;
  mqr_queue_remove_consumer(bq->q);
  if (bq->feed) mqr__feed_consumers(b, bq); /* (the last: what it brought goes with it) */
  mqr__group_forget(bq, c);                 /* its groups go to whoever takes their next message */
  bq->n_selective -= c->selector != NULL;
  bq->n_refusing -= c->n_refused != 0;
  mqr_filter_free(c->selector);
  mqr_free(c->refused);
  mqr__pool_put(&b->consumers, c);
  if (taken && !mqr__redeliver_pinned(b, bq, taken)) return true;
  if (bq->temporary && bq->n_consumers == 0) { /* its address too, when the broker made it for the subscription */
    mqr__queue_drop_then_address(b, bq);
    return true;
  }
  if (bq->n_consumers == 0) { /* a queue the broker made may go now (autodelete.c) */
    uv_update_time(b->loop);
    bq->consumer_gone_at = uv_now(b->loop);
    if (mqr__auto_delete_queue(b, bq, true)) return true;
  }
  return mqr__dispatch_gone(bq); /* (which may close another that asked to, and the queue with it) */
}

/* ---- sessions ------------------------------------------------------------------------------ */

void mqr__session_init(mqr_broker_t *b, mqr__session_t *s, const mqr__producer_ops_t *ops) {
  *s = (mqr__session_t){b, ++b->next_session, NULL, {ops, 0, 0, 0, 0}, NULL};
}

mqr_broker_consumer_t *mqr__session_consumer(const mqr__session_t *s, int64_t subscription) {
  for (mqr_broker_consumer_t *k = s->consumers; k; k = k->session_next)
    if (k->subscription == subscription) return k;
  return NULL;
}

void mqr__session_unsubscribe(mqr__session_t *s, mqr_broker_consumer_t *k) {
  (void)s;
  mqr__consumer_close(k);
}

void mqr__session_end(mqr__session_t *s) {
  /* Its consumers go: what they had not acknowledged returns to the queues. */
  while (s->consumers) mqr__consumer_close(s->consumers);
  mqr__producer_unblock_all(s->b, &s->producer);
  mqr__durable_forget_producer(s->b, &s->producer); /* answers still to come have nobody to go to */
  mqr__principal_release(s->who);
  s->who = NULL;
}

int64_t mqr__consumer_subscription(const mqr_broker_consumer_t *k) { return k->subscription; }
void *mqr__consumer_ctx(const mqr_broker_consumer_t *k) { return k->ctx; }
mqr_str_t mqr__consumer_queue_name(const mqr_broker_consumer_t *k) { return mqr_queue_name(k->bq->q); }
mqr_str_t mqr__consumer_group_first(const mqr_broker_consumer_t *k) { return k->group_first; }

void mqr__session_ready(mqr__session_t *s) {
  for (mqr_broker_consumer_t *k = s->consumers; k; k = k->session_next) mqr__consumer_ready(k);
}

uint32_t mqr__session_consumer_count(const mqr__session_t *s) {
  uint32_t n = 0;
  for (const mqr_broker_consumer_t *k = s->consumers; k; k = k->session_next) n++;
  return n;
}

int mqr__implied_routing_type(mqr_broker_t *b, mqr_str_t name) {
  const mqr_router_t *r = mqr_broker_router(b);
  mqr_address_t *a = mqr_router_find_address(r, name);
  if (a) {
    mqr_routing_set_t t = mqr_address_routing_types(a);
    bool any = mqr_routing_set_contains(t, MQR_ANYCAST), multi = mqr_routing_set_contains(t, MQR_MULTICAST);
    if (any != multi) return any ? MQR_ANYCAST : MQR_MULTICAST;
    return mqr_address_settings(a)->default_address_routing_type;
  }
  if (mqr_router_find_queue(r, name)) return MQR_ROUTING_NONE;
  mqr_address_settings_t s;
  mqr_router_resolve_settings(r, name, &s);
  return s.default_address_routing_type;
}
