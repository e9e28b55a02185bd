/* Consumers on a node that does not lead a replicated queue's group (docs/cluster.md,
 * "Consumers on any node"): the queue here is fed from the group's leader. A feed is a
 * libmqr-client subscription of this node (as the cluster user) to the same queue on
 * the leader, over the native protocol, with credit for what the consumers here can
 * take; what the leader delivers to it goes onto the queue here (no record: the
 * leader's group has the message), and the consumers here take it as from any queue,
 * with their own credit and selectors (the feed asks only for what one of them selects).
 * Whatever takes a fed message off the queue here (an acknowledgement, an expiry, the
 * dead letters) is an acknowledgement to the leader, with a receipt, so that an answer
 * asked for is given once the leader committed the DELETE; a message a consumer here
 * gives back goes back to the leader (a counted Nack), which redelivers it by its own
 * counts and settings. The feed goes when the queue's
 * last consumer here does (what it brought and was not delivered goes back uncounted),
 * when this node comes to lead the group (it serves the queue itself), and when the
 * leader changes or the connection fails: then what it had brought is taken off the
 * queue here and the consumers' unacknowledged deliveries are forgotten (their acks are
 * refused), and a new feed starts from the new leader, which delivers them again (at
 * least once, as after any failover).
 *
 * A queue made for one subscription here (an MQTT or STOMP subscription to a topic) is
 * fed by a subscription of the same kind on the leader (its address and routing type,
 * the leader naming its own queue); a named MULTICAST queue (a durable subscription, an
 * MQTT session's) by a subscription to the same name, which the leader makes when it
 * does not have it (and records in the group); an ANYCAST queue by its fully qualified
 * name. */
#include <stdio.h>
#include <string.h>

#include "../cluster/cluster.h"
#include "durable.h"
#include "mqr/client.h"

/* The leader is given credit for what the consumers here can take (their credit, less
 * what waits here already), at most this many: no more is fed than is wanted, so that a
 * consumer here that stops leaves little to give back, and another node's consumer that
 * comes next gets the queue in order. */
#define WINDOW 1000

typedef struct mqr__feed_s mqr__feed_t;

struct mqr__feed_s {
  mqr_broker_t *b;
  mqr__bq_t *bq;
  uint32_t g;
  uint64_t leader; /* the node it feeds from */
  mqr_client_t *c;
  mqr_client_sub_t *sub;
  bool broken;       /* the connection or the subscription failed: a new feed at the next check */
  bool stale;        /* its selector is no longer the consumers' (see feed_selector): made again */
  uint64_t stale_at; /* since when (the loop's ms) */
  char *selector;    /* the one it was made with (NULL: none) */
  uint64_t credit;   /* the leader's for this feed: deliveries it may still make */
  /* message id -> the leader's delivery of it: open addressing, cap a power of two */
  int64_t *ids, *deliveries;
  uint32_t cap, n;
  /* acknowledgements forwarded, oldest first, not yet answered: how many answers here
   * wait for each (a ring of want_cap, a power of two) */
  uint32_t *want;
  uint64_t want_head, want_tail, want_cap;
  uint64_t warned;          /* when a failure of it was last logged (the loop's ms): at most once in WARN_MS */
  struct mqr__feed_s *next; /* the broker's */
};

#define WARN_MS 10000
/* A feed whose selector went stale is made again once nothing it brought is delivered here
 * and unacknowledged and no acknowledgement waits for the leader's answer (it takes no more
 * meanwhile), so that consumers that come and go with other selectors do not cost the
 * others their deliveries; after this long, anyway. */
#define STALE_WAIT_MS 5000

/* Whether a failure of f's may be logged now (not one of a run of them: a feed that
 * fails is made again every tick). */
static bool warn_now(mqr__feed_t *f) {
  uint64_t now = uv_now(f->b->loop);
  if (f->warned && now - f->warned < WARN_MS) return false;
  f->warned = now;
  return true;
}

/* ---- message id -> the leader's delivery ------------------------------------------------------ */

static uint32_t slot_of(const mqr__feed_t *f, int64_t id) {
  uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & (f->cap - 1);
}

