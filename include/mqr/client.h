/* libmqr-client: the native protocol's client (docs/protocol.md, docs/client.md), async
 * on a libuv loop, with a blocking wrapper for simple programs.
 *
 * Async: every call queues frames and returns; the frames a loop pass queues leave in
 * one write. Threads: a client belongs to its loop's thread. Callbacks run on the loop;
 * from a callback every call of the async client may be made except freeing the client
 * whose callback runs (mqr_client_close is fine: it takes effect after). Views passed to
 * callbacks are valid during the call only; strings passed in are copied. Errors are the
 * MQR_E* codes of mqr/common.h, with err (may be NULL) saying why.
 *
 * Blocking (mqr_bclient_*): each client has a loop of its own, run only inside its calls;
 * one thread at a time may use a client. */
#ifndef MQR_CLIENT_H
#define MQR_CLIENT_H

#include <uv.h>

#include "mqr/protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mqr_client_s mqr_client_t;
typedef struct mqr_client_sub_s mqr_client_sub_t;

/* Parses tcp://HOST:PORT: HOST an IPv4 literal, [IPv6], or a name resolved with
 * getaddrinfo(3) (mqr_resolve: it may block while a resolver answers). 0 or MQR_EINVAL
 * (err says why, an unknown name included). */
MQR_EXTERN int mqr_client_parse_url(const char *url, struct sockaddr_storage *out, mqr_error_t *err);

/* What the broker answered: status 0 with a receipt, or an error (code and frame). */
typedef void (*mqr_client_done_fn)(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg);
typedef void (*mqr_client_message_fn)(mqr_client_sub_t *s, const mqr_frame_message_t *m, void *arg);
/* An error no request waits for, or the connection lost (frame NULL, status the cause). */
typedef void (*mqr_client_error_fn)(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg);

typedef struct {
  const char *client_id; /* NULL: "mqr-client" */
  uint32_t max_frame;    /* the largest frame it takes; 0: 64 MiB */
  mqr_client_error_fn on_error;
  void *arg;
  /* For a tls:// URL (read when it connects): the PEM file of the CAs the broker's
   * certificate must chain to (NULL: the system's), and a client certificate (chain)
   * and its key (PEM; NULL: none) to prove who it is. The certificate must also name
   * the URL's host. */
  const char *tls_ca, *tls_cert, *tls_key;
  /* Who it is (read when it connects; NULL user: anonymous, or a TLS client certificate):
   * over TLS the password goes as SASL PLAIN, on a plain connection SCRAM-SHA-256 proves
   * it without sending it (and the broker proves it knew the user's keys). */
  const char *user, *password;
} mqr_client_options_t;

/* A client on loop (which must outlive it), not yet connected; opt may be NULL and is
 * copied (client_id too). 0, or MQR_ENOMEM with *out untouched. Free it with
 * mqr_client_close. */
MQR_EXTERN int mqr_client_create(uv_loop_t *loop, const mqr_client_options_t *opt, mqr_client_t **out);

/* Connects and says CONNECT; cb gets 0 once CONNECTED came back (answer: that frame), or
 * an error. */
MQR_EXTERN int mqr_client_connect(mqr_client_t *c, const char *url, mqr_client_done_fn cb, void *arg, mqr_error_t *err);

/* What a send carries. */
typedef struct {
  mqr_str_t address;
  int routing_type; /* MQR_ANYCAST, MQR_MULTICAST, MQR_ROUTING_NONE */
  bool durable;
  mqr_str_t duplicate_id;
  int32_t priority;   /* 0..MQR_PRIORITY_MAX; a zeroed message has 0, the lowest */
  int64_t timestamp;  /* ms since the epoch; 0: the client stamps the send's time, as
                         Artemis's clients do */
  int64_t expiration; /* ms since the epoch; 0: never */
  mqr_str_t user_id;  /* empty: none */
  const mqr_str_t *property_keys;
  const mqr_value_t *property_values; /* n_properties of each */
  size_t n_properties;
  mqr_str_t body;
} mqr_client_message_t;

/* Queues a SEND. With cb, a receipt is asked for and cb gets it (status 0, answer the
 * RECEIPT) or the broker's error (status its code, answer the ERROR); without, the send
 * is fire-and-forget (a refusal reaches on_error). Strings are copied. Errors:
 * MQR_ELIMIT when the frame would be over the max-frame-size the broker announced in
 * CONNECTED (nothing is queued and the connection stays), MQR_ECLOSED, MQR_ENOMEM. */
MQR_EXTERN int mqr_client_send(mqr_client_t *c, const mqr_client_message_t *m, mqr_client_done_fn cb, void *arg,
                               mqr_error_t *err);

/* The same with the body an Avro datum: value encoded by codec in single-object
 * encoding (C3 01, the schema's fingerprint, the datum). */
