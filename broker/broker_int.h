/* The broker's insides, shared by its sources (nothing here is installed). The core,
 * with no sockets (core.h has the interfaces its protocol heads implement):
 *
 *   broker.c     creating, reloading and closing the broker; what it holds
 *   send.c       doSend: route, account the address, store once, enqueue
 *   dispatch.c   deliveries within credit to ready consumers; acks; credit
 *   select.c     a message's values for queue filters and consumer selectors
 *   move.c       a message leaving its queue for another address (dead letters, expiry)
 *   kinds.c      queue kinds: exclusive, ring, last-value
 *   expiry.c     expired messages: at dispatch, and a periodic scan of the queues
 *   redeliver.c  what comes back unacknowledged: max-delivery-attempts and the dead-letter
 *                address, redelivery delays; and scheduled messages (a timer over a heap
 *                of waiting entries)
 *   subscribe.c  subscriptions by the Artemis rules; consumers and sessions
 *   store.c      pools: messages by size class, queue entries; the in-memory store
 *   ack.c        a consumer's in-flight deliveries by number (an ack in O(1))
 *
 * and its protocol heads:
 *
 *   inproc.c     in-process consumers (mqr_broker_subscribe)
 *   native/      the native protocol: listeners, connections, frames, one uv_write per
 *                connection per loop pass; timeouts, heartbeats and peers gone while
 *                paused (a 250 ms timer); its state is its own (b->net)
 *
 * One libuv loop owns all of it (docs/architecture.md): no locks. */
#ifndef MQR_BROKER_INT_H
#define MQR_BROKER_INT_H

#include <stddef.h>

#include "core.h"
#include "mqr/broker.h"
#include "mqr/filter.h"

/* ---- pools ---------------------------------------------------------------------------- */

/* Fixed-size objects on a free list; at most max_free kept. */
typedef struct {
  void *free;
  size_t size;
  uint32_t n_free, max_free;
} mqr__pool_t;

void mqr__pool_init(mqr__pool_t *p, size_t size, uint32_t max_free);
void *mqr__pool_get(mqr__pool_t *p); /* zeroed; NULL when out of memory */

/* Not zeroed: the caller sets every field. */
static inline void *mqr__pool_take(mqr__pool_t *p) {
  void *obj = p->free;
  if (obj == NULL) return mqr_malloc(p->size);
  p->free = *(void **)obj;
  p->n_free--;
  return obj;
}
void mqr__pool_put(mqr__pool_t *p, void *obj);
void mqr__pool_free(mqr__pool_t *p);

/* ---- messages --------------------------------------------------------------------------- */

/* What an address holds, for max-size-bytes: created on the first send routed to it. */
typedef struct mqr__acct_s {
  mqr_address_t *address;
  int64_t bytes; /* stored bytes of its messages that some queue still holds */
  int64_t max;   /* max-size-bytes, -1 unbounded */
  mqr_full_policy_t policy;
  bool expiry_adjust;         /* expiry-delay or min/max-expiry-delay: a send's expiration may change */
  mqr__producer_t **blocked;  /* producers paused on it (BLOCK) */
  struct mqr__pager_s *pager; /* its page files (PAGE; pager.c), NULL until it first pages */
  uint32_t n_blocked, cap_blocked;
  uint64_t jfile; /* an address made by management: the file of its TOPOLOGY record (0: none) */
  bool deleted;   /* recovery: a tombstone was read (it goes at the end) */
  /* The security-settings entry that governs the address (access.c), as of generation
   * access_gen (0: not looked up). */
  const struct mqr_access_row_s *access_row;
  uint32_t access_gen;
  struct mqr__acct_s *next; /* the broker's list */
} mqr__acct_t;

/* ---- queue storage ------------------------------------------------------------------------ */

/* Where a queue keeps its waiting entries. In memory here; a journal goes under durable
 * queues behind the same calls. */