static bool map_put(mqr__feed_t *f, int64_t id, int64_t delivery) {
  if ((f->n + 1) * 2 > f->cap) {
    uint32_t ncap = f->cap ? f->cap * 2 : 256;
    int64_t *ni = mqr_calloc(ncap, sizeof *ni), *nd = mqr_malloc(ncap * sizeof *nd);
    if (ni == NULL || nd == NULL) {
      mqr_free(ni);
      mqr_free(nd);
      return false;
    }
    int64_t *oi = f->ids, *od = f->deliveries;
    uint32_t ocap = f->cap;
    f->ids = ni, f->deliveries = nd, f->cap = ncap, f->n = 0;
    for (uint32_t i = 0; i < ocap; i++)
      if (oi[i]) (void)map_put(f, oi[i], od[i]);
    mqr_free(oi);
    mqr_free(od);
  }
  uint32_t i = slot_of(f, id);
  while (f->ids[i] && f->ids[i] != id) i = (i + 1) & (f->cap - 1);
  f->n += f->ids[i] == 0;
  f->ids[i] = id; /* (message ids start at 1) */
  f->deliveries[i] = delivery;
  return true;
}

/* The leader's delivery of message id, taken out of the map (0: none). */
static int64_t map_take(mqr__feed_t *f, int64_t id) {
  if (f->cap == 0) return 0;
  uint32_t i = slot_of(f, id);
  while (f->ids[i] && f->ids[i] != id) i = (i + 1) & (f->cap - 1);
  if (f->ids[i] == 0) return 0;
  int64_t d = f->deliveries[i];
  f->ids[i] = 0;
  f->n--;
  /* the entries after it in its run move back where a lookup will find them */
  for (uint32_t j = (i + 1) & (f->cap - 1); f->ids[j]; j = (j + 1) & (f->cap - 1)) {
    uint32_t home = slot_of(f, f->ids[j]);
    if (((j - home) & (f->cap - 1)) >= ((j - i) & (f->cap - 1))) {
      f->ids[i] = f->ids[j], f->deliveries[i] = f->deliveries[j];
      f->ids[j] = 0;
      i = j;
    }
  }
  return d;
}

/* ---- what the leader delivers ---------------------------------------------------------------- */

static void on_message(mqr_client_sub_t *s, const mqr_frame_message_t *fm, void *arg) {
  mqr__feed_t *f = arg;
  mqr_broker_t *b = f->b;
  mqr__bq_t *bq = f->bq;
  if (f->sub != s || f->broken) return;
  if (f->credit) f->credit--;
  mqr__msg_t *m = fm->stored.len ? mqr__msg_alloc(b, fm->stored.len) : NULL;
  mqr__entry_t *e = m ? mqr__pool_take(&b->entries) : NULL;
  if (e == NULL || !map_put(f, fm->message_id, fm->delivery)) {
    if (e) mqr__pool_put(&b->entries, e);
    if (m) m->refs = 1, b->stats.messages++, b->stats.bytes += m->len, mqr__msg_release(b, m); /* (recycled) */
    f->broken = true; /* (the leader keeps it unacknowledged: a new feed has it again) */
    mqr__log(b, MQR_LOG_WARN, "cluster: out of memory for a message fed to queue '%.*s' from node %llu",
             (int)mqr_queue_name(bq->q).len, mqr_queue_name(bq->q).ptr, (unsigned long long)f->leader);
    return;
  }
  memcpy(m->data, fm->stored.ptr, fm->stored.len);
  m->id = fm->message_id;
  m->refs = 1; /* (its entry's) */
  b->stats.messages++;
  b->stats.bytes += m->len;
  /* The leader counted this delivery; delivered here it is counted again. Its queue is
   * its jbq, as a journaled entry's, so that every way it leaves (acked, expired, sent to
   * the dead letters, purged) comes to mqr__feed_removed (mqr__durable_removed's record). */
  *e = (mqr__entry_t){NULL, NULL, m, 0, fm->delivery_count > 0 ? fm->delivery_count - 1 : 0, 0, bq, NULL, false, 0};
  m->jentries = e;
  bq->enqueued++;
  bq->bytes += m->len;
  mqr__enqueue(b, bq, e);
  mqr__dispatch(bq);
}

/* ---- acknowledgements -------------------------------------------------------------------------- */

