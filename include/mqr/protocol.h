/* mqr's native protocol (docs/protocol.md): frames of a 4-byte big-endian body length and
 * a body that is one datum of the Avro union conf/schemas/protocol/frame.avsc, encoded
 * with the compiled codec. Any Avro implementation can read it.
 *
 * Shared by the broker and the client. The frame schema is compiled once per process, on
 * first use. */
#ifndef MQR_PROTOCOL_H
#define MQR_PROTOCOL_H

#include "mqr/codec.h"
#include "mqr/routing.h"
#include "mqr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: PING and PONG; 3: headers, typed properties, selectors; 4: MANAGE; 5: SASL; 6: ACK's
 * receipt, REDIRECT. */
#define MQR_PROTOCOL_VERSION 7
#define MQR_FRAME_HEADER 4 /* the body's length, big-endian */

/* The frames, defined once: XX(ENUM, NAME, Record, member) for each branch of the
 * frame.avsc union, in its order. The enum, the names, the union's members and the
 * codec's binding are all made from this list; test_protocol checks it against the
 * schema. */
#define MQR_FRAME_TYPES(XX)                                                                                            \
  XX(CONNECT, "CONNECT", Connect, connect)                                                                             \
  XX(CONNECTED, "CONNECTED", Connected, connected)                                                                     \
  XX(SEND, "SEND", Send, send)                                                                                         \
  XX(RECEIPT, "RECEIPT", Receipt, receipt)                                                                             \
  XX(SUBSCRIBE, "SUBSCRIBE", Subscribe, subscribe)                                                                     \
  XX(SUBSCRIBED, "SUBSCRIBED", Subscribed, subscribed)                                                                 \
  XX(MESSAGE, "MESSAGE", Message, message)                                                                             \
  XX(ACK, "ACK", Ack, ack)                                                                                             \
  XX(CREDIT, "CREDIT", Credit, credit)                                                                                 \
  XX(UNSUBSCRIBE, "UNSUBSCRIBE", Unsubscribe, unsubscribe)                                                             \
  XX(QUERY, "QUERY", Query, query)                                                                                     \
  XX(QUERY_RESULT, "QUERY_RESULT", QueryResult, query_result)                                                          \
  XX(ERROR, "ERROR", Error, error)                                                                                     \
  XX(DISCONNECT, "DISCONNECT", Disconnect, disconnect)                                                                 \
  XX(PING, "PING", Ping, ping)                                                                                         \
  XX(PONG, "PONG", Pong, pong)                                                                                         \
  XX(MANAGE, "MANAGE", Manage, manage)                                                                                 \
  XX(MANAGE_RESULT, "MANAGE_RESULT", ManageResult, manage_result)                                                      \
  XX(AUTH, "AUTH", Auth, auth)                                                                                         \
  XX(REDIRECT, "REDIRECT", Redirect, redirect)                                                                         \
  XX(NACK, "NACK", Nack, nack)

/* The frame types: the union's branches, in the schema's order. */
typedef enum {
#define MQR_FRAME_ENUM_ITEM(e, name, rec, member) MQR_FRAME_##e,
  MQR_FRAME_TYPES(MQR_FRAME_ENUM_ITEM)
#undef MQR_FRAME_ENUM_ITEM
      MQR_FRAME_COUNT
} mqr_frame_type_t;

/* "CONNECT", ...; "?" for an unknown type. */
MQR_EXTERN const char *mqr_frame_type_name(int type);

/* The protocol's routing type: NONE (let the address decide), ANYCAST, MULTICAST. */
typedef enum { MQR_PROTO_RT_NONE, MQR_PROTO_RT_ANYCAST, MQR_PROTO_RT_MULTICAST } mqr_proto_rt_t;

static inline int mqr_proto_rt_to_routing(int rt) {
  return rt == MQR_PROTO_RT_ANYCAST ? MQR_ANYCAST : rt == MQR_PROTO_RT_MULTICAST ? MQR_MULTICAST : MQR_ROUTING_NONE;
}

static inline int mqr_proto_rt_from_routing(int t) {
  return t == MQR_ANYCAST ? MQR_PROTO_RT_ANYCAST : t == MQR_MULTICAST ? MQR_PROTO_RT_MULTICAST : MQR_PROTO_RT_NONE;
}

