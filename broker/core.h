/* The broker core's interfaces: all that a protocol head (../heads) and the connection
 * layer (../net) may use of the broker. The core (broker.c, dispatch.c, send.c, store.c,
 * ack.c) has no sockets; a head turns its protocol into these calls and back:
 *
 *   session   one client: its consumers and its producer. The head makes it when the
 *             client says hello and ends it when the client goes; ending it closes its
 *             consumers (their unacknowledged deliveries go back to their queues, in
 *             order) and takes its producer off every full address it waits on.
 *   consumer  offered deliveries by the core, one at a time, within its credit and only
 *             while it says it is ready (its output not backed up); it may refuse one
 *             for want of memory (tried again at the next dispatch) or for good (a
 *             message its client cannot take: held for other consumers, told once).
 *   producer  sends through mqr__do_send, the one send path; when a send lands on an
 *             address full under BLOCK the head pauses its input, and the core resumes
 *             it (producer ops) when the address has room again.
 *
 *   message   stored once (its bytes are a Message frame's tail), an entry per queue that
 *             holds it; a head writes a delivery from the stored bytes.
 *
 * The network heads are ../heads (native, MQTT, STOMP); in-process consumers are
 * inproc.c (a callback per delivery, mqr_broker_subscribe). A new protocol is one more
 * head: one more set of these ops, no change to the send path. */
#ifndef MQR_BROKER_CORE_H
#define MQR_BROKER_CORE_H

#include <stddef.h>

#include "mqr/broker.h"
#include "strmap.h"

typedef struct mqr__entry_s mqr__entry_t;
struct mqr__acct_s;
typedef struct mqr__session_s mqr__session_t;
typedef struct mqr__producer_s mqr__producer_t;

/* A consumer's protocol side. Called on the loop's thread, from dispatch. */
typedef struct {
  /* Whether the consumer can take a delivery now (its connection's output not backed
   * up). A consumer that is not ready is skipped; its head calls mqr__consumer_ready
   * when it is again. */
  bool (*ready)(const mqr_broker_consumer_t *k);
  /* Hands e to the consumer (e->delivery and e->delivery_count are set). 0: taken.
   * MQR_ENOMEM: nothing delivered; the core puts e back at the head of its queue and the
   * next dispatch tries again. MQR_ELIMIT: e can never go to this consumer; the core
   * holds it for others and calls refused once. The consumer may call back into the
   * core from here (ack, credit, unsubscribe, send). */
  int (*deliver)(mqr_broker_consumer_t *k, mqr__entry_t *e);
  /* e is held back from k for good (deliver said MQR_ELIMIT): tell the client, once. */
  void (*refused)(mqr_broker_consumer_t *k, const mqr__entry_t *e);
} mqr__consumer_ops_t;

/* A producer's protocol side. */
typedef struct {
  /* Every address that paused the producer has room again: read on. */
  void (*resume)(mqr__producer_t *p);
  /* The answer to a send that mqr__do_send left pending (MQR__PENDING), in send order:
   * status 0 with *r, or an error with err saying why. */
  void (*sent)(mqr__producer_t *p, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err);
} mqr__producer_ops_t;

struct mqr__producer_s {
  const mqr__producer_ops_t *ops;
  uint32_t blocked_on;            /* full addresses (BLOCK) it waits on */
  uint32_t pending;               /* its answers not yet given (durable.h) */
  uint64_t first_pend, last_pend; /* while pending: ring positions of its oldest and newest (durable.c) */
};

/* Who a session acts as (auth.c): a user, or an anonymous client; NULL for the broker's
 * own and in-process sessions, which are not checked. */
typedef struct mqr__principal_s mqr__principal_t;

struct mqr__session_s {
  mqr_broker_t *b;
  int64_t id;
  mqr__principal_t *who;
  mqr__producer_t producer;
  mqr_broker_consumer_t *consumers; /* linked by session_next */
};

/* A session of broker b whose producer the core resumes through ops (NULL: a session
 * that never pauses). */
void mqr__session_init(mqr_broker_t *b, mqr__session_t *s, const mqr__producer_ops_t *ops);

