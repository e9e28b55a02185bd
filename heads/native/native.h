/* The native protocol's head (private to it): its frames on the connection layer.
 *
 *   head.c     the head's ops, its consumers' deliveries, its per-connection state
 *   frames.c   CONNECT, SEND, SUBSCRIBE, ACK, CREDIT, QUERY and the rest
 *   manage.c   MANAGE frames: addresses, queues, consumers
 *   write.c    frames written, answers a client waits for, errors */
#ifndef MQR_HEADS_NATIVE_H
#define MQR_HEADS_NATIVE_H

#include <mqr/security.h>

#include "../../net/net.h"

#define MQR__MIN_PEER_FRAME 1024 /* the smallest max_frame a client may declare */

/* A connection's native state (c->hs). */
typedef struct {
  uint32_t peer_max_frame; /* the largest frame the client takes (its CONNECT) */
  uint64_t ping_ms;        /* uv_now a PING went with nothing heard since; 0: none out */
  /* Its CONNECT, while who it is is being found (sasl.c): the max_frame it asked for,
   * its client id (for the log), an answer awaited, a SCRAM exchange under way. */
  uint32_t want_max_frame;
  char client_id[128];
  mqr__auth_t *auth;
  mqr_scram_server_t *scram;
} mqr__nat_conn_t;

static inline mqr__nat_conn_t *mqr__nat(const mqr__conn_t *c) { return c->hs; }

/* The head's state for a broker: a decoding arena for control frames. */
typedef struct {
  uint8_t scratch[16384];
} mqr__nat_broker_t;

extern const mqr__head_t mqr__native_head;

/* write.c. 0, MQR_ENOMEM, or MQR_ELIMIT: longer than the max_frame the client declared. */
int mqr__nat_write_frame(mqr__conn_t *c, const mqr_frame_t *f);
void mqr__nat_reply_failed(mqr__conn_t *c, int type, int rc);
/* An answer the client waits for: if it cannot be written, the connection closes. */
void mqr__nat_reply(mqr__conn_t *c, const mqr_frame_t *f);
__attribute__((format(printf, 5, 6))) void mqr__nat_send_error(mqr__conn_t *c, int code, int64_t receipt, bool fatal,
                                                               const char *fmt, ...);
/* Before an ENOTLEADER refusal (rc; other codes: nothing) of the request `receipt` (a
 * SEND's receipt, a SUBSCRIBE's subscription, a MANAGE's request): a REDIRECT saying
 * where the leader's clients connect, when it is known. */
void mqr__nat_redirect(mqr__conn_t *c, int rc, int64_t receipt);

/* sasl.c: CONNECT (its mechanism: PLAIN over TLS, SCRAM-SHA-256, a client certificate,
 * anonymous) and the AUTH frames of an exchange. */
void mqr__nat_on_connect(mqr__conn_t *c, const mqr_frame_connect_t *cn);
void mqr__nat_on_auth(mqr__conn_t *c, const mqr_frame_auth_t *a);

/* frames.c */
void mqr__nat_handle_frame(mqr__conn_t *c, const uint8_t *body, size_t len);
/* manage.c: a MANAGE frame, carried out and answered. */
void mqr__nat_on_manage(mqr__conn_t *c, const mqr_frame_manage_t *m);

/* head.c */
extern const mqr__consumer_ops_t mqr__nat_consumer_ops;

#endif
