/* The broker's network side: listeners, connections, frames in place in pooled read
 * buffers, and writes gathered per connection and handed to libuv once per loop pass (in
 * the next pass's idle phase), a delivery being a small head and the stored message's
 * own bytes.
 *
 * A bad frame (too long, cut, unknown, not Avro) gets an ERROR frame and the connection
 * is closed; nothing of it stays in the broker. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>

#include "broker_int.h"

static void conn_close(mqr__conn_t *c, bool graceful);
static void process(mqr__conn_t *c);
__attribute__((format(printf, 5, 6))) static void send_error(mqr__conn_t *c, int code, int64_t receipt, bool fatal,
                                                             const char *fmt, ...);
static void start_reading(mqr__conn_t *c);

/* ---- read buffers ------------------------------------------------------------------------ */

static uint8_t *rbuf_get(mqr_broker_t *b) {
  void *p = b->rbuf_free;
  if (p) {
    b->rbuf_free = *(void **)p;
    b->n_rbuf_free--;
    return p;
  }
  return mqr_malloc(MQR__READ_CHUNK);
}

static void rbuf_release(mqr__conn_t *c) {
  mqr_broker_t *b = c->b;
  if (c->rbuf == NULL) return;
  if (c->rbuf_pooled && b->n_rbuf_free < 256) {
    *(void **)c->rbuf = b->rbuf_free;
    b->rbuf_free = c->rbuf;
    b->n_rbuf_free++;
  } else {
    mqr_free(c->rbuf);
  }
  c->rbuf = NULL;
  c->rpos = c->rlen = c->rcap = 0;
}

/* ---- writes ------------------------------------------------------------------------------- */

static mqr__wreq_t *out(mqr__conn_t *c) {
  mqr_broker_t *b = c->b;
  if (c->out) return c->out;
  mqr__wreq_t *w = b->wreq_free;
  if (w) {
    b->wreq_free = w->next_free;
    b->n_wreq_free--;
  } else if ((w = mqr_calloc(1, sizeof *w)) == NULL) {
    return NULL;
  }
  w->conn = c;
  w->req.data = w;
  c->out = w;
  if (!c->dirty) {
    c->dirty = true;
    c->next_dirty = b->dirty;
    b->dirty = c;
    mqr__broker_wake(b);
  }
  return w;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
  if (need <= *cap) return true;
  uint32_t ncap = *cap ? *cap : 16;
  while (ncap < need) ncap *= 2;
  void *np = mqr_realloc(*p, ncap * size);
  if (np == NULL) return false;
  *p = np;
  *cap = ncap;
  return true;
}

/* A segment of the request's own bytes [off, off + len): joined to the last when they
 * touch. */
static int add_own(mqr__wreq_t *w, size_t off, size_t len) {
  if (w->n_segs && w->segs[w->n_segs - 1].ptr == NULL &&
      w->segs[w->n_segs - 1].off + w->segs[w->n_segs - 1].len == off) {
    w->segs[w->n_segs - 1].len += len;
  } else {
    if (!grow((void **)&w->segs, &w->cap_segs, w->n_segs + 1, sizeof *w->segs)) return MQR_ENOMEM;
    w->segs[w->n_segs++] = (mqr__seg_t){NULL, off, len};
  }
  w->total += len;
  return 0;
}

/* Appends a frame to this pass's write: MQR_ENOMEM, or MQR_ELIMIT when it is longer than
 * the max_frame the client declared (then nothing was added). */
static int write_frame(mqr__conn_t *c, const mqr_frame_t *f) {
  mqr__wreq_t *w = out(c);
  if (w == NULL) return MQR_ENOMEM;
  mqr_avro_buf_t buf = {w->bytes, w->n_bytes, w->cap_bytes, true};
  size_t off = buf.len;
  int rc = mqr_frame_encode(f, &buf, NULL);
  w->bytes = buf.data;
  w->cap_bytes = buf.cap;
  if (rc) return rc;
  if (buf.len - off - MQR_FRAME_HEADER > c->peer_max_frame) return MQR_ELIMIT;
  if ((rc = add_own(w, off, buf.len - off)) != 0) return rc;
  w->n_bytes = buf.len;
  return 0;
}

/* An answer the client waits for (CONNECTED, RECEIPT, SUBSCRIBED, an ERROR...): if it
 * cannot be written, the client must not wait forever for it, so the connection closes
 * (its consumers' deliveries go back to their queues). */
static void reply_failed(mqr__conn_t *c, int type, int rc) {
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a %s frame could not be written (%s); closing it",
           (long long)c->session, c->peer, mqr_frame_type_name(type), mqr_strerror(rc));
  conn_close(c, false);
}

static void reply(mqr__conn_t *c, const mqr_frame_t *f) {
  int rc = write_frame(c, f);
  if (rc) reply_failed(c, f->type, rc);
}

/* A connection whose answers it does not read (receipts, errors) would make its output
 * grow: past max_pending_write unwritten, it gets no deliveries and is not read from until
 * that drains. */