/* What the consumers here can take, less what waits here and what the leader may still
 * send: the leader's credit to give (at most WINDOW in all). */
static uint64_t wanted(const mqr__feed_t *f) {
  uint64_t want = 0;
  for (uint32_t i = 0; i < f->bq->n_consumers; i++) want += f->bq->consumers[i]->credit;
  if (want > WINDOW) want = WINDOW;
  uint64_t have = f->bq->store.depth + f->credit;
  return want > have ? want - have : 0;
}

void mqr__feed_demand(mqr__bq_t *bq) {
  mqr__feed_t *f = bq->feed;
  uint64_t n = f && f->sub && !f->broken && !f->stale ? wanted(f) : 0;
  if (n == 0) return;
  if (mqr_client_credit(f->sub, (uint32_t)n) != 0)
    f->broken = true;
  else
    f->credit += n;
}

static void ack_answered(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg) {
  (void)c;
  mqr__feed_t *f = arg;
  int st = status == 0 && answer && answer->type == MQR_FRAME_RECEIPT ? 0 : status ? status : MQR_EINDOUBT;
  if (f->want_head == f->want_tail) return; /* (the feed went: answered already) */
  uint32_t waiting = f->want[f->want_head++ & (f->want_cap - 1)];
  while (waiting--) mqr__durable_settle(f->b->dur, f, st);
}

static bool want_push(mqr__feed_t *f) {
  if (f->want_tail - f->want_head == f->want_cap) {
    uint64_t ncap = f->want_cap ? f->want_cap * 2 : 64;
    uint32_t *nw = mqr_malloc(ncap * sizeof *nw);
    if (nw == NULL) return false;
    for (uint64_t i = f->want_head; i < f->want_tail; i++) nw[i - f->want_head] = f->want[i & (f->want_cap - 1)];
    mqr_free(f->want);
    f->want = nw;
    f->want_tail -= f->want_head;
    f->want_head = 0;
    f->want_cap = ncap;
  }
  f->want[f->want_tail++ & (f->want_cap - 1)] = 0;
  return true;
}

void mqr__feed_removed(mqr_broker_t *b, mqr__bq_t *bq, int64_t id) {
  mqr__feed_t *f = bq->feed;
  if (b->dur->cluster_silent) return;
  int64_t delivery = map_take(f, id);
  if (delivery == 0 || f->broken) return;
  if (!want_push(f) || mqr_client_ack_receipt(f->sub, delivery, false, ack_answered, f, NULL) != 0) {
    if (f->want_tail > f->want_head) f->want_tail--;
    f->broken = true; /* (unacknowledged there: delivered again by the next feed) */
    return;
  }
}

bool mqr__feed_given_back(mqr_broker_t *b, mqr__entry_t *e) {
  mqr__bq_t *bq = e->jbq;
  mqr__feed_t *f = bq->feed;
  if (f == NULL || b->dur->cluster_silent) return false;
  int64_t delivery = map_take(f, e->msg->id);
  if (delivery && !f->broken) {
    if (mqr_client_nack(f->sub, delivery, true) != 0) {
      f->broken = true; /* (outstanding there: delivered again by the next feed) */
    }
  }
  /* Not here again: the leader counts the delivery and delivers it anew (to this feed,
   * or elsewhere), so that its count never goes back. */
  bq->in_flight--;
  e->msg->jentries = NULL;
  e->jbq = NULL;
  mqr__msg_release(b, e->msg);
  mqr__pool_put(&b->entries, e);
  return true;
}

int mqr__feed_answer(mqr_broker_t *b, mqr__bq_t *bq, const struct mqr__send_s *s, uint32_t n, mqr_error_t *err) {
  mqr__feed_t *f = bq->feed;
  mqr__durable_t *d = b->dur;
  if (f->want_head == f->want_tail) /* (none forwarded, or all answered: the feed broke) */
    return mqr_error_set(err, MQR_EINDOUBT,
                         "the acknowledgement could not be forwarded to the node that leads queue '%.*s': the message "
                         "will be delivered again",
                         (int)mqr_queue_name(bq->q).len, mqr_queue_name(bq->q).ptr);
  if (!mqr__durable_pend_reserve(d)) return 0;       /* (no memory to wait: answered now) */
  f->want[(f->want_tail - 1) & (f->want_cap - 1)]++; /* answered with the last one forwarded */
  mqr_broker_receipt_t r = {0, n, 0};
  mqr__durable_pend_ack(d, s, f, &r);
  return MQR__PENDING;
}

