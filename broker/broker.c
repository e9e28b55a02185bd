/* The broker's core: doSend (route, store once, enqueue), subscriptions by the Artemis
 * rules, dispatch round-robin within credit, acknowledgements, redelivery in order,
 * address accounting with max-size-bytes and address-full-policy, and the embedding API.
 *
 * The send path allocates nothing once warm: the route writes into an array kept for it,
 * the message comes from its size class's free list, entries from a pool, and a queue's
 * state is made once, on the first message or consumer it sees. */
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

/* ---- queues and accounts, made on first use ---------------------------------------------- */

static mqr__bq_t *bq_of(mqr_broker_t *b, mqr_queue_t *q) {
  mqr__bq_t *bq = mqr_queue_data(q);
  if (bq) return bq;
  if ((bq = mqr_calloc(1, sizeof *bq)) == NULL) return NULL;
  bq->q = q;
  mqr__memstore_init(&bq->store);
  bq->next = b->queues;
  if (b->queues) b->queues->prev = bq;
  b->queues = bq;
  mqr_queue_set_data(q, bq);
  return bq;
}

static void acct_settings(mqr__acct_t *a) {
  const mqr_address_settings_t *s = mqr_address_settings(a->address);
  a->max = s->max_size_bytes;
  a->policy = s->address_full_policy;
}

static mqr__acct_t *acct_of(mqr_broker_t *b, mqr_address_t *addr) {
  mqr__acct_t *a = mqr_address_data(addr);
  if (a) return a;
  if ((a = mqr_calloc(1, sizeof *a)) == NULL) return NULL;
  a->address = addr;
  acct_settings(a);
  a->next = b->accts;
  b->accts = a;
  mqr_address_set_data(addr, a);
  return a;
}

void mqr__acct_block(mqr__acct_t *a, mqr__conn_t *c) {
  for (uint32_t i = 0; i < a->n_blocked; i++)
    if (a->blocked[i] == c) return;
  if (a->n_blocked == a->cap_blocked) {
    uint32_t ncap = a->cap_blocked ? a->cap_blocked * 2 : 4;
    mqr__conn_t **nb = mqr_realloc(a->blocked, ncap * sizeof *nb);
    if (nb == NULL) return; /* not paused: bounded by one message anyway */
    a->blocked = nb;
    a->cap_blocked = ncap;
  }
  a->blocked[a->n_blocked++] = c;
  c->blocked_on++;
}

/* A connection going away leaves every account it waits on. */
void mqr__acct_unblock_conn(mqr_broker_t *b, mqr__conn_t *c) {
  for (mqr__acct_t *a = b->accts; a && c->blocked_on; a = a->next)
    for (uint32_t i = 0; i < a->n_blocked; i++)
      if (a->blocked[i] == c) {
        a->blocked[i] = a->blocked[--a->n_blocked];
        c->blocked_on--;
        break;
      }
  c->blocked_on = 0;
}

/* ---- doSend -------------------------------------------------------------------------------- */

