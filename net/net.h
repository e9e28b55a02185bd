/* The connection layer: listeners, connections and their writes, whatever protocol they
 * carry. It names no protocol: a connection is a byte stream from a transport (TCP; the
 * table in transports.c) into a head (a protocol: the table in heads/heads.c), which the
 * listener's protocols and, when it has several, the connection's first bytes choose
 * (each head's sniff).
 *
 *   listen.c      listeners, accepting, SIGPIPE; the layer started and stopped
 *   conn.c        reading into pooled buffers, the head chosen, a head's frames taken in
 *                 place with a budget per pass, errors and closing, the clocks
 *   write.c       writes gathered per connection and pass, back-pressure
 *   tcp.c         the TCP transport
 *
 * Heads include this and the broker core's interface (broker/core.h), nothing else of
 * the broker. Everything here runs on the loop's thread. */
#ifndef MQR_NET_H
#define MQR_NET_H

#include "../broker/core.h"
#include "../common/grow.h"

typedef struct mqr__listener_s mqr__listener_t;
typedef struct mqr__conn_s mqr__conn_t;
typedef struct mqr__wreq_s mqr__wreq_t;

/* ---- writes --------------------------------------------------------------------------------- */

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
  uv_buf_t *bufs; /* the segments as buffers, for the transport (n_segs of them) */
  uint32_t cap_bufs;
  size_t total;
  struct mqr__wreq_s *next_free;
};

/* ---- transports and heads --------------------------------------------------------------------- */

/* A transport: how a connection's bytes cross its socket (c->tcp). It hands the bytes it
 * reads, as the head will read them, to mqr__conn_room and mqr__conn_received, and
 * writes what the head wrote (w->bufs), calling mqr__conn_written when done. */
typedef struct mqr__transport_s {
  const char *name; /* "tcp", "tls" */
  /* For a listener (each may be NULL): its state made from its config (l->ts; 0, or an
   * error with err set: the listener does not open), made again from the same files (a
   * reload: the old kept, and logged, when that fails), and freed. */
  int (*listen)(mqr__listener_t *l, mqr_error_t *err);
  void (*reload)(mqr__listener_t *l);
  void (*unlisten)(mqr__listener_t *l);
  bool secure; /* what crosses it is encrypted (TLS) */
  /* The identity the peer proved (a TLS client certificate's subject CN), or NULL. */
  const char *(*peer_name)(mqr__conn_t *c);
  /* A connection accepted on its listener: the transport's state (c->ts). 0 or MQR_ENOMEM. */
  int (*open)(mqr__conn_t *c);
  /* Reading starts, and stops (the connection held: a full address, its own output). 0,
   * or a libuv error (the connection closes). */
  int (*read_start)(mqr__conn_t *c);
  void (*read_stop)(mqr__conn_t *c);
  /* Writes w->bufs[0 .. w->n_segs) (w->total bytes): 0, then mqr__conn_written(w, status)
   * once; or a libuv error (nothing was written, w is the caller's again). */
  int (*write)(mqr__conn_t *c, mqr__wreq_t *w);
  /* The connection is closed (its socket too, every write called back): its state goes. */
  void (*release)(mqr__conn_t *c);
} mqr__transport_t;

/* The transports, by name (transports.c): NULL after the last. */
extern const mqr__transport_t *const mqr__transports[];
/* The transport of that name, or NULL. */
const mqr__transport_t *mqr__transport_named(const char *name);

