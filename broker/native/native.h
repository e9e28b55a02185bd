/* The connection layer every protocol head shares, and the native protocol's head
 * (private to the broker): connection, write and listener state.
 *
 *   listen.c  listeners, accepting, SIGPIPE
 *   conn.c    reading, the protocol told by the first byte, a head's frames taken in
 *             place with a budget per pass, errors and closing, the clocks
 *   write.c   writes gathered per connection and pass, back-pressure
 *
 * A head (mqr__head_t) is a protocol: the native one here (head.c, frames.c,
 * manage.c), STOMP in ../stomp/, MQTT in ../mqtt/. */
#ifndef MQR_BROKER_NATIVE_H
#define MQR_BROKER_NATIVE_H

#include "../../common/grow.h"
#include "../broker_int.h"

typedef struct mqr__listener_s mqr__listener_t;
typedef struct mqr__conn_s mqr__conn_t;
typedef struct mqr__wreq_s mqr__wreq_t;

/* The MQTT head's sessions outlive connections (mqtt/head.c). */
void mqr__mqtt_tick_sessions(mqr_broker_t *b, uint64_t now);
void mqr__mqtt_free_sessions(mqr_broker_t *b);
int mqr__mqtt_load_sessions(mqr_broker_t *b);

/* ---- connections ---------------------------------------------------------------------------- */

/* One write: segments of the request's own bytes (heads, control frames) and of stored
 * messages (held by a reference until the write completes). */
typedef struct {
  const uint8_t *ptr; /* NULL: own bytes at off */
  size_t off, len;
} mqr__seg_t;

struct mqr__wreq_s {
  uv_write_t req;
  struct mqr__conn_s *conn;
  mqr__seg_t *segs;
  uint32_t n_segs, cap_segs;
  uint8_t *bytes;
  size_t n_bytes, cap_bytes;
  mqr__msg_t **msgs;
  uint32_t n_msgs, cap_msgs;
  uv_buf_t *bufs;
  uint32_t cap_bufs;
  size_t total;
  struct mqr__wreq_s *next_free;
};

struct mqr__listener_s {
  uv_tcp_t tcp;
  mqr_broker_t *b;
  const mqr_listener_config_t *cfg; /* = &own: a reload frees the config it came from */
  mqr_listener_config_t own;
  char *strings; /* own's name, host and prefixes */
  int port;
  bool open;
  /* A connection for which there is no memory is accepted into spare and closed, so
   * that libuv, which stops accepting until uv_accept is called, keeps accepting and the
   * client sees the close; one that comes while spare is closing waits for the tick. */
  uv_tcp_t spare;
  bool refusing, accept_pending;
};

typedef enum { MQR__CONN_HANDSHAKE, MQR__CONN_OPEN, MQR__CONN_CLOSING } mqr__conn_state_t;

/* A protocol head on the connection layer. Every call is on the loop's thread. */
typedef struct mqr__head_s {
  const char *name;
  uint32_t protocol; /* MQR_PROTOCOL_* */
  /* Makes the head's state (c->hs) for a new connection: 0 or MQR_ENOMEM. */
  int (*open)(mqr__conn_t *c);
  /* Handles the next whole frame at c->rbuf[rpos..rlen), moving rpos past what it used:
   * 1 handled, 0 more bytes needed (the head may keep where it got to), -1 closing. */
  int (*take)(mqr__conn_t *c);
  /* The read buffer is full with part of one frame: the size it must grow to (more than
   * rcap; the head has checked its limit). */
  size_t (*room)(const mqr__conn_t *c);
  /* Each tick, for a connection that is not closing: the head's clocks (idle, heart-beats). */
  void (*tick)(mqr__conn_t *c, uint64_t now);
  /* Ends the connection for a fault of the client's (code, text): told to it where the
   * protocol can, then closed. */
  void (*fail)(mqr__conn_t *c, int code, const char *text);
  /* The broker is shutting down: what the protocol says before the close (may be NULL). */
  void (*bye)(mqr__conn_t *c);
  /* The answer to a send the core left pending (core.h's producer ops). */
  void (*sent)(mqr__conn_t *c, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err);
  /* The connection closes: its session has ended; the head frees c->hs. */
  void (*release)(mqr__conn_t *c);
} mqr__head_t;

extern const mqr__head_t mqr__native_head, mqr__stomp_head, mqr__mqtt_head;

struct mqr__conn_s {
  uv_tcp_t tcp;
  mqr_broker_t *b;
  mqr__listener_t *l;
  mqr__conn_state_t state;
  const mqr__head_t *head; /* NULL until its first byte tells it (a listener of several protocols) */
  void *hs;                /* the head's state */
  uint8_t *rbuf;           /* bytes read and not yet taken: rbuf[rpos..rlen) */
  size_t rpos, rlen, rcap;
  bool rbuf_pooled;
  bool reading;
  mqr__session_t sess; /* its consumers, and its producer (sess.producer.blocked_on: full addresses
                          whose BLOCK pauses it) */
  mqr__wreq_t *out;    /* this pass's writes */
  size_t in_flight;    /* bytes handed to uv_write and not yet written */
  uint32_t writes;     /* uv_writes not yet called back */
  bool dirty, resume, closed;
  bool deferred;                             /* stopped after its share of frames in a pass: goes on in the next */
  bool ping_out;                             /* a PING sent and nothing heard since */
  uint32_t peer_max_frame;                   /* the largest frame the client takes (its CONNECT) */
  uint64_t opened_ms, heard_ms, progress_ms; /* uv_now of: accept; last bytes read; last write done */
  struct mqr__conn_s *next_dirty, *next_resume;
  char peer[64];
  struct mqr__conn_s *next, *prev; /* the broker's list */
};

