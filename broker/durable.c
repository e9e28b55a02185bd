/* The durable store's life and its write path (durable.h): opening the journal with
 * recovery, a durable send's records and its answer after the fdatasync that covers
 * them, acknowledgements and deliveries as records, a journal that fails (disk full, an
 * I/O error) and is taken up again, and closing. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"

#define RETRY_MS 1000 /* how often a failed journal is tried again */

/* ---- appending -------------------------------------------------------------------------- */

void mqr__durable_append(mqr__durable_t *d, mqr_journal_record_type_t type, int64_t id, const void *p, size_t n) {
  if (d->w == NULL || mqr_journal_append(d->w, type, (uint64_t)id, p, n, NULL, NULL) != 0) d->lost_records++;
}

/* A named record's payload: [u32 count [i64 due]] then a queue's name, into small (cap
 * bytes) or, past it, a buffer of its own (the caller frees what is not small); *n its
 * bytes. NULL: out of memory. */
static uint8_t *named(uint8_t *small, size_t cap, const uint32_t *count, const int64_t *due, mqr_str_t name,
                      size_t *n) {
  size_t at = count ? (due ? 12 : 4) : 0;
  *n = at + name.len;
  uint8_t *p = *n <= cap ? small : mqr_malloc(*n);
  if (p == NULL) return NULL;
  if (count) memcpy(p, count, 4); /* little-endian hosts only: mqr builds on x86-64 and aarch64 */
  if (count && due) memcpy(p + 4, due, 8);
  memcpy(p + at, name.ptr, name.len);
  return p;
}

/* A record whose payload is [u32 count] then a queue's name. */
void mqr__durable_append_named(mqr__durable_t *d, mqr_journal_record_type_t type, int64_t id, uint32_t *count,
                               mqr_str_t name) {
  uint8_t buf[512];
  size_t n;
  uint8_t *p = named(buf, sizeof buf, count, NULL, name, &n);
  if (p == NULL) {
    d->lost_records++;
    return;
  }
  mqr__durable_append(d, type, id, p, n);
  if (p != buf) mqr_free(p);
}

/* An entry's record (DELETE; UPDATE: [u32 count [i64 due]]; then its queue's name) to
 * where its queue's records go: the journal, or its replication group (replicate.c):
 * that group, or -1. A queue fed from its group's leader (feed.c) records nothing: a
 * DELETE is an acknowledgement there, and the leader keeps the counts. */
static int entry_record(mqr_broker_t *b, mqr__bq_t *bq, mqr_journal_record_type_t type, int64_t id,
                        const uint32_t *count, const int64_t *due) {
  if (bq->feed) {
    if (type == MQR_JOURNAL_DELETE) mqr__feed_removed(b, bq, id);
    return -1;
  }
  int g = mqr__replicate_group(b, bq);
  uint8_t buf[512];
  size_t n;
  uint8_t *p = named(buf, sizeof buf, count, due, mqr_queue_name(bq->q), &n);
  if (p == NULL && g < 0)
    b->dur->lost_records++;
  else if (p == NULL)
    b->dur->cluster_dropped++;
  else if (g < 0)
    mqr__durable_append(b->dur, type, id, p, n);
  else
    mqr__replicate_record(b, g, type, id, p, n);
  if (p != buf) mqr_free(p);
  return g;
}

void mqr__durable_removed(mqr_broker_t *b, mqr__entry_t *e) {
  mqr__durable_t *d = b->dur;
  mqr__msg_t *m = e->msg;
  entry_record(b, e->jbq, MQR_JOURNAL_DELETE, m->id, NULL, NULL);
  for (mqr__entry_t **pp = &m->jentries; *pp; pp = &(*pp)->jnext)
    if (*pp == e) {
      *pp = e->jnext;
      break;
    }
  e->jbq = NULL;
  e->jnext = NULL;
  if (m->jentries == NULL && m->jfile) {
    mqr__jlive_drop(d, m);
    mqr__durable_maintain(d);
  }
}

void mqr__durable_delivering(mqr_broker_t *b, mqr__entry_t *e) {
  uint32_t count = (uint32_t)e->delivery_count;
  int g = entry_record(b, e->jbq, MQR_JOURNAL_UPDATE, e->msg->id, &count, NULL);
  if (g >= 0) e->useq = mqr__replicate_seq(b, g); /* (not delivered again before it commits) */
}