typedef struct mqr__store_s mqr__store_t;
typedef struct {
  void (*push)(mqr__store_t *s, mqr__entry_t *e);       /* at the tail */
  void (*push_front)(mqr__store_t *s, mqr__entry_t *e); /* returned: before every waiting entry */
  mqr__entry_t *(*pop)(mqr__store_t *s);                /* the head; NULL when empty */
  mqr__entry_t *(*peek)(mqr__store_t *s);               /* the head, left there; NULL when empty */
  /* For dispatch past the head (consumers with selectors): the entry after e (NULL at
   * the tail), taking e out wherever it is, and putting e back before another (NULL: at
   * the tail). */
  mqr__entry_t *(*next)(mqr__store_t *s, mqr__entry_t *e);
  void (*remove)(mqr__store_t *s, mqr__entry_t *e);
  void (*insert_before)(mqr__store_t *s, mqr__entry_t *e, mqr__entry_t *before);
} mqr__store_ops_t;

struct mqr__store_s {
  const mqr__store_ops_t *ops;
  struct mqr__lvq_s *lvq; /* a last-value queue's keys (kinds.c): told when a holder leaves */
  struct mqr__bq_s *nd;   /* a non-destructive queue: its consumers' places are told (dispatch.c) */
  uint64_t depth;
  uint64_t removals;         /* entries taken out (pop, remove): a walk that sees it change restarts */
  mqr__entry_t *head, *tail; /* the memory store's list */
};

void mqr__memstore_init(mqr__store_t *s);

/* ---- queues and consumers ------------------------------------------------------------------ */

typedef struct mqr__bq_s {
  mqr_queue_t *q;
  mqr__store_t store;
  uint64_t enqueued, acked, in_flight;
  uint64_t held;      /* waiting out a redelivery delay (redeliver.c), out of the store */
  uint64_t killed;    /* sent to the dead-letter address, or dropped for want of one */
  uint64_t expired;   /* sent to the expiry address, or dropped */
  uint64_t scheduled; /* waiting for their scheduled delivery time, out of the store */
  struct mqr_broker_consumer_s **consumers;
  uint32_t n_consumers, cap_consumers, rr;
  uint32_t n_selective; /* consumers with a selector: dispatch then scans (select.c) */
  uint32_t n_refusing;  /* consumers that refused a message for good: dispatch scans too */
  bool priorities;      /* its consumers' priorities differ: consumers[] is by priority, highest first */
  bool exclusive;       /* one consumer (the first) takes everything (kinds.c) */
  int64_t ring_size;    /* -1: no ring */
  /* Message groups (kinds.c): group (or bucket) -> its consumer, made with the first
   * grouped message; grouping: dispatch walks the queue, a busy group's messages waiting
   * while others go. */
  mqr__smap_t groups;
  int32_t group_buckets;
  bool group_rebalance, grouping;
  /* consumers-before-dispatch (0: none) and delay-before-dispatch (-1: none): dispatch
   * waits until gate_open (kinds.c). */
  int32_t consumers_before_dispatch;
  int64_t delay_before_dispatch;
  bool gate_open;
  bool paused;     /* mqr_broker_pause_queue: it takes messages and delivers none */
  bool pause_kept; /* its pause is recorded in the journal (its TOPOLOGY record says so) */
  bool dispatching, again;
  bool drop_pending;               /* deleted while pinned: it goes at the last unpin */
  uint32_t pins;                   /* held by code that sends (mqr__bq_pin) */
  bool temporary;                  /* made for one subscription; goes with it */
  bool from_config;                /* made by the config: the config makes it again at start */
  bool configured;                 /* made by the config, now or at an earlier start (configured.c) */
  bool topo_stale;                 /* its TOPOLOGY record is missing or older than its config */
  uint32_t config_gen;             /* configured.c: the broker's config_gen when a config last listed it */
  bool deleted;                    /* recovery: a tombstone was read (it goes at the end) */
  bool had_consumer;               /* auto-delete: a queue goes only once it has had one */
  uint64_t consumer_gone_at;       /* uv_now ms its last consumer went */
  uint64_t jfile;                  /* the file of its TOPOLOGY record (0: none) */
  bool replicated_topo;            /* made at run time, its TOPOLOGY record in its replication group (replicate.c) */
  uint8_t name_group;              /* replicate.c: 1 + the group its address's name hashes to (0: not yet known) */
  bool promoted;                   /* replicate.c: the group's state made or kept it at the last promotion */
  bool await_commit;               /* replicate.c: its head waits for its last UPDATE's commit */
  struct mqr__pcursor_s *pcursors; /* where it reads paged messages back (pager.c) */
  struct mqr__bq_s *next, *prev;   /* the broker's list */
  /* Bytes of its messages in memory (waiting, in flight, held, scheduled): added with
   * enqueued, taken away with acked, killed and expired. (Here, not beside them: placed
   * there it moved the fields after it and cost a checked send 14 ns, dosend.checked.) */
  uint64_t bytes;
  struct mqr__feed_s *feed; /* feed.c: a replicated queue whose group another node leads, fed from it; NULL: none */
} mqr__bq_t;