int mqr__do_send(mqr_broker_t *b, const mqr__send_t *s, mqr_broker_receipt_t *r, mqr__acct_t **blocked,
                 mqr_error_t *err) {
  mqr_route_request_t req = {s->address, s->routing_type, s->duplicate_id, s->prefixes, NULL};
  mqr_route_result_t res = {b->targets, b->cap_targets, 0, 0, 0, 0, NULL};
  int rc = mqr_router_route(&b->router, &req, &res, err);
  if (rc == MQR_ENOSPC) { /* the topology grew: a bigger target array, once */
    uint32_t ncap = res.needed + 16;
    mqr_queue_t **t = mqr_realloc(b->targets, ncap * sizeof *t);
    if (t == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory routing a send");
    b->targets = t;
    b->cap_targets = ncap;
    res = (mqr_route_result_t){b->targets, b->cap_targets, 0, 0, 0, 0, NULL};
    rc = mqr_router_route(&b->router, &req, &res, err);
  }
  if (rc) return rc;
  if (r) *r = (mqr_broker_receipt_t){(int)res.status, 0, 0};
  if (res.count == 0) return 0;

  mqr__acct_t *acct = acct_of(b, res.address);
  if (acct == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory routing a send");
  if (acct->max >= 0 && acct->bytes >= acct->max) {
    mqr_str_t an = mqr_address_name(res.address);
    if (acct->policy == MQR_FULL_DROP) {
      b->stats.dropped++;
      if (r) r->status = MQR_RECEIPT_DROPPED;
      return 0;
    }
    if (acct->policy == MQR_FULL_FAIL || blocked == NULL)
      return mqr_error_set(err, MQR_EFULL, "address '%.*s' is full (%lld of max-size-bytes %lld)", (int)an.len, an.ptr,
                           (long long)acct->bytes, (long long)acct->max);
    *blocked = acct; /* BLOCK: take this one, then the producer pauses */
  }

  /* The message, stored once: the Message frame's stored part, written into room for
   * its largest size (varints at their longest) and then measured. */
  mqr_str_t addr = mqr_address_name(res.address);
  size_t bound = 10 + 10 + addr.len + 2 + (s->tail ? s->tail_len : 1 + 10 + 10 + s->body.len);
  for (size_t i = 0; !s->tail && i < s->n_props; i++) bound += 20 + s->keys[i].len + s->values[i].len;
  int64_t id = ++b->next_message_id;
  mqr__msg_t *m = mqr__msg_alloc(b, bound);
  if (m == NULL) {
    if (bound > ((size_t)64 << (MQR__MSG_CLASSES - 1)))
      return mqr_error_set(err, MQR_ELIMIT, "a message of %zu bytes is more than the broker stores", bound);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory storing a message");
  }
  m->id = id;
  /* A listener's prefix decides the routing type the message carries, as in Artemis. */
  mqr_str_t named = s->address;
  int eff = s->routing_type;
  mqr_prefixes_strip(s->prefixes, &named, &eff);
  int rt = mqr_proto_rt_from_routing(eff);
  size_t len;
  if (s->tail) {
    len = mqr_message_write_stored(m->data, id, addr, rt, s->durable, s->tail, s->tail_len);
  } else {
    len = mqr_message_write_stored(m->data, id, addr, rt, s->durable, NULL, 0);
    len += mqr_message_write_tail(m->data + len, s->keys, s->values, s->n_props, s->body);
  }
  m->len = (uint32_t)len;
  b->stats.messages++; /* and back down in mqr__msg_release */
  b->stats.bytes += len;

  uint32_t taken = 0;
  for (uint32_t i = 0; i < res.count; i++) {
    mqr__bq_t *bq = bq_of(b, res.queues[i]);
    mqr__entry_t *e = bq ? mqr__pool_take(&b->entries) : NULL;
    if (e == NULL) {
      if (m->refs == 0) mqr__msg_release(b, (m->refs = 1, m));
      return mqr_error_set(err, MQR_ENOMEM, "out of memory enqueueing a message (%u of %u queues took it)", taken,
                           res.count);
    }
    e->msg = m;
    e->delivery = 0;
    e->delivery_count = 0;
    m->refs++;
    bq->store.ops->push(&bq->store, e);
    bq->enqueued++;
    taken++;
  }
  m->acct = acct;
  acct->bytes += m->len;
  if (r) {
    r->queues = taken;
    r->message_id = id;
  }
  for (uint32_t i = 0; i < res.count; i++) mqr__dispatch(mqr_queue_data(res.queues[i]));
  return 0;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

static void unlink_unacked(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->unacked_head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->unacked_tail = e->prev;
}

static bool can_take(const mqr_broker_consumer_t *c, const mqr__entry_t *head) {
  return c->credit > 0 && !c->closing && (c->conn == NULL || !mqr__conn_paused(c->conn)) && head->msg->id != c->too_big;
}

/* Delivers e to in-process consumer c: the Message frame a network consumer would read,
 * decoded, to its callback. MQR_ENOMEM when the buffers cannot be had: then nothing was
 * delivered, and the caller puts e back. */
static int in_process_deliver(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  mqr_broker_t *b = c->b;
  uint8_t head[MQR_MESSAGE_HEADER_MAX];
  size_t hl = mqr_message_head(head, c->subscription, e->delivery, e->delivery_count, e->msg->len);
  /* The frame a network consumer would read, decoded: head then stored bytes, in this
   * depth's buffer (broker_int.h). */
  size_t n = hl + e->msg->len;
  uint32_t d = b->deliver_depth;
  uint8_t *frame = NULL, *arena_mem = NULL, *big = NULL;
  int rc = MQR_ENOMEM;
  if (d < MQR__DELIVER_DEPTH) {
    if (b->deliver[d].frame_cap < n) {
      size_t cap = b->deliver[d].frame_cap ? b->deliver[d].frame_cap * 2 : 1024;
      while (cap < n) cap *= 2;
      uint8_t *p = mqr_realloc(b->deliver[d].frame, cap);
      if (p == NULL) return MQR_ENOMEM;
      b->deliver[d].frame = p;
      b->deliver[d].frame_cap = cap;
    }
    if (b->deliver[d].arena == NULL && (b->deliver[d].arena = mqr_malloc(MQR__DELIVER_ARENA)) == NULL)
      return MQR_ENOMEM;
    frame = b->deliver[d].frame;
    arena_mem = b->deliver[d].arena;
  } else {
    frame = mqr_malloc(n);
    arena_mem = mqr_malloc(MQR__DELIVER_ARENA);
    if (frame == NULL || arena_mem == NULL) goto done;
  }
  memcpy(frame, head, hl);
  memcpy(frame + hl, e->msg->data, e->msg->len);
  mqr_frame_t f;
  mqr_avro_arena_t arena = {arena_mem, MQR__DELIVER_ARENA, 0};
  rc = mqr_frame_decode(frame + MQR_FRAME_HEADER, n - MQR_FRAME_HEADER, &f, &arena, NULL);
  if (rc == MQR_ENOSPC) {
    /* More properties than the arena holds: one that holds any frame this long (a
     * property takes at least 2 bytes there, and 32 decoded). */
    size_t cap = 16 * n + 1024;
    if ((big = mqr_malloc(cap)) == NULL) {
      rc = MQR_ENOMEM;
      goto done;
    }
    arena = (mqr_avro_arena_t){big, cap, 0};
    rc = mqr_frame_decode(frame + MQR_FRAME_HEADER, n - MQR_FRAME_HEADER, &f, &arena, NULL);
  }
  if (rc == 0) {
    b->deliver_depth++;
    c->fn(c, &f.u.message, c->arg);
    b->deliver_depth--;
  } else { /* the broker wrote this frame: it decodes, or the broker is wrong */
    mqr__log(b, MQR_LOG_ERROR, "an in-process delivery did not decode (%s): it stays unacknowledged", mqr_err_name(rc));
    rc = 0;
  }
done:
  if (big != NULL) mqr_free(big); /* no call on the common path */
  if (d >= MQR__DELIVER_DEPTH) {
    mqr_free(frame);
    mqr_free(arena_mem);
  }
  return rc;
}

void mqr__dispatch(mqr__bq_t *bq) {
  if (bq == NULL) return;
  if (bq->dispatching) { /* a delivery callback acked or granted credit: go round again */
    bq->again = true;
    return;
  }
  bq->dispatching = true;
  do {
    bq->again = false;
    while (bq->store.depth && bq->n_consumers) {
      mqr_broker_consumer_t *c = NULL;
      const mqr__entry_t *head = bq->store.ops->peek(&bq->store);
      for (uint32_t k = 0; k < bq->n_consumers && c == NULL; k++) {
        mqr_broker_consumer_t *cand = bq->consumers[(bq->rr + k) % bq->n_consumers];
        if (can_take(cand, head)) {
          c = cand;
          bq->rr = (bq->rr + k + 1) % bq->n_consumers;
        }
      }
      if (c == NULL || !mqr__idx_reserve(c)) break; /* no room to index it: the next dispatch tries */
      mqr__entry_t *e = bq->store.ops->pop(&bq->store);
      e->delivery = c->next_delivery++;
      e->delivery_count++;
      e->prev = c->unacked_tail;
      e->next = NULL;
      if (c->unacked_tail)
        c->unacked_tail->next = e;
      else
        c->unacked_head = e;
      c->unacked_tail = e;
      mqr__idx_put(c, e);
      c->credit--;
      bq->in_flight++;
      int rc = c->conn ? mqr__conn_deliver(c->conn, c->subscription, e) : in_process_deliver(c, e);
      if (rc != 0) {
        /* Nothing delivered: back to the head as it was. MQR_ENOMEM (no room to write it,
         * or to decode it for the callback): the next dispatch (a send, an ack, credit)
         * tries again. MQR_ELIMIT (longer than the max_frame the consumer's client
         * declared): the message is held for a consumer that can take it, and this one
         * is told once and skips it while it is at the head. */
        unlink_unacked(c, e);
        mqr__idx_del(c, e->delivery);
        c->next_delivery--;
        e->delivery_count--;
        c->credit++;
        bq->in_flight--;
        bq->store.ops->push_front(&bq->store, e);
        if (rc == MQR_ELIMIT) {
          c->too_big = e->msg->id;
          mqr__conn_too_big(c, e);
          continue;
        }
        bq->again = false;
        break;
      }
    }
  } while (bq->again);
  bq->dispatching = false;
  /* Consumers that went during the callbacks go now (the last of a temporary queue takes
   * the queue with it: then there is nothing more to look at). */
  for (uint32_t i = 0; i < bq->n_consumers; i++)
    if (bq->consumers[i]->closing) {
      if (mqr__consumer_close(bq->consumers[i])) return;
      i = (uint32_t)-1; /* the array changed: from the start */
    }
}

/* ---- acknowledgements ---------------------------------------------------------------------- */

static void acked(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  mqr_broker_t *b = c->b;
  unlink_unacked(c, e);
  mqr__idx_del(c, e->delivery);
  c->bq->acked++;
  c->bq->in_flight--;
  mqr__msg_release(b, e->msg);
  mqr__pool_put(&b->entries, e);
}

int mqr_broker_ack(mqr_broker_consumer_t *c, int64_t delivery, bool cumulative) {
  mqr__entry_t *e = mqr__idx_find(c, delivery);
  if (e == NULL) return MQR_ENOTFOUND;
  if (cumulative)
    while (c->unacked_head != e) acked(c, c->unacked_head);
  acked(c, e);
  return 0;
}

void mqr_broker_credit(mqr_broker_consumer_t *c, uint32_t n) {
  uint32_t max = c->b->opt.max_credit;
  c->credit = n > max - c->credit ? max : c->credit + n;
  mqr__dispatch(c->bq);
}

/* ---- subscriptions ------------------------------------------------------------------------- */

/* A made-up subscription queue name: the target, then a number unique in the broker. */
static mqr_str_t temp_name(mqr_broker_t *b, mqr_str_t target, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%.*s.sub-%lld", (int)(target.len > cap - 40 ? cap - 40 : target.len), target.ptr,
                   (long long)++b->next_session);
  return mqr_str_n(buf, (size_t)n);
}

static int find_or_make_queue(mqr_broker_t *b, mqr_str_t target, int rt, mqr_str_t queue, bool *temporary,
                              mqr_queue_t **out, mqr_error_t *err) {
  *temporary = false;
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
    *out = q;
    return 0;
  }
  char buf[512];
  if (!sep) {
    /* ANYCAST: the address's queue of its own name. MULTICAST: a subscription queue. */
    if (rt == MQR_ANYCAST)
      qname = address;
    else if (qname.len == 0) {
      qname = temp_name(b, address, buf, sizeof buf);
      *temporary = true;
    }
  }
  mqr_queue_t *q = mqr_router_find_queue(&b->router, qname);
  if (q) {
    if (!mqr_str_eq(mqr_address_name(mqr_queue_address(q)), address) || (int)mqr_queue_routing_type(q) != rt)
      return mqr_error_set(err, MQR_EQUEUEEXISTS, "queue '%.*s' exists on address '%.*s' as %s", (int)qname.len,
                           qname.ptr, (int)mqr_address_name(mqr_queue_address(q)).len,
                           mqr_address_name(mqr_queue_address(q)).ptr,
                           mqr_routing_type_name(mqr_queue_routing_type(q)));
    *out = q;
    return 0;
  }
  mqr_address_settings_t st;
  mqr_router_resolve_settings(&b->router, address, &st);
  if (!st.auto_create_queues && !*temporary)
    return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist and auto-create-queues is off for '%.*s'",
                         (int)qname.len, qname.ptr, (int)address.len, address.ptr);
  mqr_queue_config_t cfg;
  mqr_queue_config_init(&cfg, qname, address, (mqr_routing_type_t)rt);
  cfg.durable = !*temporary;
  cfg.auto_created = true;
  cfg.auto_create_address = true;
  return mqr_router_add_queue(&b->router, &cfg, out, err);
}