/* ---- starting and ending ------------------------------------------------------------------------ */

/* The feed's selector: what some consumer here takes, so that the leader feeds nothing
 * none of them matches (it would wait here, and hold the credit the leader is given). Each
 * distinct selector of theirs once, "(s1) OR (s2) ...". Writes it into buf (cap bytes) and
 * returns its length: 0 when some consumer has none (everything is fed), more than cap
 * when it does not fit (then nothing more is written and the caller asks again with room). */
static size_t feed_selector(const mqr__bq_t *bq, char *buf, size_t cap) {
  size_t len = 0;
  for (uint32_t i = 0; i < bq->n_consumers; i++) {
    const mqr_filter_t *fl = bq->consumers[i]->selector;
    if (fl == NULL) return 0;
    mqr_str_t t = mqr_filter_text(fl);
    bool seen = false;
    for (uint32_t k = 0; k < i && !seen; k++) seen = mqr_str_eq(mqr_filter_text(bq->consumers[k]->selector), t);
    if (seen) continue;
    size_t need = len + (len ? 4 : 0) + t.len + 2;
    if (need <= cap) {
      char *p = buf + len;
      if (len) memcpy(p, " OR ", 4), p += 4;
      *p++ = '(';
      memcpy(p, t.ptr, t.len);
      p[t.len] = ')';
    }
    len = need;
  }
  return len;
}

/* The feed's selector, allocated (*out NULL: none); false when out of memory. */
static bool feed_selector_new(const mqr__bq_t *bq, char **out) {
  char small[256];
  size_t n = feed_selector(bq, small, sizeof small);
  *out = NULL;
  if (n == 0) return true;
  if ((*out = mqr_malloc(n + 1)) == NULL) return false;
  if (n <= sizeof small)
    memcpy(*out, small, n);
  else
    (void)feed_selector(bq, *out, n);
  (*out)[n] = 0;
  return true;
}

static bool same_selector(const mqr__feed_t *f) {
  char *now = NULL;
  if (!feed_selector_new(f->bq, &now)) return true; /* (out of memory: as it is) */
  bool same = now && f->selector ? strcmp(now, f->selector) == 0 : now == f->selector;
  mqr_free(now);
  return same;
}

static void on_error(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  mqr__feed_t *f = arg;
  if (f->c != c) return;
  if (!f->broken && warn_now(f))
    mqr__log(f->b, MQR_LOG_WARN, "cluster: feeding queue '%.*s' from node %llu failed: %.*s",
             (int)mqr_queue_name(f->bq->q).len, mqr_queue_name(f->bq->q).ptr, (unsigned long long)f->leader,
             e ? (int)e->text.len : 0, e ? e->text.ptr : mqr_strerror(status));
  f->broken = true;
}

static void subscribed(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg) {
  (void)c;
  mqr__feed_t *f = arg;
  if (status == 0) {
    mqr__log(f->b, MQR_LOG_INFO, "cluster: queue '%.*s' here is fed from node %llu, which leads group %u",
             (int)mqr_queue_name(f->bq->q).len, mqr_queue_name(f->bq->q).ptr, (unsigned long long)f->leader, f->g);
    return;
  }
  if (!f->broken && warn_now(f))
    mqr__log(f->b, MQR_LOG_WARN, "cluster: node %llu refused to feed queue '%.*s': %.*s", (unsigned long long)f->leader,
             (int)mqr_queue_name(f->bq->q).len, mqr_queue_name(f->bq->q).ptr,
             answer && answer->type == MQR_FRAME_ERROR ? (int)answer->u.error.text.len : 0,
             answer && answer->type == MQR_FRAME_ERROR ? answer->u.error.text.ptr : "");
  f->sub = NULL; /* (the client dropped it) */
  f->broken = true;
}