/* A protocol head on the connection layer. Every call is on the loop's thread. */
typedef struct mqr__head_s {
  const char *name; /* in logs: "MQTT" */
  /* Its name and bit in a listener's protocols, and the options of its block there
   * (read with mqr_listener_option(c->l->cfg, def, i)). */
  const mqr_protocol_def_t *def;
  /* Whether p[0 .. n) (n >= 1), a connection's first bytes, start this protocol: 1 yes,
   * 0 no, -1 more bytes are needed to tell. */
  int (*sniff)(const uint8_t *p, size_t n);
  /* For the broker (each may be NULL): after the journal is open, what the head recovers
   * (MQTT's sessions; 0 or MQR_ENOMEM), called when a listener names it; each tick (250
   * ms); the broker's memory of it freed. Its state is *mqr__head_slot(b, head). */
  int (*ready)(mqr_broker_t *b);
  void (*tick_all)(mqr_broker_t *b, uint64_t now);
  void (*free)(mqr_broker_t *b);
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
  /* Work the head does in slices, a pass at a time, while its connection is held (an
   * HTTP answer made of many queues' figures): called once in each pass it asked for with
   * mqr__conn_schedule while held (may be NULL). */
  void (*resume)(mqr__conn_t *c);
  /* The connection closes: its session has ended; the head frees c->hs (may be NULL). */
  void (*release)(mqr__conn_t *c);
  /* A head that holds its producer back by a flow control of its own (AMQP's link credit)
   * sets this: a send that lands on a full BLOCK address does not stop the connection's
   * reads (its consumers' acknowledgements still come in); the head gives no more credit
   * while c->sess.producer.blocked_on, and unblocked is called once every such address
   * has room again. */
  bool credit_flow;
  void (*unblocked)(mqr__conn_t *c);
} mqr__head_t;

/* The heads (heads/heads.c): NULL after the last. */
extern const mqr__head_t *const mqr__heads[];

/* Where the head keeps its state for broker b (NULL until it makes it). */
void **mqr__head_slot(mqr_broker_t *b, const mqr__head_t *h);

/* ---- listeners and connections ----------------------------------------------------------------- */

struct mqr__listener_s {
  uv_tcp_t tcp;
  mqr_broker_t *b;
  const mqr_listener_config_t *cfg; /* = &own: a reload frees the config it came from */
  mqr_listener_config_t own;
  char *strings; /* own's name, host and prefixes */
  const mqr__transport_t *transport;
  void *ts; /* the transport's state for the listener */
  int port;
  uint32_t n_conns; /* its connections open now (max-connections) */
  uint32_t refused; /* connections refused for max-connections since the last warning */
  bool open;
  /* A connection for which there is no memory is accepted into spare and closed, so
   * that libuv, which stops accepting until uv_accept is called, keeps accepting and the
   * client sees the close; one that comes while spare is closing waits for the tick. */
  uv_tcp_t spare;
  bool refusing, accept_pending;
  bool over; /* the spare closes a connection over max-connections, not one without memory */
};

typedef enum { MQR__CONN_HANDSHAKE, MQR__CONN_OPEN, MQR__CONN_CLOSING } mqr__conn_state_t;

struct mqr__conn_s {
  uv_tcp_t tcp; /* the socket, under its transport */
  mqr_broker_t *b;
  struct mqr__net_s *net; /* the layer's state (b's) */
  mqr__listener_t *l;
  mqr__conn_state_t state; /* the head sets OPEN once its client has said hello */
  const mqr__transport_t *tr;
  void *ts;                /* the transport's state */
  const mqr__head_t *head; /* NULL until its first bytes tell it (a listener of several protocols) */
  void *hs;                /* the head's state */
  uint8_t *rbuf;           /* bytes read and not yet taken: rbuf[rpos..rlen) */
  size_t rpos, rlen, rcap;
  bool rbuf_pooled;
  bool reading;
  mqr__session_t sess; /* its consumers, and its producer (sess.producer.blocked_on: full addresses
                          whose BLOCK pauses it) */
  mqr__wreq_t *out;    /* this pass's writes */
  size_t in_flight;    /* bytes handed to the transport and not yet written */
  uint32_t writes;     /* writes not yet called back */
  bool dirty, resume, closed;
  bool big_out;  /* its writes grew past 1 MiB of own bytes: it takes a big request first (write.c) */
  bool deferred; /* stopped after its share of frames in a pass: goes on in the next */
  bool held;     /* its head waits for something (an authentication): no frame is taken, nothing read */
  uint64_t opened_ms, heard_ms, progress_ms; /* uv_now of: accept; last bytes read; last write done */
  struct mqr__conn_s *next_dirty, *next_resume;
  char peer[64];
  struct mqr__ws_s *ws;            /* WebSocket framing (ws.c), after an HTTP upgrade; else NULL */
  struct mqr__conn_s *next, *prev; /* the layer's list */
};