/* A named MULTICAST subscription queue its consumers share (MQTT's $share): the broker
 * deletes it once the last has gone (auto-delete), where a named queue otherwise stays
 * until it is deleted by name (a durable subscription). */
#define MQR__SUB_SHARED 1u
/* A named queue made for this subscription alone that goes with its consumer (an MQTT
 * session that ends with its connection): not durable, and what its consumer had not
 * acknowledged goes with it, not back to it first. */
#define MQR__SUB_TEMPORARY 2u
/* Artemis's JMS subscriptions (STOMP's and AMQP's): a MULTICAST subscription queue (not
 * address::queue) is made with the selector as its filter, so that it keeps only what
 * the selector matches, and its consumer has none of its own. Without it the selector
 * is the consumer's, what it does not match staying in the queue for others (the native
 * protocol's, and the cluster's feeds, which select for several consumers of a queue). */
#define MQR__SUB_FILTER 4u
/* With MQR__SUB_FILTER, AMQP's rule for a named one found with another filter (not the
 * config's): made anew when it has no consumers (its messages going with it: a JMS
 * subscriber that changes its selector changes its subscription), else refused
 * (MQR_EQUEUEINUSE). Without it (STOMP's), such a queue is taken as it is. */
#define MQR__SUB_RENEW 8u

/* Subscribes for session s (NULL: the broker's in-process consumers) as a SUBSCRIBE
 * frame does (mqr_broker_subscribe has the rules; flags: MQR__SUB_*); the consumer's
 * deliveries go through ops with ctx (mqr__consumer_ctx). Every queue a subscription
 * makes is made here, under auto-create-queues. Dispatch does not start: the head
 * answers its client first, then calls mqr__consumer_start. */
int mqr__session_subscribe(mqr__session_t *s, mqr_str_t target, int routing_type, mqr_str_t queue, unsigned flags,
                           mqr_str_t selector, uint32_t credit, int64_t subscription, const mqr__consumer_ops_t *ops,
                           void *ctx, mqr_broker_consumer_t **out, mqr_error_t *err);
/* The routing type of a subscription that names none, as Artemis decides it (STOMP's, and
 * an AMQP link's without a capability): the address's, when it has one; MQR_ROUTING_NONE
 * for a queue of that name; else the address settings' default-address-routing-type. */
int mqr__implied_routing_type(mqr_broker_t *b, mqr_str_t name);
/* After a refusal MQR_ENOTLEADER (a replicated address's group led by another node):
 * where that leader's clients connect (the cluster config's url; NULL: not known) and
 * its node id. Valid until the next call into the broker. */
const char *mqr__session_leader_url(const mqr__session_t *s, uint64_t *node);
/* The consumer's subscription id, its head's context, and its queue's name. */
int64_t mqr__consumer_subscription(const mqr_broker_consumer_t *k);
void *mqr__consumer_ctx(const mqr_broker_consumer_t *k);
mqr_str_t mqr__consumer_queue_name(const mqr_broker_consumer_t *k);
/* Delivers what the consumer's queue holds, within its credit. */
void mqr__consumer_start(mqr_broker_consumer_t *k);
/* The consumer can take deliveries again (its head's output drained). */
void mqr__consumer_ready(mqr_broker_consumer_t *k);
/* Acknowledges delivery (cumulative: and every earlier one of k): how many went, 0 when
 * it is not outstanding. */
uint32_t mqr__consumer_ack(mqr_broker_consumer_t *k, int64_t delivery, bool cumulative);
/* The answer to an acknowledgement of n deliveries of k that its client asked to hear
 * (p: its session's producer; token: the answer's): 0, answer it now; MQR__PENDING, the
 * answer (a receipt with queues = n, or an error) comes through p's ops->sent with token
 * once the acknowledgement is as safe as a durable send (its DELETE records committed by
 * a replicated queue's group) and after p's earlier answers; or an error (err says why:
 * MQR_EINDOUBT, this node stopped leading the queue's group and did not take it). */
