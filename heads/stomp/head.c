/* The STOMP head's connection (stomp.h): CONNECT or STOMP with the version negotiated
 * and heart-beats agreed, as the STOMP 1.2 specification and Artemis's heart-beat rules
 * have them; ERROR frames (then the connection closes), RECEIPT frames, transactions
 * (BEGIN, COMMIT, ABORT: a transaction's SEND, ACK and NACK frames are kept and handled
 * at its COMMIT), DISCONNECT; and the head's ops on the connection layer. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "stomp.h"

/* ---- writing frames --------------------------------------------------------------------------- */

int mqr__stomp_write(mqr__conn_t *c, mqr__stomp_command_t cmd, const mqr__stomp_header_t *h, uint32_t n, mqr_str_t body,
                     bool with_length) {
  stomp_t *st = c->hs;
  size_t head = mqr__stomp_put_head(NULL, 0, st->version, cmd, h, n, with_length, body.len), off;
  uint8_t *p = mqr__conn_reserve(c, head + body.len + 1, &off);
  if (p == NULL) return MQR_ENOMEM;
  mqr__stomp_put_head(p, head, st->version, cmd, h, n, with_length, body.len);
  if (body.len) memcpy(p + head, body.ptr, body.len);
  p[head + body.len] = 0;
  st->sent_ms = uv_now(mqr__loop(c->b));
  return mqr__conn_commit(c, off, head + body.len + 1);
}

void mqr__stomp_written(mqr__conn_t *c, int rc) {
  if (rc == 0) return;
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a STOMP frame could not be written (%s); closing it",
           (long long)c->sess.id, c->peer, mqr_strerror(rc));
  mqr__conn_close(c, false);
}

void mqr__stomp_error(mqr__conn_t *c, const mqr__stomp_frame_t *f, const char *message, const char *fmt, ...) {
  if (c->state == MQR__CONN_CLOSING) return;
  char text[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  mqr__stomp_header_t h[3] = {{MQR_STR("message"), mqr_str(message)}, {MQR_STR("content-type"), MQR_STR("text/plain")}};
  uint32_t n = 2;
  const mqr_str_t *receipt = f ? mqr__stomp_header(f, "receipt") : NULL;
  if (receipt) h[n++] = (mqr__stomp_header_t){MQR_STR("receipt-id"), *receipt};
  (void)mqr__stomp_write(c, MQR__STOMP_ERROR, h, n, mqr_str(text), true); /* closing anyway */
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): STOMP ERROR: %s: %s; closing it", (long long)c->sess.id, c->peer,
           message, text);
  mqr__conn_close(c, true);
}

void mqr__stomp_receipt(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  const mqr_str_t *receipt = mqr__stomp_header(f, "receipt");
  if (receipt == NULL || c->state == MQR__CONN_CLOSING) return;
  mqr__stomp_header_t h = {MQR_STR("receipt-id"), *receipt};
  mqr__stomp_written(c, mqr__stomp_write(c, MQR__STOMP_RECEIPT, &h, 1, MQR_STR(""), false));
}