MQR_EXTERN int mqr_client_send_avro(mqr_client_t *c, const mqr_client_message_t *m, const mqr_avro_codec_t *codec,
                                    const mqr_avro_schema_t *schema, const void *value, mqr_client_done_fn cb,
                                    void *arg, mqr_error_t *err);

/* Subscribes (routing_type MQR_ROUTING_NONE: to a queue or address::queue; otherwise to
 * an address by the Artemis rules), with a selector (empty: none; a filter expression,
 * docs/filters.md, that the broker compiles: a bad one is its MQR_ESYNTAX). on_message gets each delivery; acknowledge
 * it with mqr_client_ack and grant more with mqr_client_credit. done (may be NULL) gets the SUBSCRIBED frame (the
 * queue's name) or the error. */
MQR_EXTERN int mqr_client_subscribe(mqr_client_t *c, mqr_str_t target, int routing_type, mqr_str_t queue,
                                    mqr_str_t selector, uint32_t credit, mqr_client_message_fn on_message,
                                    mqr_client_done_fn done, void *arg, mqr_client_sub_t **out, mqr_error_t *err);

/* A message as a broker stores it (mqr/protocol.h's stored part: address, routing type,
 * durability, tail) sent as it is, with duplicate_id: what a node of a cluster does to
 * forward a send to the node that leads its group. cb as mqr_client_send's. 0, or
 * MQR_EBADDATA (stored does not read), MQR_ECLOSED, MQR_ENOMEM, MQR_ELIMIT. */
MQR_EXTERN int mqr_client_send_stored(mqr_client_t *c, const uint8_t *stored, size_t len, mqr_str_t duplicate_id,
                                      mqr_client_done_fn cb, void *arg, mqr_error_t *err);

/* The url where the leader of a replicated address's group takes clients, and its node
 * id (node may be NULL), from the last REDIRECT the broker sent (before refusing a
 * subscription or a send with MQR_ENOTLEADER); NULL when none came. Valid until the
 * next callback of c. */
MQR_EXTERN const char *mqr_client_redirect(const mqr_client_t *c, int64_t *node);

/* Acknowledges a delivery of s (cumulative: and every earlier one); the broker answers
 * an unknown delivery with an ERROR to on_error. 0, MQR_ECLOSED, MQR_ENOMEM. */
MQR_EXTERN int mqr_client_ack(mqr_client_sub_t *s, int64_t delivery, bool cumulative);
/* The same, answered: cb gets 0 with the RECEIPT (queues: how many deliveries went) once
 * the broker holds the acknowledgement as safe as a durable send (on a replicated queue:
 * committed by its group; after a restart or a failover it is not delivered again), or
 * the broker's ERROR (MQR_ENOTFOUND: not outstanding; MQR_EINDOUBT: the node stopped
 * leading the queue's group and did not take it), or MQR_ECLOSED. 0, MQR_ECLOSED,
 * MQR_ENOMEM. */
MQR_EXTERN int mqr_client_ack_receipt(mqr_client_sub_t *s, int64_t delivery, bool cumulative, mqr_client_done_fn cb,
                                      void *arg, mqr_error_t *err);
/* Gives delivery back unacknowledged (a Nack frame): the broker delivers it again as the
 * queue's settings say; counted: this delivery counts (false: the application never had
 * it, and the broker takes its count back and stops delivering to s until it grants
 * credit again: what a consumer that stops does with what it fetched ahead). 0, MQR_ECLOSED, MQR_ENOMEM. */
MQR_EXTERN int mqr_client_nack(mqr_client_sub_t *s, int64_t delivery, bool counted);
/* Grants s n more deliveries. 0, MQR_ECLOSED, MQR_ENOMEM. */
MQR_EXTERN int mqr_client_credit(mqr_client_sub_t *s, uint32_t n);
/* Ends a subscription; s is freed. */
MQR_EXTERN int mqr_client_unsubscribe(mqr_client_sub_t *s);

/* Asks for the broker's addresses, queues and counters: cb gets the QUERY_RESULT. */
MQR_EXTERN int mqr_client_query(mqr_client_t *c, mqr_client_done_fn cb, void *arg, mqr_error_t *err);

/* A management operation (docs/protocol.md, Management: "queue.pause", "address.create",
 * ...) with n string arguments, read during the call: cb gets the MANAGE_RESULT, whose
 * code says whether it was done. */
MQR_EXTERN int mqr_client_manage(mqr_client_t *c, mqr_str_t operation, const mqr_str_t *args, size_t n,
                                 mqr_client_done_fn cb, void *arg, mqr_error_t *err);

/* Says DISCONNECT, lets queued frames go, closes; callbacks still waiting get
 * MQR_ECLOSED; then cb (may be NULL), after which c is freed. A client whose connection
 * failed or ended stays allocated (its calls fail with MQR_ECLOSED) until this call. */
MQR_EXTERN void mqr_client_close(mqr_client_t *c, void (*cb)(void *arg), void *arg);