/* Whether a queue's durable messages go to the journal: a durable queue not made for one
 * subscription (one without broker state yet counts as not temporary). */
static inline bool mqr__queue_journaled(const mqr_queue_t *q) {
  if (!mqr_queue_durable(q)) return false;
  const mqr__bq_t *bq = mqr_queue_data(q);
  return bq == NULL || !bq->temporary;
}

struct mqr_broker_consumer_s {
  mqr_broker_t *b;
  mqr__bq_t *bq;
  int64_t subscription;
  uint32_t credit;
  int64_t next_delivery;
  mqr__entry_t *unacked_head, *unacked_tail; /* in delivery order */
  /* The same entries by delivery number, for an ack in O(1) whatever is in flight: open
   * addressing, linear probing, at most half full (ack.c). */
  mqr__entry_t **idx;
  uint32_t idx_mask, idx_n; /* idx_mask + 1 slots; 0 before the first delivery */
  bool closing;             /* unsubscribed while its queue was dispatching */
  int64_t too_big;          /* the id of a message its head refused for good: held for others */
  int64_t *refused;         /* ids of messages its client refused for good (AMQP's undeliverable-here), */
  uint32_t n_refused;       /* the last MQR__REFUSED_MAX at most: never given to it again (dispatch.c) */
  mqr_filter_t *selector;   /* only messages it matches come to it (NULL: all) */
  int32_t priority;         /* consumer-priority: higher levels are served first (dispatch.c) */
  mqr__entry_t *nd_at;      /* a non-destructive queue: the last store entry it was given (NULL: before the head) */
  mqr_str_t group_first;    /* set during a delivery that is the first of its group to this consumer, on a
                               queue with a group-first-key: that key (the head adds it, true) */
  uint32_t level_rr;        /* the first of a priority level keeps its level's turn */
  /* Its protocol head: how deliveries go (core.h), and the head's own context (the
   * native protocol's connection; an in-process consumer's callback argument). */
  const mqr__consumer_ops_t *ops;
  void *ctx;
  mqr_deliver_fn fn; /* in-process consumers' callback */
  mqr__session_t *session;
  struct mqr_broker_consumer_s *session_next; /* the session's consumers */
};

/* The durable store as the send path and the queues' state use it: the journal
 * (durable.c, compact.c) and the page files (pager.c) implement it, set once the journal
 * is open (b->persist; NULL: no persistence), so that send.c and acct.c call neither. */