#define MQR__READ_CHUNK 65536
/* A stored message (or body) of at most this many bytes is copied into a write's own
 * bytes rather than written from the store: copying it costs less than an iovec of its
 * own, and a write of many small messages is then one buffer (libuv allocates an array
 * for more than four). */
#define MQR__COPY_MAX 512
#define MQR__FRAMES_PER_PASS 256 /* frames one connection has handled before the loop serves others */
#define MQR__MIN_PEER_FRAME 1024 /* the smallest max_frame a client may declare */

#define MQR__TICK_MS 250 /* how often the head looks at its connections' clocks */

/* The head's state, b->net. */
struct mqr__native_s {
  mqr__listener_t *listeners;
  uint32_t n_listeners;
  mqr__conn_t *conns;
  uint32_t n_conns;
  mqr__conn_t *dirty, *resume; /* connections with writes, or frames to handle, next pass */
  mqr__wreq_t *wreq_free;      /* write requests keep their arrays between uses */
  uint32_t n_wreq_free;
  void *rbuf_free; /* read buffers of MQR__READ_CHUNK bytes */
  uint32_t n_rbuf_free;
  uv_timer_t tick;     /* timeouts, heartbeats, paused peers gone */
  void *stomp_headers; /* the STOMP head's frame being handled: its headers, and properties */
  void *stomp_keys, *stomp_values;
  uint32_t stomp_cap;
  void *mqtt;      /* the MQTT head's sessions (mqtt/mqtt.h) */
  void *stomp_out; /* a MESSAGE frame's headers, and its properties' numbers as text */
  uint32_t stomp_out_cap;
  char *stomp_text;
  size_t stomp_text_cap;
  uint8_t scratch[16384]; /* decoding arena for control frames */
};

void mqr__nat_tick(uv_timer_t *t);

/* write.c */
mqr__wreq_t *mqr__nat_out(mqr__conn_t *c); /* this pass's write request; NULL: out of memory */
int mqr__nat_add_own(mqr__wreq_t *w, size_t off, size_t len);
/* A head's own bytes: room for n (NULL: no memory), written there, then committed (0 or
 * MQR_ENOMEM: then they are not sent). */
uint8_t *mqr__conn_reserve(mqr__conn_t *c, size_t n, size_t *off);
int mqr__conn_commit(mqr__conn_t *c, size_t off, size_t len);
/* A stored message's bytes [ptr, ptr + len) written as they are (copied when small);
 * hold: the write keeps a reference to m until done (once per message and write). 0 or
 * MQR_ENOMEM. */
int mqr__conn_add_stored(mqr__conn_t *c, mqr__msg_t *m, const uint8_t *ptr, size_t len, bool hold);
/* 0, MQR_ENOMEM, or MQR_ELIMIT: longer than the max_frame the client declared. */
int mqr__nat_write_frame(mqr__conn_t *c, const mqr_frame_t *f);
void mqr__nat_reply_failed(mqr__conn_t *c, int type, int rc);
/* An answer the client waits for: if it cannot be written, the connection closes. */
void mqr__nat_reply(mqr__conn_t *c, const mqr_frame_t *f);
bool mqr__nat_output_full(const mqr__conn_t *c);
bool mqr__nat_conn_paused(const mqr__conn_t *c);
void mqr__nat_wreq_recycle(mqr_broker_t *b, mqr__wreq_t *w);
void mqr__nat_schedule(mqr__conn_t *c); /* handle its frames again next pass */

/* conn.c */
void mqr__nat_close_cb(uv_handle_t *h);
void mqr__nat_maybe_finish_close(mqr__conn_t *c);
__attribute__((format(printf, 5, 6))) void mqr__nat_send_error(mqr__conn_t *c, int code, int64_t receipt, bool fatal,
                                                               const char *fmt, ...);
void mqr__nat_conn_close(mqr__conn_t *c, bool graceful);
void mqr__nat_process(mqr__conn_t *c);
void mqr__nat_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void mqr__nat_start_reading(mqr__conn_t *c);
/* The connection speaks h: its state made (false: no memory, the connection closing). A
 * listener of one protocol sets it at accept; of several, the first byte tells. */
bool mqr__conn_set_head(mqr__conn_t *c, const mqr__head_t *h);
/* Ends the connection for a client's fault, through its head (formatted text). */
__attribute__((format(printf, 3, 4))) void mqr__conn_fail(mqr__conn_t *c, int code, const char *fmt, ...);
/* The connection's session's producer ops: resume reads on, sent goes to the head. */
extern const mqr__producer_ops_t mqr__conn_producer_ops;

/* frames.c */
void mqr__nat_handle_frame(mqr__conn_t *c, const uint8_t *body, size_t len);
/* manage.c: a MANAGE frame, carried out and answered. */
void mqr__nat_on_manage(mqr__conn_t *c, const mqr_frame_manage_t *m);

/* listen.c */
void mqr__nat_on_connection(uv_stream_t *server, int status);

/* head.c */
extern const mqr__consumer_ops_t mqr__nat_consumer_ops;

#endif
