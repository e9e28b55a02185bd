/* Replicated durable queues (docs/cluster.md; durable.h): the broker's side of the
 * cluster (../cluster). A durable queue of an address whose settings say `replicated`
 * keeps its records not in the journal but in a Raft group's log (the group chosen by
 * the address's name): a durable send to it is answered once the group has committed its
 * ADD and REFs, and it goes onto its queues then, as a journaled send does once its
 * fdatasync returned; acks and deliveries append their DELETE and UPDATE records to the
 * group as they do to the journal.
 *
 * Only the node that leads a group serves its queues. Every node keeps the group's
 * replicated state (what its committed records leave); the node that comes to lead a
 * group empties those queues (without records) and puts the state's messages on them,
 * in id order, with their delivery counts and redelivery times. A node that stops
 * leading empties them, without records. A send to a replicated address on a node that
 * does not lead its group is forwarded to the leader when the config gives the leader's
 * url (a libmqr-client connection per peer, the message sent as stored, its answer the
 * leader's receipt, in order), else refused (MQR_ENOTLEADER, naming the leader). */
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "durable.h"
#include "mqr/client.h"

/* ---- which group ------------------------------------------------------------------------------ */

int mqr__replicate_group(const mqr_broker_t *b, mqr__bq_t *bq) {
  const mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL || bq == NULL) return -1;
  mqr_address_t *a = mqr_queue_address(bq->q);
  if (a == NULL || !mqr_address_settings(a)->replicated) return -1;
  if (bq->name_group == 0) /* (hashed once: every record of the queue asks) */
    bq->name_group = (uint8_t)(1 + mqr__cluster_group_of(d->cluster, mqr_address_name(a)));
  return bq->name_group - 1;
}

/* A record of an entry (DELETE, UPDATE) to its group: dropped when this node no longer
 * leads it (its queues were emptied then; the new leader has the message) or while the
 * broker moves messages in and out of the queues itself. */
void mqr__replicate_record(mqr_broker_t *b, int g, mqr_journal_record_type_t type, int64_t id, const void *p,
                           size_t n) {
  mqr__durable_t *d = b->dur;
  if (d->cluster_silent) return;
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, (uint32_t)g);
  if (gr == NULL || mqr__rgroup_append(gr, type, (uint64_t)id, p, n, NULL, NULL) != 0) d->cluster_dropped++;
}

static void committed(void *arg, int status);

int mqr__replicate_acked(mqr_broker_t *b, mqr__bq_t *bq, const mqr__send_t *s, uint32_t n, mqr_error_t *err) {
  if (bq->feed) return mqr__feed_answer(b, bq, s, n, err); /* (forwarded to the leader) */
  int g = mqr__queue_journaled(bq->q) ? mqr__replicate_group(b, bq) : -1;
  if (g < 0) return 0;
  mqr__durable_t *d = b->dur;
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, (uint32_t)g);
  if (!mqr__rgroup_leading(gr))
    return mqr_error_set(err, MQR_EINDOUBT,
                         "this node no longer leads group %d of queue '%.*s': the acknowledgement was not taken, and "
                         "the message will be delivered again",
                         g, (int)mqr_queue_name(bq->q).len, mqr_queue_name(bq->q).ptr);
  if (!mqr__durable_pend_reserve(d)) return 0; /* (no memory to wait: answered now) */
  int rc = mqr__rgroup_after(gr, committed, gr);
  if (rc) return 0; /* 1: nothing uncommitted; else no memory to wait */
  mqr_broker_receipt_t r = {0, n, 0};
  mqr__durable_pend_ack(d, s, gr, &r);
  return MQR__PENDING;
}

/* ---- delivery counts that never go back ------------------------------------------------------ */

uint32_t mqr__replicate_seq(mqr_broker_t *b, int g) {
  mqr__durable_t *d = b->dur;
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, (uint32_t)g);
  return d->cluster_silent || gr == NULL || !mqr__rgroup_leading(gr) ? 0 : mqr__rgroup_seq(gr);
}

bool mqr__replicate_update_pending(mqr_broker_t *b, mqr__bq_t *bq, uint32_t useq) {
  mqr__durable_t *d = b->dur;
  int g = mqr__replicate_group(b, bq);
  mqr__rgroup_t *gr = g < 0 ? NULL : mqr__cluster_group(d->cluster, (uint32_t)g);
  if (gr == NULL || mqr__rgroup_seq_done(gr, useq)) return false;
  bq->await_commit = true;
  d->awaiting = true;
  return true;
}

