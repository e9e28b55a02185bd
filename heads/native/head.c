/* The native protocol as a head: of the broker core (core.h), its consumers' deliver,
 * ready and refused; of the connection layer (mqr__head_t), its frames, clocks and
 * answers. */
#include <stddef.h>
#include <stdio.h>

#include "native.h"

/* ---- the native protocol as a head of the core (core.h) --------------------------------------- */

static bool consumer_ready(const mqr_broker_consumer_t *k) { return !mqr__conn_paused(mqr__consumer_ctx(k)); }

/* A delivery: the Message frame's head, then the stored message as it is (no copy, a
 * reference held until the write completes; a small one is copied). MQR_ELIMIT: longer
 * than the max_frame its client declared. */
static int consumer_deliver(mqr_broker_consumer_t *k, mqr__entry_t *e) {
  mqr__conn_t *c = mqr__consumer_ctx(k);
  int64_t subscription = mqr__consumer_subscription(k);
  /* The first of a group to this consumer, on a queue with a group-first-key: a block of
   * that property, true, goes in after the message's own properties (the rare path). */
  uint32_t at = 0;
  mqr_str_t group_first = mqr__consumer_group_first(k);
  size_t extra = group_first.len ? mqr__group_first_block(e->msg, group_first, NULL, &at) : 0;
  size_t len = e->msg->len + extra;
  if ((uint64_t)len + MQR_MESSAGE_HEADER_MAX - MQR_FRAME_HEADER > mqr__nat(c)->peer_max_frame) {
    uint8_t head[MQR_MESSAGE_HEADER_MAX];
    size_t hl = mqr_message_head(head, subscription, e->delivery, e->delivery_count, len);
    if (hl - MQR_FRAME_HEADER + len > mqr__nat(c)->peer_max_frame) return MQR_ELIMIT;
  }
  bool copy = extra == 0 && len <= MQR__COPY_MAX; /* a small one: copied (native.h) */
  size_t off;
  if (mqr__conn_reserve(c, MQR_MESSAGE_HEADER_MAX + extra + (copy ? len : 0), &off) == NULL) return MQR_ENOMEM;
  mqr__wreq_t *w = c->out;
  if (!mqr__grow((void **)&w->msgs, &w->cap_msgs, w->n_msgs + 1, sizeof *w->msgs) ||
      !mqr__grow((void **)&w->segs, &w->cap_segs, w->n_segs + 4, sizeof *w->segs))
    return MQR_ENOMEM;
  size_t hl = mqr_message_head(w->bytes + off, subscription, e->delivery, e->delivery_count, len);
  if (copy) {
    memcpy(w->bytes + off + hl, e->msg->data, len);
    w->n_bytes += hl + len;
    mqr__wreq_add_own(w, off, hl + len); /* cannot fail: room was made above */
    return 0;
  }
  w->n_bytes += hl;
  mqr__wreq_add_own(w, off, hl); /* cannot fail: room for the segments was made above */
  if (extra) {
    w->segs[w->n_segs++] = (mqr__seg_t){e->msg->data, 0, at};
    mqr__group_first_block(e->msg, group_first, w->bytes + w->n_bytes, &at);
    mqr__wreq_add_own(w, w->n_bytes, extra);
    w->n_bytes += extra;
    w->segs[w->n_segs++] = (mqr__seg_t){e->msg->data + at, 0, e->msg->len - at};
  } else {
    w->segs[w->n_segs++] = (mqr__seg_t){e->msg->data, 0, e->msg->len};
  }
  w->total += e->msg->len;
  e->msg->refs++;
  w->msgs[w->n_msgs++] = e->msg;
  return 0;
}

static void consumer_refused(mqr_broker_consumer_t *k, const mqr__entry_t *e) {
  mqr__conn_t *c = mqr__consumer_ctx(k);
  mqr_str_t q = mqr__consumer_queue_name(k);
  mqr__nat_send_error(
      c, MQR_ELIMIT, mqr__consumer_subscription(k), false,
      "message %lld (a frame of %u bytes) is more than the max_frame %u this connection declared: it stays at "
      "the head of queue '%.*s' until a consumer that can take it does",
      (long long)e->msg->id, (unsigned)(e->msg->len + MQR_MESSAGE_HEADER_MAX - MQR_FRAME_HEADER),
      mqr__nat(c)->peer_max_frame, (int)q.len, q.ptr);
}

const mqr__consumer_ops_t mqr__nat_consumer_ops = {consumer_ready, consumer_deliver, consumer_refused};

/* ---- the native protocol on the connection layer ------------------------------------------ */