int64_t mqr__stomp_receipt_later(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  const mqr_str_t *receipt = mqr__stomp_header(f, "receipt");
  if (receipt == NULL) return 0;
  if (st->w_n == st->w_cap) { /* a ring: grown in place, its order kept */
    uint32_t ncap = st->w_cap ? st->w_cap * 2 : 8;
    stomp_receipt_t *nw = mqr_malloc(ncap * sizeof *nw);
    if (nw == NULL) return -1;
    for (uint32_t i = 0; i < st->w_n; i++) nw[i] = st->waiting[(st->w_head + i) % st->w_cap];
    mqr_free(st->waiting);
    st->waiting = nw;
    st->w_cap = ncap;
    st->w_head = 0;
  }
  /* The ids, in order, in one buffer: taken from the front as the answers come. */
  if (st->ids_head == st->ids_len) st->ids_head = st->ids_len = 0;
  if (st->ids_len + receipt->len > st->ids_cap && st->ids_head) { /* the answered ones' room, back */
    memmove(st->ids, st->ids + st->ids_head, st->ids_len - st->ids_head);
    for (uint32_t i = 0; i < st->w_n; i++) st->waiting[(st->w_head + i) % st->w_cap].off -= st->ids_head;
    st->ids_len -= st->ids_head;
    st->ids_head = 0;
  }
  if (st->ids_len + receipt->len > st->ids_cap) {
    size_t ncap = st->ids_cap ? st->ids_cap : 256;
    while (ncap < st->ids_len + receipt->len) ncap *= 2;
    char *ni = mqr_realloc(st->ids, ncap);
    if (ni == NULL) return -1;
    st->ids = ni;
    st->ids_cap = ncap;
  }
  if (receipt->len) memcpy(st->ids + st->ids_len, receipt->ptr, receipt->len); /* ("receipt:" may be empty) */
  stomp_receipt_t *r = &st->waiting[(st->w_head + st->w_n++) % st->w_cap];
  *r = (stomp_receipt_t){++st->next_token, st->ids_len, receipt->len};
  st->ids_len += receipt->len;
  return r->token;
}

void mqr__stomp_receipt_drop_last(mqr__conn_t *c) {
  stomp_t *st = c->hs;
  st->ids_len = st->waiting[(st->w_head + --st->w_n) % st->w_cap].off;
}

/* ---- CONNECT ------------------------------------------------------------------------------------ */

/* "cx,cy": two integers of ms. */
static bool heart_beat(mqr_str_t s, uint64_t *cx, uint64_t *cy) {
  uint64_t v[2] = {0, 0};
  size_t i = 0;
  for (int k = 0; k < 2; k++) {
    size_t start = i;
    while (i < s.len && s.ptr[i] >= '0' && s.ptr[i] <= '9' && v[k] < 86400000)
      v[k] = v[k] * 10 + (uint64_t)(s.ptr[i++] - '0');
    if (i == start || (k == 0 && (i >= s.len || s.ptr[i++] != ','))) return false;
  }
  if (i != s.len) return false;
  *cx = v[0];
  *cy = v[1];
  return true;
}

/* The highest version both speak, of accept-version's comma-separated list; none: 1.0. */
static int negotiate(const mqr_str_t *accept) {
  if (accept == NULL) return MQR__STOMP_10;
  int best = -1;
  for (size_t i = 0, s = 0; i <= accept->len; i++) {
    if (i < accept->len && accept->ptr[i] != ',') continue;
    mqr_str_t v = mqr_str_n(accept->ptr + s, i - s);
    int x = mqr_str_eq(v, MQR_STR("1.0"))   ? MQR__STOMP_10
            : mqr_str_eq(v, MQR_STR("1.1")) ? MQR__STOMP_11
            : mqr_str_eq(v, MQR_STR("1.2")) ? MQR__STOMP_12
                                            : -1;
    if (x > best) best = x;
    s = i + 1;
  }
  return best;
}

/* The answer to a CONNECT's login: its CONNECT is taken again, now with it. */
static void auth_answered(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  stomp_t *st = c->hs;
  st->auth = NULL;
  st->auth_done = true;
  st->auth_status = status;
  st->auth_who = who;
  mqr__conn_hold(c, false);
}

/* Checks a CONNECT's login and passcode headers: true when the answer is in, false when
 * it comes later (the connection held, the frame left unread). */
static bool authenticate(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  if (st->auth_done) return true;
  const mqr_str_t *login = mqr__stomp_header(f, "login"), *passcode = mqr__stomp_header(f, "passcode");
  mqr_str_t user = login ? *login : MQR_STR(""), pw = passcode ? *passcode : MQR_STR("");
  if (login && login->len == 0 && passcode && passcode->len) user = MQR_STR(" "); /* a name, and a wrong one */
  mqr__principal_t *who = NULL;
  const char *identity = mqr__conn_identity(c);
  int rc = login == NULL && identity ? mqr__authenticate_certificate(c->b, identity, c->peer, &who)
                                     : mqr__authenticate(c->b, user, pw, c->peer, auth_answered, c, &who, &st->auth);
  if (rc == MQR__PENDING) {
    mqr__conn_hold(c, true);
    return false;
  }
  st->auth_done = true;
  st->auth_status = rc;
  st->auth_who = who;
  return true;
}