/* A proposal of group g was answered: its queues whose head waited go on. */
static void answered(void *arg, uint32_t g) {
  mqr_broker_t *b = arg;
  mqr__durable_t *d = b->dur;
  if (!d->awaiting || d->closing) return;
  d->awaiting = false;
  for (mqr__bq_t *bq = b->queues, *next; bq; bq = next) {
    next = bq->next;
    if (!bq->await_commit) continue;
    if (mqr__replicate_group(b, bq) != (int)g) {
      d->awaiting = true; /* (another group's) */
      continue;
    }
    bq->await_commit = false;
    mqr__dispatch(bq); /* (it may wait again) */
  }
}

/* ---- queues made at run time ------------------------------------------------------------------ */

void mqr__replicate_queue_made(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  int g = mqr__replicate_group(b, bq);
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, (uint32_t)g);
  mqr_str_t name = mqr_queue_name(bq->q);
  if (d->cluster_silent) { /* made from the group's state (a promotion) */
    bq->replicated_topo = true;
    return;
  }
  if (!mqr__rgroup_leading(gr)) {
    if (mqr__replicate_feedable(b, NULL)) /* (a consumer's: its feed makes it there) */
      mqr__log(b, MQR_LOG_INFO,
               "cluster: queue '%.*s' made here, on a node that does not lead its group %d: the leader makes it too "
               "(and records it in the group) when this node's consumers are fed from it",
               (int)name.len, name.ptr, g);
    else
      mqr__log(b, MQR_LOG_WARN,
               "cluster: queue '%.*s' was made on a node that does not lead its group %d: it is not replicated (and "
               "goes when this node leads the group)",
               (int)name.len, name.ptr, g);
    return;
  }
  size_t n = mqr__topology_size(bq->q);
  uint8_t *buf = mqr_malloc(n);
  int rc = buf ? (mqr__topology_write(buf, bq->q), mqr__rgroup_append(gr, MQR_JOURNAL_TOPOLOGY, 0, buf, n, NULL, NULL))
               : MQR_ENOMEM;
  mqr_free(buf);
  if (rc == 0)
    bq->replicated_topo = true;
  else
    mqr__log(b, MQR_LOG_ERROR, "cluster: queue '%.*s' could not be recorded in group %d (%s): it is this node's only",
             (int)name.len, name.ptr, g, mqr_strerror(rc));
}

int mqr__replicate_queue_deleted(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  int g = mqr__replicate_group(b, bq);
  mqr__rgroup_t *gr = g < 0 ? NULL : mqr__cluster_group(d->cluster, (uint32_t)g);
  if (d->cluster_silent || gr == NULL) return 0;
  if (!mqr__rgroup_leading(gr)) return MQR_ENOTLEADER;
  mqr_str_t name = mqr_queue_name(bq->q);
  size_t n = MQR__TOMB_SIZE(name);
  uint8_t small[256], *buf = n <= sizeof small ? small : mqr_malloc(n);
  if (buf == NULL) return MQR_ENOMEM;
  mqr__tomb_write(buf, MQR__TOMB_QUEUE, name);
  int rc = mqr__rgroup_append(gr, MQR_JOURNAL_TOPOLOGY, 0, buf, n, NULL, NULL);
  if (buf != small) mqr_free(buf);
  if (rc) return rc == MQR_ENOMEM ? MQR_ENOMEM : MQR_EIO;
  bq->replicated_topo = false;
  return 0;
}

/* ---- forwarding to the leader ------------------------------------------------------------------- */

struct mqr__fwd_s {
  mqr_broker_t *b;
  uint64_t id;     /* the peer's */
  const char *url; /* where its clients connect (the config's) */
  mqr_client_t *c; /* NULL until the first forward */
  bool broken;     /* its connection failed: a new one for the next forward */
};

static void fwd_error(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  struct mqr__fwd_s *f = arg;
  if (f->c != c) return;
  f->broken = true;
  mqr__log(f->b, MQR_LOG_WARN, "cluster: the connection to node %llu (%s) for forwarded sends failed: %.*s",
           (unsigned long long)f->id, f->url, e ? (int)e->text.len : 0, e ? e->text.ptr : mqr_strerror(status));
}

