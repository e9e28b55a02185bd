/* Connections, whatever their protocol: reading into pooled buffers, the head told by the
 * first bytes, the head's frames taken in place with a budget per pass, errors and
 * closing, and the clocks (the handshake timeout, stalled output, peers that went away
 * while paused; the head's own idle and heart-beat clocks). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "net.h"

/* ---- read buffers ------------------------------------------------------------------------ */

static uint8_t *rbuf_get(mqr_broker_t *b) {
  struct mqr__net_s *net = mqr__net(b);
  void *p = net->rbuf_free;
  if (p) {
    net->rbuf_free = *(void **)p;
    net->n_rbuf_free--;
    return p;
  }
  return mqr_malloc(MQR__READ_CHUNK);
}

static void rbuf_release(mqr__conn_t *c) {
  if (c->rbuf == NULL) return;
  if (c->rbuf_pooled && c->net->n_rbuf_free < 256) {
    *(void **)c->rbuf = c->net->rbuf_free;
    c->net->rbuf_free = c->rbuf;
    c->net->n_rbuf_free++;
  } else {
    mqr_free(c->rbuf);
  }
  c->rbuf = NULL;
  c->rpos = c->rlen = c->rcap = 0;
}

void mqr__conn_close_cb(uv_handle_t *h) {
  mqr__conn_t *c = h->data;
  mqr_broker_t *b = c->b;
  struct mqr__net_s *net = c->net;
  /* Out of the lists the next pass walks: it may have been put on them in the pass that
   * closed it (a drained address resuming it, an answer written to it). */
  for (mqr__conn_t **pp = &net->dirty; *pp; pp = &(*pp)->next_dirty)
    if (*pp == c) {
      *pp = c->next_dirty;
      break;
    }
  for (mqr__conn_t **pp = &net->resume; *pp; pp = &(*pp)->next_resume)
    if (*pp == c) {
      *pp = c->next_resume;
      break;
    }
  if (c->prev)
    c->prev->next = c->next;
  else
    net->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  net->n_conns--;
  c->l->n_conns--;
  if (c->tr && c->tr->release) c->tr->release(c); /* after its last write: a graceful close's go through it */
  mqr__ws_free(c);
  mqr_free(c);
  mqr__broker_handle_closed(b);
}

void mqr__conn_maybe_finish_close(mqr__conn_t *c) {
  if (c->state == MQR__CONN_CLOSING && !c->closed && c->writes == 0 && c->out == NULL) {
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, mqr__conn_close_cb);
  }
}

/* ---- errors and closing --------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) void mqr__conn_fail(mqr__conn_t *c, int code, const char *fmt, ...) {
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (c->state == MQR__CONN_CLOSING) return;
  if (c->head) {
    c->head->fail(c, code, text);
    return;
  }
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): %s: %s; closing it", (long long)c->sess.id, c->peer,
           mqr_err_name(code), text);
  mqr__conn_close(c, false);
}

void mqr__conn_close(mqr__conn_t *c, bool graceful) {
  if (c->state == MQR__CONN_CLOSING) return;
  if (c->ws && graceful) mqr__ws_bye(c); /* the close frame, after what was written */
  c->state = MQR__CONN_CLOSING;
  if (c->reading) c->tr->read_stop(c);
  c->reading = false;
  /* Its session ends: what its consumers had not acknowledged returns to the queues. */
  mqr__session_end(&c->sess);
  if (c->head && c->head->release) c->head->release(c);
  rbuf_release(c);
  if (!graceful && c->out) { /* nothing more will reach it */
    mqr__wreq_recycle(c->b, c->out);
    c->out = NULL;
  }
  mqr__conn_maybe_finish_close(c);
}

/* The head a connection's first bytes name, among its listener's protocols (Artemis
 * tells them apart on its single port the same way): 1 chosen, 0 more bytes needed, -1
 * none (it is closing). */
static int pick_head(mqr__conn_t *c) {
  uint32_t set = c->l->cfg->protocols;
  const uint8_t *p = c->rbuf + c->rpos;
  size_t n = c->rlen - c->rpos;
  bool wait = false;
  for (const mqr__head_t *const *h = mqr__heads; *h; h++) {
    if (!((*h)->def->bit & set)) continue;
    int r = (*h)->sniff(p, n);
    if (r > 0) return mqr__conn_set_head(c, *h) ? 1 : -1;
    if (r < 0) wait = true;
  }
  if (wait && n < 16) return 0;
  mqr__conn_fail(c, MQR_EPROTOCOL, "its first bytes (0x%02x...) start none of the protocols listener '%s' accepts",
                 p[0], c->l->cfg->name);
  return -1;
}