int mqr__consumer_ack_answer(mqr_broker_consumer_t *k, mqr__producer_t *p, int64_t token, uint32_t n, mqr_error_t *err);
/* Gives delivery back (cumulative: and every earlier one of k), as a consumer that
 * closes does: to the head of its queue, its delivery counted (a redelivery delay, the
 * dead-letter address after max-delivery-attempts). How many; 0 when not outstanding. */
uint32_t mqr__consumer_nack(mqr_broker_consumer_t *k, int64_t delivery, bool cumulative);
/* Takes delivery off k to the dead-letter address at once, whatever its count (AMQP's
 * rejected outcome, as Artemis's reject; no dead-letter address: dropped, and logged). 1,
 * or 0 (not outstanding). */
uint32_t mqr__consumer_reject(mqr_broker_consumer_t *k, int64_t delivery);
/* Gives delivery back uncounted (its client never handed it to its application, and is
 * stopping): its delivery count is taken back, k's credit goes to 0 (nothing more is
 * delivered to it until it grants more), then as mqr__consumer_nack. 1, or 0 (not
 * outstanding). */
uint32_t mqr__consumer_release(mqr_broker_consumer_t *k, int64_t delivery);
/* Keeps delivery's message from k for good (AMQP's modified outcome with
 * undeliverable-here, as Artemis's rejectConsumer): it goes back to the queue, counted
 * (as mqr__consumer_nack) or not (as mqr__consumer_release), and is never given to k
 * again while it is one of the last MQR__REFUSED_MAX k refused; k's other consumers
 * may take it, and k goes on with the messages after it. 1, or 0 (not outstanding). */
#define MQR__REFUSED_MAX 1024
uint32_t mqr__consumer_refuse(mqr_broker_consumer_t *k, int64_t delivery, bool counted);
/* The delivery number of message message_id outstanding at k (the oldest), or 0. */
int64_t mqr__consumer_delivery_of(const mqr_broker_consumer_t *k, int64_t message_id);
/* The session's consumer of subscription id, or NULL. */
mqr_broker_consumer_t *mqr__session_consumer(const mqr__session_t *s, int64_t subscription);
/* How many consumers the session has. */
uint32_t mqr__session_consumer_count(const mqr__session_t *s);
/* Every consumer of the session may take deliveries again (its head's output drained). */
void mqr__session_ready(mqr__session_t *s);
/* Ends one consumer of the session (its deliveries back to the queue). */
void mqr__session_unsubscribe(mqr__session_t *s, mqr_broker_consumer_t *k);
/* Ends the session: every consumer, and the producer leaves every account it waits on. */
void mqr__session_end(mqr__session_t *s);

/* ---- messages -------------------------------------------------------------------------------- */

/* A message, stored once for every queue that takes it: the stored part of a Message
 * frame (protocol.h). refs: queue entries and writes in flight. */
typedef struct mqr__msg_s {
  uint32_t refs;
  uint32_t len;
  uint8_t cls; /* size class: data holds mqr__msg_class_size(cls) bytes */
  int64_t id;
  struct mqr__acct_s *acct; /* its address's accounting (send.c) */
  struct mqr__msg_s *next_free;
  /* In the journal (durable.h): the file of its first record (0: not journaled), the
   * bytes its records take there, its entries on durable queues (linked by jnext), and
   * its place in the list of live journaled messages, in file order. */
  uint64_t jfile;
  uint32_t jbytes;
  int64_t expiration;            /* ms since the epoch, 0: never; -1: not read from data yet (expiry.c) */
  int64_t scheduled;             /* its MQR_PROP_SCHEDULED, ms since the epoch, 0: none; -1: not read yet */
  uint32_t group_off, group_len; /* its MQR_PROP_GROUP in data; len 0: none, UINT32_MAX: not read yet */
  struct mqr__entry_s *jentries;
  struct mqr__msg_s *jlive_next, *jlive_prev;
  uint8_t data[];
} mqr__msg_t;

/* Size classes of a message's data, four to each doubling as jemalloc's are (64, 80, 96,
 * 112, 128, 160, ...): a 1 KiB body with its headers takes 1280 bytes, not 2048. */
