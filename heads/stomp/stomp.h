/* The STOMP head (STOMP 1.0, 1.1, 1.2 on the connection layer): what its sources share.
 *
 *   frame.c    reading a client's frames in place, writing the head of the broker's
 *   head.c     the connection: CONNECT and versions, heart-beats, ERROR and RECEIPT
 *              frames, transactions, the head's ops (mqr__stomp_head)
 *   session.c  SEND, SUBSCRIBE, UNSUBSCRIBE, ACK and NACK on the core's session, and
 *              MESSAGE frames for its consumers
 *
 * docs/protocols.md says how frames map to the address model, as Artemis maps them. */
#ifndef MQR_BROKER_STOMP_H
#define MQR_BROKER_STOMP_H

#include "../../net/net.h"
#include "frame.h"

enum { ACK_AUTO, ACK_CLIENT, ACK_INDIVIDUAL };

/* A subscription: its consumer, the client's id for it and its destination as named. */
typedef struct stomp_sub_s {
  struct stomp_sub_s *next;
  mqr__conn_t *c;
  mqr_broker_consumer_t *k;
  int64_t num;        /* the core's subscription id */
  uint8_t ack;        /* ACK_* */
  mqr_str_t id, dest; /* copies, in the allocation's tail */
  mqr_str_t address;  /* dest without its prefix: a view into dest */
} stomp_sub_t;

/* A transaction: its frames (SEND, ACK, NACK) written again, to be handled at COMMIT. */
typedef struct stomp_tx_s {
  struct stomp_tx_s *next;
  mqr_str_t name; /* a copy, in the allocation's tail */
  uint8_t *buf;
  size_t len, cap;
} stomp_tx_t;

/* A receipt that waits for the journal: the core answers with its token, in order. */
typedef struct {
  int64_t token;
  size_t off, len; /* its id in ids */
} stomp_receipt_t;

typedef struct {
  mqr__stomp_progress_t progress; /* of the frame arriving */
  mqr__stomp_version_t version;   /* once connected */
  bool connected;
  uint32_t send_every; /* ms between the broker's heart-beats; 0: none */
  uint32_t ttl;        /* ms of the client's silence before it is taken for gone; 0: never */
  uint64_t sent_ms;    /* uv_now when the broker last wrote to it */
  stomp_sub_t *subs;
  int64_t next_sub;
  stomp_tx_t *txs;
  uint32_t n_txs;
  char *client_id; /* CONNECT's client-id: durable subscriptions are named by it */
  stomp_receipt_t *waiting;
  uint32_t w_head, w_n, w_cap;
  char *ids; /* the waiting receipts' ids, in order: [ids_head, ids_len) */
  size_t ids_head, ids_len, ids_cap;
  int64_t next_token;
  /* Its CONNECT's login and passcode checked: under way, or done (auth_status, and the
   * principal the session takes). */
  mqr__auth_t *auth;
  bool auth_done;
  int auth_status;
  mqr__principal_t *auth_who;
} stomp_t;

/* The head's buffers for a broker (its slot), shared: one frame is handled at a time. */
typedef struct {
  mqr__stomp_header_t *headers; /* the frame being handled: its headers, and properties */
  mqr_str_t *keys;
  mqr_value_t *values;
  uint32_t cap;
  mqr__stomp_header_t *out; /* a MESSAGE frame's headers, and its properties' numbers as text */
  uint32_t out_cap;
  char *text;
  size_t text_cap;
} stomp_broker_t;

extern const mqr__head_t mqr__stomp_head;
/* A listener's stomp block (head.c): its options, in this order. */
extern const mqr_protocol_def_t mqr__stomp_def;
enum { STOMP_OPT_MAX_FRAME, STOMP_OPT_MAX_HEADERS, STOMP_OPT_MAX_HEADER_LEN };
static inline uint32_t mqr__stomp_opt(const mqr__conn_t *c, int i) {
  return (uint32_t)mqr_listener_option(c->l->cfg, &mqr__stomp_def, i);
}
static inline stomp_broker_t *mqr__stomp_broker(mqr_broker_t *b) { return *mqr__head_slot(b, &mqr__stomp_head); }

#define STOMP_MAX_SUBSCRIPTIONS 1024 /* per connection */
#define STOMP_MAX_TRANSACTIONS 64    /* open at once, per connection */
#define STOMP_MAX_TX_BYTES (64u << 20)

/* head.c */
/* Writes a frame (headers escaped for the connection's version; content-length added
 * when with_length): 0, or MQR_ENOMEM (nothing written). */
int mqr__stomp_write(mqr__conn_t *c, mqr__stomp_command_t cmd, const mqr__stomp_header_t *h, uint32_t n, mqr_str_t body,
                     bool with_length);
/* An answer the client waits for could not be written (rc not 0): the connection
 * closes, as it must not wait for it forever. */
void mqr__stomp_written(mqr__conn_t *c, int rc);
/* An ERROR frame (message, the detail as its body, receipt-id when the frame had a
 * receipt), then the connection closes, as the specification says a server does. */
void mqr__stomp_error(mqr__conn_t *c, const mqr__stomp_frame_t *f, const char *message, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The frame's RECEIPT, if it asked for one. */
void mqr__stomp_receipt(mqr__conn_t *c, const mqr__stomp_frame_t *f);
/* A send's receipt that waits for the core's answer: its token (0: no receipt; -1: no
 * memory). Allocates nothing once its buffers have grown. */
int64_t mqr__stomp_receipt_later(mqr__conn_t *c, const mqr__stomp_frame_t *f);
/* The last one taken back: the send was answered at once. */
void mqr__stomp_receipt_drop_last(mqr__conn_t *c);

/* session.c */
void mqr__stomp_on_send(mqr__conn_t *c, const mqr__stomp_frame_t *f);
void mqr__stomp_on_subscribe(mqr__conn_t *c, const mqr__stomp_frame_t *f);
void mqr__stomp_on_unsubscribe(mqr__conn_t *c, const mqr__stomp_frame_t *f);
void mqr__stomp_on_ack(mqr__conn_t *c, const mqr__stomp_frame_t *f, bool ack);
void mqr__stomp_subs_free(mqr__conn_t *c);
extern const mqr__consumer_ops_t mqr__stomp_consumer_ops;

#endif
