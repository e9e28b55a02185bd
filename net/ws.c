/* WebSocket framing (RFC 6455) between a connection's transport and its head, once the
 * HTTP head has upgraded the connection: MQTT and STOMP over WebSockets see the byte
 * stream they see over TCP. The frames a client sends are parsed by wslay (Debian's
 * libwslay: masking checked, control frames answered, fragments and the close handshake
 * as the RFC says, a frame over the limit refused with 1009), without buffering messages:
 * each data frame's payload goes straight into the head's read buffer, fed no faster than
 * the head has room. What the head writes in a loop pass goes out as one binary frame
 * (its header written before the write's segments, no copy), after the control frames
 * wslay queued. A close from the client, or a protocol error, closes the connection
 * after the close frame.
 *
 * One kind of frame skips wslay: a whole binary message in one frame (FIN, no RSV bits,
 * masked, its length in the fewest bytes and within the limit) arriving while no
 * fragmented message is open: what MQTT clients send. (Text frames stay wslay's: it
 * checks that they are UTF-8.) wslay unmasks a byte at a time through its own 4 KiB
 * buffer, most of the broker's time at 1 KiB and more; such a frame is unmasked eight
 * bytes at a time straight from the read buffer into the head's.
 * Every other frame is given to wslay alone (its bytes and no more, so that wslay is
 * always between frames when the next one is looked at), and wslay handles or refuses it
 * as before: the fast frames are ones it would take and pass on unchanged. */
#include <stdio.h>
#include <string.h>
#include <wslay/wslay.h>

#include "net.h"

typedef struct mqr__ws_s mqr__ws_t;

struct mqr__ws_s {
  wslay_event_context_ptr ctx;
  uint8_t *raw; /* frames read and not yet given to wslay: raw[pos..len) */
  size_t pos, len, cap;
  uint8_t *ctl; /* control frames wslay wrote, for the next write */
  size_t ctl_len, ctl_cap;
  uint32_t plain_segs; /* segments of the write being gathered that went before the upgrade */
  uint8_t opcode;      /* of the frame being received (a continuation's: its message's) */
  uint8_t msg_opcode;  /* of the data message being received (control frames come between its frames) */
  bool pumping, failed, overrun;
  uint64_t given; /* payload bytes given to the head (its rlen can shrink: the room is compacted) */
  bool grow;      /* the head took nothing from a full read buffer: its frame needs a larger one */
  uint64_t max_frame;
  uint64_t fast_left;  /* payload left of a frame unmasked here, not by wslay */
  uint64_t wslay_left; /* bytes left of the frame being given to wslay */
  uint8_t key[4];      /* the fast frame's mask, and where in it the next byte is */
  uint8_t phase;
  bool fragmented; /* a fragmented message is open (its frames go to wslay) */
  bool direct;     /* the transport reads a fast frame's payload straight into the head's room */
};

/* How many payload bytes the head has room for: none while it holds (the frames it has
 * wait for it, not a larger buffer). A payload is never longer than its frame, so what
 * is fed to wslay or unmasked here is held to this. */
static size_t head_room(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  size_t n = mqr__conn_holding(c) ? 0 : mqr__conn_head_room_in(c, ws->grow).len;
  ws->grow = false;
  return n;
}

/* ---- wslay's callbacks ------------------------------------------------------------------------ */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *arg) {
  (void)flags;
  mqr__conn_t *c = arg;
  mqr__ws_t *ws = c->ws;
  size_t n = ws->len - ws->pos, room = head_room(c);
  if (n > room) n = room;
  if (n > len) n = len;
  if (n > ws->wslay_left) n = (size_t)ws->wslay_left; /* its frame's bytes, not the next's */
  if (n == 0) {                                       /* all fed, or the head has no room until it takes what it has */
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  memcpy(buf, ws->raw + ws->pos, n);
  ws->pos += n;
  ws->wslay_left -= n;
  return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg) {
  (void)flags;
  mqr__conn_t *c = arg;
  mqr__ws_t *ws = c->ws;
  if (!mqr__grow_size((void **)&ws->ctl, &ws->ctl_cap, ws->ctl_len + len, 1) || mqr__conn_out(c) == NULL) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  memcpy(ws->ctl + ws->ctl_len, data, len);
  ws->ctl_len += len;
  return (ssize_t)len;
}

static void frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *a, void *arg) {
  mqr__conn_t *c = arg;
  mqr__ws_t *ws = c->ws;
  if (a->opcode == WSLAY_CONTINUATION_FRAME)
    ws->opcode = ws->msg_opcode;
  else if (a->opcode & 0x8) /* a control frame, maybe between a message's fragments */
    ws->opcode = a->opcode;
  else
    ws->opcode = ws->msg_opcode = a->opcode;
  if (a->payload_length > ws->max_frame) { /* refused at its first bytes, not once it has all come */
    (void)wslay_event_queue_close(ctx, WSLAY_CODE_MESSAGE_TOO_BIG, NULL, 0);
    wslay_event_shutdown_read(ctx);
  }
}

