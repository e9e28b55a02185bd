/* The AMQP 1.0 head on the connection layer: what its sources share. Qpid Proton's
 * connection driver (proton/connection_driver.h) is the protocol engine: it takes the
 * connection's bytes, gives back the frames to write and the events they make, and
 * does no I/O of its own; this head turns its events into the core's calls and back.
 *
 *   head.c     the connection: the driver fed and drained, SASL (ANONYMOUS, PLAIN over
 *              TLS, EXTERNAL) against the broker's users as a Proton SASL plugin, the
 *              connection's and sessions' events, the idle timeout, the head's ops
 *   link.c     links: a sender link's target and a receiver link's source as addresses,
 *              transfers in (sends, settled once the core answered) and out (a consumer
 *              per receiving link, link credit as its credit), dispositions
 *   message.c  an AMQP message to the broker's and back (docs/protocols.md's table)
 *   txn.c      transactions: the coordinator link, held sends and acknowledgements
 *
 * docs/protocols.md says how AMQP maps onto the address model, as Artemis maps it. */
#ifndef MQR_HEADS_AMQP_H
#define MQR_HEADS_AMQP_H

#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>

#include "../../net/net.h"

/* A link of the connection's. */
typedef struct amqp_link_s {
  struct amqp_link_s *next;
  pn_link_t *link;
  mqr__conn_t *c;
  /* a link the client receives on: its consumer, and the credit given it that no delivery
   * has used yet (the link's credit bounds what is delivered: see link.c's ready) */
  mqr_broker_consumer_t *k;
  int64_t credit;
  bool settled;       /* its deliveries go pre-settled (at most once) */
  bool coordinator;   /* the client's transaction coordinator (txn.c) */
  char *subscription; /* a durable subscription's queue: closing the link removes it */
  /* a link the client sends on: its target's address and routing type (empty: each
   * message's `to`, the anonymous relay) */
  char *address;
  int routing_type;
} amqp_link_t;

/* A transaction (txn.c): its sends (each transfer's bytes, with where its link sends) and
 * its acknowledgements, applied when it is committed. */
typedef struct {
  char *address; /* NULL: the message's `to` */
  int routing_type;
  uint8_t *bytes;
  size_t len;
} amqp_txn_send_t;
typedef struct {
  mqr_broker_consumer_t *k;
  int64_t delivery;
  pn_delivery_t *d;
} amqp_txn_ack_t;
typedef struct amqp_txn_s {
  struct amqp_txn_s *next;
  uint32_t id;
  amqp_txn_send_t *sends;
  uint32_t n_sends, cap_sends;
  amqp_txn_ack_t *acks;
  uint32_t n_acks, cap_acks;
  bool committing; /* its sends went; the discharge waits for their answers */
  bool failed;     /* one of them was refused */
} amqp_txn_t;

/* A transfer the core has not yet answered: settled with its outcome when it is (a
 * commit's sends: txn set, and d, on the last, the discharge's). */
typedef struct {
  int64_t token;
  pn_delivery_t *d; /* NULL once its link went */
  amqp_txn_t *txn;
} amqp_pending_t;

typedef struct {
  pn_connection_driver_t driver;
  bool open;   /* the driver was made */
  bool opened; /* the client's Open answered */
  /* SASL: a PLAIN authentication under way, its outcome, who it made */
  mqr__auth_t *auth;
  bool auth_done;
  int auth_status;
  mqr__principal_t *who;
  char user[128];
  amqp_link_t *links;
  uint32_t n_links;
  amqp_txn_t *txns;
  uint32_t next_txn;
  mqr_str_t container; /* the client's container id (Proton's, for the connection's life; empty: none) */
  int64_t next_sub, next_dynamic;
  amqp_pending_t *pending; /* a ring, oldest first */
  uint32_t p_head, p_n, p_cap;
  int64_t next_token;
  pn_message_t *msg; /* reused for each message in and out */
  uint8_t *buf;      /* a transfer's bytes, in and out */
  size_t cap;
  uint8_t *abuf; /* a message's annotations, encoded again */
  size_t acap;
} amqp_t;

/* head.c: the driver's events handled and its output written (after anything that may
 * have made some: a delivery, an answer, a SASL outcome). */
void mqr__amqp_pump(mqr__conn_t *c);
/* Only its output written: from inside the core's calls (a delivery), where handling
 * events could call back into the core. */
void mqr__amqp_flush(mqr__conn_t *c);
int mqr__amqp_grow(amqp_t *a, size_t n);