static bool output_full(const mqr__conn_t *c) {
  return c->in_flight + (c->out ? c->out->total : 0) > c->b->opt.max_pending_write;
}

bool mqr__conn_paused(const mqr__conn_t *c) { return c->state == MQR__CONN_CLOSING || output_full(c); }

int mqr__conn_deliver(mqr__conn_t *c, int64_t subscription, mqr__entry_t *e) {
  if ((uint64_t)e->msg->len + MQR_MESSAGE_HEADER_MAX - MQR_FRAME_HEADER > c->peer_max_frame) {
    uint8_t head[MQR_MESSAGE_HEADER_MAX];
    size_t hl = mqr_message_head(head, subscription, e->delivery, e->delivery_count, e->msg->len);
    if (hl - MQR_FRAME_HEADER + e->msg->len > c->peer_max_frame) return MQR_ELIMIT;
  }
  mqr__wreq_t *w = out(c);
  if (w == NULL) return MQR_ENOMEM;
  if (w->cap_bytes - w->n_bytes < MQR_MESSAGE_HEADER_MAX) {
    size_t ncap = w->cap_bytes ? w->cap_bytes * 2 : 4096;
    uint8_t *nb = mqr_realloc(w->bytes, ncap);
    if (nb == NULL) return MQR_ENOMEM;
    w->bytes = nb;
    w->cap_bytes = ncap;
  }
  if (!grow((void **)&w->msgs, &w->cap_msgs, w->n_msgs + 1, sizeof *w->msgs) ||
      !grow((void **)&w->segs, &w->cap_segs, w->n_segs + 2, sizeof *w->segs))
    return MQR_ENOMEM;
  size_t off = w->n_bytes;
  size_t hl = mqr_message_head(w->bytes + off, subscription, e->delivery, e->delivery_count, e->msg->len);
  w->n_bytes += hl;
  add_own(w, off, hl); /* cannot fail: room for two segments was made above */
  w->segs[w->n_segs++] = (mqr__seg_t){e->msg->data, 0, e->msg->len};
  w->total += e->msg->len;
  e->msg->refs++;
  w->msgs[w->n_msgs++] = e->msg;
  return 0;
}

void mqr__conn_too_big(mqr_broker_consumer_t *k, const mqr__entry_t *e) {
  mqr__conn_t *c = k->conn;
  mqr_str_t q = mqr_queue_name(k->bq->q);
  send_error(c, MQR_ELIMIT, k->subscription, false,
             "message %lld (a frame of %u bytes) is more than the max_frame %u this connection declared: it stays at "
             "the head of queue '%.*s' until a consumer that can take it does",
             (long long)e->msg->id, (unsigned)(e->msg->len + MQR_MESSAGE_HEADER_MAX - MQR_FRAME_HEADER),
             c->peer_max_frame, (int)q.len, q.ptr);
}

/* A request done with: its messages released, its arrays kept for the next. */
static void wreq_recycle(mqr_broker_t *b, mqr__wreq_t *w) {
  for (uint32_t i = 0; i < w->n_msgs; i++) mqr__msg_release(b, w->msgs[i]);
  w->n_msgs = w->n_segs = 0;
  w->n_bytes = w->total = 0;
  w->conn = NULL;
  if (b->n_wreq_free >= 64 || w->cap_bytes > (1u << 20)) {
    mqr_free(w->segs);
    mqr_free(w->bytes);
    mqr_free(w->msgs);
    mqr_free(w->bufs);
    mqr_free(w);
    return;
  }
  w->next_free = b->wreq_free;
  b->wreq_free = w;
  b->n_wreq_free++;
}

static void close_cb(uv_handle_t *h) {
  mqr__conn_t *c = h->data;
  mqr_broker_t *b = c->b;
  /* Out of the lists the next pass walks: it may have been put on them in the pass that
   * closed it (a drained address resuming it, an answer written to it). */
  for (mqr__conn_t **pp = &b->dirty; *pp; pp = &(*pp)->next_dirty)
    if (*pp == c) {
      *pp = c->next_dirty;
      break;
    }
  for (mqr__conn_t **pp = &b->resume; *pp; pp = &(*pp)->next_resume)
    if (*pp == c) {
      *pp = c->next_resume;
      break;
    }
  if (c->prev)
    c->prev->next = c->next;
  else
    b->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  b->n_conns--;
  mqr_free(c);
  mqr__broker_handle_closed(b);
}

static void maybe_finish_close(mqr__conn_t *c) {
  if (c->state == MQR__CONN_CLOSING && !c->closed && c->writes == 0 && c->out == NULL) {
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, close_cb);
  }
}

static void redispatch(mqr__conn_t *c) {
  for (mqr_broker_consumer_t *k = c->consumers; k; k = k->conn_next) mqr__dispatch(k->bq);
}