static void frame_chunk(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_chunk_arg *a, void *arg) {
  (void)ctx;
  mqr__conn_t *c = arg;
  uint8_t op = c->ws->opcode;
  if (op != WSLAY_BINARY_FRAME && op != WSLAY_TEXT_FRAME) return; /* (control frames: wslay's) */
  uv_buf_t room = mqr__conn_head_room_in(c, false);
  if (a->data_length > room.len) { /* (never: fed within room) */
    c->ws->overrun = true;
    return;
  }
  if (a->data_length) memcpy(room.base, a->data, a->data_length);
  c->rlen += a->data_length;
  c->ws->given += a->data_length;
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb,
    .send_callback = send_cb,
    .on_frame_recv_start_callback = frame_start,
    .on_frame_recv_chunk_callback = frame_chunk,
};

/* ---- the connection ------------------------------------------------------------------------------ */

int mqr__conn_websocket(mqr__conn_t *c, const mqr__head_t *h, uint64_t max_frame) {
  mqr__ws_t *ws = mqr_calloc(1, sizeof *ws);
  if (ws == NULL || wslay_event_context_server_init(&ws->ctx, &callbacks, c) != 0) {
    mqr_free(ws);
    return MQR_ENOMEM;
  }
  wslay_event_config_set_no_buffering(ws->ctx, 1);
  wslay_event_config_set_max_recv_msg_length(ws->ctx, max_frame); /* per frame, without buffering: 1009 past it */
  ws->max_frame = max_frame;
  ws->plain_segs = c->out ? c->out->n_segs : 0;  /* the 101 answer goes as it is */
  size_t rest = c->rbuf ? c->rlen - c->rpos : 0; /* frames sent right behind the upgrade request */
  if (rest) {
    if (!mqr__grow_size((void **)&ws->raw, &ws->cap, rest, 1)) {
      wslay_event_context_free(ws->ctx);
      mqr_free(ws);
      return MQR_ENOMEM;
    }
    memcpy(ws->raw, c->rbuf + c->rpos, rest);
    ws->len = rest;
    c->rpos = c->rlen;
  }
  c->ws = ws;
  if (!mqr__conn_set_head(c, h)) return MQR_ENOMEM;
  c->state = MQR__CONN_HANDSHAKE;
  c->opened_ms = uv_now(mqr__loop(c->b)); /* the head's handshake-timeout starts now */
  if (rest) mqr__conn_schedule(c);
  return 0;
}

/* A close frame of ours, with its status code, for the next write. */
static void own_close(mqr__conn_t *c, uint16_t code) {
  mqr__ws_t *ws = c->ws;
  uint8_t f[4] = {0x88, 2, (uint8_t)(code >> 8), (uint8_t)code};
  if (mqr__grow_size((void **)&ws->ctl, &ws->ctl_cap, ws->ctl_len + sizeof f, 1) && mqr__conn_out(c)) {
    memcpy(ws->ctl + ws->ctl_len, f, sizeof f);
    ws->ctl_len += sizeof f;
  }
}

bool mqr__ws_pending(const mqr__conn_t *c) { return c->ws && c->ws->pos < c->ws->len; }

/* ---- the frames that skip wslay -------------------------------------------------------------- */

/* The next frame, between frames: false while its header has not all come. A frame that
 * skips wslay has its header taken here; any other is given to wslay, whole. */
static bool next_frame(mqr__ws_t *ws) {
  const uint8_t *p = ws->raw + ws->pos;
  size_t avail = ws->len - ws->pos;
  if (avail < 2) return false;
  uint8_t code = p[1] & 0x7f, op = p[0] & 0x0f;
  bool fin = p[0] & 0x80, masked = p[1] & 0x80;
  size_t hn = 2 + (code == 126 ? 2 : code == 127 ? 8 : 0) + (masked ? 4 : 0);
  if (avail < hn) return false;
  uint64_t n = code;
  if (code == 126) n = (uint64_t)p[2] << 8 | p[3];
  if (code == 127)
    for (int i = 0; i < 8; i++) n = (i ? n << 8 : 0) | p[2 + i];
  bool fewest = code < 126 || (code == 126 ? n >= 126 : n > 0xffff && n >> 63 == 0);
  if (fin && (p[0] & 0x70) == 0 && op == WSLAY_BINARY_FRAME && masked && fewest && n <= ws->max_frame &&
      !ws->fragmented) {
    memcpy(ws->key, p + hn - 4, 4);
    ws->phase = 0;
    ws->pos += hn;
    ws->fast_left = n;
    return true;
  }
  if (op == WSLAY_TEXT_FRAME || op == WSLAY_BINARY_FRAME) /* (wslay refuses what is out of turn) */
    ws->fragmented = !fin;
  else if (op == WSLAY_CONTINUATION_FRAME && fin)
    ws->fragmented = false;
  ws->wslay_left = n >> 62 ? UINT64_MAX : hn + n; /* (a length wslay refuses at the header) */
  return true;
}