/* The connection to the leader, and the subscription there. */
static void feed_connect(mqr__feed_t *f) {
  mqr_broker_t *b = f->b;
  mqr__bq_t *bq = f->bq;
  mqr_error_t err;
  const char *url = mqr__replicate_peer_url(b, f->leader);
  if (url == NULL || mqr__replicate_peer_client(b, url, "mqr-cluster-feed", on_error, f, &f->c, &err) != 0) {
    if (url && warn_now(f))
      mqr__log(b, MQR_LOG_WARN, "cluster: cannot feed queue '%.*s' from node %llu: %s", (int)mqr_queue_name(bq->q).len,
               mqr_queue_name(bq->q).ptr, (unsigned long long)f->leader, err.message);
    f->broken = true;
    return;
  }
  mqr_address_t *a = mqr_queue_address(bq->q);
  mqr_str_t address = mqr_address_name(a), queue = mqr_queue_name(bq->q);
  char fq[512];
  mqr_str_t target = address;
  int rt = mqr_queue_routing_type(bq->q) == MQR_MULTICAST ? MQR_MULTICAST : MQR_ANYCAST;
  mqr_str_t qname = mqr_str_n("", 0);
  if (!bq->temporary && rt == MQR_MULTICAST) { /* the same subscription queue there, made if missing */
    qname = queue;
  } else if (!bq->temporary) { /* the same queue there, by its fully qualified name */
    int n = snprintf(fq, sizeof fq, "%.*s::%.*s", (int)address.len, address.ptr, (int)queue.len, queue.ptr);
    if (n < 0 || (size_t)n >= sizeof fq) {
      f->broken = true;
      return;
    }
    target = mqr_str_n(fq, (size_t)n);
    rt = MQR_ROUTING_NONE;
  }
  f->credit = 0;
  uint64_t credit = wanted(f);
  mqr_free(f->selector);
  int rc = !feed_selector_new(bq, &f->selector)
               ? mqr_error_set(&err, MQR_ENOMEM, "out of memory")
               : mqr_client_subscribe(f->c, target, rt, qname, f->selector ? mqr_str(f->selector) : mqr_str_n("", 0),
                                      (uint32_t)credit, on_message, subscribed, f, &f->sub, &err);
  if (rc != 0) {
    if (warn_now(f))
      mqr__log(b, MQR_LOG_WARN, "cluster: cannot feed queue '%.*s' from node %llu: %s", (int)queue.len, queue.ptr,
               (unsigned long long)f->leader, err.message);
    f->sub = NULL;
    f->broken = true;
    return;
  }
  f->credit = credit;
}

static void feed_closed(void *arg) { mqr__broker_handle_closed(arg); }

/* The feed's connection goes (the leader takes back what it had delivered to it); what it
 * brought here goes too, silently (purge: false when the caller empties the queue). */
static void feed_drop(mqr__feed_t *f, bool purge) {
  mqr_broker_t *b = f->b;
  mqr__durable_t *d = b->dur;
  if (f->sub && !f->broken) { /* what it brought goes back: counted when a consumer here has it */
    for (uint32_t i = 0; i < f->bq->n_consumers; i++)
      for (mqr__entry_t *e = f->bq->consumers[i]->unacked_head; e; e = e->next) {
        int64_t delivery = map_take(f, e->msg->id);
        if (delivery) (void)mqr_client_nack(f->sub, delivery, true);
      }
    for (uint32_t i = 0; i < f->cap; i++) /* (not delivered here: not counted, as a closing consumer's buffer) */
      if (f->ids[i]) (void)mqr_client_nack(f->sub, f->deliveries[i], false);
  }
  if (f->c) {
    mqr__broker_handle_opened(b);
    mqr_client_close(f->c, feed_closed, b); /* (acks waiting for receipts are answered now) */
    f->c = NULL;
    f->sub = NULL;
  }
  while (f->want_head != f->want_tail) { /* (answers no receipt will come for) */
    uint32_t waiting = f->want[f->want_head++ & (f->want_cap - 1)];
    while (waiting--) mqr__durable_settle(d, f, MQR_EINDOUBT);
  }
  if (purge) {
    bool was = d->cluster_silent;
    d->cluster_silent = true;
    for (uint32_t i = 0; i < f->bq->n_consumers; i++) mqr__consumer_forget_unacked(f->bq->consumers[i]);
    mqr_broker_purge(b, f->bq->q);
    d->cluster_silent = was;
  }
  if (f->cap) memset(f->ids, 0, f->cap * sizeof *f->ids);
  f->n = 0;
  f->credit = 0;
  f->broken = f->stale = false;
  f->leader = 0;
}