static void write_cb(uv_write_t *req, int status) {
  mqr__wreq_t *w = req->data;
  mqr__conn_t *c = w->conn;
  mqr_broker_t *b = c->b;
  bool was_paused = mqr__conn_paused(c);
  c->progress_ms = uv_now(b->loop);
  c->in_flight -= w->total;
  c->writes--;
  wreq_recycle(b, w);
  if (status < 0 && c->state != MQR__CONN_CLOSING) {
    mqr__log(b, MQR_LOG_INFO, "connection %lld (%s): write failed: %s", (long long)c->session, c->peer,
             uv_strerror(status));
    conn_close(c, false);
  }
  if (c->state == MQR__CONN_CLOSING) {
    maybe_finish_close(c);
    return;
  }
  if (was_paused && !mqr__conn_paused(c)) {
    redispatch(c);
    if (!c->reading && c->blocked_on == 0) process(c); /* held for its output: read on */
  }
}

static void flush_conn(mqr__conn_t *c) {
  mqr__wreq_t *w = c->out;
  c->out = NULL;
  if (w == NULL) return;
  if (w->n_segs == 0 || c->closed) {
    wreq_recycle(c->b, w);
    return;
  }
  if (!grow((void **)&w->bufs, &w->cap_bufs, w->n_segs, sizeof *w->bufs)) {
    wreq_recycle(c->b, w);
    conn_close(c, false);
    return;
  }
  for (uint32_t i = 0; i < w->n_segs; i++) {
    const mqr__seg_t *s = &w->segs[i];
    w->bufs[i] = uv_buf_init((char *)(s->ptr ? s->ptr : w->bytes + s->off), (unsigned)s->len);
  }
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->n_segs, write_cb);
  if (rc < 0) {
    wreq_recycle(c->b, w);
    conn_close(c, false);
    return;
  }
  if (c->writes == 0) c->progress_ms = uv_now(c->b->loop); /* its clock starts with the wait */
  c->in_flight += w->total;
  c->writes++;
}

void mqr__server_flush(mqr_broker_t *b) {
  /* Producers a drained address lets go: what they sent meanwhile is in their buffers. */
  mqr__conn_t *list = b->resume;
  b->resume = NULL;
  while (list) {
    mqr__conn_t *c = list;
    list = c->next_resume;
    c->resume = false;
    c->deferred = false;
    if (c->state == MQR__CONN_CLOSING || c->blocked_on) continue;
    process(c);
  }
  while (b->dirty) {
    mqr__conn_t *c = b->dirty;
    b->dirty = c->next_dirty;
    c->dirty = false;
    flush_conn(c);
    if (c->state == MQR__CONN_CLOSING) maybe_finish_close(c);
  }
}

static void schedule(mqr__conn_t *c) {
  if (c->resume || c->state == MQR__CONN_CLOSING) return;
  c->resume = true;
  c->next_resume = c->b->resume;
  c->b->resume = c;
  mqr__broker_wake(c->b);
}

void mqr__conn_resume(mqr__conn_t *c) {
  if (c->blocked_on) c->blocked_on--;
  if (c->blocked_on == 0) schedule(c);
}

/* ---- errors and closing --------------------------------------------------------------------- */

__attribute__((format(printf, 5, 6))) static void send_error(mqr__conn_t *c, int code, int64_t receipt, bool fatal,
                                                             const char *fmt, ...) {
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  mqr_frame_t f = {MQR_FRAME_ERROR, {.error = {code, mqr_str(mqr_err_name(code)), mqr_str(text), receipt, fatal}}};
  reply(c, &f);
  if (fatal) {
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): %s: %s; closing it", (long long)c->session, c->peer,
             mqr_err_name(code), text);
    conn_close(c, true);
  }
}

static void conn_close(mqr__conn_t *c, bool graceful) {
  if (c->state == MQR__CONN_CLOSING) return;
  c->state = MQR__CONN_CLOSING;
  if (c->reading) uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
  /* Its consumers go: what they had not acknowledged returns to the queues. */
  while (c->consumers) {
    mqr_broker_consumer_t *k = c->consumers;
    c->consumers = k->conn_next;
    mqr__consumer_close(k);
  }
  mqr__acct_unblock_conn(c->b, c);
  rbuf_release(c);
  if (!graceful && c->out) { /* nothing more will reach it */
    wreq_recycle(c->b, c->out);
    c->out = NULL;
  }
  maybe_finish_close(c);
}

/* ---- frames ----------------------------------------------------------------------------------- */

static mqr_broker_consumer_t *find_sub(mqr__conn_t *c, int64_t id) {
  for (mqr_broker_consumer_t *k = c->consumers; k; k = k->conn_next)
    if (k->subscription == id) return k;
  return NULL;
}

/* Names are UTF-8, as every Avro reader of the frames they are sent on in requires. */
static bool utf8_ok(mqr__conn_t *c, mqr_str_t s, const char *what, int64_t receipt, bool fatal) {
  size_t bad = mqr_utf8_check(s.ptr, s.len);
  if (bad == s.len) return true;
  send_error(c, MQR_EINVAL, receipt, fatal, "the %s is not valid UTF-8 (byte %zu of %zu is 0x%02x)", what, bad, s.len,
             (uint8_t)s.ptr[bad]);
  return false;
}