static void drop_queue(mqr_broker_t *b, mqr__bq_t *bq);

int mqr__subscribe(mqr_broker_t *b, mqr_str_t target, int rt, mqr_str_t queue, uint32_t credit,
                   mqr_broker_consumer_t **out, mqr_error_t *err) {
  if (target.len == 0) return mqr_error_set(err, MQR_EINVAL, "a subscription needs a target");
  if (rt != MQR_ROUTING_NONE && rt != MQR_ANYCAST && rt != MQR_MULTICAST)
    return mqr_error_set(err, MQR_EBADROUTINGTYPE, "routing type %d", rt);
  bool temporary = false;
  mqr_queue_t *q = NULL;
  int rc = find_or_make_queue(b, target, rt, queue, &temporary, &q, err);
  if (rc) return rc;
  mqr__bq_t *bq = bq_of(b, q);
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
    mqr__pool_put(&b->consumers, c);
    rc = !room ? mqr_error_set(err, MQR_ENOMEM, "out of memory subscribing")
               : mqr_error_set(err, rc, "queue '%.*s' has its %d consumers", (int)mqr_queue_name(q).len,
                               mqr_queue_name(q).ptr, mqr_queue_max_consumers(q));
    /* A subscription queue made for this consumer goes, with its state when it has one. */
    if (temporary && bq != NULL)
      drop_queue(b, bq);
    else if (temporary)
      mqr_router_remove_queue(&b->router, mqr_queue_name(q), NULL);
    return rc;
  }
  bq->temporary |= temporary;
  c->b = b;
  c->bq = bq;
  c->credit = credit > b->opt.max_credit ? b->opt.max_credit : credit;
  c->next_delivery = 1;
  bq->consumers[bq->n_consumers++] = c;
  *out = c;
  return 0;
}

