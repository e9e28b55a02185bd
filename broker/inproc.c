/* In-process consumers, the broker's second protocol head (core.h): a callback per
 * delivery with the Message frame a network consumer would read, decoded; nothing to
 * pause, and no frame too long. They belong to the broker's own session. */
#include <string.h>

#include "broker_int.h"

/* Delivers e to in-process consumer c: the Message frame a network consumer would read,
 * decoded, to its callback. MQR_ENOMEM when the buffers cannot be had: then nothing was
 * delivered, and the core puts e back. */
static int deliver(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  mqr_broker_t *b = c->b;
  uint8_t head[MQR_MESSAGE_HEADER_MAX];
  /* The first of a group to this consumer, with a group-first-key: that property's block
   * goes in after the message's own properties. */
  uint32_t at = 0;
  size_t extra = c->group_first.len ? mqr__group_first_block(e->msg, c->group_first, NULL, &at) : 0;
  size_t hl = mqr_message_head(head, c->subscription, e->delivery, e->delivery_count, e->msg->len + extra);
  /* The frame a network consumer would read, decoded: head then stored bytes, in this
   * depth's buffer (broker_int.h). */
  size_t n = hl + e->msg->len + extra;
  uint32_t d = b->deliver_depth;
  uint8_t *frame = NULL, *arena_mem = NULL, *big = NULL;
  int rc = MQR_ENOMEM;
  if (d < MQR__DELIVER_DEPTH) {
    if (b->deliver[d].frame_cap < n) {
      size_t cap = b->deliver[d].frame_cap ? b->deliver[d].frame_cap * 2 : 1024;
      while (cap < n) cap *= 2;
      uint8_t *p = mqr_realloc(b->deliver[d].frame, cap);
      if (p == NULL) return MQR_ENOMEM;
      b->deliver[d].frame = p;
      b->deliver[d].frame_cap = cap;
    }
    if (b->deliver[d].arena == NULL && (b->deliver[d].arena = mqr_malloc(MQR__DELIVER_ARENA)) == NULL)
      return MQR_ENOMEM;
    frame = b->deliver[d].frame;
    arena_mem = b->deliver[d].arena;
  } else {
    frame = mqr_malloc(n);
    arena_mem = mqr_malloc(MQR__DELIVER_ARENA);
    if (frame == NULL || arena_mem == NULL) goto done;
  }
  memcpy(frame, head, hl);
  if (extra) {
    memcpy(frame + hl, e->msg->data, at);
    mqr__group_first_block(e->msg, c->group_first, frame + hl + at, &at);
    memcpy(frame + hl + at + extra, e->msg->data + at, e->msg->len - at);
  } else {
    memcpy(frame + hl, e->msg->data, e->msg->len);
  }
  mqr_frame_t f;
  mqr_avro_arena_t arena = {arena_mem, MQR__DELIVER_ARENA, 0};
  rc = mqr_frame_decode(frame + MQR_FRAME_HEADER, n - MQR_FRAME_HEADER, &f, &arena, NULL);
  if (rc == MQR_ENOSPC) {
    /* More properties than the arena holds: one that holds any frame this long (a
     * property takes at least 2 bytes there, and 32 decoded). */
    size_t cap = 16 * n + 1024;
    if ((big = mqr_malloc(cap)) == NULL) {
      rc = MQR_ENOMEM;
      goto done;
    }
    arena = (mqr_avro_arena_t){big, cap, 0};
    rc = mqr_frame_decode(frame + MQR_FRAME_HEADER, n - MQR_FRAME_HEADER, &f, &arena, NULL);
  }
  if (rc == 0) {
    b->deliver_depth++;
    c->fn(c, &f.u.message, c->ctx);
    b->deliver_depth--;
  } else { /* the broker wrote this frame: it decodes, or the broker is wrong */
    mqr__log(b, MQR_LOG_ERROR, "an in-process delivery did not decode (%s): it stays unacknowledged", mqr_err_name(rc));
    rc = 0;
  }
done:
  if (big != NULL) mqr_free(big); /* no call on the common path */
  if (d >= MQR__DELIVER_DEPTH) {
    mqr_free(frame);
    mqr_free(arena_mem);
  }
  return rc;
}

static bool ready(const mqr_broker_consumer_t *c) {
  (void)c;
  return true;
}

static void refused(mqr_broker_consumer_t *c, const mqr__entry_t *e) {
  (void)c, (void)e; /* deliver never says MQR_ELIMIT */
}

static const mqr__consumer_ops_t inproc_ops = {ready, deliver, refused};

int mqr_broker_subscribe(mqr_broker_t *b, mqr_str_t target, int routing_type, mqr_str_t queue, mqr_str_t selector,
                         uint32_t credit, mqr_deliver_fn fn, void *arg, mqr_broker_consumer_t **out,
                         mqr_str_t *queue_name, mqr_error_t *err) {
  if (fn == NULL) return mqr_error_set(err, MQR_EINVAL, "no delivery function");
  mqr_broker_consumer_t *c;
  int rc = mqr__session_subscribe(&b->inproc, target, routing_type, queue, 0, selector, credit, 0, &inproc_ops, arg, &c,
                                  err);
  if (rc) return rc;
  c->fn = fn;
  if (queue_name) *queue_name = mqr_queue_name(c->bq->q);
  *out = c;
  mqr__consumer_start(c);
  return 0;
}

void mqr_broker_unsubscribe(mqr_broker_consumer_t *c) { mqr__consumer_close(c); }