static void fwd_answer(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  struct mqr__fwd_s *fw = arg;
  int st = status == 0 && f && f->type == MQR_FRAME_RECEIPT ? 0 : status ? status : MQR_EINDOUBT;
  mqr_error_t why;
  if (st && f && f->type == MQR_FRAME_ERROR)
    mqr_error_set(&why, st, "%.*s", (int)f->u.error.text.len, f->u.error.text.ptr);
  mqr__durable_settle_forwarded(fw->b->dur, fw, st, st && f && f->type == MQR_FRAME_ERROR ? &why : NULL,
                                st == 0 ? &f->u.receipt : NULL);
}

static void fwd_closed(void *arg) { mqr__broker_handle_closed(arg); }

/* f's client goes (its sends in flight are answered as it closes). */
static void fwd_drop(struct mqr__fwd_s *f) {
  mqr__broker_handle_opened(f->b);
  mqr_client_close(f->c, fwd_closed, f->b);
  f->c = NULL;
}

static void peer_client_closed(void *arg) { mqr__broker_handle_closed(arg); }

int mqr__replicate_peer_client(mqr_broker_t *b, const char *url, const char *client_id, mqr_client_error_fn on_error,
                               void *arg, mqr_client_t **out, mqr_error_t *err) {
  const mqr_cluster_config_t *cc = mqr_config_cluster(b->config); /* (who this node is to its peers) */
  mqr_client_options_t o = {.client_id = client_id,
                            .on_error = on_error,
                            .arg = arg,
                            .tls_ca = cc->tls_ca,
                            .tls_cert = cc->tls_cert,
                            .tls_key = cc->tls_key,
                            .user = cc->user,
                            .password = cc->password};
  mqr_client_t *c = NULL;
  if (mqr_client_create(b->loop, &o, &c) != 0) return mqr_error_set(err, MQR_ENOMEM, "out of memory for a client");
  int rc = mqr_client_connect(c, url, NULL, NULL, err);
  if (rc) {
    mqr__broker_handle_opened(b);
    mqr_client_close(c, peer_client_closed, b);
    return rc;
  }
  *out = c;
  return 0;
}

const char *mqr__replicate_peer_url(mqr_broker_t *b, uint64_t id) {
  mqr__durable_t *d = b->dur;
  for (uint32_t i = 0; id && i < d->n_fwd; i++)
    if (d->fwd[i].id == id) return d->fwd[i].url;
  return NULL;
}

static mqr_client_t *fwd_client(struct mqr__fwd_s *f) {
  if (f->c && f->broken) fwd_drop(f);
  if (f->c) return f->c;
  mqr_error_t err;
  if (mqr__replicate_peer_client(f->b, f->url, "mqr-cluster-forward", fwd_error, f, &f->c, &err) != 0) {
    mqr__log(f->b, MQR_LOG_WARN, "cluster: cannot connect to node %llu (%s): %s", (unsigned long long)f->id, f->url,
             err.message);
    f->c = NULL;
    return NULL;
  }
  f->broken = false;
  return f->c;
}

/* The peer (with a url) that leads the group whose leadership this node lacked at its
 * last refusal (not_leader noted the group), or NULL. */
static struct mqr__fwd_s *leader_peer(mqr__durable_t *d) {
  mqr__rgroup_t *gr = d && d->cluster ? mqr__cluster_group(d->cluster, d->refused_group) : NULL;
  uint64_t leader = gr ? mqr__rgroup_leader(gr, NULL) : 0;
  for (uint32_t i = 0; leader && i < d->n_fwd; i++)
    if (d->fwd[i].id == leader) return &d->fwd[i];
  return NULL;
}

const char *mqr__replicate_leader_url(mqr_broker_t *b, uint64_t *node) {
  struct mqr__fwd_s *f = leader_peer(b->dur);
  if (f && node) *node = f->id;
  return f ? f->url : NULL;
}

int mqr__replicate_forward(mqr_broker_t *b, mqr__msg_t *m, const mqr__send_t *s, const mqr_broker_receipt_t *r,
                           int refusal) {
  mqr__durable_t *d = b->dur;
  struct mqr__fwd_s *f = leader_peer(d);
  mqr_client_t *c = f ? fwd_client(f) : NULL;
  mqr_error_t ferr;
  if (c == NULL || !mqr__durable_pend_reserve_n(d, 0) ||
      mqr_client_send_stored(c, m->data, m->len, mqr_str_n("", 0), fwd_answer, f, &ferr) != 0) {
    mqr__msg_release(b, m);
    return refusal; /* (err says who leads) */
  }
  mqr__durable_pend_forwarded(d, s, f, r);
  mqr__msg_release(b, m);
  return MQR__PENDING;
}