static void feed_free(mqr__feed_t *f) {
  mqr__durable_t *d = f->b->dur;
  for (mqr__feed_t **p = &d->feeds; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  f->bq->feed = NULL;
  mqr_free(f->ids);
  mqr_free(f->deliveries);
  mqr_free(f->want);
  mqr_free(f->selector);
  mqr_free(f);
}

/* The feed as the group's leadership now says: from its leader, made again when that
 * changed or the last one broke; none while no node leads or this one does. */
static void feed_check(mqr__feed_t *f) {
  mqr_broker_t *b = f->b;
  mqr__rgroup_t *gr = mqr__cluster_group(b->dur->cluster, f->g);
  uint64_t leader = gr && !mqr__rgroup_leading(gr) ? mqr__rgroup_leader(gr, NULL) : 0;
  if (f->leader && f->stale && !f->broken && leader == f->leader &&
      (f->want_head != f->want_tail || f->bq->in_flight > 0) && uv_now(b->loop) - f->stale_at < STALE_WAIT_MS)
    return; /* (made again once its deliveries here are settled) */
  if (f->leader && (f->broken || f->stale || leader != f->leader)) feed_drop(f, !mqr__rgroup_leading(gr));
  if (f->leader == 0 && leader) {
    f->leader = leader;
    feed_connect(f);
  }
}

void mqr__feed_consumers(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  int g = d && d->cluster ? mqr__replicate_group(b, bq) : -1;
  if (g < 0) return;
  mqr__feed_t *f = bq->feed;
  if (bq->n_consumers == 0 || mqr__rgroup_leading(mqr__cluster_group(d->cluster, (uint32_t)g))) {
    if (f) {
      feed_drop(f, bq->n_consumers == 0 && !mqr__rgroup_leading(mqr__cluster_group(d->cluster, (uint32_t)g)));
      feed_free(f);
    }
    return;
  }
  if (f) { /* (consumers came or went: the leader is asked for what they want; for another selector, anew) */
    bool same = f->leader == 0 || same_selector(f);
    if (!same && !f->stale) f->stale_at = uv_now(b->loop);
    f->stale = !same;
    mqr__feed_demand(bq);
    return;
  }
  if (!mqr__replicate_feedable(b, NULL)) return; /* (no peer's url, or follower-consumers: redirect) */
  if ((f = mqr_calloc(1, sizeof *f)) == NULL) {
    mqr__log(b, MQR_LOG_WARN, "cluster: out of memory feeding queue '%.*s'", (int)mqr_queue_name(bq->q).len,
             mqr_queue_name(bq->q).ptr);
    return;
  }
  f->b = b;
  f->bq = bq;
  f->g = (uint32_t)g;
  f->next = d->feeds;
  d->feeds = f;
  bq->feed = f;
  feed_check(f);
}

void mqr__feed_check_all(mqr_broker_t *b) {
  for (mqr__feed_t *f = b->dur->feeds, *next; f; f = next) {
    next = f->next;
    feed_check(f);
  }
}

void mqr__feed_group(mqr_broker_t *b, uint32_t g, bool leader) {
  mqr__durable_t *d = b->dur;
  for (mqr__feed_t *f = d->feeds, *next; f; f = next) {
    next = f->next;
    if (f->g != g) continue;
    if (leader) { /* this node serves the queue itself now (the caller empties it) */
      feed_drop(f, false);
      feed_free(f);
    }
  }
  if (leader) return;
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
    if (bq->n_consumers && bq->feed == NULL && mqr__replicate_group(b, bq) == (int)g) mqr__feed_consumers(b, bq);
}

void mqr__feed_forget_queue(mqr_broker_t *b, mqr__bq_t *bq) {
  if (bq->feed == NULL) return;
  feed_drop(bq->feed, false);
  feed_free(bq->feed);
  (void)b;
}

void mqr__feed_close_all(mqr_broker_t *b) {
  mqr__durable_t *d = b->dur;
  while (d->feeds) {
    mqr__feed_t *f = d->feeds;
    feed_drop(f, false);
    feed_free(f);
  }
}