static void drop_queue(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__entry_t *e;
  while ((e = bq->store.ops->pop(&bq->store)) != NULL) {
    mqr__msg_release(b, e->msg);
    mqr__pool_put(&b->entries, e);
  }
  if (bq->prev)
    bq->prev->next = bq->next;
  else
    b->queues = bq->next;
  if (bq->next) bq->next->prev = bq->prev;
  mqr_free(bq->consumers);
  mqr_str_t name = mqr_queue_name(bq->q);
  char copy[512];
  snprintf(copy, sizeof copy, "%.*s", (int)name.len, name.ptr);
  mqr_queue_set_data(bq->q, NULL);
  mqr_free(bq);
  mqr_router_remove_queue(&b->router, mqr_str(copy), NULL);
}

bool mqr__consumer_close(mqr_broker_consumer_t *c) {
  mqr__bq_t *bq = c->bq;
  mqr_broker_t *b = c->b;
  if (bq->dispatching) { /* from a delivery callback: when the dispatch loop is done */
    c->closing = true;
    return false;
  }
  /* Unacknowledged messages go back to the head of the queue, in their order. */
  for (mqr__entry_t *e = c->unacked_tail, *prev; e; e = prev) {
    prev = e->prev;
    bq->in_flight--;
    bq->store.ops->push_front(&bq->store, e);
  }
  c->unacked_head = c->unacked_tail = NULL;
  mqr__idx_clear(c);
  for (uint32_t i = 0; i < bq->n_consumers; i++)
    if (bq->consumers[i] == c) {
      memmove(&bq->consumers[i], &bq->consumers[i + 1], (bq->n_consumers - i - 1) * sizeof *bq->consumers);
      bq->n_consumers--;
      break;
    }
  if (bq->rr >= bq->n_consumers) bq->rr = 0;
  mqr_queue_remove_consumer(bq->q);
  mqr__pool_put(&b->consumers, c);
  if (bq->temporary && bq->n_consumers == 0) {
    drop_queue(b, bq);
    return true;
  }
  mqr__dispatch(bq);
  return false;
}