typedef struct {
  /* A durable message to durable queues: its records appended; the send answered once
   * they are durable (MQR__PENDING), or an error. */
  int (*send)(mqr_broker_t *b, mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n, const struct mqr__send_s *s,
              const mqr_broker_receipt_t *r, mqr_error_t *err);
  /* An answer ready now that must wait for its producer's earlier ones (it has some
   * pending): MQR__PENDING, or rc when it need not wait. */
  int (*answer)(mqr_broker_t *b, const struct mqr__send_s *s, int rc, const mqr_broker_receipt_t *r,
                const mqr_error_t *err);
  /* PAGE: whether this send to acct goes to its page files, and sending it there. */
  bool (*page_wants)(mqr_broker_t *b, const struct mqr__acct_s *acct);
  int (*page)(mqr_broker_t *b, struct mqr__acct_s *acct, const mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n,
              const struct mqr__send_s *s, const mqr_broker_receipt_t *r, bool durable, mqr_error_t *err);
  /* A queue's broker state was made: a durable queue made at run time is recorded. */
  void (*queue_made)(mqr_broker_t *b, struct mqr__bq_s *bq);
  /* With a cluster (b->clustered): 0 when this node may put a message on these queues
   * now, MQR_ENOTLEADER (err names the leader) when one is a replicated queue whose group
   * another node leads. */
  int (*serves)(mqr_broker_t *b, mqr_queue_t *const *targets, uint32_t n, mqr_error_t *err);
  /* The same for a send to a replicated address that no queue here takes: the leader's
   * queues (its subscriptions fed to other nodes included) may. */
  int (*serves_address)(mqr_broker_t *b, mqr_address_t *a, mqr_error_t *err);
  /* A send serves refused (refusal: its text, naming the leader, already in err) sent on
   * to that leader when it can be: MQR__PENDING, answered with the leader's receipt;
   * else refusal (m, with one reference, released either way). */
  int (*forward)(mqr_broker_t *b, mqr__msg_t *m, const struct mqr__send_s *s, const mqr_broker_receipt_t *r,
                 int refusal);
  /* An acknowledgement of n deliveries of bq made its records: 0 when its answer need
   * not wait for them, MQR__PENDING (answered through s once its replication group
   * committed them), or an error (err). */
  int (*acked)(mqr_broker_t *b, struct mqr__bq_s *bq, const struct mqr__send_s *s, uint32_t n, mqr_error_t *err);
  /* After a refusal MQR_ENOTLEADER: the url where the leader's clients connect (the
   * config's, NULL: not known) and its node id. */
  const char *(*leader_url)(mqr_broker_t *b, uint64_t *node);
  /* An entry of bq whose last UPDATE is in proposal useq (not 0) of its replication
   * group: true while that is unanswered (bq is dispatched again once it is). */
  bool (*update_pending)(mqr_broker_t *b, struct mqr__bq_s *bq, uint32_t useq);
} mqr__persist_ops_t;

/* The connection layer's state is its own (../net/net.h); the broker holds a pointer. */
struct mqr__net_s;

/* ---- the broker ------------------------------------------------------------------------------ */

#define MQR__DELIVER_DEPTH 8
#define MQR__DIVERT_DEPTH 10 /* diverted copies of diverted copies: a longer chain is cut */
#define MQR__SEND_DEPTH 32   /* sends in progress, one in another: deeper is refused */
#define MQR__DELIVER_ARENA 16384