/* Receipt statuses: mqr_route_status_t, and DROPPED (the address was full, policy DROP). */
#define MQR_RECEIPT_DROPPED 4

typedef struct {
  int32_t version;
  mqr_str_t client_id;
  int32_t max_frame;
  mqr_str_t mechanism; /* SASL: "PLAIN" (over TLS), "SCRAM-SHA-256"; empty: none */
  mqr_str_t response;  /* its initial response */
} mqr_frame_connect_t;

typedef struct {
  int32_t version;
  mqr_str_t server;
  int64_t session;
  int32_t max_frame;
} mqr_frame_connected_t;

/* A message's priority: 0 (lowest) to 9; JMS's and Artemis's default is 4. */
#define MQR_PRIORITY_DEFAULT 4
#define MQR_PRIORITY_MAX 9

/* properties: a map of typed values (keys an array of mqr_str_t, values of mqr_value_t,
 * whose type numbers are the union's branches). */
typedef struct {
  mqr_str_t address;
  int32_t routing_type; /* mqr_proto_rt_t */
  bool durable;
  mqr_str_t duplicate_id; /* empty: none */
  int64_t receipt;        /* 0: none */
  int32_t priority;       /* 0..MQR_PRIORITY_MAX */
  int64_t timestamp;      /* ms since the epoch; 0: none */
  int64_t expiration;     /* ms since the epoch; 0: never */
  mqr_str_t user_id;      /* empty: none */
  mqr_avro_map_t properties;
  mqr_str_t body;
} mqr_frame_send_t;

typedef struct {
  int64_t receipt;
  int32_t status; /* mqr_route_status_t, or MQR_RECEIPT_DROPPED */
  int32_t queues;
} mqr_frame_receipt_t;

typedef struct {
  int64_t subscription;
  mqr_str_t target;
  int32_t routing_type; /* mqr_proto_rt_t */
  mqr_str_t queue;
  int32_t credit;
  mqr_str_t selector; /* a filter expression (mqr/filter.h); empty: every message */
} mqr_frame_subscribe_t;

typedef struct {
  int64_t subscription;
  mqr_str_t queue;
} mqr_frame_subscribed_t;

typedef struct {
  int64_t subscription;
  int64_t delivery;
  int32_t delivery_count;
  int64_t message_id;
  mqr_str_t address;
  int32_t routing_type;
  bool durable;
  int32_t priority;
  int64_t timestamp, expiration;
  mqr_str_t user_id;
  mqr_avro_map_t properties; /* of mqr_value_t */
  mqr_str_t body;
  /* The stored part the frame carried (from message_id to the body), as the broker
   * stores it: what a cluster node keeps of a message its group's leader delivered to
   * it. Set by libmqr-client (mqr_frame_message_stored); empty after mqr_frame_decode. */
  mqr_str_t stored;
} mqr_frame_message_t;

typedef struct {
  int64_t subscription;
  int64_t delivery;
  bool cumulative;
  int64_t receipt; /* not 0: answered with a RECEIPT (queues: how many went) once as safe as a durable send */
} mqr_frame_ack_t;

typedef struct {
  int64_t subscription;
  int32_t messages;
} mqr_frame_credit_t;

typedef struct {
  int64_t subscription;
} mqr_frame_unsubscribe_t;

typedef struct {
  int64_t query;
} mqr_frame_query_t;

typedef struct {
  mqr_str_t name;
  mqr_str_t routing_types;
  int64_t routed, unrouted, size_bytes;
} mqr_frame_address_info_t;

typedef struct {
  mqr_str_t name;
  mqr_str_t address;
  int32_t routing_type;
  int64_t depth, in_flight;
  int32_t consumers;
  int64_t enqueued, acknowledged;
  bool paused;
} mqr_frame_queue_info_t;

typedef struct {
  int64_t query;
  mqr_avro_array_t addresses; /* of mqr_frame_address_info_t */
  mqr_avro_array_t queues;    /* of mqr_frame_queue_info_t */
  int32_t connections;
  int64_t dropped;
} mqr_frame_query_result_t;