/* ---- the embedding API --------------------------------------------------------------------- */

/* Writes gathered in a loop pass leave at the start of the next (the idle phase, which
 * also keeps the poll from blocking while something waits). */
static void idle_cb(uv_idle_t *h) {
  mqr_broker_t *b = h->data;
  mqr__server_flush(b);
  if (b->dirty == NULL && b->resume == NULL) {
    uv_idle_stop(&b->idle);
    b->idle_on = false;
  }
}

void mqr__broker_wake(mqr_broker_t *b) {
  if (b->idle_on || b->closing) return;
  b->idle_on = true;
  uv_idle_start(&b->idle, idle_cb);
}

int mqr_broker_create(uv_loop_t *loop, const mqr_broker_options_t *opt, mqr_broker_t **out, mqr_error_t *err) {
  mqr_broker_t *b = mqr_calloc(1, sizeof *b);
  if (b == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory creating the broker");
  b->loop = loop;
  if (opt) b->opt = *opt;
  if (b->opt.server_name == NULL) b->opt.server_name = "mqrd";
  if (b->opt.max_credit == 0) b->opt.max_credit = 65536;
  if (b->opt.max_pending_write == 0) b->opt.max_pending_write = 4u << 20;
  mqr__pool_init(&b->entries, sizeof(mqr__entry_t), 1u << 16);
  mqr__pool_init(&b->consumers, sizeof(mqr_broker_consumer_t), 1024);
  int rc = 0;
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
  if ((rc = mqr_config_build_router(b->config, &b->router, err)) != 0) {
    mqr_config_destroy(b->own_config);
    mqr_free(b);
    return rc;
  }
  uv_idle_init(loop, &b->idle);
  b->idle.data = b;
  b->open_handles = 1;
  if (b->opt.listen) { /* connections' clocks: timeouts, heartbeats, peers gone while paused */
    uv_timer_init(loop, &b->tick);
    b->tick.data = b;
    b->open_handles++;
    uv_timer_start(&b->tick, mqr__server_tick, MQR__TICK_MS, MQR__TICK_MS);
    uv_unref((uv_handle_t *)&b->tick); /* it keeps no loop alive by itself */
  }
  if (b->opt.listen && (rc = mqr__server_listen(b, err)) != 0) {
    mqr_broker_close(b, NULL, NULL);
    return rc;
  }
  *out = b;
  return 0;
}

static void free_broker(mqr_broker_t *b) {
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
      mqr__pool_put(&b->consumers, c);
    }
    mqr_queue_set_data(bq->q, NULL);
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
  mqr_router_close(&b->router);
  mqr_free(b->targets);
  mqr__pool_free(&b->entries);
  mqr__server_free_pools(b);
  mqr__pool_free(&b->consumers);
  mqr__msg_pools_free(b);
  for (uint32_t d = 0; d < MQR__DELIVER_DEPTH; d++) {
    mqr_free(b->deliver[d].frame);
    mqr_free(b->deliver[d].arena);
  }
  for (uint32_t i = 0; i < b->n_listeners; i++) mqr_free(b->listeners[i].strings);
  mqr_free(b->listeners);
  mqr_config_destroy(b->own_config);
  void (*cb)(void *) = b->close_cb;
  void *arg = b->close_arg;
  mqr_free(b);
  if (cb) cb(arg);
}