const mqr__head_t *mqr__head_named(const char *name) {
  for (const mqr__head_t *const *h = mqr__heads; *h; h++)
    if (strcmp((*h)->def->name, name) == 0) return *h;
  return NULL;
}

bool mqr__conn_set_head(mqr__conn_t *c, const mqr__head_t *h) {
  c->head = h;
  if (h->open && h->open(c) != 0) {
    c->head = NULL;
    mqr__conn_fail(c, MQR_ENOMEM, "out of memory for a %s connection", h->name);
    return false;
  }
  mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): %s", (long long)c->sess.id, c->peer, h->name);
  return true;
}

/* Takes every whole frame in the read buffer, while the connection may go on. */
void mqr__conn_process(mqr__conn_t *c) {
  uint32_t budget = MQR__FRAMES_PER_PASS; /* then the loop serves others, and this goes on next pass */
  if (mqr__ws_pending(c)) {               /* frames that waited for the head's room (it calls back here) */
    mqr__ws_pump(c);
    if (c->state == MQR__CONN_CLOSING) return;
  }
  if (c->head == NULL && c->rbuf && c->rpos < c->rlen) {
    int r = pick_head(c);
    if (r < 0) return;
  }
  while (c->head && !c->held && c->state != MQR__CONN_CLOSING && !mqr__conn_blocked(c) && c->rbuf &&
         !mqr__conn_output_full(c)) {
    if (budget-- == 0) {
      c->deferred = true;
      mqr__conn_schedule(c);
      break;
    }
    if (c->rpos == c->rlen || c->head->take(c) <= 0) break;
  }
  if (c->state == MQR__CONN_CLOSING) return;
  if (c->rbuf && c->rpos == c->rlen) rbuf_release(c); /* nothing held: the buffer goes back */
  bool hold = mqr__conn_holding(c);
  if (!hold && !c->reading) {
    c->reading = true;
    c->heard_ms = uv_now(mqr__loop(c->b)); /* it was not listened to while held */
    if (c->tr->read_start(c) != 0) mqr__conn_close(c, false);
  } else if (hold && c->reading) {
    c->tr->read_stop(c);
    c->reading = false;
  }
}

bool mqr__conn_holding(const mqr__conn_t *c) {
  return mqr__conn_blocked(c) || mqr__conn_output_full(c) || c->deferred || c->held;
}

uv_buf_t mqr__conn_room(mqr__conn_t *c) { return c->ws ? mqr__ws_room(c) : mqr__conn_head_room(c); }

uv_buf_t mqr__conn_head_room(mqr__conn_t *c) { return mqr__conn_head_room_in(c, true); }

uv_buf_t mqr__conn_head_room_in(mqr__conn_t *c, bool grow) {
  if (c->rbuf == NULL) {
    if ((c->rbuf = rbuf_get(c->b)) == NULL) return uv_buf_init(NULL, 0);
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
    if (!grow) return uv_buf_init((char *)c->rbuf + c->rlen, 0);
    /* A frame longer than the buffer: as large as its head says it must be (within the
     * protocol's limit, which the head checked). */
    size_t need = c->head->room(c);
    uint8_t *nb = mqr_malloc(need);
    if (nb == NULL) return uv_buf_init(NULL, 0);
    memcpy(nb, c->rbuf, c->rlen);
    size_t keep = c->rlen;
    rbuf_release(c);
    c->rbuf = nb;
    c->rbuf_pooled = false;
    c->rcap = need;
    c->rlen = keep;
  }
  return uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

uint32_t mqr__net_connections(mqr_broker_t *b, const mqr__head_t *h) {
  struct mqr__net_s *net = mqr__net(b);
  uint32_t n = 0;
  for (mqr__conn_t *c = net ? net->conns : NULL; c; c = c->next)
    if ((h == NULL || c->head == h) && c->state != MQR__CONN_CLOSING) n++;
  return n;
}

void mqr__net_bytes(mqr_broker_t *b, uint64_t *in, uint64_t *out) {
  struct mqr__net_s *net = mqr__net(b);
  *in = net ? net->bytes_in : 0;
  *out = net ? net->bytes_out : 0;
}

void mqr__conn_room_unused(mqr__conn_t *c) {
  if (c->rbuf && c->rpos == c->rlen) rbuf_release(c);
}

void mqr__conn_received(mqr__conn_t *c, ssize_t nread) {
  if (nread < 0) {
    if (nread != UV_EOF)
      mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): %s", (long long)c->sess.id, c->peer, uv_strerror((int)nread));
    else
      mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): closed by the peer", (long long)c->sess.id, c->peer);
    mqr__conn_close(c, false);
    return;
  }
  if (nread == 0) return;
  c->net->bytes_in += (uint64_t)nread;
  c->reading = true; /* (the transport reads) */
  if (c->ws) {
    mqr__ws_received(c, (size_t)nread);
    return;
  }
  c->heard_ms = uv_now(mqr__loop(c->b));
  c->rlen += (size_t)nread;
  mqr__conn_head_received(c);
}