/* ---- a durable send ------------------------------------------------------------------------- */

static void committed(void *arg, int status) {
  mqr__rgroup_t *gr = arg;
  mqr__durable_settle(mqr__rgroup_owner(gr), gr, status);
}

static mqr_str_t address_of(const mqr__msg_t *m) {
  mqr_stored_view_t v;
  return mqr_message_read_stored(m->data, m->len, &v, NULL) == 0 ? v.address : mqr_str_n("?", 1);
}

/* MQR_ENOTLEADER, err naming the leader of group g (of address a) if one is known. */
static int not_leader(mqr__rgroup_t *gr, int g, mqr_str_t a, mqr_error_t *err) {
  mqr__durable_t *d = mqr__rgroup_owner(gr);
  if (d) d->refused_group = (uint32_t)g; /* (where a forward goes) */
  const char *where = NULL;
  uint64_t leader = mqr__rgroup_leader(gr, &where);
  if (a.len == 0) /* (the group itself) */
    return leader ? mqr_error_set(err, MQR_ENOTLEADER, "group %d is led by node %llu (%s), not by this node", g,
                                  (unsigned long long)leader, where ? where : "?")
                  : mqr_error_set(err, MQR_ENOTLEADER, "group %d has no leader now", g);
  if (leader == 0)
    return mqr_error_set(err, MQR_ENOTLEADER, "address '%.*s' is replicated in group %d, which has no leader now",
                         (int)a.len, a.ptr, g);
  return mqr_error_set(err, MQR_ENOTLEADER,
                       "address '%.*s' is replicated in group %d, led by node %llu (%s), not by this node", (int)a.len,
                       a.ptr, g, (unsigned long long)leader, where ? where : "?");
}

int mqr__replicate_serves(mqr_broker_t *b, mqr__bq_t *bq, mqr_error_t *err) {
  int g = mqr__replicate_group(b, bq);
  if (g < 0) return 0;
  mqr__rgroup_t *gr = mqr__cluster_group(b->dur->cluster, (uint32_t)g);
  return mqr__rgroup_leading(gr) ? 0 : not_leader(gr, g, mqr_address_name(mqr_queue_address(bq->q)), err);
}

int mqr__replicate_serves_address(mqr_broker_t *b, mqr_address_t *a, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL || a == NULL || !mqr_address_settings(a)->replicated) return 0;
  uint32_t g = mqr__cluster_group_of(d->cluster, mqr_address_name(a));
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, g);
  return mqr__rgroup_leading(gr) ? 0 : not_leader(gr, (int)g, mqr_address_name(a), err);
}

bool mqr__replicate_feedable(mqr_broker_t *b, const mqr__principal_t *who) {
  const mqr_cluster_config_t *cc = mqr_config_cluster(b->config);
  if (b->dur->n_fwd == 0 || cc->redirect_consumers) return false; /* (no peer's url: nothing to feed it from) */
  /* Another node's feed comes to the leader only: were it fed here, two nodes that each
   * thought the other led would feed each other. */
  return cc->user == NULL || who == NULL || !mqr_str_eq(mqr__principal_name(who), mqr_str(cc->user));
}

int mqr__replicate_send(mqr_broker_t *b, mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n, int g,
                        const mqr__send_t *s, const mqr_broker_receipt_t *r, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, (uint32_t)g);
  if (!mqr__rgroup_leading(gr)) {
    not_leader(gr, g, address_of(m), err); /* (and notes the group, for the forward) */
    return mqr__replicate_forward(b, m, s, r, MQR_ENOTLEADER);
  }
  if (!mqr__durable_pend_reserve_n(d, n)) {
    mqr__msg_release(b, m);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory sending a replicated message");
  }
  uint32_t last = 0;
  for (uint32_t i = 0; i < n; i++)
    if (mqr__queue_journaled(targets[i])) last = i;
  int rc = mqr__rgroup_append(gr, MQR_JOURNAL_ADD, (uint64_t)m->id, m->data, m->len, NULL, NULL);
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    if (!mqr__queue_journaled(targets[i])) continue;
    mqr_str_t q = mqr_queue_name(targets[i]);
    rc = mqr__rgroup_append(gr, MQR_JOURNAL_REF, (uint64_t)m->id, q.ptr, q.len, i == last ? committed : NULL,
                            i == last ? gr : NULL);
  }
  if (rc) { /* (what went in before commits with no answer: the message is in the state, on no queue here) */
    mqr__msg_release(b, m);
    return mqr_error_set(err, rc, "the cluster cannot take the message: %s", mqr_strerror(rc));
  }
  m->jfile = 0; /* (nothing of it is in the journal) */
  mqr__durable_pend_wait_msg(d, s, gr, r, m, targets, n);
  return MQR__PENDING;
}