/* A frame: its 4-byte length, then its body, handled in place. */
static int take(mqr__conn_t *c) {
  uint32_t body = 0;
  int rc = mqr_frame_peek(c->rbuf + c->rpos, c->rlen - c->rpos, c->l->cfg->max_frame, &body);
  if (rc == MQR_ELIMIT) {
    const uint8_t *h = c->rbuf + c->rpos;
    mqr__nat_send_error(c, MQR_ELIMIT, 0, true, "a frame of %u bytes is more than max-frame-size %u",
                        (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3], c->l->cfg->max_frame);
    return -1;
  }
  if (rc == 0) return 0;
  size_t at = c->rpos;
  c->rpos += MQR_FRAME_HEADER + body;
  mqr__nat_handle_frame(c, c->rbuf + at + MQR_FRAME_HEADER, body);
  return c->state == MQR__CONN_CLOSING ? -1 : 1;
}

/* The header says how long, and take checked it against max-frame-size. */
static size_t room(const mqr__conn_t *c) {
  uint32_t body = 0;
  mqr_frame_peek(c->rbuf + c->rpos, c->rlen - c->rpos, UINT32_MAX, &body);
  return (size_t)body + MQR_FRAME_HEADER;
}

/* Silence for half of idle-timeout: a PING; for all of it: closed. */
static void tick(mqr__conn_t *c, uint64_t now) {
  const mqr_listener_config_t *cfg = c->l->cfg;
  mqr__nat_conn_t *n = mqr__nat(c);
  if (cfg->idle_timeout_ms == 0 || !c->reading) return; /* held by the broker: its silence is not its own */
  uint64_t silent = now - c->heard_ms;
  if (n->ping_ms && c->heard_ms >= n->ping_ms) n->ping_ms = 0; /* heard since (it had been silent when it went) */
  if (silent >= cfg->idle_timeout_ms) {
    mqr__nat_send_error(c, MQR_ETIMEOUT, 0, true, "nothing heard for idle-timeout (%u ms)", cfg->idle_timeout_ms);
  } else if (silent >= cfg->idle_timeout_ms / 2 && n->ping_ms == 0) {
    mqr_frame_t f = {MQR_FRAME_PING, {.ping = {(int64_t)now}}};
    n->ping_ms = now;
    mqr__nat_reply(c, &f);
  }
}

static void fail(mqr__conn_t *c, int code, const char *text) { mqr__nat_send_error(c, code, 0, true, "%s", text); }

static void bye(mqr__conn_t *c) {
  mqr_frame_t f = {MQR_FRAME_DISCONNECT, {.disconnect = {MQR_STR("the broker is shutting down")}}};
  (void)mqr__nat_write_frame(c, &f);
}

/* The answer to a send that waited for the journal (or for an earlier answer): a
 * RECEIPT, or an ERROR naming the receipt. */
static void sent(mqr__conn_t *c, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  if (status != 0) {
    mqr__nat_send_error(c, status, token, false, "%s", err ? err->message : mqr_strerror(status));
    return;
  }
  if (token) {
    mqr_frame_t f = {MQR_FRAME_RECEIPT, {.receipt = {token, r->status, (int32_t)r->queues}}};
    mqr__nat_reply(c, &f);
  }
}

/* A frame's 4-byte length, big-endian, of at most 64 MiB: its first byte is 0 to 3. */
static int sniff(const uint8_t *p, size_t n) {
  (void)n;
  return p[0] <= 0x03;
}

static int open_conn(mqr__conn_t *c) {
  void **slot = mqr__head_slot(c->b, &mqr__native_head);
  if (*slot == NULL && (*slot = mqr_malloc(sizeof(mqr__nat_broker_t))) == NULL) return MQR_ENOMEM;
  mqr__nat_conn_t *n = mqr_calloc(1, sizeof *n);
  if (n == NULL) return MQR_ENOMEM;
  n->peer_max_frame = MQR__MIN_PEER_FRAME; /* until its CONNECT says */
  c->hs = n;
  return 0;
}

static void release(mqr__conn_t *c) {
  mqr__nat_conn_t *n = c->hs;
  if (n) {
    mqr__auth_cancel(n->auth);
    mqr_free(n->scram);
  }
  mqr_free(c->hs);
  c->hs = NULL;
}

static void free_broker(mqr_broker_t *b) {
  void **slot = mqr__head_slot(b, &mqr__native_head);
  mqr_free(*slot);
  *slot = NULL;
}

/* The native protocol has no block of its own: its max-frame-size is the listener's. */
static const mqr_protocol_def_t def = {"mqr", MQR_PROTOCOL_MQR, NULL, 0};

const mqr__head_t mqr__native_head = {
    .name = "mqr",
    .def = &def,
    .sniff = sniff,
    .free = free_broker,
    .open = open_conn,
    .take = take,
    .room = room,
    .tick = tick,
    .fail = fail,
    .bye = bye,
    .sent = sent,
    .release = release,
};