struct mqr_broker_s {
  uv_loop_t *loop;
  mqr_broker_options_t opt;
  const mqr_config_t *config;
  mqr_config_t *own_config; /* the default, when none was given */
  mqr_router_t router;
  /* Route results, one set per level of sends in progress: a diverted copy (divert.c),
   * or an in-process consumer's callback, sends while the send that led to it still
   * uses its result. */
  struct mqr__routebuf_s {
    mqr_queue_t **q;
    mqr_divert_t **d;
    uint32_t cap, dcap;
    uint8_t *copy; /* a copy's tail */
    uint8_t *made; /* an in-process send's tail, made to be copied */
    size_t copy_cap, made_cap;
    mqr_str_t *keys; /* a copy decoded for a transformer */
    mqr_value_t *values;
    size_t kv_cap;
  } route[MQR__SEND_DEPTH];
  uint32_t route_depth; /* sends in progress */
  uint64_t queue_drops; /* queues deleted, ever (send.c looks for a change) */
  uint32_t config_gen;  /* configured.c: counts the configs applied */
  /* Entries that left their queue for good (a deleted queue's, a purge's), out of the
   * journal already: their messages are released a slice at a time (grave.c), so that a
   * queue of 100,000 does not hold the loop. */
  mqr__entry_t *grave_head, *grave_tail;
  struct mqr__mover_s *movers;             /* moves of many messages, a slice a pass (manage.c) */
  uint32_t divert_level;                   /* diverted copies being sent, one in another */
  struct mqr__transformer_s *transformers; /* by divert name (divert.c) */
  uint32_t n_transformers;
  int64_t next_message_id, next_session;
  mqr__pool_t entries, consumers;
  mqr__msg_t *msg_free[MQR__MSG_CLASSES];
  uint32_t msg_n_free[MQR__MSG_CLASSES];
  uint32_t msg_live[MQR__MSG_CLASSES];    /* messages of each class alive */
  uint32_t msg_peak[MQR__MSG_CLASSES][2]; /* the most alive at once, this period and the last */
  uint64_t msg_period_ms;                 /* when this period began (store.c) */
  mqr__bq_t *queues;
  mqr__acct_t *accts;
  mqr__session_t inproc;                   /* in-process consumers' */
  struct mqr__durable_s *dur;              /* the journal and what it holds (durable.h); NULL: no persistence */
  const mqr__persist_ops_t *persist;       /* its ops for the send path (set with dur) */
  bool clustered;                          /* it has replicated queues (replicate.c): sends ask persist->serves */
  struct mqr__sec_s *sec;                  /* users, security-settings, principals (auth.c) */
  struct mqr__net_s *net;                  /* the connection layer: listeners and connections; NULL without listen */
  uv_idle_t idle;                          /* started when a head has work for the next pass (writes, resumes) */
  uv_idle_cb idle_fn;                      /* its callback (broker.c) */
  void (*last_handle_fn)(mqr_broker_t *b); /* frees it, once closing and every handle closed */
  bool idle_on;
  /* Entries waiting out a redelivery delay: a min-heap by when they are due (uv_now ms),
   * and the timer set for the first (redeliver.c). */
  uv_timer_t redeliver_timer;
  struct mqr__held_s *held;
  uint32_t n_held, cap_held;
  uv_timer_t expiry_timer; /* the periodic scan for expired messages (expiry.c) */
  mqr_broker_stats_t stats;
  /* In-process deliveries nest (a callback that sends, or grants credit on another queue,
   * delivers inside its own delivery): each depth has its own frame buffer and decoding
   * arena, kept and grown, so that an outer callback's views stay whole and a warm
   * broker allocates nothing to deliver. Deeper than MQR__DELIVER_DEPTH, a delivery
   * allocates its own. */
  uint32_t deliver_depth;
  struct {
    uint8_t *frame, *arena;
    size_t frame_cap;
  } deliver[MQR__DELIVER_DEPTH];
  bool closing, started;
  uint64_t started_ns; /* uv_hrtime when it started (its uptime) */
  uint32_t open_handles;
  void (*close_cb)(void *arg);
  void *close_arg;
  /* global-max-size (mqr_config_global_max_size): the bytes of messages held in memory,
   * every address together, past which each address acts on its full policy; -1: none.
   * global_blocked: a producer paused on it, to be resumed once below. */
  int64_t global_max;
  bool global_blocked;
};

/* Whether a's address is at its own max-size-bytes; whether it is full, by that or by
 * the broker's global-max-size. */
static inline bool mqr__acct_over(const mqr__acct_t *a) { return a->max >= 0 && a->bytes >= a->max; }
static inline bool mqr__full(const mqr_broker_t *b, const mqr__acct_t *a) {
  return mqr__acct_over(a) || (b->global_max >= 0 && (int64_t)b->stats.bytes >= b->global_max);
}
/* q's counts (mqr_broker_queue_stats, for a queue in hand: paged messages included). */
void mqr__queue_stats(const mqr_queue_t *q, mqr_broker_queue_stats_t *out);
/* The producers paused on the global limit go on once under it (store.c, reload). */
void mqr__global_release(mqr_broker_t *b);

/* store.c: a message of room for len bytes (its caller sets len and counts it in the
 * stats); the message pools freed. */
mqr__msg_t *mqr__msg_alloc(mqr_broker_t *b, size_t len);
void mqr__msg_pools_free(mqr_broker_t *b);

/* ack.c: the in-flight index of a consumer. reserve makes room for one more (false:
 * out of memory, nothing changed); put then cannot fail. */
bool mqr__idx_reserve(mqr_broker_consumer_t *c);
void mqr__idx_put(mqr_broker_consumer_t *c, mqr__entry_t *e);
mqr__entry_t *mqr__idx_find(const mqr_broker_consumer_t *c, int64_t delivery);
void mqr__idx_del(mqr_broker_consumer_t *c, int64_t delivery);
void mqr__idx_clear(mqr_broker_consumer_t *c); /* empty, its memory freed */