/* Unmasks n bytes of src into dst (or in place), eight at a time, from the mask's byte
 * at *phase. */
static void unmask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t key[4], uint8_t *phase) {
  uint8_t k[8];
  for (int i = 0; i < 8; i++) k[i] = key[(*phase + i) & 3];
  uint64_t m;
  memcpy(&m, k, sizeof m);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, src + i, sizeof w);
    w ^= m;
    memcpy(dst + i, &w, sizeof w);
  }
  for (; i < n; i++) dst[i] = src[i] ^ k[i & 7];
  *phase = (uint8_t)((*phase + n) & 3);
}

/* n bytes of the fast frame's payload from src, unmasked onto the end of the head's read
 * buffer (src may be that place: read there directly). */
static void give_fast(mqr__conn_t *c, const uint8_t *src, size_t n) {
  mqr__ws_t *ws = c->ws;
  unmask(c->rbuf + c->rlen, src, n, ws->key, &ws->phase);
  ws->fast_left -= n;
  c->rlen += n;
  ws->given += n;
}

/* Gives the head what it has room for of the fast frame's payload. */
static void feed_fast(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  size_t n = ws->len - ws->pos, room = head_room(c);
  if (n > room) n = room;
  if (n > ws->fast_left) n = (size_t)ws->fast_left;
  if (n == 0) return;
  give_fast(c, ws->raw + ws->pos, n);
  ws->pos += n;
}

/* Gives wslay what it may have of its frame: false when the connection closes. */
static bool feed_wslay(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  uint64_t before = ws->given;
  int rc = wslay_event_recv(ws->ctx);
  if (rc == 0 && ws->overrun) rc = WSLAY_ERR_CALLBACK_FAILURE;
  if (rc != 0) { /* a frame the RFC refuses (unmasked, a fragmented control frame, ...), or no memory */
    ws->failed = true;
    if (!wslay_event_get_close_sent(ws->ctx)) /* (wslay writes nothing more after its error) */
      own_close(c, rc == WSLAY_ERR_NOMEM || ws->overrun ? WSLAY_CODE_INTERNAL_SERVER_ERROR : WSLAY_CODE_PROTOCOL_ERROR);
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): WebSocket %s; closing it", (long long)c->sess.id, c->peer,
             rc == WSLAY_ERR_NOMEM ? "out of memory"
             : ws->overrun         ? "internal error (a payload past the read buffer)"
                                   : "protocol error");
    mqr__conn_close(c, true);
    return false;
  }
  (void)wslay_event_send(ws->ctx);              /* pongs, the close frame */
  if (!wslay_event_get_read_enabled(ws->ctx)) { /* a close frame came, or a protocol error */
    ws->failed = true;
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): WebSocket %s (status %u); closing it", (long long)c->sess.id,
             c->peer, wslay_event_get_close_received(ws->ctx) ? "closed by the client" : "protocol error",
             wslay_event_get_status_code_received(ws->ctx));
    if (ws->given != before) mqr__conn_head_received(c); /* (what came before it is taken) */
    if (c->state != MQR__CONN_CLOSING) mqr__conn_close(c, true);
    return false;
  }
  return true;
}

/* Feeds what was read, frame by frame, while the head has room, and the head what came
 * out. */
void mqr__ws_pump(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  if (ws == NULL || ws->pumping) return;
  ws->pumping = true;
  while (c->state != MQR__CONN_CLOSING && !ws->failed) {
    if (ws->fast_left == 0 && ws->wslay_left == 0) {           /* between frames */
      if (!next_frame(ws)) break;                              /* (its header has not all come) */
      if (ws->fast_left == 0 && ws->wslay_left == 0) continue; /* an empty fast frame */
    }
    uint64_t before = ws->given;
    size_t at = ws->pos;
    bool growing = ws->grow; /* this round may grow the head's buffer */
    if (ws->fast_left)
      feed_fast(c);
    else if (!feed_wslay(c))
      break;
    if (ws->given != before) mqr__conn_head_received(c);
    if (c->state == MQR__CONN_CLOSING || mqr__conn_holding(c)) break; /* (processed again when that ends) */
    ws->grow = c->rbuf && c->rpos == 0 && c->rlen == c->rcap &&
               !(growing && ws->pos == at);                        /* (growth that gave no room: stop) */
    if ((ws->pos == at && !ws->grow) || ws->pos == ws->len) break; /* no room for more, or all fed */
  }
  if (ws->pos == ws->len) ws->pos = ws->len = 0;
  ws->pumping = false;
}