static void on_send(mqr__conn_t *c, const uint8_t *body, size_t len) {
  mqr_broker_t *b = c->b;
  mqr_send_view_t v;
  mqr_error_t err;
  int rc = mqr_frame_send_view(body, len, &v, &err);
  if (rc) {
    send_error(c, rc, 0, true, "bad SEND frame: %s", err.message);
    return;
  }
  /* the view checked that every string is UTF-8 */
  mqr__send_t s = {v.address,
                   mqr_proto_rt_to_routing(v.routing_type),
                   v.durable,
                   v.duplicate_id,
                   v.tail,
                   v.tail_len,
                   NULL,
                   NULL,
                   0,
                   {NULL, 0},
                   &c->l->cfg->prefixes};
  mqr__acct_t *blocked = NULL;
  mqr_broker_receipt_t r;
  if ((rc = mqr__do_send(b, &s, &r, &blocked, &err)) != 0) {
    send_error(c, rc, v.receipt, false, "%s", err.message);
    return;
  }
  if (v.receipt) {
    mqr_frame_t f = {MQR_FRAME_RECEIPT, {.receipt = {v.receipt, r.status, (int32_t)r.queues}}};
    reply(c, &f);
  }
  if (blocked) mqr__acct_block(blocked, c);
}

#define MAX_SUBSCRIPTIONS 1024 /* per connection */

static void on_subscribe(mqr__conn_t *c, const mqr_frame_subscribe_t *s) {
  uint32_t n = 0;
  for (mqr_broker_consumer_t *k = c->consumers; k; k = k->conn_next) n++;
  if (n >= MAX_SUBSCRIPTIONS) {
    send_error(c, MQR_ELIMIT, s->subscription, false, "a connection has at most %d subscriptions", MAX_SUBSCRIPTIONS);
    return;
  }
  if (find_sub(c, s->subscription)) {
    send_error(c, MQR_EINVAL, s->subscription, false, "subscription %lld is already in use on this connection",
               (long long)s->subscription);
    return;
  }
  if (!utf8_ok(c, s->target, "target", s->subscription, false) ||
      !utf8_ok(c, s->queue, "queue", s->subscription, false))
    return;
  if (s->routing_type < MQR_PROTO_RT_NONE || s->routing_type > MQR_PROTO_RT_MULTICAST || s->credit < 0) {
    send_error(c, MQR_EINVAL, s->subscription, false, "routing type %d or credit %d out of range", s->routing_type,
               s->credit);
    return;
  }
  /* The listener's prefixes apply to a consumer's target as to a send's address:
   * "anycast://orders" is the address orders, ANYCAST. */
  mqr_str_t target = s->target;
  int rt = mqr_proto_rt_to_routing(s->routing_type);
  mqr_prefixes_strip(&c->l->cfg->prefixes, &target, &rt);
  mqr_broker_consumer_t *k;
  mqr_error_t err;
  int rc = mqr__subscribe(c->b, target, rt, s->queue, (uint32_t)s->credit, &k, &err);
  if (rc) {
    send_error(c, rc, s->subscription, false, "%s", err.message);
    return;
  }
  k->conn = c;
  k->subscription = s->subscription;
  k->conn_next = c->consumers;
  c->consumers = k;
  mqr_frame_t f = {MQR_FRAME_SUBSCRIBED, {.subscribed = {s->subscription, mqr_queue_name(k->bq->q)}}};
  reply(c, &f);
  if (c->state == MQR__CONN_CLOSING) return;
  mqr__dispatch(k->bq);
}

static void on_unsubscribe(mqr__conn_t *c, int64_t id) {
  for (mqr_broker_consumer_t **pp = &c->consumers; *pp; pp = &(*pp)->conn_next)
    if ((*pp)->subscription == id) {
      mqr_broker_consumer_t *k = *pp;
      *pp = k->conn_next;
      mqr__consumer_close(k);
      return;
    }
  send_error(c, MQR_ENOSUB, id, false, "no subscription %lld on this connection", (long long)id);
}

typedef struct {
  mqr_frame_address_info_t *a;
  uint32_t n, cap;
  mqr_frame_queue_info_t *q;
  uint32_t nq, capq;
  char (*types)[24];
} query_t;

static int collect(mqr_address_t *a, void *arg) {
  query_t *x = arg;
  if (mqr_address_flags(a) & MQR_ADDRESS_INTERNAL) return 0;
  if (!grow((void **)&x->a, &x->cap, x->n + 1, sizeof *x->a)) return MQR_ENOMEM;
  uint32_t nq = mqr_address_queue_count(a);
  if (!grow((void **)&x->q, &x->capq, x->nq + nq, sizeof *x->q)) return MQR_ENOMEM;
  const mqr__acct_t *acct = mqr_address_data(a);
  x->a[x->n] = (mqr_frame_address_info_t){mqr_address_name(a),
                                          {NULL, 0},
                                          (int64_t)mqr_address_routed(a),
                                          (int64_t)mqr_address_unrouted(a),
                                          acct ? acct->bytes : 0};
  x->n++;
  for (uint32_t i = 0; i < nq; i++) {
    mqr_queue_t *q = mqr_address_queue(a, i);
    const mqr__bq_t *bq = mqr_queue_data(q);
    x->q[x->nq++] = (mqr_frame_queue_info_t){mqr_queue_name(q),
                                             mqr_address_name(a),
                                             mqr_proto_rt_from_routing(mqr_queue_routing_type(q)),
                                             bq ? (int64_t)bq->store.depth : 0,
                                             bq ? (int64_t)bq->in_flight : 0,
                                             (int32_t)mqr_queue_consumer_count(q),
                                             bq ? (int64_t)bq->enqueued : 0,
                                             bq ? (int64_t)bq->acked : 0};
  }
  return 0;
}