/* An UPDATE whose count has the top bit set: an i64 time (ms since the epoch) follows it,
 * before which the message is not delivered again (a redelivery delay, as Artemis keeps
 * a redelivered message's scheduled time). */
void mqr__durable_held(mqr_broker_t *b, const mqr__entry_t *e, int64_t due) {
  uint32_t count = (uint32_t)e->delivery_count | MQR__UPDATE_DUE;
  entry_record(b, e->jbq, MQR_JOURNAL_UPDATE, e->msg->id, &count, &due);
}

/* ---- answers in send order ----------------------------------------------------------------- */

/* Room for one more answer and n more targets. */
static bool pend_reserve(mqr__durable_t *d, uint32_t n) {
  if (d->pend_n == d->pend_cap) {
    uint32_t ncap = d->pend_cap ? d->pend_cap * 2 : 64;
    mqr__pend_t *np = mqr_malloc(ncap * sizeof *np);
    if (np == NULL) return false;
    for (uint32_t i = 0; i < d->pend_n; i++) {
      uint64_t seq = d->pend_head + i;
      np[seq & (ncap - 1)] = d->pend[seq & (d->pend_cap - 1)];
    }
    mqr_free(d->pend);
    d->pend = np;
    d->pend_cap = ncap;
  }
  if (d->tgt_tail - d->tgt_head + n > d->tgt_cap) {
    uint64_t ncap = d->tgt_cap ? d->tgt_cap : 256;
    while (ncap < d->tgt_tail - d->tgt_head + n) ncap *= 2;
    mqr__bq_t **nt = mqr_malloc(ncap * sizeof *nt);
    if (nt == NULL) return false;
    for (uint64_t i = d->tgt_head; i < d->tgt_tail; i++) nt[i & (ncap - 1)] = d->tgt[i & (d->tgt_cap - 1)];
    mqr_free(d->tgt);
    d->tgt = nt;
    d->tgt_cap = ncap;
  }
  return true;
}

#define NO_PEND UINT64_MAX

static mqr__pend_t *pend_push(mqr__durable_t *d, const mqr__send_t *s) {
  uint64_t seq = d->pend_head + d->pend_n++;
  mqr__pend_t *p = &d->pend[seq & (d->pend_cap - 1)];
  mqr__producer_t *prod = s->producer;
  *p = (mqr__pend_t){.p = prod,
                     .token = s->token,
                     .fn = s->fn,
                     .fn_arg = s->fn_arg,
                     .tfirst = d->tgt_tail,
                     .next_same = NO_PEND,
                     .chain = prod    ? prod
                              : s->fn ? &d->anon
                                      : NULL};
  mqr__producer_t *k = p->chain; /* whose answers its own is in order with: NULL, nobody's */
  if (k) {                       /* (the end of its chain of answers) */
    if (k->pending)
      d->pend[k->last_pend & (d->pend_cap - 1)].next_same = seq;
    else
      k->first_pend = seq;
    k->last_pend = seq;
    k->pending++;
  }
  return p;
}

static mqr_error_t *copy_err(const mqr_error_t *err) {
  if (err == NULL) return NULL;
  mqr_error_t *e = mqr_malloc(sizeof *e);
  if (e) *e = *err;
  return e;
}

/* The ring's head past the answers given. */
static void pop_answered(mqr__durable_t *d) {
  while (d->pend_n) {
    mqr__pend_t *p = &d->pend[d->pend_head & (d->pend_cap - 1)];
    if (!p->answered) break;
    d->pend_head++;
    d->pend_n--;
    if (p->n) d->tgt_head = p->tfirst + p->n;
  }
}

/* Gives the answer at ring position seq (done; every earlier one of its producer given). */
static void answer(mqr__durable_t *d, uint64_t seq) {
  mqr__pend_t *p = &d->pend[seq & (d->pend_cap - 1)];
  p->answered = true;
  mqr__pend_t a = *p;
  p->err = NULL; /* (freed here; the slot goes when the ring's head passes it) */
  mqr__producer_t *k = a.chain;
  if (k) {
    k->first_pend = a.next_same;
    k->pending--;
  }
  mqr_error_t fallback;
  const mqr_error_t *err = a.err;
  if (a.status != 0 && err == NULL) {
    mqr_error_set(&fallback, a.status, "%s", mqr_strerror(a.status));
    err = &fallback;
  }
  if (a.fn)
    a.fn(a.fn_arg, a.status, &a.r, a.status ? err : NULL);
  else if (a.p && a.p->ops && a.p->ops->sent && (a.token || a.status))
    a.p->ops->sent(a.p, a.token, a.status, &a.r, a.status ? err : NULL);
  mqr_free(a.err);
}