#define MQR__MSG_CLASSES 81 /* 64 B to 64 MiB */
static inline size_t mqr__msg_class_size(int cls) {
  if (cls == 0) return 64;
  int p = 6 + (cls - 1) / 4, sub = (cls - 1) % 4;
  return ((size_t)1 << p) + (size_t)(sub + 1) * ((size_t)1 << (p - 2));
}
static inline int mqr__msg_class(size_t len) {
  if (len <= 64) return 0;
  int p = 63 - __builtin_clzll((unsigned long long)(len - 1)); /* 2^p < len <= 2^(p+1) */
  int sub = (int)(((len - 1) >> (p - 2)) & 3);
  return 1 + (p - 6) * 4 + sub;
}

/* A message in a queue, or in flight to a consumer (then on its unacked list). */
struct mqr__entry_s {
  struct mqr__entry_s *next, *prev;
  mqr__msg_t *msg;
  int64_t delivery;       /* while in flight */
  int32_t delivery_count; /* deliveries so far */
  uint32_t lv_slot;       /* a last-value queue's holder of its key: its slot + 1 (kinds.c); 0: none */
  /* A reference the journal holds (a durable message on a durable queue): its queue, and
   * the message's next such entry. NULL: nothing of it is in the journal. */
  struct mqr__bq_s *jbq;
  struct mqr__entry_s *jnext;
  bool copy;     /* a non-destructive queue's delivery: its message stays in the store (dispatch.c) */
  uint32_t useq; /* a replicated queue's: the group's proposal holding its last UPDATE (0: none); it is not
                    delivered again before that commits, so that its delivery count never goes back */
};

/* store.c: drops a reference to m (a write that held it is done); the last release
 * uncounts it and recycles it. */
void mqr__msg_release(mqr_broker_t *b, mqr__msg_t *m);
/* kinds.c: for a delivery of m carrying group-first-key `key` (true): the offset in m's
 * stored bytes where the extra property block goes (the end of its properties), and the
 * block's length (0 when m does not read); the block written to out unless NULL. */
size_t mqr__group_first_block(const mqr__msg_t *m, mqr_str_t key, uint8_t *out, uint32_t *at);
/* The key of group-first-key when the delivery being made is the first of its group to
 * consumer k (the head adds that property, true); empty otherwise. */
mqr_str_t mqr__consumer_group_first(const mqr_broker_consumer_t *k);
/* text.c: a property's value as text (STOMP headers, MQTT user properties); numbers are
 * written into buf (24 bytes hold any). */
mqr_str_t mqr__value_text(const mqr_value_t *v, char *buf, size_t cap);

/* ---- sends --------------------------------------------------------------------------------- */

/* A send from a frame or in-process: tail is the properties and body as a Send encodes
 * them. *blocked (may be NULL) tells a network producer to pause: the message went to
 * an address over max-size-bytes whose policy is BLOCK. */
/* The answer to a send comes later (MQR__PENDING): through the producer's ops, or fn. */
#define MQR__PENDING 1

typedef struct mqr__send_s { /* a field added here is set in mqr__send_init too */
  mqr_str_t address;
  int routing_type; /* MQR_ANYCAST, MQR_MULTICAST, MQR_ROUTING_NONE */
  bool durable;
  mqr_str_t duplicate_id;
  int64_t scheduled;   /* its MQR_PROP_SCHEDULED (0: none) */
  mqr_str_t group;     /* its MQR_PROP_GROUP: a view into tail, or (in-process) anywhere; empty: none */
  const uint8_t *tail; /* a SEND frame's tail, checked (mqr_frame_send_view) */
  size_t tail_len;
  const mqr_tail_t *made; /* in-process (tail NULL): the tail is made from these, checked */
  const mqr_prefixes_t *prefixes;
  /* Who hears the answer, when it must wait for the journal or for an earlier answer to
   * the same producer: the producer's ops->sent with token, or fn with fn_arg. With
   * neither (producer NULL), a journaled message is still enqueued only once durable. */
  mqr__producer_t *producer;
  int64_t token;
  mqr__principal_t *who; /* whose send: checked against the security-settings (NULL: not checked) */
  mqr_broker_sent_fn fn;
  void *fn_arg;
} mqr__send_t;