static void on_query(mqr__conn_t *c, int64_t id) {
  query_t x = {0};
  int rc = mqr_router_foreach_address(&c->b->router, collect, &x);
  char *types = rc == 0 ? mqr_malloc((size_t)x.n * 24 + 1) : NULL;
  if (rc == 0 && types == NULL) rc = MQR_ENOMEM;
  for (uint32_t i = 0; rc == 0 && i < x.n; i++) {
    mqr_address_t *a = mqr_router_find_address(&c->b->router, x.a[i].name);
    int n = a ? mqr_routing_set_format(mqr_address_routing_types(a), types + i * 24, 24) : 0;
    x.a[i].routing_types = mqr_str_n(types + i * 24, n > 0 ? (size_t)n : 0);
  }
  if (rc) {
    send_error(c, rc, id, false, "the query failed: %s", mqr_strerror(rc));
  } else {
    mqr_broker_stats_t st;
    mqr_broker_stats(c->b, &st);
    mqr_frame_t f = {MQR_FRAME_QUERY_RESULT,
                     {.query_result = {id, {x.a, x.n}, {x.q, x.nq}, (int32_t)st.connections, (int64_t)st.dropped}}};
    rc = write_frame(c, &f);
    if (rc == MQR_ELIMIT)
      send_error(c, MQR_ELIMIT, id, false,
                 "the query's result (%u addresses, %u queues) is more than the max_frame %u this connection declared",
                 x.n, x.nq, c->peer_max_frame);
    else if (rc)
      reply_failed(c, f.type, rc);
  }
  mqr_free(types);
  mqr_free(x.a);
  mqr_free(x.q);
}

static void handle_frame(mqr__conn_t *c, const uint8_t *body, size_t len) {
  mqr_broker_t *b = c->b;
  int type = len && body[0] < 0x80 ? (body[0] >> 1) ^ -(body[0] & 1) : -1;
  if (c->state == MQR__CONN_HANDSHAKE && type != MQR_FRAME_CONNECT) {
    send_error(c, MQR_EPROTOCOL, 0, true, "the first frame must be CONNECT, not %s", mqr_frame_type_name(type));
    return;
  }
  if (type == MQR_FRAME_SEND) {
    on_send(c, body, len);
    return;
  }
  mqr_frame_t f;
  mqr_error_t err;
  mqr_avro_arena_t arena = {b->scratch, sizeof b->scratch, 0};
  int rc = mqr_frame_decode(body, len, &f, &arena, &err);
  if (rc) {
    send_error(c, rc, 0, true, "bad frame: %s", err.message);
    return;
  }
  mqr_broker_consumer_t *k;
  switch (f.type) {
  case MQR_FRAME_CONNECT:
    if (c->state != MQR__CONN_HANDSHAKE) {
      send_error(c, MQR_EPROTOCOL, 0, true, "CONNECT twice");
    } else if (f.u.connect.version != MQR_PROTOCOL_VERSION) {
      send_error(c, MQR_EPROTOCOL, 0, true, "protocol version %d is not supported (%d is)", f.u.connect.version,
                 MQR_PROTOCOL_VERSION);
    } else if (f.u.connect.max_frame < MQR__MIN_PEER_FRAME) {
      send_error(c, MQR_EINVAL, 0, true, "max_frame %d is less than the %d bytes every client must take",
                 f.u.connect.max_frame, MQR__MIN_PEER_FRAME);
    } else if (!utf8_ok(c, f.u.connect.client_id, "client id", 0, true)) {
      return;
    } else {
      c->state = MQR__CONN_OPEN;
      c->peer_max_frame = (uint32_t)f.u.connect.max_frame;
      mqr_frame_t r = {MQR_FRAME_CONNECTED,
                       {.connected = {MQR_PROTOCOL_VERSION, mqr_str(b->opt.server_name), c->session,
                                      (int32_t)c->l->cfg->max_frame}}};
      reply(c, &r);
      mqr__log(b, MQR_LOG_DEBUG, "connection %lld (%s): client '%.*s' connected", (long long)c->session, c->peer,
               (int)f.u.connect.client_id.len, f.u.connect.client_id.ptr);
    }
    return;
  case MQR_FRAME_SUBSCRIBE: on_subscribe(c, &f.u.subscribe); return;
  case MQR_FRAME_ACK:
    if ((k = find_sub(c, f.u.ack.subscription)) == NULL)
      send_error(c, MQR_ENOSUB, f.u.ack.subscription, false, "no subscription %lld on this connection",
                 (long long)f.u.ack.subscription);
    else if (mqr_broker_ack(k, f.u.ack.delivery, f.u.ack.cumulative) != 0)
      send_error(c, MQR_ENOTFOUND, f.u.ack.subscription, false, "delivery %lld of subscription %lld is not outstanding",
                 (long long)f.u.ack.delivery, (long long)f.u.ack.subscription);
    return;
  case MQR_FRAME_CREDIT:
    if ((k = find_sub(c, f.u.credit.subscription)) == NULL)
      send_error(c, MQR_ENOSUB, f.u.credit.subscription, false, "no subscription %lld on this connection",
                 (long long)f.u.credit.subscription);
    else if (f.u.credit.messages > 0)
      mqr_broker_credit(k, (uint32_t)f.u.credit.messages);
    return;
  case MQR_FRAME_UNSUBSCRIBE: on_unsubscribe(c, f.u.unsubscribe.subscription); return;
  case MQR_FRAME_QUERY: on_query(c, f.u.query.query); return;
  case MQR_FRAME_DISCONNECT:
    mqr__log(b, MQR_LOG_DEBUG, "connection %lld (%s): disconnected", (long long)c->session, c->peer);
    conn_close(c, true);
    return;
  case MQR_FRAME_PING: {
    mqr_frame_t r = {MQR_FRAME_PONG, {.pong = {f.u.ping.token}}};
    reply(c, &r);
    return;
  }
  case MQR_FRAME_PONG: return; /* hearing it was the point (read_cb) */
  default:
    send_error(c, MQR_EPROTOCOL, 0, true, "a %s frame is not one a client sends", mqr_frame_type_name(f.type));
    return;
  }
}