/* link.c */
#define MQR__AMQP_MAX_LINKS 1024       /* per connection (a link flood: refused past it) */
#define MQR__AMQP_MAX_SESSIONS 255     /* per connection: its channel-max */
#define MQR__AMQP_MAX_MESSAGE 67108864 /* bytes of one message, 64 MiB (its transfers together) */
#define MQR__AMQP_STR_(x) #x
#define MQR__AMQP_STR(x) MQR__AMQP_STR_(x)
void mqr__amqp_link_open(mqr__conn_t *c, pn_link_t *l);
/* The client detached (closed false) or closed the link, and the broker's end follows;
 * the same for a session, with its links. */
void mqr__amqp_link_closed(mqr__conn_t *c, pn_link_t *l, bool closed);
void mqr__amqp_session_closed(mqr__conn_t *c, pn_session_t *s);
void mqr__amqp_link_flow(mqr__conn_t *c, pn_link_t *l);
void mqr__amqp_delivery(mqr__conn_t *c, pn_delivery_t *d);
void mqr__amqp_sent(mqr__conn_t *c, int64_t token, int status, const mqr_error_t *err);
/* Every full BLOCK address its producer waited on has room: its sending links get credit. */
void mqr__amqp_unblocked(mqr__conn_t *c);
/* A message's bytes sent (to address, or its `to`; from the connection's container) as a
 * transfer on a link is: answered to d when the core answers (NULL: at most once, a
 * refusal logged), or, for a commit's sends, counted in txn (its last, with d, settles the
 * discharge). */
void mqr__amqp_send(mqr__conn_t *c, const char *address, int routing_type, const uint8_t *bytes, size_t len,
                    pn_delivery_t *d, amqp_txn_t *txn);
void mqr__amqp_settle_in(pn_delivery_t *d, int status, const char *text);
/* A copy of s (mqr_malloc'd), or NULL for want of memory. */
char *mqr__amqp_copy_str(const char *s);

#define MQR__AMQP_TXN_STATE 0x34 /* transactional-state, a delivery's state in a transaction */
/* txn.c: the coordinator's transfers (declare, discharge); a transfer or an outcome in a
 * transaction (the delivery's transactional state: true when it was one, and is held);
 * a commit's end (its sends all answered); a link's acknowledgements forgotten (its
 * consumer went); every transaction freed. */
void mqr__amqp_txn_control(mqr__conn_t *c, pn_delivery_t *d, const uint8_t *bytes, size_t len);
bool mqr__amqp_txn_transfer(mqr__conn_t *c, amqp_link_t *lk, pn_delivery_t *d, const uint8_t *bytes, size_t len);
bool mqr__amqp_txn_outcome(mqr__conn_t *c, amqp_link_t *lk, pn_delivery_t *d, int64_t delivery);
void mqr__amqp_txn_committed(mqr__conn_t *c, amqp_txn_t *txn, pn_delivery_t *discharge);
void mqr__amqp_txn_forget(mqr__conn_t *c, mqr_broker_consumer_t *k);
void mqr__amqp_txns_free(mqr__conn_t *c);
void mqr__amqp_links_free(mqr__conn_t *c);

/* message.c: a transfer's bytes decoded as the broker's message (its views into a->msg
 * and bytes, valid until the next message); 0, or an error with err saying why. */
#define MQR__AMQP_MAX_PROPS 64 /* application-properties of a message, at most (and a few more) */
/* The property Artemis stamps with the sending connection's id (here its container id),
 * which no-local compares; not given to AMQP consumers. */
#define CONNECTION_ID "__AMQ_CID"
typedef struct {
  mqr_broker_message_t m;
  mqr_str_t keys[MQR__AMQP_MAX_PROPS + 12];
  mqr_value_t values[MQR__AMQP_MAX_PROPS + 12];
  char ids[2][80]; /* message-id and correlation-id as text, when they are not strings */
  int64_t now_ms;
  bool direct;    /* the body was viewed in the transfer's bytes: */
  mqr_str_t body; /* it, */
  int encoding;   /* and how it came */
} amqp_in_t;
int mqr__amqp_decode(amqp_t *a, const uint8_t *bytes, size_t len, amqp_in_t *in, mqr_error_t *err);

/* manage.c: Artemis's management messages. Whether address is the management address;
 * the request in carried out and answered to its reply-to: 0, or MQR_EPERM (no manage
 * on the management address: nothing done, err says why). */
bool mqr__amqp_is_management(mqr_str_t address);
int mqr__amqp_manage(mqr__conn_t *c, const amqp_in_t *in, mqr_error_t *err);
/* The stored message of e, its delivery count, as an AMQP message: its encoding's length in
 * a->buf, the rest of it in *body (a view of the stored body; empty when a->buf holds it
 * all), or an error (MQR_ENOMEM, MQR_EBADDATA). */
int64_t mqr__amqp_to_message(amqp_t *a, const mqr__msg_t *m, int32_t delivery_count, int64_t now_ms, mqr_str_t *body);

#endif