/* A send's fields zero, each set: gcc zeroes a compound literal this size with rep stos,
 * whose start-up costs more than a send's checks together (perf annotate). */
static inline void mqr__send_init(mqr__send_t *s) {
  s->address = s->duplicate_id = s->group = (mqr_str_t){NULL, 0};
  s->routing_type = 0;
  s->durable = false;
  s->scheduled = 0;
  s->tail = NULL;
  s->tail_len = 0;
  s->made = NULL;
  s->prefixes = NULL;
  s->producer = NULL;
  s->token = 0;
  s->who = NULL;
  s->fn = NULL;
  s->fn_arg = NULL;
  _Static_assert(sizeof(mqr__send_t) == offsetof(mqr__send_t, fn_arg) + sizeof(void *), "a field not set here");
}

/* 0 or an error (*r and err say which), or MQR__PENDING: the answer comes later, in send
 * order per producer, once the message is durable (*r already says where it goes). */
int mqr__do_send(mqr_broker_t *b, const mqr__send_t *s, mqr_broker_receipt_t *r, struct mqr__acct_s **blocked,
                 mqr_error_t *err);
/* send.c: an in-process message checked and made a send, as mqr_broker_send does. */
int mqr__send_from_message(const mqr_broker_message_t *m, mqr_tail_t *t, mqr__send_t *s, mqr_error_t *err);

/* ---- the broker, for heads and the connection layer ---------------------------------------------- */