/* ---- leading a group, and no longer ------------------------------------------------------------- */

/* Every entry of the group's queues goes, without records: those on the queues, and
 * those in flight to their consumers (the group's leader, this node again included,
 * delivers them anew from the state; an ack of the old delivery would delete the new). */
static void empty_group(mqr_broker_t *b, uint32_t g) {
  mqr__durable_t *d = b->dur;
  d->cluster_silent = true;
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
    if (mqr__replicate_group(b, bq) == (int)g) {
      for (uint32_t i = 0; i < bq->n_consumers; i++) mqr__consumer_forget_unacked(bq->consumers[i]);
      mqr_broker_purge(b, bq->q);
    }
  d->cluster_silent = false;
}

typedef struct {
  mqr_broker_t *b;
  uint32_t g;
  uint64_t messages, orphans;
} promote_t;

static int promote_one(void *ctx, int64_t id, const uint8_t *stored, size_t len, const mqr__rref_t *refs,
                       uint32_t n_refs) {
  promote_t *pr = ctx;
  mqr_broker_t *b = pr->b;
  mqr__msg_t *m = mqr__msg_alloc(b, len);
  if (m == NULL) return MQR_ENOMEM;
  memcpy(m->data, stored, len);
  m->id = id;
  m->jfile = 0;
  m->jbytes = 0;
  m->jentries = NULL;
  m->jlive_next = m->jlive_prev = NULL;
  b->stats.messages++;
  b->stats.bytes += len;
  mqr_stored_view_t v;
  mqr_address_t *a =
      mqr_message_read_stored(stored, len, &v, NULL) == 0 ? mqr_router_find_address(&b->router, v.address) : NULL;
  m->refs = 1; /* (the walk's, until its entries hold it) */
  m->acct = NULL;
  int64_t now = mqr__wall_ms();
  for (uint32_t k = 0; k < n_refs; k++) {
    mqr_queue_t *q = mqr_router_find_queue(&b->router, refs[k].queue);
    mqr__bq_t *bq = q ? mqr__bq_of(b, q) : NULL;
    if (bq == NULL || mqr__replicate_group(b, bq) != (int)pr->g) {
      pr->orphans++;
      continue;
    }
    mqr__entry_t *e = mqr__pool_take(&b->entries);
    if (e == NULL) break;
    if (m->acct == NULL) {
      m->acct = mqr__acct_of(b, a ? a : mqr_queue_address(q));
      if (m->acct) m->acct->bytes += len;
    }
    *e = (mqr__entry_t){NULL, NULL, m, 0, refs[k].delivery_count, 0, bq, m->jentries, false, 0};
    m->jentries = e;
    m->refs++;
    bq->enqueued++;
    bq->bytes += len;
    /* waiting out a redelivery delay when its last leader went: held to the same time */
    if (refs[k].due <= now || !mqr__hold_redelivery(b, bq, e, (uint64_t)(refs[k].due - now))) mqr__enqueue(b, bq, e);
  }
  mqr__msg_release(b, m);
  if (id > b->next_message_id) b->next_message_id = id;
  pr->messages++;
  return 0;
}

/* A queue the group's state holds made here if missing, and marked as the state's. */
static int promote_queue(void *ctx, const uint8_t *p, size_t len) {
  promote_t *pr = ctx;
  mqr_broker_t *b = pr->b;
  mqr_queue_config_t cfg;
  if (!mqr__topology_read(p, len, &cfg)) return 0; /* (the state keeps queues' records only) */
  mqr_queue_t *q = mqr_router_find_queue(&b->router, cfg.name);
  mqr_error_t err;
  if (q == NULL) {
    int rc = mqr__queue_make_from(b, &cfg, &q, &err);
    if (rc == MQR_ENOMEM) return rc;
    if (rc) {
      mqr__log(b, MQR_LOG_WARN, "cluster: group %u: queue '%.*s' cannot be made here: %s", pr->g, (int)cfg.name.len,
               cfg.name.ptr, err.message);
      return 0;
    }
  }
  mqr__bq_t *bq = mqr__bq_of(b, q);
  if (bq == NULL) return MQR_ENOMEM;
  if (mqr__replicate_group(b, bq) == (int)pr->g) bq->promoted = true;
  return 0;
}