/* send.c: a queue's and an address's state, made on first use (NULL: out of memory). */
mqr__bq_t *mqr__bq_of(mqr_broker_t *b, mqr_queue_t *q);
mqr__acct_t *mqr__acct_of(mqr_broker_t *b, mqr_address_t *addr);
void mqr__acct_settings(mqr__acct_t *a); /* max-size-bytes and policy as they resolve now */
/* The account has room again: its paused producers that wait on nothing else resume. */
void mqr__acct_release(mqr__acct_t *a);
void mqr__producer_unblock_all(mqr_broker_t *b, mqr__producer_t *p);
/* subscribe.c: a queue's broker state and the queue itself go (what it holds is deleted,
 * in the journal too); mqr_broker_delete_queue journals the deletion first. */
void mqr__queue_drop(mqr_broker_t *b, mqr__bq_t *bq);

/* access.c: a send's SEND check on an address that exists (0 or MQR_EPERM, err set), and
 * the route's check before it makes an address, a routing type or a queue
 * (mqr_router_create_check_fn, ctx the route's mqr__send_fill_t). */
int mqr__access_send(mqr_broker_t *b, const mqr__send_t *s, mqr_str_t address, mqr_error_t *err);
int mqr__access_create(void *ctx, uint32_t what, mqr_str_t name, bool durable, mqr_error_t *err);

/* grave.c: e (off every list, its journal record written) to be released later; a slice
 * of the graveyard released (true: some are left); all of it (the broker closing). */
void mqr__grave_put(mqr_broker_t *b, mqr__entry_t *e);
bool mqr__grave_step(mqr_broker_t *b);
void mqr__grave_drain(mqr_broker_t *b);

/* configured.c: the config's queues. At a start: every queue of the router just built is
 * the config's (0 or MQR_ENOMEM); after the journal is open: their records written, and
 * those a config no longer lists kept or deleted by config-delete-queues/-addresses; at
 * a reload, the same against the new config (what is done reported through fn). */
int mqr__configured_start(mqr_broker_t *b);
void mqr__configured_recovered(mqr_broker_t *b);
void mqr__configured_reload(mqr_broker_t *b, const mqr_config_t *old, const mqr_config_t *cfg,
                            void (*fn)(void *ctx, bool applied, const char *line), void *ctx);
/* Code that keeps a queue across a send whose callbacks may delete it (an expiry scan,
 * a move, a closing consumer's redeliveries) pins it: a deletion meanwhile waits for the
 * last unpin, which returns false when the queue went then. */
static inline void mqr__bq_pin(mqr__bq_t *bq) { bq->pins++; }
bool mqr__bq_unpin(mqr_broker_t *b, mqr__bq_t *bq);
/* dispatch.c: one delivery of c back to its queue (out of c's unacknowledged list): at
 * the head, unless a newer last value replaced it; or, when it must wait a redelivery
 * delay or has used its attempts, onto *taken for mqr__redeliver_run. */
void mqr__consumer_give_back(mqr_broker_consumer_t *c, mqr__entry_t *e, mqr__entry_t **taken);
/* dispatch.c: every delivery in flight to c leaves it and its queue, as if acknowledged
 * (the queue's group went to another node, which delivers them again): an
 * acknowledgement of one of them later is of a delivery not outstanding. */
void mqr__consumer_forget_unacked(mqr_broker_consumer_t *c);
/* subscribe.c: ends a consumer (deferred while its queue dispatches); true when its
 * queue went with it (temporary, or auto-deleted), or with another consumer that had asked
 * to close during the dispatch that follows. */
bool mqr__consumer_close(mqr_broker_consumer_t *c);
/* autodelete.c: an address's account goes (with the address, which has no messages). */
void mqr__acct_drop(mqr_broker_t *b, mqr__acct_t *acct);
/* divert.c: a copy of the message of send s to each forwarding address of each divert
 * in res (routed with res), sent before s's own message is stored, so that its journal
 * records come first and s's answer follows theirs. id is s's message id. Called by the
 * send in progress at level route_depth - 1. */
void mqr__divert_forward(mqr_broker_t *b, const mqr__send_t *s, const mqr_route_result_t *res, int routing_type,
                         int64_t id);