#define MQR__READ_CHUNK 65536
/* Write requests past 1 MiB of own bytes kept for reuse, at most (write.c). */
#define MQR__WREQ_BIG_KEEP 4
/* A stored message (or body) of at most this many bytes is copied into a write's own
 * bytes rather than written from the store: copying it costs less than an iovec of its
 * own, and a write of many small messages is then one buffer (libuv allocates an array
 * for more than four). */
#define MQR__COPY_MAX 512
#define MQR__FRAMES_PER_PASS 256 /* frames one connection has handled before the loop serves others */
#define MQR__TICK_MS 250         /* how often the layer looks at its connections' clocks */

/* ---- for heads: writing ------------------------------------------------------------------------ */

/* This pass's write request; NULL: out of memory. */
mqr__wreq_t *mqr__conn_out(mqr__conn_t *c);
/* A segment of w's own bytes [off, off + len): 0 or MQR_ENOMEM. */
int mqr__wreq_add_own(mqr__wreq_t *w, size_t off, size_t len);
/* A head's own bytes: room for n (NULL: no memory), written there, then committed (0 or
 * MQR_ENOMEM: then they are not sent). */
uint8_t *mqr__conn_reserve(mqr__conn_t *c, size_t n, size_t *off);
int mqr__conn_commit(mqr__conn_t *c, size_t off, size_t len);
/* A stored message's bytes [ptr, ptr + len) written as they are (copied when small);
 * hold: the write keeps a reference to m until done (once per message and write). 0 or
 * MQR_ENOMEM. */
int mqr__conn_add_stored(mqr__conn_t *c, mqr__msg_t *m, const uint8_t *ptr, size_t len, bool hold);
/* Whether its unwritten output is past max_pending_write (it gets no deliveries and is
 * not read from until that drains); or that, or closing. */
bool mqr__conn_output_full(const mqr__conn_t *c);
bool mqr__conn_paused(const mqr__conn_t *c);

/* ---- for heads: the connection ------------------------------------------------------------------- */

/* Ends the connection (its session ends; graceful: what is written still goes). */
void mqr__conn_close(mqr__conn_t *c, bool graceful);
/* Ends the connection for a client's fault, through its head (formatted text). */
__attribute__((format(printf, 3, 4))) void mqr__conn_fail(mqr__conn_t *c, int code, const char *fmt, ...);
/* The identity its transport proved (a verified TLS client certificate's CN), or NULL. */
static inline const char *mqr__conn_identity(mqr__conn_t *c) {
  return c->tr && c->tr->peer_name ? c->tr->peer_name(c) : NULL;
}
/* Whether its transport encrypts (TLS). */
static inline bool mqr__conn_secure(const mqr__conn_t *c) { return c->tr && c->tr->secure; }
/* Bytes read from and written to the broker's connections since it started. */
void mqr__net_bytes(mqr_broker_t *b, uint64_t *in, uint64_t *out);
/* The HTTP head's upgrade to a WebSocket (ws.c): from now on the connection's bytes are
 * WebSocket frames, each client frame of at most max_frame bytes, carrying h's stream; h
 * takes the connection (its open op) as at a connect, its handshake-timeout starting now.
 * What the head wrote before (the 101 answer) goes unframed; what the client sent behind
 * its upgrade request is taken as frames. 0, or MQR_ENOMEM (the caller closes). */
int mqr__conn_websocket(mqr__conn_t *c, const mqr__head_t *h, uint64_t max_frame);
/* The head of that protocol name ("mqtt"), or NULL. */
const mqr__head_t *mqr__head_named(const char *name);
/* The broker's connections open now that speak h (NULL: every one). */
uint32_t mqr__net_connections(mqr_broker_t *b, const mqr__head_t *h);
/* Handle its frames again next pass. */
void mqr__conn_schedule(mqr__conn_t *c);
/* The head waits (hold true: the frame it looked at stays unread, no more frames are
 * taken and nothing is read), or goes on (false: its frames are taken again next pass). */
void mqr__conn_hold(mqr__conn_t *c, bool hold);

/* ---- for transports -------------------------------------------------------------------------------- */

/* Where the next bytes read go (len 0: no memory; the read fails and the connection
 * closes), and that n of them came (n < 0: a libuv error or UV_EOF; the connection closes). */