/* A line for the broker's log (log.c). */
void mqr__log(mqr_broker_t *b, mqr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* broker.c, for heads: work for the next loop pass (the idle phase), and handles that
 * count until the broker may be freed. */
void mqr__broker_wake(mqr_broker_t *b);
void mqr__broker_handle_opened(mqr_broker_t *b);
void mqr__broker_handle_closed(mqr_broker_t *b);
/* Its loop, options and config (the one it runs on now), whether it is closing, and
 * whether it has a journal. */
uv_loop_t *mqr__loop(const mqr_broker_t *b);
uint64_t mqr__uptime_s(const mqr_broker_t *b); /* seconds since it started */
const mqr_broker_options_t *mqr__options(const mqr_broker_t *b);
const mqr_config_t *mqr__config(const mqr_broker_t *b);
bool mqr__closing(const mqr_broker_t *b);
bool mqr__has_journal(const mqr_broker_t *b);
/* Where the connection layer keeps its state (../net: struct mqr__net_s). */
struct mqr__net_s **mqr__net_slot(const mqr_broker_t *b);

/* The connection layer (../net), as the broker starts and stops it: its state is its own
 * (mqr__net_slot), and the core calls nothing else of it. */
int mqr__server_listen(mqr_broker_t *b, mqr_error_t *err); /* makes b->net, binds the listeners */
int mqr__server_ready(mqr_broker_t *b, mqr_error_t *err);  /* after the journal: what heads recover (MQTT sessions) */
void mqr__server_close(mqr_broker_t *b);                   /* each closed handle counts down */
bool mqr__server_flush(mqr_broker_t *b);                   /* this pass's writes; true: more waits */
void mqr__server_free(mqr_broker_t *b);                    /* once every handle closed */
uint32_t mqr__server_connections(const mqr_broker_t *b);
void mqr__server_reload(mqr_broker_t *b); /* a reload: TLS certificates and keys read again */

/* ---- who a client is, and what it may do (auth.c, access.c; docs/security.md) ---------------------- */

/* An authentication under way, and how its answer comes: status 0 with who (the
 * caller's reference), MQR_EAUTH (a wrong name or password, told late on purpose),
 * MQR_ENOMEM. */
typedef struct mqr__auth_s mqr__auth_t;
typedef void (*mqr__auth_fn)(void *ctx, int status, mqr__principal_t *who);

/* Authenticates name and password (name empty: an anonymous client) from peer (its
 * address, for the log and the delay after failures). 0 with *who now (a cached
 * verification, or anonymous allowed); MQR_EPERM (anonymous refused), MQR_EAUTH,
 * MQR_ENOMEM now; or MQR__PENDING: fn(ctx, ...) later, never from inside this call, unless
 * *pending is cancelled first (the connection went). The password is not kept. */
int mqr__authenticate(mqr_broker_t *b, mqr_str_t name, mqr_str_t password, const char *peer, mqr__auth_fn fn, void *ctx,
                      mqr__principal_t **who, mqr__auth_t **pending);
void mqr__auth_cancel(mqr__auth_t *a);
/* SASL mechanisms the head runs itself (SCRAM-SHA-256): the user's stored SCRAM keys
 * (NULL: no such user, or none kept); once the proof verified, the user's principal (0,
 * or MQR_EAUTH when gone); a failed proof counted, logged and answered late as a wrong
 * password is (MQR__PENDING: fn with MQR_EAUTH after the peer's delay). */
const char *mqr__user_scram(mqr_broker_t *b, const char *name);
int mqr__authenticate_proved(mqr_broker_t *b, const char *name, mqr__principal_t **who);
int mqr__authenticate_failed(mqr_broker_t *b, const char *name, const char *peer, mqr__auth_fn fn, void *ctx,
                             mqr__auth_t **pending);
/* A client that proved who it is with a TLS client certificate (its subject CN, name)
 * and gave no credentials: the user of that name, with its roles (0 and *who), or
 * MQR_EAUTH when the users file has none. As mosquitto's use_identity_as_username and
 * Artemis's certificate login. */
int mqr__authenticate_certificate(mqr_broker_t *b, const char *name, const char *peer, mqr__principal_t **who);
/* Authentications accepted and refused since start (the metrics). */
void mqr__sec_counts(const mqr_broker_t *b, uint64_t *accepted, uint64_t *refused);
void mqr__principal_release(mqr__principal_t *p);           /* NULL is allowed */
mqr__principal_t *mqr__principal_hold(mqr__principal_t *p); /* one more reference (NULL: NULL) */
mqr_str_t mqr__principal_name(const mqr__principal_t *p);   /* "(anonymous)" for an anonymous client */
bool mqr__principal_anonymous(const mqr__principal_t *p);   /* (NULL: true) */
/* Its user was removed (or anonymous clients refused) by a reload: its connection goes. */
bool mqr__principal_revoked(const mqr__principal_t *p);
/* The session acts as who from now on, holding the reference (the session's end drops
 * it); and who it acts as. */
void mqr__session_set_principal(mqr__session_t *s, mqr__principal_t *who);
mqr__principal_t *mqr__session_principal(const mqr__session_t *s);
/* One option of a queue made through management (queue.create's key=value, the HTTP
 * API's options), by its name in mqr.yaml: 0, or MQR_EINVAL (err says which and why).
 * qc keeps views of v (a filter, a key). */
int mqr__queue_option(mqr_queue_config_t *qc, mqr_str_t key, mqr_str_t v, mqr_error_t *err);

/* Whether who may do p on address (a concrete name, or a wildcard subscription's address,
 * as Artemis checks it): always, without security-settings or without a principal.
 * A denial is logged and err (may be NULL) says it (MQR_EPERM). */
bool mqr__may(mqr_broker_t *b, mqr__principal_t *who, mqr_permission_t p, mqr_str_t address, mqr_error_t *err);
/* The same, said to no one (what a listing shows). */
bool mqr__allowed(mqr_broker_t *b, mqr__principal_t *who, mqr_permission_t p, mqr_str_t address);
bool mqr__session_may(const mqr__session_t *s, mqr_permission_t p, mqr_str_t address, mqr_error_t *err);

/* The producer was told by mqr__do_send that its message went to a full BLOCK address
 * (acct): it waits there, and its head stops reading. */
struct mqr__acct_s;
void mqr__producer_block(mqr__producer_t *p, struct mqr__acct_s *acct);

#endif