/* Takes every whole frame in the read buffer, while the connection may go on. */
static void process(mqr__conn_t *c) {
  uint32_t budget = MQR__FRAMES_PER_PASS; /* then the loop serves others, and this goes on next pass */
  while (c->state != MQR__CONN_CLOSING && c->blocked_on == 0 && c->rbuf && !output_full(c)) {
    if (budget-- == 0) {
      c->deferred = true;
      schedule(c);
      break;
    }
    uint32_t body = 0;
    int rc = mqr_frame_peek(c->rbuf + c->rpos, c->rlen - c->rpos, c->l->cfg->max_frame, &body);
    if (rc == MQR_ELIMIT) {
      const uint8_t *h = c->rbuf + c->rpos;
      send_error(c, MQR_ELIMIT, 0, true, "a frame of %u bytes is more than max-frame-size %u",
                 (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3], c->l->cfg->max_frame);
      return;
    }
    if (rc == 0) break;
    size_t at = c->rpos;
    c->rpos += MQR_FRAME_HEADER + body;
    handle_frame(c, c->rbuf + at + MQR_FRAME_HEADER, body);
  }
  if (c->state == MQR__CONN_CLOSING) return;
  if (c->rbuf && c->rpos == c->rlen) rbuf_release(c); /* nothing held: the buffer goes back */
  bool hold = c->blocked_on || output_full(c) || c->deferred;
  if (!hold && !c->reading) {
    c->reading = true;
    c->heard_ms = uv_now(c->b->loop); /* it was not listened to while held */
    start_reading(c);
  } else if (hold && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mqr__conn_t *c = h->data;
  *buf = uv_buf_init(NULL, 0);
  if (c->rbuf == NULL) {
    if ((c->rbuf = rbuf_get(c->b)) == NULL) return; /* UV_ENOBUFS: the read fails, the connection closes */
    c->rbuf_pooled = true;
    c->rcap = MQR__READ_CHUNK;
    c->rpos = c->rlen = 0;
  }
  if (c->rpos && c->rlen == c->rcap) { /* make room at the end */
    memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
    c->rlen -= c->rpos;
    c->rpos = 0;
  }
  if (c->rlen == c->rcap) {
    /* A frame longer than the buffer: one of its size (the header said how long, and that
     * it is within max-frame-size). */
    uint32_t body = 0;
    mqr_frame_peek(c->rbuf, c->rlen, UINT32_MAX, &body);
    size_t need = (size_t)body + MQR_FRAME_HEADER;
    uint8_t *nb = mqr_malloc(need);
    if (nb == NULL) return;
    memcpy(nb, c->rbuf, c->rlen);
    size_t keep = c->rlen;
    rbuf_release(c);
    c->rbuf = nb;
    c->rbuf_pooled = false;
    c->rcap = need;
    c->rlen = keep;
  }
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  mqr__conn_t *c = s->data;
  if (nread < 0) {
    if (nread != UV_EOF)
      mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): %s", (long long)c->session, c->peer, uv_strerror((int)nread));
    else
      mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): closed by the peer", (long long)c->session, c->peer);
    conn_close(c, false);
    return;
  }
  if (nread == 0) return;
  c->heard_ms = uv_now(c->b->loop);
  c->ping_out = false;
  c->rlen += (size_t)nread;
  c->reading = true;
  process(c);
}

static void start_reading(mqr__conn_t *c) {
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0) conn_close(c, false);
}

