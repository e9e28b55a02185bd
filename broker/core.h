/* The broker core's interfaces: what a protocol head implements and calls. The core
 * (broker.c, dispatch.c, send.c, store.c, ack.c) has no sockets; a head turns its
 * protocol into these calls and back:
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
 * The native protocol's head is native/ (head.c, frames.c); in-process consumers are
 * inproc.c (a callback per delivery, mqr_broker_subscribe). A new protocol is one more
 * head: one more set of these ops, no change to the send path. */
#ifndef MQR_BROKER_CORE_H
#define MQR_BROKER_CORE_H

#include "mqr/broker.h"

typedef struct mqr__entry_s mqr__entry_t;
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
  uint32_t blocked_on; /* full addresses (BLOCK) it waits on */
  uint32_t pending;    /* its answers not yet given (durable.h) */
};

struct mqr__session_s {
  mqr_broker_t *b;
  int64_t id;
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

/* Subscribes for session s (NULL: the broker's in-process consumers) as a SUBSCRIBE
 * frame does (mqr_broker_subscribe has the rules; flags: MQR__SUB_*); the consumer's
 * deliveries go through ops with ctx (mqr__consumer_ctx). Every queue a subscription
 * makes is made here, under auto-create-queues. Dispatch does not start: the head
 * answers its client first, then calls mqr__consumer_start. */
int mqr__session_subscribe(mqr__session_t *s, mqr_str_t target, int routing_type, mqr_str_t queue, unsigned flags,
                           mqr_str_t selector, uint32_t credit, int64_t subscription, const mqr__consumer_ops_t *ops,
                           void *ctx, mqr_broker_consumer_t **out, mqr_error_t *err);
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
/* Gives delivery back (cumulative: and every earlier one of k), as a consumer that
 * closes does: to the head of its queue, its delivery counted (a redelivery delay, the
 * dead-letter address after max-delivery-attempts). How many; 0 when not outstanding. */
uint32_t mqr__consumer_nack(mqr_broker_consumer_t *k, int64_t delivery, bool cumulative);
/* The delivery number of message message_id outstanding at k (the oldest), or 0. */
int64_t mqr__consumer_delivery_of(const mqr_broker_consumer_t *k, int64_t message_id);
/* The session's consumer of subscription id, or NULL. */
mqr_broker_consumer_t *mqr__session_consumer(const mqr__session_t *s, int64_t subscription);
/* Ends one consumer of the session (its deliveries back to the queue). */
void mqr__session_unsubscribe(mqr__session_t *s, mqr_broker_consumer_t *k);
/* Ends the session: every consumer, and the producer leaves every account it waits on. */
void mqr__session_end(mqr__session_t *s);

/* The producer was told by mqr__do_send that its message went to a full BLOCK address
 * (acct): it waits there, and its head stops reading. */
struct mqr__acct_s;
void mqr__producer_block(mqr__producer_t *p, struct mqr__acct_s *acct);

#endif