uv_buf_t mqr__conn_room(mqr__conn_t *c);
void mqr__conn_received(mqr__conn_t *c, ssize_t n);
/* The room was taken and nothing came (a TLS read that made no plaintext): the buffer,
 * if it holds nothing, goes back, so that an idle connection keeps none. */
void mqr__conn_room_unused(mqr__conn_t *c);
/* A write the transport was given is done (status < 0: it failed, the connection closes). */
void mqr__conn_written(mqr__wreq_t *w, int status);

/* ---- inside the layer ------------------------------------------------------------------------------ */

/* The head's read buffer (room, and bytes added to rlen taken), under a WebSocket or not.
 * A full buffer grows (to what the head's room op says its frame needs) only when grow
 * is true: when the head was given all of it and could take none, not while it holds
 * whole frames it has yet to take; else the room is empty. */
uv_buf_t mqr__conn_head_room_in(mqr__conn_t *c, bool grow);
uv_buf_t mqr__conn_head_room(mqr__conn_t *c); /* (grow true: the transports' reads) */
void mqr__conn_head_received(mqr__conn_t *c);
/* Whether the connection takes no frames now (its producer blocked, its output full, its
 * pass's budget spent, its head holding): something will process it when that ends. */
bool mqr__conn_holding(const mqr__conn_t *c);
/* Whether its producer's block stops its reads (not for a head with credit_flow). */
static inline bool mqr__conn_blocked(const mqr__conn_t *c) {
  return c->sess.producer.blocked_on && !(c->head && c->head->credit_flow);
}
/* ws.c: frames read (room, received), fed to the head while it has room (pump, pending:
 * some wait); a write's frame around the head's bytes; the close frame; the end. */
uv_buf_t mqr__ws_room(mqr__conn_t *c);
void mqr__ws_received(mqr__conn_t *c, size_t n);
bool mqr__ws_pending(const mqr__conn_t *c);
void mqr__ws_pump(mqr__conn_t *c);
int mqr__ws_frame(mqr__conn_t *c, mqr__wreq_t *w);
void mqr__ws_bye(mqr__conn_t *c);
void mqr__ws_free(mqr__conn_t *c);

/* The layer's state, b->net. */
struct mqr__net_s {
  mqr__listener_t *listeners;
  uint32_t n_listeners;
  mqr__conn_t *conns;
  uint32_t n_conns;
  mqr__conn_t *dirty, *resume; /* connections with writes, or frames to handle, next pass */
  mqr__wreq_t *wreq_free;      /* write requests keep their arrays between uses */
  uint32_t n_wreq_free;
  mqr__wreq_t *wreq_big; /* and those whose own bytes grew past 1 MiB, apart (MQR__WREQ_BIG_KEEP at most) */
  uint32_t n_wreq_big;
  void *rbuf_free; /* read buffers of MQR__READ_CHUNK bytes */
  uint32_t n_rbuf_free;
  uv_timer_t tick;              /* timeouts, heartbeats, paused peers gone */
  void *heads[8];               /* each head's state, in the order of mqr__heads */
  uint32_t protocols;           /* the protocols some listener names */
  uint64_t bytes_in, bytes_out; /* read from and written to connections, since start */
};

static inline struct mqr__net_s *mqr__net(const mqr_broker_t *b) { return *mqr__net_slot(b); }

void mqr__conn_process(mqr__conn_t *c);
void mqr__conn_maybe_finish_close(mqr__conn_t *c);
void mqr__conn_close_cb(uv_handle_t *h);
void mqr__wreq_recycle(mqr_broker_t *b, mqr__wreq_t *w);
void mqr__net_tick(uv_timer_t *t);
void mqr__net_on_connection(uv_stream_t *server, int status);
/* The connection speaks h: its state made (false: no memory, the connection closing). A
 * listener of one protocol sets it at accept; of several, the first bytes tell. */
bool mqr__conn_set_head(mqr__conn_t *c, const mqr__head_t *h);
/* The connection's session's producer ops: resume reads on, sent goes to the head. */
extern const mqr__producer_ops_t mqr__conn_producer_ops;

#endif