static void on_connect(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  const mqr_listener_config_t *cfg = c->l->cfg;
  if (st->auth_status != 0) { /* an ERROR frame, then the close, as Artemis answers */
    const mqr_str_t *login = mqr__stomp_header(f, "login");
    if (st->auth_status == MQR_EPERM)
      mqr__stomp_error(c, f, "Security Error", "anonymous clients are not allowed: give login and passcode");
    else
      mqr__stomp_error(c, f, "Security Error", "authentication of user '%.*s' failed",
                       (int)(login ? (login->len > 64 ? 64 : login->len) : 0), login ? login->ptr : "");
    return;
  }
  mqr__session_set_principal(&c->sess, st->auth_who);
  st->auth_who = NULL;
  int v = negotiate(mqr__stomp_header(f, "accept-version"));
  if (v < 0) {
    mqr__stomp_header_t h = {MQR_STR("version"), MQR_STR("1.0,1.1,1.2")};
    (void)mqr__stomp_write(c, MQR__STOMP_ERROR, &h, 1, MQR_STR("Supported protocol versions are 1.0 1.1 1.2"), true);
    mqr__conn_close(c, true);
    return;
  }
  st->version = (mqr__stomp_version_t)v;
  uint64_t cx = 0, cy = 0;
  const mqr_str_t *hb = v >= MQR__STOMP_11 ? mqr__stomp_header(f, "heart-beat") : NULL;
  if (hb && !heart_beat(*hb, &cx, &cy)) {
    mqr__stomp_error(c, f, "bad heart-beat header",
                     "heart-beat must be two integers of ms, as '10000,10000', not '%.*s'", (int)hb->len, hb->ptr);
    return;
  }
  /* As Artemis: the client's silence is allowed twice its heart-beat (at least 1 s), or
   * the listener's idle-timeout when it sends none; the broker beats at the client's
   * wish, at most every 500 ms. */
  st->ttl = cx ? (uint32_t)(cx * 2 < 1000 ? 1000 : cx * 2) : cfg->idle_timeout_ms;
  st->send_every = cy ? (uint32_t)(cy < 500 ? 500 : cy) : 0;
  const mqr_str_t *id = mqr__stomp_header(f, "client-id");
  if (id && id->len) {
    if ((st->client_id = mqr_malloc(id->len + 1)) == NULL) {
      mqr__conn_fail(c, MQR_ENOMEM, "out of memory");
      return;
    }
    memcpy(st->client_id, id->ptr, id->len);
    st->client_id[id->len] = 0;
  }
  st->connected = true;
  c->state = MQR__CONN_OPEN;
  char session[24], beat[48];
  snprintf(session, sizeof session, "%lld", (long long)c->sess.id);
  snprintf(beat, sizeof beat, "%u,%u", st->send_every, cx ? st->ttl / 2 : 0);
  mqr__stomp_header_t h[4] = {{MQR_STR("session"), mqr_str(session)},
                              {MQR_STR("server"), MQR_STR("mqr/" MQR_VERSION_STRING)}};
  uint32_t n = 2;
  if (v >= MQR__STOMP_11) {
    h[n++] = (mqr__stomp_header_t){MQR_STR("version"), v == MQR__STOMP_11 ? MQR_STR("1.1") : MQR_STR("1.2")};
    h[n++] = (mqr__stomp_header_t){MQR_STR("heart-beat"), mqr_str(beat)};
  }
  mqr__stomp_written(c, mqr__stomp_write(c, MQR__STOMP_CONNECTED, h, n, MQR_STR(""), false));
  mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): STOMP 1.%d client connected", (long long)c->sess.id, c->peer, v);
}

/* ---- transactions ------------------------------------------------------------------------------- */