/* The group's queues made at run time as its state says: those it holds made here when
 * missing; those it does not (made here while another node led, or deleted since) go,
 * when no consumer holds them. Silent: nothing recorded. */
static int promote_queues(promote_t *pr) {
  mqr_broker_t *b = pr->b;
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next) bq->promoted = false;
  int rc = mqr__rstate_each_topology(mqr__cluster_state(b->dur->cluster, pr->g), promote_queue, pr);
  for (mqr__bq_t *bq = b->queues, *next; bq; bq = next) {
    next = bq->next;
    if (bq->promoted || bq->from_config || bq->temporary || bq->n_consumers || !mqr_queue_durable(bq->q) ||
        mqr__replicate_group(b, bq) != (int)pr->g)
      continue;
    mqr__log(b, MQR_LOG_INFO, "cluster: group %u: queue '%.*s' is not in the group's state: it goes here", pr->g,
             (int)mqr_queue_name(bq->q).len, mqr_queue_name(bq->q).ptr);
    mqr__queue_drop(b, bq);
  }
  return rc;
}

static void leadership(void *arg, uint32_t g, bool leader) {
  mqr_broker_t *b = arg;
  mqr__durable_t *d = b->dur;
  if (d->closing) return;
  if (leader) mqr__feed_group(b, g, true); /* (this node serves its queues now) */
  empty_group(b, g);
  if (!leader) {
    mqr__log(b, MQR_LOG_WARN, "cluster: this node no longer leads group %u; its queues here are emptied", g);
    mqr__feed_group(b, g, false); /* (those with consumers here are fed from the next leader) */
    return;
  }
  mqr__rstate_t *st = mqr__cluster_state(d->cluster, g);
  mqr__rstate_stats_t ss = mqr__rstate_stats(st);
  if (ss.max_id > b->next_message_id) b->next_message_id = ss.max_id;
  promote_t pr = {b, g, 0, 0};
  d->cluster_silent = true;
  int rc = promote_queues(&pr);
  d->cluster_silent = false;
  if (rc == 0) rc = mqr__rstate_each(st, promote_one, &pr);
  if (rc) mqr__log(b, MQR_LOG_ERROR, "cluster: group %u: out of memory putting its messages on their queues", g);
  mqr__log(b, MQR_LOG_INFO, "cluster: this node leads group %u (term %llu): %llu messages on its queues", g,
           (unsigned long long)mqr__rgroup_raft(mqr__cluster_group(d->cluster, g))->current_term,
           (unsigned long long)pr.messages);
  if (pr.orphans)
    mqr__log(b, MQR_LOG_WARN,
             "cluster: group %u: %llu references to queues this node does not have (or not replicated here) dropped", g,
             (unsigned long long)pr.orphans);
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
    if (mqr__replicate_group(b, bq) == (int)g) mqr__dispatch(bq);
}

static void disk_failed(void *arg, uint32_t g, const char *why, bool leading) {
  mqr_broker_t *b = arg;
  mqr__log(b, MQR_LOG_ERROR, "cluster: group %u: this node cannot write its Raft log (%s)%s", g,
           why && why[0] ? why : "I/O error",
           b->opt.fatal ? ""
           : leading    ? ": it stops leading the group and hands it to a follower; once the disk is fixed, "
                          "restart this node (it catches up from the others)"
                        : ": as a follower it refuses the leader's entries (the others make the majority); once "
                          "the disk is fixed, restart this node (it catches up from the others)");
  if (b->opt.fatal == NULL) return;
  /* At once, still inside libraft's callback: libraft 0.15 goes on to release the entries
   * it failed to write, which may crash it moments later (or at its close). */
  char text[200];
  snprintf(text, sizeof text, "cluster group %u: this node cannot write its Raft log", g);
  b->opt.fatal(b->opt.fatal_ctx, text);
}

/* ---- looking, and moving a leadership ----------------------------------------------------------- */