/* The answer at ring position seq is ready (done): given, with the later answers of its
 * producer that were ready and waited for it, once every earlier one of that producer's
 * is given. Answers go in order per producer (MQTT's PUBACKs must), not across
 * producers: a node that forwards sends to a peer and leads a group the peer forwards to
 * would otherwise wait on the peer while the peer waits on it. Then the ring's head moves
 * past what was given. A callback may send again (the ring may grow): positions are read
 * afresh each time. */
static void drain_at(mqr__durable_t *d, uint64_t seq) {
  mqr__pend_t *p = &d->pend[seq & (d->pend_cap - 1)];
  mqr__producer_t *k = p->chain;
  if (k == NULL) {
    answer(d, seq);
  } else if (k->pending && k->first_pend == seq) {
    while (seq != NO_PEND) {
      p = &d->pend[seq & (d->pend_cap - 1)];
      if (!p->done || p->answered) break;
      uint64_t next = p->next_same;
      k = p->chain;
      answer(d, seq);
      if (k == NULL || k->pending == 0) break;
      seq = next;
    }
  }
  pop_answered(d);
}

/* Ring position of p. */
static uint64_t seq_of(const mqr__durable_t *d, const mqr__pend_t *p) {
  uint64_t i = (uint64_t)(p - d->pend);
  return d->pend_head + ((i - d->pend_head) & (d->pend_cap - 1));
}

int mqr__durable_answer(mqr_broker_t *b, const mqr__send_t *s, int rc, const mqr_broker_receipt_t *r,
                        const mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  bool waits = d && s->producer && s->producer->pending;
  if (!waits || (rc == 0 && s->token == 0 && s->fn == NULL)) return rc;
  if (!pend_reserve(d, 0)) return rc; /* no memory to wait: answered now, out of order */
  mqr__pend_t *p = pend_push(d, s);
  p->status = rc;
  p->done = true;
  if (r) p->r = *r;
  if (rc) p->err = copy_err(err);
  return MQR__PENDING;
}

bool mqr__durable_pend_reserve(mqr__durable_t *d) { return pend_reserve(d, 0); }

uint64_t mqr__durable_waiting(const mqr__durable_t *d) {
  uint64_t n = 0;
  for (uint32_t i = 0; d && i < d->pend_n; i++) {
    const mqr__pend_t *p = &d->pend[(d->pend_head + i) & (d->pend_cap - 1)];
    n += p->m != NULL && p->wait != d; /* (the journal's are counted live already) */
  }
  return n;
}

mqr__pend_t *mqr__durable_pend_wait_msg(mqr__durable_t *d, const mqr__send_t *s, const void *owner,
                                        const mqr_broker_receipt_t *r, mqr__msg_t *m, mqr_queue_t *const *targets,
                                        uint32_t n) {
  mqr__pend_t *p = pend_push(d, s);
  p->m = m;
  p->wait = owner;
  p->n = n;
  if (r) p->r = *r;
  for (uint32_t i = 0; i < n; i++) d->tgt[d->tgt_tail++ & (d->tgt_cap - 1)] = mqr_queue_data(targets[i]);
  return p;
}

void mqr__durable_pend_wait(mqr__durable_t *d, const mqr__send_t *s, const void *owner, const mqr_broker_receipt_t *r) {
  mqr__durable_pend_wait_msg(d, s, owner, r, NULL, NULL, 0);
}

/* The oldest answer still waiting for owner: owners finish their records in order. */
static mqr__pend_t *oldest_waiting(mqr__durable_t *d, const void *owner) {
  for (uint32_t i = 0; i < d->pend_n; i++) {
    mqr__pend_t *q = &d->pend[(d->pend_head + i) & (d->pend_cap - 1)];
    if (q->wait == owner && !q->done) return q;
  }
  return NULL;
}

