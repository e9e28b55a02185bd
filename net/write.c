/* Writes, whatever the protocol: a head's bytes and deliveries gathered per connection
 * in a write request and handed to the transport once per loop pass (the idle phase of
 * the next), a delivery being a small head and the stored message's own bytes; what
 * backs a connection's output up, and what follows when a write completes. */
#include <stdio.h>

#include "net.h"

/* ---- writes ------------------------------------------------------------------------------- */

#define WREQ_BIG (1u << 20)

mqr__wreq_t *mqr__conn_out(mqr__conn_t *c) {
  mqr_broker_t *b = c->b;
  if (c->out) return c->out;
  struct mqr__net_s *net = c->net;
  bool big = (c->big_out && net->wreq_big) || net->wreq_free == NULL; /* (the list it takes from) */
  mqr__wreq_t **list = big ? &net->wreq_big : &net->wreq_free, *w = *list;
  if (w) {
    *list = w->next_free;
    (*(big ? &net->n_wreq_big : &net->n_wreq_free))--;
  } else if ((w = mqr_calloc(1, sizeof *w)) == NULL) {
    return NULL;
  }
  w->conn = c;
  w->req.data = w;
  c->out = w;
  if (!c->dirty) {
    c->dirty = true;
    c->next_dirty = c->net->dirty;
    c->net->dirty = c;
    mqr__broker_wake(b);
  }
  return w;
}

/* A segment of the request's own bytes [off, off + len): joined to the last when they
 * touch. */
int mqr__wreq_add_own(mqr__wreq_t *w, size_t off, size_t len) {
  if (w->n_segs && w->segs[w->n_segs - 1].ptr == NULL &&
      w->segs[w->n_segs - 1].off + w->segs[w->n_segs - 1].len == off) {
    w->segs[w->n_segs - 1].len += len;
  } else {
    if (!mqr__grow((void **)&w->segs, &w->cap_segs, w->n_segs + 1, sizeof *w->segs)) return MQR_ENOMEM;
    w->segs[w->n_segs++] = (mqr__seg_t){NULL, off, len};
  }
  w->total += len;
  return 0;
}

/* Room for n more own bytes in this pass's write: where they go (at w->bytes + *off),
 * or NULL for want of memory. The head writes them, then mqr__conn_commit. */
uint8_t *mqr__conn_reserve(mqr__conn_t *c, size_t n, size_t *off) {
  mqr__wreq_t *w = mqr__conn_out(c);
  if (w == NULL) return NULL;
  if (w->cap_bytes - w->n_bytes < n) {
    size_t ncap = w->cap_bytes ? w->cap_bytes * 2 : 4096;
    if (ncap > WREQ_BIG) c->big_out = true;
    while (ncap - w->n_bytes < n) ncap *= 2;
    uint8_t *nb = mqr_realloc(w->bytes, ncap);
    if (nb == NULL) return NULL;
    w->bytes = nb;
    w->cap_bytes = ncap;
  }
  *off = w->n_bytes;
  return w->bytes + w->n_bytes;
}

int mqr__conn_commit(mqr__conn_t *c, size_t off, size_t len) {
  mqr__wreq_t *w = c->out;
  int rc = mqr__wreq_add_own(w, off, len);
  if (rc == 0) w->n_bytes = off + len;
  return rc;
}

int mqr__conn_add_stored(mqr__conn_t *c, mqr__msg_t *m, const uint8_t *ptr, size_t len, bool hold) {
  if (len <= MQR__COPY_MAX) { /* copied: one buffer for the write, not one per message */
    size_t off;
    uint8_t *p = mqr__conn_reserve(c, len, &off);
    if (p == NULL) return MQR_ENOMEM;
    memcpy(p, ptr, len);
    return mqr__conn_commit(c, off, len);
  }
  mqr__wreq_t *w = mqr__conn_out(c);
  if (w == NULL || !mqr__grow((void **)&w->segs, &w->cap_segs, w->n_segs + 1, sizeof *w->segs) ||
      (hold && !mqr__grow((void **)&w->msgs, &w->cap_msgs, w->n_msgs + 1, sizeof *w->msgs)))
    return MQR_ENOMEM;
  w->segs[w->n_segs++] = (mqr__seg_t){ptr, 0, len};
  w->total += len;
  if (hold) {
    m->refs++;
    w->msgs[w->n_msgs++] = m;
  }
  return 0;
}

/* A connection whose answers it does not read (receipts, errors) would make its output
 * grow: past max_pending_write unwritten, it gets no deliveries and is not read from until
 * that drains. */
bool mqr__conn_output_full(const mqr__conn_t *c) {
  return c->in_flight + (c->out ? c->out->total : 0) > mqr__options(c->b)->max_pending_write;
}

bool mqr__conn_paused(const mqr__conn_t *c) { return c->state == MQR__CONN_CLOSING || mqr__conn_output_full(c); }

/* A request done with: its messages released, its arrays kept for the next (up to 64 of
 * them, and apart up to MQR__WREQ_BIG_KEEP whose own bytes grew past WREQ_BIG, which
 * connections that write that much take first: a head that copies its deliveries, as
 * AMQP's copies Proton's output, fills one to about max_pending_write on every pass, and
 * would otherwise grow a small one there each time). */