uint64_t mqr_broker_cluster_groups(mqr_broker_t *b, void (*fn)(void *arg, const mqr_broker_group_info_t *g),
                                   void *arg) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL) return 0;
  for (uint32_t g = 0; g < mqr__cluster_groups(d->cluster); g++) {
    mqr__cluster_status_t st;
    mqr__cluster_status(d->cluster, g, &st);
    mqr__rstate_stats_t ss = mqr__rstate_stats(mqr__cluster_state(d->cluster, g));
    mqr_broker_group_info_t info = {.group = g,
                                    .leading = st.leading,
                                    .leader_id = st.leader_id,
                                    .leader_address = mqr_str(st.leader ? st.leader : ""),
                                    .term = st.term,
                                    .commit_index = st.commit_index,
                                    .applied_index = st.applied_index,
                                    .messages = ss.messages,
                                    .bytes = ss.bytes,
                                    .n_followers = st.n_followers,
                                    .held_back = st.sends_refused};
    for (uint32_t k = 0; k < st.n_followers && k < 16; k++) {
      info.follower_id[k] = st.followers[k].id;
      info.follower_lag[k] = st.followers[k].lag;
    }
    fn(arg, &info);
  }
  return mqr_config_cluster(b->config)->node_id;
}

typedef struct {
  mqr_broker_t *b;
  uint32_t g;
} moved_t;

static void moved(void *arg, bool ok, uint64_t leader) {
  moved_t *m = arg;
  if (ok)
    mqr__log(m->b, MQR_LOG_INFO, "cluster: group %u's leadership moved to node %llu", m->g, (unsigned long long)leader);
  else
    mqr__log(m->b, MQR_LOG_WARN, "cluster: group %u's leadership did not move (node %llu leads)", m->g,
             (unsigned long long)leader);
  mqr_free(m);
}

int mqr_broker_cluster_transfer(mqr_broker_t *b, uint32_t g, uint64_t to, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL) return mqr_error_set(err, MQR_ENOTFOUND, "this broker is not in a cluster");
  if (g >= mqr__cluster_groups(d->cluster))
    return mqr_error_set(err, MQR_ENOTFOUND, "the cluster has %u group(s): no group %u",
                         mqr__cluster_groups(d->cluster), g);
  mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, g);
  moved_t *m = mqr_malloc(sizeof *m);
  if (m == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  *m = (moved_t){b, g};
  int rc = mqr__rgroup_transfer(gr, to, moved, m);
  if (rc == 0) return 0;
  mqr_free(m);
  if (rc == MQR_ENOTLEADER) return not_leader(gr, (int)g, mqr_str_n("", 0), err);
  return mqr_error_set(err, rc, "group %u: node %llu is not a voter of it (or this node)", g, (unsigned long long)to);
}

typedef struct {
  mqr_broker_t *b;
  uint32_t g;
  uint64_t id;
  bool add;
} change_t;

static void change_done(void *arg, int status) {
  change_t *ch = arg;
  if (status == 0)
    mqr__log(ch->b, MQR_LOG_INFO, "cluster: group %u: node %llu %s", ch->g, (unsigned long long)ch->id,
             ch->add ? "added as a voter" : "removed");
  else
    mqr__log(ch->b, MQR_LOG_WARN, "cluster: group %u: node %llu not %s: %s", ch->g, (unsigned long long)ch->id,
             ch->add ? "added" : "removed", mqr_strerror(status));
  mqr_free(ch);
}

int mqr_broker_cluster_change(mqr_broker_t *b, uint64_t id, const char *address, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL) return mqr_error_set(err, MQR_ENOTFOUND, "this broker is not in a cluster");
  char ga[64];
  if (id == 0 || (address && !mqr__cluster_group_address(address, mqr__cluster_groups(d->cluster) - 1, ga, sizeof ga)))
    return mqr_error_set(err, MQR_EINVAL, "a node needs an id (1..) and an address IP:PORT");
  int asked = 0;
  for (uint32_t g = 0; g < mqr__cluster_groups(d->cluster); g++) {
    mqr__rgroup_t *gr = mqr__cluster_group(d->cluster, g);
    if (!mqr__rgroup_leading(gr)) continue;
    change_t *ch = mqr_malloc(sizeof *ch);
    if (ch == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
    *ch = (change_t){b, g, id, address != NULL};
    if (address) mqr__cluster_group_address(address, g, ga, sizeof ga);
    int rc = address ? mqr__rgroup_add(gr, id, ga, change_done, ch) : mqr__rgroup_remove(gr, id, change_done, ch);
    if (rc) {
      mqr_free(ch);
      return mqr_error_set(err, rc, "group %u: node %llu cannot be %s now (%s)", g, (unsigned long long)id,
                           address ? "added (already a member, or a change in progress)"
                                   : "removed (not a member, or a change in progress)",
                           mqr_strerror(rc));
    }
    asked++;
  }
  return asked;
}