void mqr__durable_done(mqr__durable_t *d, const void *owner, int status) {
  mqr__pend_t *p = oldest_waiting(d, owner);
  if (p == NULL) return;
  uint64_t seq = seq_of(d, p);
  p->done = true;
  if (status != 0) {
    p->status = MQR_EIO;
    mqr_error_t e;
    mqr_error_set(&e, MQR_EIO, "the address's page files could not make the message durable: it went nowhere");
    p->err = copy_err(&e);
  }
  drain_at(d, seq);
}

static void page_idle_cb(uv_idle_t *h) {
  mqr__durable_t *d = h->data;
  uv_idle_stop(h);
  d->page_idle_on = false;
  mqr__pagers_run(d);
}

void mqr__durable_wake(mqr__durable_t *d) {
  if (d->page_idle_on || d->closing) return;
  d->page_idle_on = true;
  uv_idle_start(&d->page_idle, page_idle_cb);
}

void mqr__durable_forget_producer(mqr_broker_t *b, mqr__producer_t *prod) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || prod->pending == 0) return;
  for (uint32_t i = 0; i < d->pend_n; i++) {
    mqr__pend_t *p = &d->pend[(d->pend_head + i) & (d->pend_cap - 1)];
    if (p->chain != prod) continue;
    p->p = NULL, p->chain = NULL;
    if (p->done && !p->answered) { /* (it waited for an earlier one: nobody to tell now) */
      p->answered = true;
      mqr_free(p->err);
      p->err = NULL;
    }
  }
  prod->pending = 0;
  pop_answered(d);
}

void mqr__durable_forget_queue(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  if (d == NULL) return;
  if (bq->feed) mqr__feed_forget_queue(b, bq);
  for (uint64_t i = d->tgt_head; i < d->tgt_tail; i++)
    if (d->tgt[i & (d->tgt_cap - 1)] == bq) d->tgt[i & (d->tgt_cap - 1)] = NULL;
}

/* ---- a failed journal ------------------------------------------------------------------------ */

static void reopen(uv_timer_t *t);

static void journal_failed(mqr__durable_t *d) {
  if (d->failed) return;
  d->failed = true;
  const char *why = d->w ? mqr_journal_error(d->w) : NULL;
  snprintf(d->why, sizeof d->why, "%s", why ? why : "the journal failed");
  mqr__log(d->b, MQR_LOG_ERROR,
           "journal: %s; durable sends are refused, other traffic goes on; trying again every %d ms", d->why, RETRY_MS);
  if (!d->closing) uv_timer_start(&d->retry, reopen, RETRY_MS, RETRY_MS);
}

static void old_closed(void *arg) { mqr__broker_handle_closed(arg); }

/* The writer stopped at a failed write or fdatasync: its page cache cannot be trusted,
 * so it is not retried. A new writer opens the directory again (a torn tail of the
 * failed write is cut) and begins a new file; what the broker holds is what was durable
 * before the failure plus what it took since. */
static void reopen(uv_timer_t *t) {
  mqr__durable_t *d = t->data;
  if (d->closing) return;
  if (d->w) { /* the failed writer goes first (its callbacks have all run) */
    mqr__broker_handle_opened(d->b);
    mqr_journal_close(d->w, old_closed, d->b);
    d->w = NULL;
  }
  mqr_error_t err;
  mqr_journal_writer_t *w;
  if (mqr_journal_open(d->b->loop, &d->jopt, NULL, NULL, &w, &err) != 0) {
    mqr__log(d->b, MQR_LOG_DEBUG, "journal: still failing: %s", err.message);
    return;
  }
  uv_timer_stop(&d->retry);
  d->w = w;
  d->failed = false;
  uint64_t cur = mqr_journal_file(w);
  mqr__jfiles_reserve(d, cur);
  mqr__log(d->b, MQR_LOG_INFO, "journal: writing again (file %llu); durable sends are taken again",
           (unsigned long long)cur);
}

/* ---- a durable send -------------------------------------------------------------------------- */

void mqr__durable_pend_forwarded(mqr__durable_t *d, const mqr__send_t *s, const void *owner,
                                 const mqr_broker_receipt_t *r) {
  mqr__durable_pend_wait_msg(d, s, owner, r, NULL, NULL, 0)->forwarded = true;
}