/* ---- clocks: timeouts, heartbeats, peers that went away -------------------------------------- */

/* Whether the peer has closed or reset the connection, asked of the kernel: a connection
 * the broker does not read from (paused by BLOCK, or by its own unread output) would
 * otherwise never hear of it. */
static bool peer_gone(mqr__conn_t *c) {
  uv_os_fd_t fd;
  struct tcp_info ti;
  socklen_t n = sizeof ti;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &n) != 0) return false;
  return ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE;
}

static void tick_conn(mqr__conn_t *c, uint64_t now) {
  const mqr_listener_config_t *cfg = c->l->cfg;
  if (!c->reading && !c->deferred && peer_gone(c)) {
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): closed by the peer while %s", (long long)c->session, c->peer,
             c->blocked_on ? "held by a full address" : "not read from");
    conn_close(c, false);
    return;
  }
  if (c->state == MQR__CONN_HANDSHAKE) {
    if (cfg->handshake_timeout_ms && now - c->opened_ms >= cfg->handshake_timeout_ms)
      send_error(c, MQR_ETIMEOUT, 0, true, "no CONNECT within handshake-timeout (%u ms)", cfg->handshake_timeout_ms);
    return;
  }
  if (cfg->idle_timeout_ms == 0) return;
  if (c->writes && now - c->progress_ms >= cfg->idle_timeout_ms) {
    /* Nothing it was sent has been taken for a whole idle-timeout: it is not reading. */
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): took none of %zu bytes written to it in %u ms; closing it",
             (long long)c->session, c->peer, c->in_flight, cfg->idle_timeout_ms);
    conn_close(c, false);
    return;
  }
  if (!c->reading) return; /* the broker holds it: its silence is not its own */
  uint64_t silent = now - c->heard_ms;
  if (silent >= cfg->idle_timeout_ms) {
    send_error(c, MQR_ETIMEOUT, 0, true, "nothing heard for idle-timeout (%u ms)", cfg->idle_timeout_ms);
  } else if (silent >= cfg->idle_timeout_ms / 2 && !c->ping_out) {
    mqr_frame_t f = {MQR_FRAME_PING, {.ping = {(int64_t)now}}};
    c->ping_out = true;
    reply(c, &f);
  }
}

static void on_connection(uv_stream_t *server, int status);

void mqr__server_tick(uv_timer_t *t) {
  mqr_broker_t *b = t->data;
  uint64_t now = uv_now(b->loop);
  for (uint32_t i = 0; i < b->n_listeners; i++) {
    mqr__listener_t *l = &b->listeners[i];
    if (l->open && l->accept_pending && !l->refusing) {
      l->accept_pending = false;
      on_connection((uv_stream_t *)&l->tcp, 0);
    }
  }
  for (mqr__conn_t *c = b->conns, *next; c; c = next) {
    next = c->next; /* closing only marks it: it leaves the list in its close callback */
    if (c->state != MQR__CONN_CLOSING) tick_conn(c, now);
  }
}

/* ---- listeners --------------------------------------------------------------------------------- */

static void refuse_closed(uv_handle_t *h) {
  mqr__listener_t *l = h->data;
  l->refusing = false;
  mqr__broker_handle_closed(l->b);
}

/* No memory for a new connection: it is closed at once (see spare). */
static void refuse(mqr__listener_t *l) {
  mqr_broker_t *b = l->b;
  if (l->refusing) {
    l->accept_pending = true;
    return;
  }
  l->refusing = true;
  uv_tcp_init(b->loop, &l->spare);
  l->spare.data = l;
  b->open_handles++;
  if (uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&l->spare) == 0)
    mqr__log(b, MQR_LOG_WARN, "listener '%s': out of memory for a new connection; closed it", l->cfg->name);
  uv_close((uv_handle_t *)&l->spare, refuse_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  mqr__listener_t *l = server->data;
  mqr_broker_t *b = l->b;
  if (status < 0 || b->closing) return;
  mqr__conn_t *c = mqr_calloc(1, sizeof *c);
  if (c == NULL) {
    refuse(l);
    return;
  }
  uv_tcp_init(b->loop, &c->tcp);
  c->tcp.data = c;
  c->b = b;
  c->l = l;
  c->session = ++b->next_session;
  c->state = MQR__CONN_HANDSHAKE;
  c->peer_max_frame = MQR__MIN_PEER_FRAME; /* until its CONNECT says */
  c->opened_ms = c->heard_ms = c->progress_ms = uv_now(b->loop);
  b->open_handles++;
  b->n_conns++;
  c->next = b->conns;
  if (b->conns) b->conns->prev = c;
  b->conns = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    c->state = MQR__CONN_CLOSING;
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, close_cb);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage sa;
  int salen = sizeof sa;
  char ip[48] = "?";
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &salen) == 0) {
    if (sa.ss_family == AF_INET6)
      uv_ip6_name((struct sockaddr_in6 *)&sa, ip, sizeof ip);
    else
      uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&sa)->sin_port));
  }
  mqr__log(b, MQR_LOG_DEBUG, "connection %lld from %s on listener '%s'", (long long)c->session, c->peer, l->cfg->name);
  c->reading = true;
  start_reading(c);
}