uv_buf_t mqr__ws_room(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  if (ws->pos && ws->pos == ws->len) ws->pos = ws->len = 0;
  ws->direct = false;
  if (ws->fast_left >= MQR__READ_CHUNK / 4 && ws->pos == ws->len && !ws->failed) {
    /* The rest of a large frame's payload is read where the head reads it, unmasked
     * there: no copy (and no more than the frame, so that its end is seen here). */
    uv_buf_t room = mqr__conn_head_room(c);
    if (room.len) {
      ws->direct = true;
      if (room.len > ws->fast_left) room.len = (unsigned)ws->fast_left;
      return room;
    }
  }
  if (ws->cap - ws->len < MQR__READ_CHUNK / 4) {
    if (ws->pos) { /* what was fed goes */
      memmove(ws->raw, ws->raw + ws->pos, ws->len - ws->pos);
      ws->len -= ws->pos, ws->pos = 0;
    }
    if (ws->cap - ws->len < MQR__READ_CHUNK / 4 &&
        !mqr__grow_size((void **)&ws->raw, &ws->cap, ws->len + MQR__READ_CHUNK, 1))
      return uv_buf_init(NULL, 0);
  }
  return uv_buf_init((char *)ws->raw + ws->len, (unsigned)(ws->cap - ws->len));
}

void mqr__ws_received(mqr__conn_t *c, size_t n) {
  mqr__ws_t *ws = c->ws;
  c->heard_ms = uv_now(mqr__loop(c->b));
  if (ws->direct) { /* the head's bytes, still masked */
    ws->direct = false;
    give_fast(c, c->rbuf + c->rlen, n);
    mqr__conn_head_received(c);
    return;
  }
  ws->len += n;
  mqr__ws_pump(c);
}

int mqr__ws_frame(mqr__conn_t *c, mqr__wreq_t *w) {
  mqr__ws_t *ws = c->ws;
  uint32_t plain = ws->plain_segs < w->n_segs ? ws->plain_segs : w->n_segs;
  ws->plain_segs = 0;
  size_t payload = 0;
  for (uint32_t i = plain; i < w->n_segs; i++) payload += w->segs[i].len;
  uint8_t head[10];
  size_t hn = 0;
  if (payload) { /* FIN, binary; the server's frames are not masked */
    head[0] = 0x82;
    if (payload < 126) {
      head[1] = (uint8_t)payload, hn = 2;
    } else if (payload < 65536) {
      head[1] = 126, head[2] = (uint8_t)(payload >> 8), head[3] = (uint8_t)payload, hn = 4;
    } else {
      head[1] = 127, hn = 10;
      for (int i = 0; i < 8; i++) head[2 + i] = (uint8_t)((uint64_t)payload >> (56 - 8 * i));
    }
  }
  size_t add = ws->ctl_len + hn;
  if (add == 0) return 0;
  if (!mqr__grow_size((void **)&w->bytes, &w->cap_bytes, w->n_bytes + add, 1) ||
      !mqr__grow((void **)&w->segs, &w->cap_segs, w->n_segs + 1, sizeof *w->segs))
    return MQR_ENOMEM;
  size_t off = w->n_bytes;
  if (ws->ctl_len) memcpy(w->bytes + off, ws->ctl, ws->ctl_len);
  if (hn) memcpy(w->bytes + off + ws->ctl_len, head, hn);
  w->n_bytes += add;
  memmove(w->segs + plain + 1, w->segs + plain, (w->n_segs - plain) * sizeof *w->segs);
  w->segs[plain] = (mqr__seg_t){NULL, off, add};
  w->n_segs++;
  w->total += add;
  ws->ctl_len = 0;
  return 0;
}

void mqr__ws_bye(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  if (ws == NULL || ws->failed || wslay_event_get_close_sent(ws->ctx)) return;
  if (wslay_event_queue_close(ws->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0) == 0) (void)wslay_event_send(ws->ctx);
}

void mqr__ws_free(mqr__conn_t *c) {
  mqr__ws_t *ws = c->ws;
  if (ws == NULL) return;
  c->ws = NULL;
  wslay_event_context_free(ws->ctx);
  mqr_free(ws->raw);
  mqr_free(ws->ctl);
  mqr_free(ws);
}