void mqr__durable_pend_ack(mqr__durable_t *d, const mqr__send_t *s, const void *owner, const mqr_broker_receipt_t *r) {
  mqr__durable_pend_wait_msg(d, s, owner, r, NULL, NULL, 0)->ack = true;
}

/* A send waiting for owner (the journal: d; a replication group) is durable (status 0)
 * or not. Callbacks come in append order, one per send: the oldest answer waiting for
 * owner and not yet done is this one. */
void mqr__durable_settle(mqr__durable_t *d, const void *owner, int status) {
  mqr__durable_settle_why(d, owner, status, NULL);
}

static void settle(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why,
                   const mqr_frame_receipt_t *receipt);

void mqr__durable_settle_forwarded(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why,
                                   const mqr_frame_receipt_t *receipt) {
  settle(d, owner, status, why, receipt);
}

void mqr__durable_settle_why(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why) {
  settle(d, owner, status, why, NULL);
}

/* owner's oldest waiting answer given status (why: a forwarded send's refusal; receipt: a
 * forwarded send's, as its leader gave it, or NULL). */
static void settle(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why,
                   const mqr_frame_receipt_t *receipt) {
  mqr_broker_t *b = d->b;
  mqr__pend_t *p = oldest_waiting(d, owner);
  if (p == NULL) return;
  uint64_t seq = seq_of(d, p);
  mqr__msg_t *m = p->m;
  p->m = NULL;
  p->done = true;
  if (p->ack) { /* its DELETEs committed, or not known to be */
    if (status) {
      mqr_error_t e;
      p->status = status == MQR_ECLOSED ? MQR_ECLOSED : MQR_EINDOUBT;
      mqr_error_set(&e, p->status, "%s",
                    p->status == MQR_ECLOSED ? "the broker closed before the cluster committed the acknowledgement"
                                             : "the cluster's leader changed before the acknowledgement was "
                                               "committed: the message may be delivered again");
      p->err = copy_err(&e);
    }
    drain_at(d, seq);
    return;
  }
  if (p->forwarded) {             /* the leader has it (status 0) or said why not */
    if (status == 0 && receipt) { /* where the leader put it */
      p->r.status = receipt->status;
      p->r.queues = receipt->queues > 0 ? (uint32_t)receipt->queues : 0;
    }
    if (status) {
      mqr_error_t e;
      bool unknown = status == MQR_EINDOUBT || status == MQR_ECLOSED || status == MQR_EIO || status == MQR_ETIMEOUT;
      p->status = unknown ? MQR_EINDOUBT : status;
      if (status == MQR_ENOTLEADER)
        mqr_error_set(&e, status,
                      "the node this one forwarded the message to no longer leads its group: send it again");
      else if (unknown)
        mqr_error_set(&e, p->status,
                      "the node this one forwarded the message to did not answer (it may have it): send it again (at "
                      "least once)");
      else /* refused there, for good */
        mqr_error_set(&e, status, "the group's leader refused the forwarded message: %s",
                      why ? why->message : mqr_strerror(status));
      p->err = copy_err(&e);
    }
    drain_at(d, seq);
    return;
  }
  if (status != 0) {
    mqr_error_t e;
    if (owner == d) {
      journal_failed(d);
      p->status = MQR_EIO;
      mqr_error_set(&e, MQR_EIO, "the journal could not make the message durable (%s): it went nowhere", d->why);
    } else {
      p->status = status;
      mqr_error_set(&e, status, "%s",
                    status == MQR_EINDOUBT  ? "the cluster's leader changed before the message was committed: it may "
                                              "or may not be delivered; send it again (at least once)"
                    : status == MQR_ECLOSED ? "the broker closed before the cluster committed the message"
                                            : "this node stopped leading the message's group before it committed: "
                                              "send it again");
    }
    p->err = copy_err(&e);
    if (m->jfile) mqr__jlive_drop(d, m);
    mqr__msg_release(b, m);
  } else {
    /* Durable: onto its queues now (Artemis adds a durable send's references once its
     * storage completes). */
    uint32_t taken = 0;
    for (uint32_t i = 0; i < p->n; i++) {
      mqr__bq_t *bq = d->tgt[(p->tfirst + i) & (d->tgt_cap - 1)];
      if (bq == NULL) continue; /* the queue went meanwhile */
      mqr__entry_t *e = mqr__pool_take(&b->entries);
      if (e == NULL) {
        mqr__log(b, MQR_LOG_ERROR, "out of memory enqueueing durable message %lld", (long long)m->id);
        continue;
      }
      *e = (mqr__entry_t){NULL, NULL, m, 0, 0, 0, NULL, NULL, false, 0};
      if (mqr__queue_journaled(bq->q)) {
        e->jbq = bq;
        e->jnext = m->jentries;
        m->jentries = e;
      }
      m->refs++;
      mqr__enqueue(b, bq, e);
      bq->enqueued++;
      bq->bytes += m->len;
      taken++;
    }
    p->r.queues = taken;
    if (m->jentries == NULL && m->jfile) mqr__jlive_drop(d, m);
    mqr__msg_release(b, m); /* the pending send's reference */
    for (uint32_t i = 0; i < p->n; i++) mqr__dispatch(d->tgt[(p->tfirst + i) & (d->tgt_cap - 1)]);
  }
  drain_at(d, seq);
  mqr__durable_maintain(d);
}