static void listener_closed(uv_handle_t *h) { mqr__broker_handle_closed(((mqr__listener_t *)h->data)->b); }

/* libuv writes to sockets with write(2), not send(2) with MSG_NOSIGNAL: a peer that
 * resets its connection while a delivery is being written raises SIGPIPE, whose default
 * action ends the process. A broker that listens must not depend on how its process was
 * started, so it ignores SIGPIPE when nobody has chosen a disposition for it (an
 * application's own handler, or SIG_IGN, is left as it is; broker.h says so). */
static void sigpipe_ignore(mqr_broker_t *b) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL || (sa.sa_flags & SA_SIGINFO)) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPIPE, &sa, NULL) == 0)
    mqr__log(b, MQR_LOG_DEBUG,
             "SIGPIPE was at its default action: now ignored (a reset peer must not end the process)");
}

int mqr__server_listen(mqr_broker_t *b, mqr_error_t *err) {
  uint32_t n = mqr_config_listener_count(b->config);
  if (n == 0) return 0;
  sigpipe_ignore(b);
  if ((b->listeners = mqr_calloc(n, sizeof *b->listeners)) == NULL)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory opening listeners");
  for (uint32_t i = 0; i < n; i++) {
    mqr__listener_t *l = &b->listeners[i];
    l->b = b;
    /* Its own copy of what it was configured with: the config may go with a reload. */
    const mqr_listener_config_t *lc = mqr_config_listener(b->config, i);
    size_t bytes = strlen(lc->name) + strlen(lc->host) + 2;
    for (uint32_t k = 0; k < lc->prefixes.count; k++) bytes += lc->prefixes.items[k].text.len + 1;
    if ((l->strings = mqr_malloc(bytes)) == NULL)
      return mqr_error_set(err, MQR_ENOMEM, "out of memory opening listeners");
    l->own = *lc;
    char *p = l->strings;
    l->own.name = strcpy(p, lc->name);
    p += strlen(p) + 1;
    l->own.host = strcpy(p, lc->host);
    p += strlen(p) + 1;
    for (uint32_t k = 0; k < lc->prefixes.count; k++) {
      mqr_str_t t = lc->prefixes.items[k].text;
      memcpy(p, t.ptr, t.len);
      p[t.len] = '\0';
      l->own.prefixes.items[k].text = mqr_str_n(p, t.len);
      p += t.len + 1;
    }
    l->cfg = &l->own;
    struct sockaddr_storage sa;
    int rc = strchr(l->cfg->host, ':') ? uv_ip6_addr(l->cfg->host, l->cfg->port, (struct sockaddr_in6 *)&sa)
                                       : uv_ip4_addr(l->cfg->host, l->cfg->port, (struct sockaddr_in *)&sa);
    uv_tcp_init(b->loop, &l->tcp);
    l->tcp.data = l;
    l->open = true;
    b->open_handles++;
    b->n_listeners = i + 1;
    if (rc == 0) rc = uv_tcp_bind(&l->tcp, (const struct sockaddr *)&sa, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&l->tcp, 1024, on_connection);
    if (rc != 0)
      return mqr_error_set(err, MQR_EIO, "listener '%s' cannot listen on %s:%u: %s", l->cfg->name, l->cfg->host,
                           l->cfg->port, uv_strerror(rc));
    int salen = sizeof sa;
    uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&sa, &salen);
    l->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    mqr__log(b, MQR_LOG_INFO, "listener '%s' on %s:%d", l->cfg->name, l->cfg->host, l->port);
  }
  return 0;
}

void mqr__server_close(mqr_broker_t *b) {
  for (uint32_t i = 0; i < b->n_listeners; i++)
    if (b->listeners[i].open) {
      b->listeners[i].open = false;
      uv_close((uv_handle_t *)&b->listeners[i].tcp, listener_closed);
    }
  for (mqr__conn_t *c = b->conns; c; c = c->next) {
    if (c->state == MQR__CONN_CLOSING) continue;
    if (c->state == MQR__CONN_OPEN) {
      mqr_frame_t f = {MQR_FRAME_DISCONNECT, {.disconnect = {MQR_STR("the broker is shutting down")}}};
      (void)write_frame(c, &f); /* closing anyway: a DISCONNECT that cannot be written is not waited for */
    }
    conn_close(c, true);
  }
  mqr__server_flush(b); /* the idle handle is closing: write what is queued now */
}

void mqr__server_free_pools(mqr_broker_t *b) {
  while (b->wreq_free) {
    mqr__wreq_t *w = b->wreq_free;
    b->wreq_free = w->next_free;
    mqr_free(w->segs);
    mqr_free(w->bytes);
    mqr_free(w->msgs);
    mqr_free(w->bufs);
    mqr_free(w);
  }
  while (b->rbuf_free) {
    void *next = *(void **)b->rbuf_free;
    mqr_free(b->rbuf_free);
    b->rbuf_free = next;
  }
}