void mqr__wreq_recycle(mqr_broker_t *b, mqr__wreq_t *w) {
  struct mqr__net_s *net = mqr__net(b);
  for (uint32_t i = 0; i < w->n_msgs; i++) mqr__msg_release(b, w->msgs[i]);
  w->n_msgs = w->n_segs = 0;
  w->n_bytes = w->total = 0;
  w->conn = NULL;
  bool big = w->cap_bytes > WREQ_BIG;
  if (big ? net->n_wreq_big >= MQR__WREQ_BIG_KEEP : net->n_wreq_free >= 64) {
    mqr_free(w->segs);
    mqr_free(w->bytes);
    mqr_free(w->msgs);
    mqr_free(w->bufs);
    mqr_free(w);
    return;
  }
  mqr__wreq_t **list = big ? &net->wreq_big : &net->wreq_free;
  w->next_free = *list;
  *list = w;
  (*(big ? &net->n_wreq_big : &net->n_wreq_free))++;
}

void mqr__conn_written(mqr__wreq_t *w, int status) {
  mqr__conn_t *c = w->conn;
  mqr_broker_t *b = c->b;
  bool was_paused = mqr__conn_paused(c);
  c->progress_ms = uv_now(mqr__loop(b));
  c->in_flight -= w->total;
  if (status >= 0) c->net->bytes_out += w->total;
  c->writes--;
  mqr__wreq_recycle(b, w);
  if (status < 0 && c->state != MQR__CONN_CLOSING) {
    mqr__log(b, MQR_LOG_INFO, "connection %lld (%s): write failed: %s", (long long)c->sess.id, c->peer,
             uv_strerror(status));
    mqr__conn_close(c, false);
  }
  if (c->state == MQR__CONN_CLOSING) {
    mqr__conn_maybe_finish_close(c);
    return;
  }
  if (was_paused && !mqr__conn_paused(c)) {
    mqr__session_ready(&c->sess);
    if (!c->reading && !mqr__conn_blocked(c)) mqr__conn_process(c); /* held for its output: read on */
  }
}

static void flush_conn(mqr__conn_t *c) {
  mqr__wreq_t *w = c->out;
  c->out = NULL;
  if (w == NULL) return;
  if (c->ws && !c->closed && mqr__ws_frame(c, w) != 0) { /* (control frames, then the head's bytes as one) */
    mqr__wreq_recycle(c->b, w);
    mqr__conn_close(c, false);
    return;
  }
  if (w->n_segs == 0 || c->closed) {
    mqr__wreq_recycle(c->b, w);
    return;
  }
  if (!mqr__grow((void **)&w->bufs, &w->cap_bufs, w->n_segs, sizeof *w->bufs)) {
    mqr__wreq_recycle(c->b, w);
    mqr__conn_close(c, false);
    return;
  }
  for (uint32_t i = 0; i < w->n_segs; i++) {
    const mqr__seg_t *s = &w->segs[i];
    w->bufs[i] = uv_buf_init((char *)(s->ptr ? s->ptr : w->bytes + s->off), (unsigned)s->len);
  }
  int rc = c->tr->write(c, w);
  if (rc < 0) {
    mqr__wreq_recycle(c->b, w);
    mqr__conn_close(c, false);
    return;
  }
  if (c->writes == 0) c->progress_ms = uv_now(mqr__loop(c->b)); /* its clock starts with the wait */
  c->in_flight += w->total;
  c->writes++;
}

bool mqr__server_flush(mqr_broker_t *b) {
  struct mqr__net_s *net = mqr__net(b);
  if (net == NULL) return false;
  /* Producers a drained address lets go: what they sent meanwhile is in their buffers. */
  mqr__conn_t *list = net->resume;
  net->resume = NULL;
  while (list) {
    mqr__conn_t *c = list;
    list = c->next_resume;
    c->resume = false;
    c->deferred = false;
    if (c->state == MQR__CONN_CLOSING || mqr__conn_blocked(c)) continue;
    if (c->held && c->head && c->head->resume) /* the head's work in slices */
      c->head->resume(c);
    else
      mqr__conn_process(c);
  }
  while (net->dirty) {
    mqr__conn_t *c = net->dirty;
    net->dirty = c->next_dirty;
    c->dirty = false;
    flush_conn(c);
    if (c->state == MQR__CONN_CLOSING) mqr__conn_maybe_finish_close(c);
  }
  return net->dirty != NULL || net->resume != NULL;
}

void mqr__conn_schedule(mqr__conn_t *c) {
  if (c->resume || c->state == MQR__CONN_CLOSING) return;
  c->resume = true;
  c->next_resume = c->net->resume;
  c->net->resume = c;
  mqr__broker_wake(c->b);
}

void mqr__conn_hold(mqr__conn_t *c, bool hold) {
  if (c->held == hold) return;
  c->held = hold;
  if (!hold) mqr__conn_schedule(c);
}