static void written(void *arg, int status) { mqr__durable_settle(arg, arg, status); }

bool mqr__durable_pend_reserve_n(mqr__durable_t *d, uint32_t n) { return pend_reserve(d, n); }

int mqr__durable_send(mqr_broker_t *b, mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n, const mqr__send_t *s,
                      const mqr_broker_receipt_t *r, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  m->refs = 1;
  if (d->failed || d->w == NULL) {
    mqr__msg_release(b, m);
    return mqr_error_set(err, MQR_EIO, "the journal cannot take durable messages now (%s)",
                         d->failed ? d->why : "closing");
  }
  if (!pend_reserve(d, n) || !mqr__jfiles_reserve(d, mqr_journal_file(d->w) + 1)) {
    mqr__msg_release(b, m);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory sending a durable message");
  }
  int group = -2; /* the replication group of its journaled targets: -1 none, -3 several */
  for (uint32_t i = 0; i < n; i++) {
    mqr__bq_t *bq = mqr__bq_of(b, targets[i]);
    if (bq == NULL) {
      mqr__msg_release(b, m);
      return mqr_error_set(err, MQR_ENOMEM, "out of memory sending a durable message");
    }
    if (!mqr__queue_journaled(targets[i])) continue;
    int g = mqr__replicate_group(b, bq);
    group = group == -2 || group == g ? g : -3;
  }
  if (group == -3) {
    mqr__msg_release(b, m);
    return mqr_error_set(err, MQR_EINVAL,
                         "the message reaches durable queues of replicated and other addresses (or of two "
                         "replication groups): not supported; send it to each address");
  }
  if (group >= 0) return mqr__replicate_send(b, m, targets, n, group, s, r, err);
  /* ADD, then a REF per durable queue; the last record's callback is the answer. */
  uint32_t last = 0;
  for (uint32_t i = 0; i < n; i++)
    if (mqr__queue_journaled(targets[i])) last = i;
  int rc = mqr_journal_append(d->w, MQR_JOURNAL_ADD, (uint64_t)m->id, m->data, m->len, NULL, NULL);
  uint64_t file = mqr_journal_file(d->w);
  size_t bytes = mqr_journal_record_size(m->len);
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    if (!mqr__queue_journaled(targets[i])) continue;
    mqr_str_t q = mqr_queue_name(targets[i]);
    rc = mqr_journal_append(d->w, MQR_JOURNAL_REF, (uint64_t)m->id, q.ptr, q.len, i == last ? written : NULL,
                            i == last ? d : NULL);
    bytes += mqr_journal_record_size(q.len);
    if (rc && i != last) { /* a REF refused after others were taken: they are undone */
      for (uint32_t k = 0; k < i; k++)
        if (mqr__queue_journaled(targets[k]))
          mqr__durable_append_named(d, MQR_JOURNAL_DELETE, m->id, NULL, mqr_queue_name(targets[k]));
    }
  }
  if (rc) {
    mqr__msg_release(b, m);
    if (rc == MQR_EIO) journal_failed(d);
    return mqr_error_set(err, rc, "the journal cannot take the message: %s",
                         rc == MQR_EIO      ? d->why
                         : rc == MQR_ELIMIT ? "larger than a journal file"
                                            : mqr_strerror(rc));
  }
  m->jfile = file;
  m->jbytes = (uint32_t)bytes;
  mqr__jlive_add(d, m);
  mqr__durable_pend_wait_msg(d, s, d, r, m, targets, n);
  return MQR__PENDING;
}