typedef struct {
  int32_t code;
  mqr_str_t name;
  mqr_str_t text;
  int64_t receipt;
  bool fatal;
} mqr_frame_error_t;

typedef struct {
  mqr_str_t reason;
} mqr_frame_disconnect_t;

/* PING (either side) and PONG (the answer, same token). */
typedef struct {
  int64_t token;
} mqr_frame_ping_t;

typedef struct {
  int64_t token;
} mqr_frame_pong_t;

/* MANAGE: an operation by name and its arguments (docs/protocol.md); MANAGE_RESULT: its
 * answer, with rows of named values (browsed messages, consumers). */
typedef struct {
  int64_t request;
  mqr_str_t operation;
  mqr_avro_array_t args; /* of mqr_str_t */
} mqr_frame_manage_t;

typedef struct {
  int64_t request;
  int32_t code; /* 0, or an MQR_E... code */
  mqr_str_t text;
  int64_t count;
  mqr_avro_array_t rows; /* of mqr_avro_map_t of mqr_value_t */
} mqr_frame_manage_result_t;

/* AUTH: a SASL exchange's next message, either way (SCRAM-SHA-256's server-first,
 * client-final, server-final). */
typedef struct {
  mqr_str_t data;
} mqr_frame_auth_t;

/* REDIRECT: the broker's hint before an ERROR ENOTLEADER answering the same receipt (a
 * SEND's) or subscription (a SUBSCRIBE's), or a MANAGE_RESULT ENOTLEADER answering the
 * same request (an operation on a replicated queue's messages): node leads the group of
 * the replicated address, and url is where its clients connect. */
typedef struct {
  int64_t receipt;
  int64_t node;
  mqr_str_t url;
} mqr_frame_redirect_t;

/* Gives delivery of subscription back, unacknowledged, to be delivered again as the
 * queue's settings say (redelivery delay, max-delivery-attempts). counted: the delivery
 * counts, as for a consumer that closed with it; false: it never reached the consumer's
 * application (a message fetched ahead), and its count is taken back (as Artemis does
 * for a closing consumer's buffered messages), and the subscription's credit goes to 0. What a cluster node does with
 * deliveries its group's leader fed it (feed.c). */
typedef struct {
  int64_t subscription;
  int64_t delivery;
  bool counted;
} mqr_frame_nack_t;

/* A frame: its type, then the record of that type. */
typedef struct {
  int32_t type; /* mqr_frame_type_t */
  union {
#define MQR_FRAME_UNION_ITEM(e, name, rec, member) mqr_frame_##member##_t member;
    MQR_FRAME_TYPES(MQR_FRAME_UNION_ITEM)
#undef MQR_FRAME_UNION_ITEM
  } u;
} mqr_frame_t;

/* The frame schema, compiled; NULL only when out of memory at the first call. */
MQR_EXTERN const mqr_avro_schema_t *mqr_protocol_schema(void);

/* The schema's JSON text (conf/schemas/protocol/frame.avsc, compiled in). */
MQR_EXTERN mqr_str_t mqr_protocol_schema_text(void);

/* Appends f as a whole frame (length and body) to out. 0, MQR_EBADDATA (a value the
 * schema refuses), MQR_ENOSPC, MQR_ENOMEM. */
MQR_EXTERN int mqr_frame_encode(const mqr_frame_t *f, mqr_avro_buf_t *out, mqr_error_t *err);

/* Looks at in[0..len) for a whole frame: 1 with *body_len set when the body is all there
 * (it starts MQR_FRAME_HEADER bytes in), 0 when more bytes are needed, MQR_ELIMIT when
 * the length says more than max bytes. */
MQR_EXTERN int mqr_frame_peek(const uint8_t *in, size_t len, uint32_t max, uint32_t *body_len);

/* Decodes one frame body (all of body[0..len), nothing left over) into f; strings and
 * bytes are views into body, maps and arrays go in arena. Errors: those of
 * mqr_avro_decode, MQR_EBADDATA for bytes after the datum. */
MQR_EXTERN int mqr_frame_decode(const uint8_t *body, size_t len, mqr_frame_t *f, mqr_avro_arena_t *arena,
                                mqr_error_t *err);