static stomp_tx_t *tx_find(stomp_t *st, mqr_str_t name, stomp_tx_t ***at) {
  for (stomp_tx_t **pp = &st->txs; *pp; pp = &(*pp)->next)
    if (mqr_str_eq((*pp)->name, name)) {
      if (at) *at = pp;
      return *pp;
    }
  return NULL;
}

static void tx_free(stomp_t *st, stomp_tx_t **at) {
  stomp_tx_t *tx = *at;
  *at = tx->next;
  st->n_txs--;
  mqr_free(tx->buf);
  mqr_free(tx);
}

static void on_begin(mqr__conn_t *c, const mqr__stomp_frame_t *f, mqr_str_t name) {
  stomp_t *st = c->hs;
  if (tx_find(st, name, NULL)) {
    mqr__stomp_error(c, f, "transaction already begun", "transaction '%.*s' is already open", (int)name.len, name.ptr);
    return;
  }
  if (st->n_txs >= STOMP_MAX_TRANSACTIONS) {
    mqr__stomp_error(c, f, "too many transactions", "a connection has at most %d transactions open",
                     STOMP_MAX_TRANSACTIONS);
    return;
  }
  stomp_tx_t *tx = mqr_calloc(1, sizeof *tx + name.len + 1);
  if (tx == NULL) {
    mqr__stomp_error(c, f, "out of memory", "no memory for transaction '%.*s'", (int)name.len, name.ptr);
    return;
  }
  memcpy(tx + 1, name.ptr, name.len);
  tx->name = mqr_str_n((const char *)(tx + 1), name.len);
  tx->next = st->txs;
  st->txs = tx;
  st->n_txs++;
  mqr__stomp_receipt(c, f);
}

/* The frame, its transaction and receipt headers left out, written again (as STOMP 1.2
 * escapes it) at the end of the transaction's frames. */
static bool tx_keep(mqr__conn_t *c, stomp_tx_t *tx, const mqr__stomp_frame_t *f) {
  (void)c;
  uint32_t n = 0;
  mqr__stomp_header_t *keep = mqr_malloc((f->n_headers + 1) * sizeof *keep);
  if (keep == NULL) return false;
  for (uint32_t i = 0; i < f->n_headers; i++)
    if (!mqr_str_eq(f->headers[i].name, MQR_STR("transaction")) && !mqr_str_eq(f->headers[i].name, MQR_STR("receipt")))
      keep[n++] = f->headers[i];
  size_t head = mqr__stomp_put_head(NULL, 0, MQR__STOMP_12, f->command, keep, n, true, f->body.len);
  size_t need = tx->len + head + f->body.len + 1;
  bool ok = need <= STOMP_MAX_TX_BYTES;
  if (ok && need > tx->cap) {
    size_t ncap = tx->cap ? tx->cap : 4096;
    while (ncap < need) ncap *= 2;
    uint8_t *nb = mqr_realloc(tx->buf, ncap);
    ok = nb != NULL;
    if (ok) tx->buf = nb, tx->cap = ncap;
  }
  if (ok) {
    mqr__stomp_put_head(tx->buf + tx->len, head, MQR__STOMP_12, f->command, keep, n, true, f->body.len);
    if (f->body.len) memcpy(tx->buf + tx->len + head, f->body.ptr, f->body.len);
    tx->buf[need - 1] = 0;
    tx->len = need;
  }
  mqr_free(keep);
  return ok;
}

static void handle(mqr__conn_t *c, const mqr__stomp_frame_t *f);