/* ---- opening and closing ------------------------------------------------------------------------ */

static void handle_closed(uv_handle_t *h) {
  mqr__durable_t *d = h->data;
  mqr__broker_handle_closed(d->b);
}

/* The send path's view of the journal and the pages (broker_int.h). */
static int serves(mqr_broker_t *b, mqr_queue_t *const *targets, uint32_t n, mqr_error_t *err) {
  for (uint32_t i = 0; i < n; i++) {
    mqr__bq_t *bq = mqr_queue_data(targets[i]);
    int rc = bq ? mqr__replicate_serves(b, bq, err) : 0;
    if (rc) return rc;
  }
  return 0;
}

static const mqr__persist_ops_t journal_ops = {.send = mqr__durable_send,
                                               .answer = mqr__durable_answer,
                                               .page_wants = mqr__pager_wants,
                                               .page = mqr__pager_send,
                                               .queue_made = mqr__durable_queue_made,
                                               .serves = serves,
                                               .serves_address = mqr__replicate_serves_address,
                                               .forward = mqr__replicate_forward,
                                               .acked = mqr__replicate_acked,
                                               .leader_url = mqr__replicate_leader_url,
                                               .update_pending = mqr__replicate_update_pending};

int mqr__durable_open(mqr_broker_t *b, mqr_error_t *err) {
  const mqr_persistence_config_t *pc = mqr_config_persistence(b->config);
  const char *dir = b->opt.data_dir ? b->opt.data_dir : pc->directory;
  if (!pc->enabled && b->opt.data_dir == NULL) return 0;
  if (dir == NULL)
    return mqr_error_set(err, MQR_EINVAL,
                         "persistence is on but has no directory (set persistence: directory, or mqrd --data-dir)");
  mqr__durable_t *d = mqr_calloc(1, sizeof *d);
  char *copy = mqr_malloc(strlen(dir) + 1);
  mqr__recovery_t *rec = mqr__recovery_new(b);
  if (d == NULL || copy == NULL || rec == NULL) {
    mqr_free(d);
    mqr_free(copy);
    mqr__recovery_free(rec);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
  }
  d->b = b;
  d->dir = strcpy(copy, dir);
  bool made = false;
  int rc = mqr_journal_lock(d->dir, &made, &d->lock_fd, err);
  if (rc) {
    mqr__recovery_free(rec);
    mqr_free(d->dir);
    mqr_free(d);
    return rc;
  }
  d->jopt = (mqr_journal_options_t){.directory = d->dir,
                                    .file_size = pc->journal_file_size,
                                    .no_sync = !pc->journal_sync,
                                    .min_files = pc->journal_min_files,
                                    .pool_files = pc->journal_pool_files,
                                    .buffer_timeout_us = (uint32_t)(pc->journal_buffer_timeout_ns / 1000),
                                    .buffer_size = pc->journal_buffer_size,
                                    .truncate_damaged = b->opt.recover_truncate,
                                    .io = b->opt.journal_io};
  d->compact_min_files = pc->journal_compact_min_files;
  d->compact_pct = pc->journal_compact_percentage;
  d->recovering = true;
  b->dur = d;
  b->persist = &journal_ops;
  uint64_t t0 = uv_hrtime();
  rc = mqr_journal_open(b->loop, &d->jopt, mqr__durable_recover_record, rec, &d->w, err);
  uint64_t messages = 0, queues = 0;
  if (rc == 0) {
    mqr_journal_stats_t st;
    mqr_journal_stats(d->w, &st);
    d->first = st.first_file;
    if (!mqr__jfiles_reserve(d, mqr_journal_file(d->w)))
      rc = mqr_error_set(err, MQR_ENOMEM, "out of memory opening the journal");
    else
      mqr__recovery_finish(rec, &messages, &queues);
    if (rc == 0) {
      double ms = (double)(uv_hrtime() - t0) / 1e6;
      mqr__log(b, MQR_LOG_INFO,
               "journal %s: recovered %llu durable messages on %llu queues from %llu records in %.1f ms (%.0f "
               "records/s)",
               d->dir, (unsigned long long)messages, (unsigned long long)queues, (unsigned long long)st.recovered, ms,
               ms > 0 ? (double)st.recovered / ms * 1000 : 0.0);
      if (st.torn)
        mqr__log(b, MQR_LOG_WARN, "journal: a torn tail (a write cut by a crash) was cut in %u file(s)", st.torn);
      if (st.cut_file)
        mqr__log(b, MQR_LOG_WARN,
                 "journal: cut at the damaged record of file %016llx.jrn at byte %llu (--recover=truncate); the "
                 "damaged files are kept as *.damaged",
                 (unsigned long long)st.cut_file, (unsigned long long)st.cut_offset);
    }
  }
  d->recovering = false;
  if (rc) {
    mqr__recovery_free(rec);
    if (d->w) {
      mqr__broker_handle_opened(b);
      mqr_journal_close(d->w, old_closed, b);
    }
    d->w = NULL;
    mqr__jfiles_free(d);
    mqr_journal_unlock(d->lock_fd);
    if (made) { /* a directory this start made goes again (rmdir: only when nothing else is in it) */
      char lock[4096];
      snprintf(lock, sizeof lock, "%s/%s", d->dir, MQR_JOURNAL_LOCK_FILE);
      unlink(lock);
      rmdir(d->dir);
    }
    mqr_free(d->dir);
    mqr_free(d);
    b->dur = NULL;
    b->persist = NULL;
    return rc;
  }
  mqr__recovery_free(rec);
  uv_timer_init(b->loop, &d->retry);
  uv_idle_init(b->loop, &d->compact_idle);
  uv_idle_init(b->loop, &d->page_idle);
  d->retry.data = d->compact_idle.data = d->page_idle.data = d;
  b->open_handles += 3;
  rc = mqr__pagers_recover(b, err);
  mqr__recovered_marks_free(d);
  if (rc == 0) rc = mqr__replicate_open(b, err);
  if (rc) return rc; /* the broker closes what is open */
  mqr__durable_maintain(d);
  return 0;
}