/* ---- the broker's send path ------------------------------------------------------ */

/* A message's tail: the part of a Send that the broker stores as it is and a Message
 * frame ends with: priority, timestamp, expiration, user id, properties, body. */
typedef struct {
  int32_t priority;   /* 0..MQR_PRIORITY_MAX */
  int64_t timestamp;  /* ms since the epoch; 0: none */
  int64_t expiration; /* ms since the epoch; 0: never */
  mqr_str_t user_id;  /* empty: none */
  const mqr_str_t *keys;
  const mqr_value_t *values; /* n of each */
  size_t n;
  mqr_str_t body;
} mqr_tail_t;

/* A tail read back: its headers, its properties still encoded (walk them with
 * mqr_props_next: props_len runs to the tail's end, and the walk stops where the
 * properties end), and its body; views into the tail. */
typedef struct {
  int32_t priority;
  int64_t timestamp, expiration;
  mqr_str_t user_id;
  const uint8_t *props; /* the encoded map */
  size_t props_len;
  mqr_str_t body;
} mqr_tail_view_t;

/* A Send frame as the broker reads it: its fields, and its tail (from priority to the
 * body, as they were encoded) checked but not decoded, to be stored as it is. */
typedef struct {
  mqr_str_t address;
  int32_t routing_type;
  bool durable;
  mqr_str_t duplicate_id;
  int64_t receipt;
  const uint8_t *tail;
  size_t tail_len;
  size_t body_len;   /* of the body in the tail */
  int64_t scheduled; /* its MQR_PROP_SCHEDULED property (an int or a long), 0: none */
  mqr_str_t group;   /* its MQR_PROP_GROUP property (a string; a view into the tail), empty: none */
} mqr_send_view_t;

/* The property that puts a message in a group: a group's messages go to one consumer
 * (Artemis's _AMQ_GROUP_ID). */
#define MQR_PROP_GROUP "_AMQ_GROUP_ID"

/* The property that schedules a message: delivered no sooner than this time, in ms since
 * the epoch (Artemis's _AMQ_SCHED_DELIVERY). */
#define MQR_PROP_SCHEDULED "_AMQ_SCHED_DELIVERY"

/* Reads a frame body that must be a Send, checking all of it (priority in range, every
 * string UTF-8, every property value's branch). Errors: MQR_EBADDATA (another frame
 * type, or bad data), MQR_ETRUNCATED, MQR_ELIMIT, naming the byte offset. No
 * allocation. */
MQR_EXTERN int mqr_frame_send_view(const uint8_t *body, size_t len, mqr_send_view_t *v, mqr_error_t *err);

/* The stored part of a Message frame: message_id, address, routing type, durable, then
 * the tail. Its size, then writing it to out (room for that size); returns the bytes
 * written. */
MQR_EXTERN size_t mqr_message_stored_size(int64_t message_id, mqr_str_t address, size_t tail_len);
MQR_EXTERN size_t mqr_message_write_stored(uint8_t *out, int64_t message_id, mqr_str_t address, int routing_type,
                                           bool durable, const uint8_t *tail, size_t tail_len);

/* A framed SEND (its MQR_FRAME_HEADER, then its body) of a stored message as it is: its
 * address, routing type, durability and tail, with duplicate_id and receipt; appended to
 * out (a node forwarding a send to another). 0, MQR_EBADDATA (stored does not read),
 * MQR_ENOMEM, MQR_ELIMIT. */
MQR_EXTERN int mqr_frame_encode_send_stored(const uint8_t *stored, size_t len, mqr_str_t duplicate_id, int64_t receipt,
                                            mqr_avro_buf_t *out, mqr_error_t *err);

/* The stored part of a Message frame's body (as mqr_frame_peek found it, after its
 * header): past its type, subscription, delivery and delivery count. 0, or
 * MQR_EBADDATA (not a Message frame) / MQR_ETRUNCATED. */
MQR_EXTERN int mqr_frame_message_stored(const uint8_t *body, size_t len, mqr_str_t *out);