/* Its frames, read back and handled in order; then it is gone. */
static void on_commit(mqr__conn_t *c, const mqr__stomp_frame_t *f, stomp_tx_t **at) {
  stomp_t *st = c->hs;
  stomp_tx_t *tx = *at;
  *at = tx->next; /* out of the list: a frame of it cannot reach it */
  st->n_txs--;
  mqr__stomp_receipt(c, f); /* f's views are overwritten by the frames read below */
  mqr__stomp_limits_t lim = {UINT32_MAX, mqr__stomp_broker(c->b)->cap, UINT32_MAX};
  mqr__stomp_version_t v = st->version;
  for (size_t pos = 0; pos < tx->len && c->state != MQR__CONN_CLOSING;) {
    mqr__stomp_frame_t g = {.headers = mqr__stomp_broker(c->b)->headers};
    size_t used = 0;
    mqr_error_t err;
    st->version = MQR__STOMP_12; /* as written */
    int rc = mqr__stomp_parse(tx->buf + pos, tx->len - pos, MQR__STOMP_12, &lim, &g, &used, &err);
    st->version = v;
    if (rc != 0) break; /* cannot be: written by tx_keep */
    pos += used;
    handle(c, &g);
  }
  mqr_free(tx->buf);
  mqr_free(tx);
}

/* ---- frames --------------------------------------------------------------------------------------- */

static void handle(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  if (!st->connected) {
    if (f->command == MQR__STOMP_CONNECT || f->command == MQR__STOMP_STOMP)
      on_connect(c, f);
    else
      mqr__stomp_error(c, f, "not connected", "the first frame must be CONNECT or STOMP, not %s",
                       mqr__stomp_command_name(f->command));
    return;
  }
  const mqr_str_t *txn = mqr__stomp_header(f, "transaction");
  stomp_tx_t *tx = NULL, **at = NULL;
  switch (f->command) {
  case MQR__STOMP_SEND:
  case MQR__STOMP_ACK:
  case MQR__STOMP_NACK:
    if (txn) {
      if ((tx = tx_find(st, *txn, NULL)) == NULL)
        mqr__stomp_error(c, f, "no such transaction", "transaction '%.*s' is not open", (int)txn->len, txn->ptr);
      else if (!tx_keep(c, tx, f))
        mqr__stomp_error(c, f, "transaction too large", "transaction '%.*s' holds more than %u bytes, or no memory",
                         (int)txn->len, txn->ptr, STOMP_MAX_TX_BYTES);
      else
        mqr__stomp_receipt(c, f);
      return;
    }
    if (f->command == MQR__STOMP_SEND)
      mqr__stomp_on_send(c, f);
    else
      mqr__stomp_on_ack(c, f, f->command == MQR__STOMP_ACK);
    return;
  case MQR__STOMP_SUBSCRIBE: mqr__stomp_on_subscribe(c, f); return;
  case MQR__STOMP_UNSUBSCRIBE: mqr__stomp_on_unsubscribe(c, f); return;
  case MQR__STOMP_BEGIN:
  case MQR__STOMP_COMMIT:
  case MQR__STOMP_ABORT:
    if (txn == NULL) {
      mqr__stomp_error(c, f, "missing transaction header", "%s needs a transaction header",
                       mqr__stomp_command_name(f->command));
    } else if (f->command == MQR__STOMP_BEGIN) {
      on_begin(c, f, *txn);
    } else if (tx_find(st, *txn, &at) == NULL) {
      mqr__stomp_error(c, f, "no such transaction", "transaction '%.*s' is not open", (int)txn->len, txn->ptr);
    } else if (f->command == MQR__STOMP_COMMIT) {
      on_commit(c, f, at);
    } else {
      tx_free(st, at); /* its frames go unhandled: its ACKs too (the messages stay delivered) */
      mqr__stomp_receipt(c, f);
    }
    return;
  case MQR__STOMP_DISCONNECT:
    mqr__stomp_receipt(c, f);
    mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): STOMP client disconnected", (long long)c->sess.id, c->peer);
    mqr__conn_close(c, true);
    return;
  case MQR__STOMP_CONNECT:
  case MQR__STOMP_STOMP:
    mqr__stomp_error(c, f, "already connected", "a second %s", mqr__stomp_command_name(f->command));
    return;
  default:
    mqr__stomp_error(c, f, "not a client frame", "%s is a frame the server sends", mqr__stomp_command_name(f->command));
    return;
  }
}

/* ---- the head's ops ------------------------------------------------------------------------------ */