void mqr__divert_free(mqr_broker_t *b);
/* dispatch.c: a non-destructive queue's store entry e leaves: consumers placed on it move
 * back to the one before it. */
void mqr__nd_removed(struct mqr__bq_s *bq, const mqr__entry_t *e);
/* dispatch.c: hands bq's waiting entries to its consumers, then closes those that asked to
 * close meanwhile. mqr__dispatch_gone says whether bq went with the last of them (a temporary
 * or auto-deleted queue): then bq must not be touched again. */
void mqr__dispatch(mqr__bq_t *bq);
bool mqr__dispatch_gone(mqr__bq_t *bq);

/* A new entry for bq: at the tail of its store, or, for a message scheduled later than
 * now, held until then (redeliver.c); a last-value queue's in the place of a waiting one
 * with its key; a ring's oldest waiting entries go to keep it within its size (kinds.c). */
bool mqr__schedule(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e);
void mqr__lvq_push(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e);
void mqr__ring_trim(mqr_broker_t *b, mqr__bq_t *bq);
void mqr__group_note(mqr__bq_t *bq, mqr__entry_t *e);
static inline void mqr__enqueue(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e) {
  if (e->msg->group_len != 0 && !bq->grouping) mqr__group_note(bq, e);
  if (e->msg->scheduled != 0 && mqr__schedule(b, bq, e)) return;
  if (bq->store.lvq)
    mqr__lvq_push(b, bq, e);
  else
    bq->store.ops->push(&bq->store, e);
  if (bq->ring_size >= 0) mqr__ring_trim(b, bq);
}
/* kinds.c: a queue's kind as its broker state is made (false: out of memory), and
 * freed; a last-value holder leaving the store; an entry back from a consumer (true:
 * it was replaced meanwhile and is gone). */
bool mqr__kinds_init(mqr__bq_t *bq);
void mqr__kinds_free(mqr__bq_t *bq);
void mqr__lvq_left(struct mqr__lvq_s *lvq, mqr__entry_t *e);
bool mqr__lvq_returned(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e);
/* Message groups: m's group (empty: none; read once); the consumer e's group is assigned
 * to (NULL: none yet), and assigning it; a consumer going (its groups are free again),
 * and one coming to a queue that rebalances (every group is). */
mqr_str_t mqr__msg_group(mqr__msg_t *m);
/* consumers-before-dispatch: whether bq may dispatch now (a consumer count reached, or
 * the delay after the first consumer out); a consumer came (the delay starts with the
 * first); the gate opened by the delay (redeliver.c's timer). */
bool mqr__gate(mqr__bq_t *bq);
void mqr__gate_consumer_came(mqr_broker_t *b, mqr__bq_t *bq);
void mqr__gate_delay_out(mqr__bq_t *bq);
/* redeliver.c: bq's gate opens in delay ms (its dispatch then runs). */
bool mqr__hold_redelivery(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, uint64_t delay);
/* The wall time (ms since the epoch) e is held to for its redelivery delay; 0: not held. */
int64_t mqr__held_until(mqr_broker_t *b, const mqr__entry_t *e);
void mqr__hold_gate(mqr_broker_t *b, mqr__bq_t *bq, uint64_t delay);
mqr_broker_consumer_t *mqr__group_owner(mqr__bq_t *bq, mqr_str_t group);
void mqr__group_assign(mqr__bq_t *bq, mqr_str_t group, mqr_broker_consumer_t *c);
void mqr__group_forget(mqr__bq_t *bq, const mqr_broker_consumer_t *c);

/* move.c: where a message that leaves its queue for good goes. */
typedef struct {
  const char *why;   /* what happened to it, for the log: "expired", ... */
  mqr_str_t address; /* empty: none (the message is dropped) */
  bool auto_create;  /* make the address, and a queue prefix + its address + suffix */
  mqr_str_t prefix, suffix;
  bool expired; /* stamp _AMQ_ACTUAL_EXPIRY (now, wall ms) and clear the expiration */
  int64_t now;
} mqr__move_t;
/* Sends a copy of e's message there. true: e is done with (sent, or dropped); false: the
 * send failed (no memory, the journal cannot write) and e must stay. e is not touched. */