/* ---- opening and closing ------------------------------------------------------------------------- */

static void tick(void *arg) {
  mqr_broker_t *b = arg;
  if (!b->dur->closing) mqr__feed_check_all(b);
}

static void link_warn(void *arg, const char *why) { mqr__log(arg, MQR_LOG_WARN, "%s", why); }

int mqr__replicate_open(mqr_broker_t *b, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  const mqr_cluster_config_t *cc = mqr_config_cluster(b->config);
  if (!cc->enabled) return 0;
  char dir[4096];
  if (cc->directory)
    snprintf(dir, sizeof dir, "%s", cc->directory);
  else
    snprintf(dir, sizeof dir, "%s/cluster", d->dir);
  mqr__cluster_peer_t peers[16];
  for (uint32_t i = 0; i < cc->n_peers && i < 16; i++)
    peers[i] = (mqr__cluster_peer_t){cc->peers[i].id, cc->peers[i].address};
  mqr__links_options_t tls = {.ca = cc->tls_ca,
                              .cert = cc->tls_cert,
                              .key = cc->tls_key,
                              .user = cc->user,
                              .password = cc->password,
                              .warn = link_warn,
                              .arg = b};
  mqr__cluster_options_t o = {.node_id = cc->node_id,
                              .bind = cc->bind,
                              .peers = peers,
                              .n_peers = cc->n_peers,
                              .groups = cc->groups,
                              .directory = dir,
                              .election_timeout = cc->election_timeout_ms,
                              .heartbeat_timeout = cc->heartbeat_timeout_ms,
                              .snapshot_threshold = cc->snapshot_threshold,
                              .segment_size = cc->segment_size,
                              .join = cc->join,
                              .tls = cc->raft_tls ? &tls : NULL,
                              .leadership = leadership,
                              .disk_failed = disk_failed,
                              .answered = answered,
                              .tick = tick,
                              .arg = b};
  int rc = mqr__cluster_open(b->loop, &o, &d->cluster, err);
  if (rc) return rc;
  for (uint32_t g = 0; g < mqr__cluster_groups(d->cluster); g++)
    mqr__rgroup_set_owner(mqr__cluster_group(d->cluster, g), d);
  b->clustered = true;
  if ((d->fwd = mqr_calloc(cc->n_peers ? cc->n_peers : 1, sizeof *d->fwd)) == NULL)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory for the cluster");
  for (uint32_t i = 0; i < cc->n_peers; i++)
    if (cc->peers[i].url) d->fwd[d->n_fwd++] = (struct mqr__fwd_s){b, cc->peers[i].id, cc->peers[i].url, NULL, false};
  mqr__log(b, MQR_LOG_INFO, "cluster: node %llu at %s, %u peer(s), %u group(s); logs in %s; Raft links over %s",
           (unsigned long long)cc->node_id, cc->bind, cc->n_peers, mqr__cluster_groups(d->cluster), dir,
           cc->raft_tls ? "TLS" : "plain TCP");
  return 0;
}

static void cluster_closed(void *arg) {
  mqr_broker_t *b = arg;
  b->dur->cluster = NULL;
  b->clustered = false;
  mqr__broker_handle_closed(b);
}

void mqr__replicate_close(mqr_broker_t *b) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->cluster == NULL) return;
  if (d->cluster_dropped)
    mqr__log(b, MQR_LOG_INFO, "cluster: %llu delivery and ack records were not taken (this node no longer led)",
             (unsigned long long)d->cluster_dropped);
  for (uint32_t i = 0; i < d->n_fwd; i++)
    if (d->fwd[i].c) fwd_drop(&d->fwd[i]);
  mqr__feed_close_all(b);
  mqr__broker_handle_opened(b);
  mqr__cluster_close(d->cluster, cluster_closed, b); /* (its sends in flight are answered MQR_ECLOSED) */
}
