/* The native protocol's head (private to broker/native/): its connection, write and
 * listener state, and what its sources share.
 *
 *   listen.c  listeners, accepting, SIGPIPE
 *   conn.c    reading, handling frames in place, errors and closing, the clocks
 *   frames.c  each frame a client sends, turned into calls of the core
 *   write.c   writes gathered per connection and pass, deliveries, back-pressure
 *   head.c    the core's consumer and producer ops (core.h)
 *   manage.c  the MANAGE frame: management operations and their results */
#ifndef MQR_BROKER_NATIVE_H
#define MQR_BROKER_NATIVE_H

#include "../broker_int.h"
#include "../../common/grow.h"

typedef struct mqr__listener_s mqr__listener_t;
typedef struct mqr__conn_s mqr__conn_t;
typedef struct mqr__wreq_s mqr__wreq_t;

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

struct mqr__conn_s {
  uv_tcp_t tcp;
  mqr_broker_t *b;
  mqr__listener_t *l;
  mqr__conn_state_t state;
  uint8_t *rbuf; /* bytes read and not yet taken: rbuf[rpos..rlen) */
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
  uv_timer_t tick;        /* timeouts, heartbeats, paused peers gone */
  uint8_t scratch[16384]; /* decoding arena for control frames */
};

void mqr__nat_tick(uv_timer_t *t);

/* write.c */
mqr__wreq_t *mqr__nat_out(mqr__conn_t *c); /* this pass's write request; NULL: out of memory */
int mqr__nat_add_own(mqr__wreq_t *w, size_t off, size_t len);
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

/* frames.c */
void mqr__nat_handle_frame(mqr__conn_t *c, const uint8_t *body, size_t len);
/* manage.c: a MANAGE frame, carried out and answered. */
void mqr__nat_on_manage(mqr__conn_t *c, const mqr_frame_manage_t *m);

/* listen.c */
void mqr__nat_on_connection(uv_stream_t *server, int status);

/* head.c */
extern const mqr__consumer_ops_t mqr__nat_consumer_ops;
extern const mqr__producer_ops_t mqr__nat_producer_ops;

#endif