static int stomp_open(mqr__conn_t *c) {
  void **slot = mqr__head_slot(c->b, &mqr__stomp_head);
  if (*slot == NULL && (*slot = mqr_calloc(1, sizeof(stomp_broker_t))) == NULL) return MQR_ENOMEM;
  stomp_broker_t *net = *slot;
  uint32_t want = mqr__stomp_opt(c, STOMP_OPT_MAX_HEADERS);
  if (net->cap < want) { /* the broker's, shared: one frame is handled at a time */
    void *h = mqr_malloc(want * sizeof(mqr__stomp_header_t)), *k = mqr_malloc(want * sizeof(mqr_str_t)),
         *v = mqr_malloc(want * sizeof(mqr_value_t));
    if (h == NULL || k == NULL || v == NULL) {
      mqr_free(h), mqr_free(k), mqr_free(v);
      return MQR_ENOMEM;
    }
    mqr_free(net->headers), mqr_free(net->keys), mqr_free(net->values);
    net->headers = h, net->keys = k, net->values = v;
    net->cap = want;
  }
  stomp_t *st = mqr_calloc(1, sizeof *st);
  if (st == NULL) return MQR_ENOMEM;
  st->version = MQR__STOMP_12; /* before CONNECT: CONNECT frames are never escaped anyway */
  c->hs = st;
  return 0;
}

static int take(mqr__conn_t *c) {
  stomp_t *st = c->hs;
  mqr__stomp_limits_t lim = {mqr__stomp_opt(c, STOMP_OPT_MAX_FRAME), mqr__stomp_opt(c, STOMP_OPT_MAX_HEADERS),
                             mqr__stomp_opt(c, STOMP_OPT_MAX_HEADER_LEN)};
  mqr__stomp_frame_t f = {.headers = mqr__stomp_broker(c->b)->headers, .progress = st->progress};
  size_t used = 0;
  mqr_error_t err;
  int rc = mqr__stomp_parse(c->rbuf + c->rpos, c->rlen - c->rpos, st->version, &lim, &f, &used, &err);
  st->progress = f.progress;
  c->rpos += used; /* a whole frame, or the heart-beats before a part of one */
  if (rc == MQR_ETRUNCATED) return 0;
  if (rc != 0) {
    mqr__stomp_error(c, NULL, rc == MQR_ELIMIT ? "frame too large" : "malformed frame", "%s", err.message);
    return -1;
  }
  if (!st->connected && (f.command == MQR__STOMP_CONNECT || f.command == MQR__STOMP_STOMP) && !authenticate(c, &f)) {
    c->rpos -= used; /* read again once the login is checked (a CONNECT is never unescaped) */
    st->progress = (mqr__stomp_progress_t){0};
    return 0;
  }
  handle(c, &f);
  return c->state == MQR__CONN_CLOSING ? -1 : 1;
}

/* The parser checked the limit on the part that came: the buffer doubles up to it. */
static size_t room(const mqr__conn_t *c) {
  size_t limit = (size_t)mqr__stomp_opt(c, STOMP_OPT_MAX_FRAME) + 2, want = c->rcap * 2;
  return want < limit || limit <= c->rcap ? want : limit;
}

static void tick(mqr__conn_t *c, uint64_t now) {
  stomp_t *st = c->hs;
  if (!st->connected) return;
  if (st->ttl && c->reading && now - c->heard_ms >= st->ttl) {
    mqr__stomp_error(c, NULL, "heart-beat missed", "nothing heard for %u ms", st->ttl);
    return;
  }
  if (st->send_every && now - st->sent_ms >= st->send_every) { /* an EOL: the broker's heart-beat */
    size_t off;
    uint8_t *p = mqr__conn_reserve(c, 1, &off);
    if (p) {
      *p = '\n';
      if (mqr__conn_commit(c, off, 1) == 0) st->sent_ms = now;
    }
  }
}

static void fail(mqr__conn_t *c, int code, const char *text) {
  mqr__stomp_error(c, NULL, mqr_err_name(code), "%s", text);
}