/* ---- the blocking wrapper --------------------------------------------------------------- */

typedef struct mqr_bclient_s mqr_bclient_t;

/* A delivery as the blocking client hands it over: owned by the caller until
 * mqr_bclient_message_free. */
typedef struct {
  int64_t subscription, delivery, message_id;
  int32_t delivery_count;
  int routing_type; /* MQR_ANYCAST, MQR_MULTICAST, MQR_ROUTING_NONE */
  bool durable;
  int32_t priority;
  int64_t timestamp, expiration;
  mqr_str_t address, user_id;
  mqr_str_t *property_keys;
  mqr_value_t *property_values; /* STRING and BYTES views into the message's storage */
  size_t n_properties;
  mqr_str_t body;
} mqr_bclient_message_t;

/* Connects (waiting at most timeout_ms) and returns a client with a loop of its own. */
MQR_EXTERN int mqr_bclient_connect(const char *url, const char *client_id, int timeout_ms, mqr_bclient_t **out,
                                   mqr_error_t *err);
/* The same with the async client's options (a tls:// URL's CA, certificate and key;
 * on_error and arg are the blocking client's own). */
MQR_EXTERN int mqr_bclient_connect_opt(const char *url, const mqr_client_options_t *opt, int timeout_ms,
                                       mqr_bclient_t **out, mqr_error_t *err);

/* Sends; with receipt, waits for it (*r may be NULL), else returns once the frame is
 * written. The broker's refusal is its error code, with err saying why. */
MQR_EXTERN int mqr_bclient_send(mqr_bclient_t *bc, const mqr_client_message_t *m, bool receipt, mqr_frame_receipt_t *r,
                                mqr_error_t *err);

/* Subscribes and waits for SUBSCRIBED; *subscription gets its id; queue_name (may be
 * NULL, cap bytes) the queue's name. */
MQR_EXTERN int mqr_bclient_subscribe(mqr_bclient_t *bc, mqr_str_t target, int routing_type, mqr_str_t queue,
                                     mqr_str_t selector, uint32_t credit, int64_t *subscription, char *queue_name,
                                     size_t cap, mqr_error_t *err);

/* The next delivery of any subscription, waiting at most timeout_ms (-1: forever):
 * 0, or MQR_ETIMEOUT, or the connection's error. */
MQR_EXTERN int mqr_bclient_receive(mqr_bclient_t *bc, int timeout_ms, mqr_bclient_message_t **out, mqr_error_t *err);
MQR_EXTERN void mqr_bclient_message_free(mqr_bclient_message_t *m);

/* Acknowledge, grant credit, unsubscribe: as the async calls, for the subscription with
 * this id; each returns once its frame is written. 0, MQR_ENOSUB (no such subscription),
 * MQR_ECLOSED (the connection ended; err says why), MQR_ENOMEM. */
MQR_EXTERN int mqr_bclient_ack(mqr_bclient_t *bc, int64_t subscription, int64_t delivery, bool cumulative,
                               mqr_error_t *err);
/* mqr_client_ack_receipt, waiting for its answer: 0 once the broker holds the
 * acknowledgement as safe as a durable send, or its refusal's code (err says why). */
MQR_EXTERN int mqr_bclient_ack_receipt(mqr_bclient_t *bc, int64_t subscription, int64_t delivery, bool cumulative,
                                       mqr_error_t *err);
MQR_EXTERN int mqr_bclient_credit(mqr_bclient_t *bc, int64_t subscription, uint32_t n, mqr_error_t *err);
MQR_EXTERN int mqr_bclient_unsubscribe(mqr_bclient_t *bc, int64_t subscription, mqr_error_t *err);

/* The broker's QUERY_RESULT, copied into storage the caller frees with mqr_free. */
MQR_EXTERN int mqr_bclient_query(mqr_bclient_t *bc, mqr_frame_query_result_t **out, mqr_error_t *err);

/* A management operation (mqr_client_manage) and its MANAGE_RESULT, copied into storage
 * the caller frees with mqr_free (its rows' keys and values too). Returns 0 when it was
 * done; the result's code when the broker refused it (*out is set, its text says why);
 * or MQR_ECLOSED / MQR_ENOMEM with *out NULL. */
MQR_EXTERN int mqr_bclient_manage(mqr_bclient_t *bc, mqr_str_t operation, const mqr_str_t *args, size_t n,
                                  mqr_frame_manage_result_t **out, mqr_error_t *err);

/* mqr_client_redirect of the blocking client's connection. */
MQR_EXTERN const char *mqr_bclient_redirect(const mqr_bclient_t *bc, int64_t *node);

/* Disconnects and frees. */
MQR_EXTERN void mqr_bclient_close(mqr_bclient_t *bc);

#ifdef __cplusplus
}
#endif
#endif /* MQR_CLIENT_H */