/* The stored part read back (a journal's copy, say): views into it. */
typedef struct {
  int64_t message_id;
  mqr_str_t address;
  int32_t routing_type; /* mqr_proto_rt_t */
  bool durable;
  const uint8_t *tail; /* from priority to the body, as a Send encodes them */
  size_t tail_len;
} mqr_stored_view_t;

/* Reads stored[0..len) as mqr_message_write_stored wrote it (the tail is not checked).
 * 0, or MQR_EBADDATA / MQR_ETRUNCATED naming the byte offset. No allocation. */
MQR_EXTERN int mqr_message_read_stored(const uint8_t *stored, size_t len, mqr_stored_view_t *out, mqr_error_t *err);

/* A tail made from values (for in-process sends): its size, then writing it (room for
 * that size); returns the bytes written. Nothing is checked here. */
MQR_EXTERN size_t mqr_message_tail_size(const mqr_tail_t *t);
MQR_EXTERN size_t mqr_message_write_tail(uint8_t *out, const mqr_tail_t *t);

/* Reads a tail's headers and finds its properties and body. 0, or MQR_EBADDATA /
 * MQR_ETRUNCATED. No allocation; nothing is copied. */
MQR_EXTERN int mqr_message_read_tail(const uint8_t *tail, size_t len, mqr_tail_view_t *out, mqr_error_t *err);

/* The headers alone, without walking the properties: props is everything after the
 * headers (a walk with mqr_props_next stops at the properties' end) and body is empty.
 * For a reader that wants the headers and perhaps a few properties. 0, or
 * MQR_EBADDATA / MQR_ETRUNCATED. */
MQR_EXTERN int mqr_message_read_headers(const uint8_t *tail, size_t len, mqr_tail_view_t *out, mqr_error_t *err);

/* Changes to a tail: properties set (a property of the same name already there is
 * replaced), and the expiration when set_expiration. */
typedef struct {
  const mqr_str_t *keys;
  const mqr_value_t *values; /* n of each */
  size_t n;
  bool set_expiration;
  int64_t expiration;
} mqr_tail_edit_t;

/* The most bytes tail[0..len) with edit applied takes (room for mqr_message_edit_tail). */
MQR_EXTERN size_t mqr_message_edit_tail_bound(size_t len, const mqr_tail_edit_t *edit);

/* Writes tail[0..len) (a tail that reads: mqr_message_read_tail) with edit applied to
 * out, which has room for mqr_message_edit_tail_bound bytes; *out_len gets its length.
 * The properties not replaced keep their order and come first. 0, or MQR_EBADDATA /
 * MQR_ETRUNCATED for a tail that does not read. No allocation. */
MQR_EXTERN int mqr_message_edit_tail(const uint8_t *tail, size_t len, const mqr_tail_edit_t *edit, uint8_t *out,
                                     size_t *out_len, mqr_error_t *err);

/* A walk over encoded properties (mqr_tail_view_t's props). */
typedef struct {
  const uint8_t *p, *end;
  uint64_t left; /* entries left in the current block */
} mqr_props_iter_t;

/* Starts a walk over props[0..len). */
static inline void mqr_props_iter_init(mqr_props_iter_t *it, const uint8_t *props, size_t len) {
  it->p = props, it->end = props + len, it->left = 0;
}

/* The next property: its key and value (views into the properties) and 1, or 0 at the
 * end, or MQR_EBADDATA / MQR_ETRUNCATED for bytes that are not a property map. */
MQR_EXTERN int mqr_props_next(mqr_props_iter_t *it, mqr_str_t *key, mqr_value_t *value);

#define MQR_MESSAGE_HEADER_MAX (MQR_FRAME_HEADER + 1 + 10 + 10 + 5)

/* The per-delivery head of a Message frame whose stored part is stored_len bytes:
 * length, type, subscription, delivery, delivery count. Written to out (room for
 * MQR_MESSAGE_HEADER_MAX); returns its length. The frame is the head then the stored
 * bytes, which a broker writes from where they are stored. */
MQR_EXTERN size_t mqr_message_head(uint8_t *out, int64_t subscription, int64_t delivery, int32_t delivery_count,
                                   size_t stored_len);

#ifdef __cplusplus
}
#endif
#endif /* MQR_PROTOCOL_H */