/* A handle of the broker's closed: the last one frees it. */
void mqr__broker_handle_closed(mqr_broker_t *b) {
  if (--b->open_handles == 0 && b->closing) free_broker(b);
}

static void idle_closed(uv_handle_t *h) { mqr__broker_handle_closed(h->data); }

void mqr_broker_close(mqr_broker_t *b, void (*cb)(void *arg), void *arg) {
  if (b->closing) return;
  b->closing = true;
  b->close_cb = cb;
  b->close_arg = arg;
  mqr__log(b, MQR_LOG_INFO, "closing: %llu messages (%llu bytes) held in memory go with the broker",
           (unsigned long long)b->stats.messages, (unsigned long long)b->stats.bytes);
  mqr__server_close(b); /* listeners and connections: each closed handle counts down */
  uv_idle_stop(&b->idle);
  uv_close((uv_handle_t *)&b->idle, idle_closed);
  if (b->opt.listen) uv_close((uv_handle_t *)&b->tick, idle_closed);
}

int mqr_broker_listener_port(const mqr_broker_t *b, uint32_t i) {
  return i < b->n_listeners && b->listeners[i].open ? b->listeners[i].port : -1;
}

mqr_router_t *mqr_broker_router(mqr_broker_t *b) { return &b->router; }

int mqr_broker_send(mqr_broker_t *b, const mqr_broker_message_t *m, mqr_broker_receipt_t *receipt, mqr_error_t *err) {
  mqr__send_t s = {m->address,       m->routing_type,    m->durable,      m->duplicate_id, NULL, 0,
                   m->property_keys, m->property_values, m->n_properties, m->body,         NULL};
  return mqr__do_send(b, &s, receipt, NULL, err);
}