bool mqr__move(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const mqr__move_t *to);

/* manage.c: a slice of the moves under way (true: some are left); all of them dropped,
 * their messages released (the broker closing). */
bool mqr__movers_step(mqr_broker_t *b);
void mqr__movers_free(mqr_broker_t *b);

/* expiry.c. The wall clock (ms since the epoch); whether m has expired (its expiration
 * read from its bytes once); e's message expired (e is out of any store, not in flight):
 * to the expiry address or dropped (true), or kept when that send failed (false); the
 * expiration a send leaves with under the address's expiry delays; the periodic scan. */
int64_t mqr__wall_ms(void);
bool mqr__msg_expired(mqr__msg_t *m, int64_t now);
int64_t mqr__msg_expiration(mqr__msg_t *m); /* 0: never */
static inline bool mqr__msg_may_expire(mqr__msg_t *m) { return m->expiration != 0; }
bool mqr__expire(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, int64_t now);
int64_t mqr__expiry_at_send(const mqr_address_settings_t *s, int64_t expiration, int64_t now);
void mqr__expiry_init(mqr_broker_t *b); /* one handle */
void mqr__expiry_close(mqr_broker_t *b);

/* redeliver.c. An entry came back unacknowledged (its consumer went): true when it was
 * taken (it reached max-delivery-attempts, or waits out a redelivery delay); false: the
 * caller puts it back at the head of bq. Nothing is sent from here; mqr__redeliver_run
 * does that once the caller has finished with the consumer. */
bool mqr__redeliver_take(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e);
/* Acts on entries taken (linked by next, in queue order): each goes to the dead-letter
 * address, or waits out its delay before going back to the head of bq. */
void mqr__redeliver_run(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *taken);
/* The same with bq pinned: false when a callback deleted it meanwhile (it is gone). */
bool mqr__redeliver_pinned(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *taken);
/* Sends e (taken off its consumer, not on bq) to the dead-letter address at once, logged
 * with why (AMQP's rejected outcome, as Artemis's reject); kept at the head of bq when the
 * move fails. False when a callback deleted bq meanwhile. */
bool mqr__redeliver_dead(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const char *why);
void mqr__redeliver_init(mqr_broker_t *b);  /* the timer (one handle) */
void mqr__redeliver_close(mqr_broker_t *b); /* the timer closes */
/* Releases bq's held entries (with journal, as removed), and when the queue goes its
 * events too; returns how many entries. */
uint64_t mqr__redeliver_drop_queue(mqr_broker_t *b, mqr__bq_t *bq, bool journal, bool queue_goes);
/* A queue's auto-delete check (bq) or an address's (bq NULL) in delay ms. */
void mqr__hold_auto_delete(mqr_broker_t *b, mqr__bq_t *bq, mqr_str_t address, uint64_t delay);
/* autodelete.c: the last consumer of bq went, or its delay is out (later): bq goes if
 * Artemis's auto-delete says so; true when it went. An address with no queue left goes
 * likewise. */
bool mqr__auto_delete_queue(mqr_broker_t *b, mqr__bq_t *bq, bool now);
void mqr__auto_delete_address(mqr_broker_t *b, mqr_str_t address, bool now);
/* bq goes, then its address when auto-delete-addresses takes it (the broker made it). */
void mqr__queue_drop_then_address(mqr_broker_t *b, mqr__bq_t *bq);
void mqr__redeliver_free(mqr_broker_t *b); /* every held entry released */

/* select.c: a message's values for filters, in the router's vocabulary: the route's fill
 * callback (ctx a mqr__send_fill_t), and a stored message's values for selectors (set
 * until mqr__msg_values_clear). */
typedef struct {
  mqr_broker_t *b;
  const mqr__send_t *s;
  mqr_str_t address; /* as routed: the prefix off (address::queue too) */
  size_t tail_len;
} mqr__send_fill_t;
void mqr__fill_send(void *ctx, mqr_filter_vocab_t *v);
const mqr_value_t *mqr__msg_values(mqr_broker_t *b, const mqr__msg_t *m, uint32_t *n);
void mqr__msg_values_clear(mqr_broker_t *b);

#endif