static void bye(mqr__conn_t *c) {
  mqr__stomp_header_t h[2] = {{MQR_STR("message"), MQR_STR("the broker is shutting down")},
                              {MQR_STR("content-type"), MQR_STR("text/plain")}};
  (void)mqr__stomp_write(c, MQR__STOMP_ERROR, h, 2, MQR_STR(""), true);
}

/* A send's (or an ACK's) answer, in order: its receipt's RECEIPT, or an ERROR (then closed). */
static void sent(mqr__conn_t *c, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r;
  stomp_t *st = c->hs;
  stomp_receipt_t w = {0, 0, 0};
  const char *id = NULL;
  if (token && st->w_n && st->waiting[st->w_head].token == token) {
    w = st->waiting[st->w_head];
    id = st->ids + w.off; /* valid until the next receipt_later */
    st->ids_head = w.off + w.len;
    st->w_head = (st->w_head + 1) % st->w_cap;
    st->w_n--;
  }
  mqr__stomp_header_t h[3] = {{MQR_STR("receipt-id"), mqr_str_n(id, w.len)}};
  if (status != 0) {
    h[0] = (mqr__stomp_header_t){MQR_STR("message"), mqr_str(mqr_err_name(status))};
    h[1] = (mqr__stomp_header_t){MQR_STR("content-type"), MQR_STR("text/plain")};
    if (id) h[2] = (mqr__stomp_header_t){MQR_STR("receipt-id"), mqr_str_n(id, w.len)};
    const char *text = err ? err->message : mqr_strerror(status);
    (void)mqr__stomp_write(c, MQR__STOMP_ERROR, h, id ? 3 : 2, mqr_str(text), true);
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a SEND or ACK failed: %s; closing it", (long long)c->sess.id,
             c->peer, text);
    mqr__conn_close(c, true);
  } else if (id) {
    mqr__stomp_written(c, mqr__stomp_write(c, MQR__STOMP_RECEIPT, h, 1, MQR_STR(""), false));
  }
}

static void release(mqr__conn_t *c) {
  stomp_t *st = c->hs;
  if (st == NULL) return;
  mqr__auth_cancel(st->auth);
  mqr__principal_release(st->auth_who);
  mqr__stomp_subs_free(c);
  while (st->txs) tx_free(st, &st->txs);
  mqr_free(st->waiting);
  mqr_free(st->ids);
  mqr_free(st->client_id);
  mqr_free(st);
  c->hs = NULL;
}

/* CONNECT or STOMP, after the end-of-lines a 1.1 client may send as heart-beats. */
static int sniff(const uint8_t *p, size_t n) {
  (void)n;
  return p[0] == 'C' || p[0] == 'S' || p[0] == '\n' || p[0] == '\r';
}

static void free_broker(mqr_broker_t *b) {
  stomp_broker_t *net = mqr__stomp_broker(b);
  mqr_free(net->headers);
  mqr_free(net->keys);
  mqr_free(net->values);
  mqr_free(net->out);
  mqr_free(net->text);
  mqr_free(net);
  *mqr__head_slot(b, &mqr__stomp_head) = NULL;
}

/* A listener's stomp block (the order of STOMP_OPT_*). */
static const mqr_option_def_t options[] = {
    {"max-frame-size", MQR_OPTION_SIZE, 1024, MQR_MAX_FRAME_LIMIT, MQR_DEFAULT_MAX_FRAME},
    {"max-headers", MQR_OPTION_INT, 1, 1000000, 1000},
    {"max-header-length", MQR_OPTION_SIZE, 64, MQR_MAX_FRAME_LIMIT, 10240},
};
const mqr_protocol_def_t mqr__stomp_def = {"stomp", MQR_PROTOCOL_STOMP, options, sizeof options / sizeof *options};

const mqr__head_t mqr__stomp_head = {
    .name = "STOMP",
    .def = &mqr__stomp_def,
    .sniff = sniff,
    .free = free_broker,
    .open = stomp_open,
    .take = take,
    .room = room,
    .tick = tick,
    .fail = fail,
    .bye = bye,
    .sent = sent,
    .release = release,
};