int mqr_broker_subscribe(mqr_broker_t *b, mqr_str_t target, int routing_type, mqr_str_t queue, uint32_t credit,
                         mqr_deliver_fn fn, void *arg, mqr_broker_consumer_t **out, mqr_str_t *queue_name,
                         mqr_error_t *err) {
  if (fn == NULL) return mqr_error_set(err, MQR_EINVAL, "no delivery function");
  mqr_broker_consumer_t *c;
  int rc = mqr__subscribe(b, target, routing_type, queue, credit, &c, err);
  if (rc) return rc;
  c->fn = fn;
  c->arg = arg;
  if (queue_name) *queue_name = mqr_queue_name(c->bq->q);
  *out = c;
  mqr__dispatch(c->bq);
  return 0;
}

void mqr_broker_unsubscribe(mqr_broker_consumer_t *c) { mqr__consumer_close(c); }

int mqr_broker_queue_stats(const mqr_broker_t *b, mqr_str_t queue, mqr_broker_queue_stats_t *out) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, queue);
  if (q == NULL) return MQR_ENOQUEUE;
  const mqr__bq_t *bq = mqr_queue_data(q);
  memset(out, 0, sizeof *out);
  out->consumers = mqr_queue_consumer_count(q);
  if (bq) {
    out->depth = bq->store.depth;
    out->in_flight = bq->in_flight;
    out->enqueued = bq->enqueued;
    out->acknowledged = bq->acked;
  }
  return 0;
}

void mqr_broker_stats(const mqr_broker_t *b, mqr_broker_stats_t *out) {
  *out = b->stats;
  out->connections = b->n_conns;
}

int64_t mqr_broker_address_size(const mqr_broker_t *b, mqr_str_t address) {
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  const mqr__acct_t *acct = a ? mqr_address_data(a) : NULL;
  return acct ? acct->bytes : 0;
}

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

int mqr_broker_reload(mqr_broker_t *b, const mqr_config_t *cfg, uint32_t *skipped, mqr_error_t *err) {
  reload_t x = {b, 0};
  int rc = mqr_config_apply(cfg, b->config, &b->router, reload_report, &x, err);
  /* Accounts take the settings as they now resolve; producers paused on a limit that grew
   * may go on. */
  for (mqr__acct_t *a = b->accts; a; a = a->next) {
    acct_settings(a);
    if (a->n_blocked && (a->max < 0 || a->bytes < a->max || a->policy != MQR_FULL_BLOCK)) {
      for (uint32_t i = 0; i < a->n_blocked; i++) mqr__conn_resume(a->blocked[i]);
      a->n_blocked = 0;
    }
  }
  if (rc == 0) {
    b->config = cfg;
    if (b->own_config && cfg != b->own_config) {
      mqr_config_destroy(b->own_config);
      b->own_config = NULL;
    }
  }
  if (skipped) *skipped = x.skipped;
  return rc;
}