static void journal_closed(void *arg) {
  mqr__durable_t *d = arg;
  d->w = NULL;
  mqr__broker_handle_closed(d->b);
}

void mqr__durable_close(mqr_broker_t *b) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->closing) return;
  d->closing = true;
  mqr__replicate_close(b); /* (its sends in flight are answered as its groups close) */
  mqr__durable_compact_stop(d);
  uv_timer_stop(&d->retry);
  uv_close((uv_handle_t *)&d->retry, handle_closed);
  uv_close((uv_handle_t *)&d->compact_idle, handle_closed);
  uv_idle_stop(&d->page_idle);
  uv_close((uv_handle_t *)&d->page_idle, handle_closed);
  mqr__pagers_close(d);
  if (d->w) {
    mqr_journal_stats_t st;
    mqr_journal_stats(d->w, &st);
    mqr__log(b, MQR_LOG_INFO,
             "journal: %llu records in %llu writes since start (%.1f a write), %llu files begun (%llu reused), %llu "
             "released, %llu compactions",
             (unsigned long long)st.records, (unsigned long long)st.writes,
             st.writes ? (double)st.records / (double)st.writes : 0.0, (unsigned long long)st.files,
             (unsigned long long)st.reused, (unsigned long long)st.released, (unsigned long long)d->compactions);
    mqr__broker_handle_opened(b);
    mqr_journal_close(d->w, journal_closed, d); /* sends waiting for their fdatasync finish first */
  }
}

void mqr__durable_free(mqr_broker_t *b) {
  mqr__durable_t *d = b->dur;
  if (d == NULL) return;
  mqr__pagers_free(d);
  mqr__recovered_marks_free(d);
  for (uint32_t i = 0; i < d->pend_n; i++) mqr_free(d->pend[(d->pend_head + i) & (d->pend_cap - 1)].err);
  mqr_free(d->pend);
  mqr_free(d->tgt);
  mqr_free(d->fwd);
  mqr__jfiles_free(d);
  mqr_journal_unlock(d->lock_fd);
  mqr_free(d->dir);
  mqr_free(d);
  b->dur = NULL;
  b->persist = NULL;
}