/* (Not a sign that the transport reads: the WebSocket layer feeds the head what it read
 * before, also while the transport is stopped.) */
void mqr__conn_head_received(mqr__conn_t *c) { mqr__conn_process(c); }

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
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): closed by the peer while %s", (long long)c->sess.id, c->peer,
             c->sess.producer.blocked_on ? "held by a full address" : "not read from");
    mqr__conn_close(c, false);
    return;
  }
  if (mqr__principal_revoked(c->sess.who)) { /* a reload removed its user */
    mqr_str_t n = mqr__principal_name(c->sess.who);
    mqr__conn_fail(c, MQR_EAUTH, "user '%.*s' was removed from the users file (or anonymous clients refused)",
                   (int)n.len, n.ptr);
    return;
  }
  if (c->state == MQR__CONN_HANDSHAKE) {
    if (cfg->handshake_timeout_ms && now - c->opened_ms >= cfg->handshake_timeout_ms)
      mqr__conn_fail(c, MQR_ETIMEOUT, "no CONNECT within handshake-timeout (%u ms)", cfg->handshake_timeout_ms);
    return;
  }
  if (cfg->idle_timeout_ms && c->writes && now - c->progress_ms >= cfg->idle_timeout_ms) {
    /* Nothing it was sent has been taken for a whole idle-timeout: it is not reading. */
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): took none of %zu bytes written to it in %u ms; closing it",
             (long long)c->sess.id, c->peer, c->in_flight, cfg->idle_timeout_ms);
    mqr__conn_close(c, false);
    return;
  }
  if (c->head && c->head->tick) c->head->tick(c, now);
}

/* ---- the session's producer ---------------------------------------------------------------- */

static mqr__conn_t *conn_of(mqr__producer_t *p) {
  return (mqr__conn_t *)(void *)((char *)p - offsetof(mqr__conn_t, sess.producer));
}

/* Every full address that paused this producer has room: read on, next pass (or the
 * head gives credit again). */
static void producer_resume(mqr__producer_t *p) {
  mqr__conn_t *c = conn_of(p);
  if (c->head && c->head->credit_flow && c->head->unblocked && c->state != MQR__CONN_CLOSING)
    c->head->unblocked(c);
  else
    mqr__conn_schedule(c);
}

static void producer_sent(mqr__producer_t *p, int64_t token, int status, const mqr_broker_receipt_t *r,
                          const mqr_error_t *err) {
  mqr__conn_t *c = conn_of(p);
  if (c->state != MQR__CONN_CLOSING && c->head) c->head->sent(c, token, status, r, err);
}

const mqr__producer_ops_t mqr__conn_producer_ops = {producer_resume, producer_sent};

void mqr__net_tick(uv_timer_t *t) {
  mqr_broker_t *b = t->data;
  struct mqr__net_s *net = mqr__net(b);
  for (uint32_t i = 0; i < net->n_listeners; i++) {
    mqr__listener_t *l = &net->listeners[i];
    if (l->refused) {
      mqr__log(b, MQR_LOG_WARN, "listener '%s': %u connection(s) closed at once: max-connections (%u) are open",
               l->cfg->name, l->refused, l->cfg->max_connections);
      l->refused = 0;
    }
    if (l->open && l->accept_pending && !l->refusing) {
      l->accept_pending = false;
      mqr__net_on_connection((uv_stream_t *)&l->tcp, 0);
    }
  }
  for (mqr__conn_t *c = net->conns, *next; c; c = next) {
    next = c->next; /* closing only marks it: it leaves the list in its close callback */
    /* (the loop's clock each time, not the tick's start: a call in this walk may move it
     * past the times a connection keeps, which would then be ahead of a stale now) */
    if (c->state != MQR__CONN_CLOSING) tick_conn(c, uv_now(mqr__loop(b)));
  }
  for (const mqr__head_t *const *h = mqr__heads; *h; h++) /* (MQTT's offline sessions: expiry, delayed wills) */
    if ((*h)->tick_all && *mqr__head_slot(b, *h)) (*h)->tick_all(b, uv_now(mqr__loop(b)));
}
