/* libmqr-client, async on libuv. Frames are encoded straight into an output buffer; the
 * frames of one loop pass leave in one write at the start of the next (the idle phase).
 * While a write is in flight, new frames gather in a second buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/grow.h"
#include "client_int.h"
#include "mqr/security.h"

typedef enum { P_CONNECT, P_RECEIPT, P_QUERY, P_MANAGE } pending_kind_t;

typedef struct pending_s {
  pending_kind_t kind;
  int64_t id;
  mqr_client_done_fn cb;
  void *arg;
  struct pending_s *next;
} pending_t;

struct mqr_client_sub_s {
  mqr_client_t *c;
  int64_t id;
  mqr_client_message_fn on_message;
  mqr_client_done_fn done;
  void *arg;
  bool subscribed;
  struct mqr_client_sub_s *next;
};

typedef enum { C_NEW, C_CONNECTING, C_HANDSHAKE, C_OPEN, C_CLOSING, C_CLOSED } state_t;

struct mqr_client_s {
  uv_loop_t *loop;
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_idle_t idle;
  uv_write_t wreq;
  mqr_client_options_t opt;
  char client_id[128];
  state_t state;
  mqr_avro_buf_t out, writing;
  bool write_in_flight, idle_on;
  uint8_t *rbuf;
  size_t rlen, rcap;
  uint8_t *arena;
  size_t arena_cap;
  int64_t next_id;
  uint32_t server_max_frame; /* from CONNECTED; 0 until then */
  /* Requests waiting for their answer, oldest first: the broker answers in order, so the
   * one answered is found at the head whatever the window. */
  pending_t *pending, *pending_tail;
  pending_t *pending_free; /* kept for reuse: a warm client allocates nothing per request */
  uint32_t n_pending_free;
  mqr_client_sub_t *subs;
  int handles;
  bool tcp_open, user_closed; /* freed once the user closed it and its handles are closed */
  void (*close_cb)(void *arg);
  void *close_arg;
  /* tls:// : its TLS, the ciphertext of the data write in flight, a read's ciphertext,
   * and the host its certificate must name. */
  mqr__ctls_t *tls;
  uint8_t *wcipher; /* the ciphertext being written, kept for the next write (a large
                       buffer made for each write cost the kernel its pages each time) */
  size_t wcipher_cap;
  uint8_t *cin;
  char tls_host[256];
  mqr_scram_client_t *scram;              /* a SCRAM-SHA-256 exchange under way */
  char url_user[256], url_password[1024]; /* a URL's user:password@ */
  bool scram_proved;                      /* the broker's server-final verified */
  char redirect_url[512];                 /* the last REDIRECT's ("": none) */
  int64_t redirect_node;
};

/* ---- urls -------------------------------------------------------------------------------- */

#define URL_HOST_MAX 256

/* tcp://HOST:PORT or tls://HOST:PORT: the address, whether TLS, and the host as written
 * (URL_HOST_MAX bytes). */
static int parse_url(const char *url, struct sockaddr_storage *out, bool *tls, char *host, mqr_error_t *err) {
  bool is_tls = url && strncmp(url, "tls://", 6) == 0;
  if (url == NULL || (strncmp(url, "tcp://", 6) != 0 && !is_tls))
    return mqr_error_set(err, MQR_EINVAL, "url '%s' must be tcp://HOST:PORT or tls://HOST:PORT", url ? url : "");
  if (tls) *tls = is_tls;
  const char *h = url + 6, *colon, *at = strchr(h, '@');
  if (at) h = at + 1; /* user:password@ (mqr_client_connect takes them) */
  if (*h == '[') {
    const char *close = strchr(h, ']');
    if (close == NULL || close[1] != ':' || (size_t)(close - h - 1) >= URL_HOST_MAX)
      return mqr_error_set(err, MQR_EINVAL, "url '%s': bad [IPv6] host", url);
    snprintf(host, URL_HOST_MAX, "%.*s", (int)(close - h - 1), h + 1);
    colon = close + 1;
  } else {
    colon = strrchr(h, ':');
    if (colon == NULL || (size_t)(colon - h) >= URL_HOST_MAX)
      return mqr_error_set(err, MQR_EINVAL, "url '%s': no port", url);
    snprintf(host, URL_HOST_MAX, "%.*s", (int)(colon - h), h);
  }
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || port <= 0 || port > 65535)
    return mqr_error_set(err, MQR_EINVAL, "url '%s': bad port", url);
  mqr_error_t why;
  if (mqr_resolve(host, (uint16_t)port, out, &why) != 0)
    return mqr_error_set(err, MQR_EINVAL, "url '%s': %s", url, why.message);
  return 0;
}

int mqr_client_parse_url(const char *url, struct sockaddr_storage *out, mqr_error_t *err) {
  char host[256];
  return parse_url(url, out, NULL, host, err);
}

/* ---- writing ------------------------------------------------------------------------------ */

static void flush(mqr_client_t *c);

static void idle_cb(uv_idle_t *h) {
  mqr_client_t *c = h->data;
  uv_idle_stop(&c->idle);
  c->idle_on = false;
  flush(c);
}

static void wake(mqr_client_t *c) {
  if (c->idle_on || c->state == C_CLOSED) return;
  c->idle_on = true;
  uv_idle_start(&c->idle, idle_cb);
}

static int queue_frame(mqr_client_t *c, const mqr_frame_t *f, mqr_error_t *err) {
  if (c->state >= C_CLOSING) return mqr_error_set(err, MQR_ECLOSED, "the client is closed");
  int rc = mqr_frame_encode(f, &c->out, err);
  if (rc == 0) wake(c);
  return rc;
}

static void lost(mqr_client_t *c, int status);
static void finish_close(mqr_client_t *c);

static void write_cb(uv_write_t *req, int status) {
  mqr_client_t *c = req->data;
  c->write_in_flight = false;
  c->writing.len = 0;
  if (status < 0) {
    lost(c, MQR_EIO);
    /* Closing already (the user's close, its DISCONNECT failing on a dead peer): lost()
     * had nothing to do, and the handles must still close. */
    if (c->state == C_CLOSING) finish_close(c);
    return;
  }
  if (c->out.len) flush(c);
  if (c->state == C_CLOSING && !c->write_in_flight) finish_close(c);
}

/* TLS's own records (the handshake's): written on their own. */
typedef struct {
  uv_write_t req;
  mqr_client_t *c;
  uint8_t data[];
} tls_own_t;

static void tls_own_cb(uv_write_t *req, int status) {
  tls_own_t *o = req->data;
  mqr_client_t *c = o->c;
  mqr_free(o);
  if (status < 0) lost(c, MQR_EIO);
}

static void tls_send_own(mqr_client_t *c) {
  size_t n = mqr__ctls_pending(c->tls);
  if (n == 0) return;
  tls_own_t *o = mqr_malloc(sizeof *o + n);
  if (o == NULL) {
    lost(c, MQR_ENOMEM);
    return;
  }
  o->c = c;
  o->req.data = o;
  n = mqr__ctls_take(c->tls, o->data, n);
  uv_buf_t b = uv_buf_init((char *)o->data, (unsigned)n);
  if (uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, tls_own_cb) != 0) {
    mqr_free(o);
    lost(c, MQR_EIO);
  }
}

static void flush(mqr_client_t *c) {
  if (c->write_in_flight || c->out.len == 0 || c->state < C_HANDSHAKE || !c->tcp_open) return;
  if (c->tls && mqr__ctls_handshake(c->tls, NULL) != 1) return; /* after the TLS handshake */
  mqr_avro_buf_t t = c->writing;
  c->writing = c->out;
  c->out = t;
  c->out.len = 0;
  uv_buf_t buf = uv_buf_init((char *)c->writing.data, (unsigned)c->writing.len);
  if (c->tls) { /* encrypted, the ciphertext written */
    size_t n = 0;
    if (mqr__ctls_write(c->tls, c->writing.data, c->writing.len, &c->wcipher, &c->wcipher_cap, &n) != 0 || n == 0) {
      lost(c, MQR_EIO);
      return;
    }
    buf = uv_buf_init((char *)c->wcipher, (unsigned)n);
  }
  c->wreq.data = c;
  if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) != 0) {
    lost(c, MQR_EIO);
    return;
  }
  c->write_in_flight = true;
}

/* ---- answers ------------------------------------------------------------------------------ */

static pending_t *take_pending(mqr_client_t *c, pending_kind_t kind, int64_t id) {
  pending_t *prev = NULL;
  for (pending_t **pp = &c->pending; *pp; prev = *pp, pp = &(*pp)->next)
    if ((*pp)->kind == kind && (*pp)->id == id) {
      pending_t *p = *pp;
      *pp = p->next;
      if (c->pending_tail == p) c->pending_tail = prev;
      return p;
    }
  return NULL;
}

static pending_t *pending_new(mqr_client_t *c) {
  pending_t *p = c->pending_free;
  if (p == NULL) return mqr_calloc(1, sizeof *p);
  c->pending_free = p->next;
  c->n_pending_free--;
  return p;
}

static void pending_put(mqr_client_t *c, pending_t *p) {
  if (c->n_pending_free >= 4096) {
    mqr_free(p);
    return;
  }
  p->next = c->pending_free;
  c->pending_free = p;
  c->n_pending_free++;
}

static void pending_append(mqr_client_t *c, pending_t *p) {
  p->next = NULL;
  if (c->pending_tail)
    c->pending_tail->next = p;
  else
    c->pending = p;
  c->pending_tail = p;
}

static mqr_client_sub_t *find_sub(mqr_client_t *c, int64_t id) {
  for (mqr_client_sub_t *s = c->subs; s; s = s->next)
    if (s->id == id) return s;
  return NULL;
}

int64_t mqr__client_sub_id(const mqr_client_sub_t *s) { return s->id; }
bool mqr__client_written(const mqr_client_t *c) {
  return c->state >= C_CLOSING || (c->out.len == 0 && !c->write_in_flight);
}
mqr_client_sub_t *mqr__client_find_sub(mqr_client_t *c, int64_t id) { return find_sub(c, id); }

static void drop_sub(mqr_client_t *c, mqr_client_sub_t *s) {
  for (mqr_client_sub_t **pp = &c->subs; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      mqr_free(s);
      return;
    }
}

static void on_frame(mqr_client_t *c, const mqr_frame_t *f) {
  pending_t *p;
  mqr_client_sub_t *s;
  switch (f->type) {
  case MQR_FRAME_AUTH:
    if (c->scram && !c->scram_proved && c->state == C_HANDSHAKE) {
      char out[512];
      if (c->scram->auth[0] == 0) { /* server-first: our proof */
        const char *pw = c->opt.password ? c->opt.password : "";
        if (mqr_scram_client_final(c->scram, pw, strlen(pw), f->u.auth.data, out, sizeof out) != 0) {
          lost(c, MQR_EPROTOCOL);
          return;
        }
        mqr_frame_t r = {MQR_FRAME_AUTH, {.auth = {mqr_str(out)}}};
        if (queue_frame(c, &r, NULL) != 0) lost(c, MQR_ENOMEM);
        return;
      }
      if (mqr_scram_client_verify(c->scram, f->u.auth.data)) { /* server-final */
        c->scram_proved = true;
        return;
      }
    }
    lost(c, MQR_EPROTOCOL); /* an exchange that is not SCRAM's, or a broker that did not prove itself */
    return;
  case MQR_FRAME_CONNECTED:
    if (c->scram && !c->scram_proved) {
      lost(c, MQR_EAUTH); /* the broker never proved it knew the user's keys */
      return;
    }
    c->state = C_OPEN;
    c->server_max_frame = f->u.connected.max_frame > 0 ? (uint32_t)f->u.connected.max_frame : 0;
    if ((p = take_pending(c, P_CONNECT, 0)) != NULL) {
      if (p->cb) p->cb(c, 0, f, p->arg);
      pending_put(c, p);
    }
    return;
  case MQR_FRAME_RECEIPT:
    if ((p = take_pending(c, P_RECEIPT, f->u.receipt.receipt)) != NULL) {
      if (p->cb) p->cb(c, 0, f, p->arg);
      pending_put(c, p);
    }
    return;
  case MQR_FRAME_SUBSCRIBED:
    if ((s = find_sub(c, f->u.subscribed.subscription)) != NULL && !s->subscribed) {
      s->subscribed = true;
      if (s->done) s->done(c, 0, f, s->arg);
    }
    return;
  case MQR_FRAME_MESSAGE:
    if ((s = find_sub(c, f->u.message.subscription)) != NULL) s->on_message(s, &f->u.message, s->arg);
    return;
  case MQR_FRAME_QUERY_RESULT:
    if ((p = take_pending(c, P_QUERY, f->u.query_result.query)) != NULL) {
      if (p->cb) p->cb(c, 0, f, p->arg);
      pending_put(c, p);
    }
    return;
  case MQR_FRAME_MANAGE_RESULT:
    if ((p = take_pending(c, P_MANAGE, f->u.manage_result.request)) != NULL) {
      if (p->cb) p->cb(c, 0, f, p->arg);
      pending_put(c, p);
    }
    return;
  case MQR_FRAME_ERROR: {
    const mqr_frame_error_t *e = &f->u.error;
    int code = e->code < 0 ? e->code : MQR_EPROTOCOL;
    if (e->receipt && (p = take_pending(c, P_RECEIPT, e->receipt)) != NULL) {
      if (p->cb) p->cb(c, code, f, p->arg);
      mqr_free(p);
    } else if (e->receipt && ((p = take_pending(c, P_QUERY, e->receipt)) != NULL ||
                              (p = take_pending(c, P_MANAGE, e->receipt)) != NULL)) {
      if (p->cb) p->cb(c, code, f, p->arg);
      mqr_free(p);
    } else if (e->receipt && (s = find_sub(c, e->receipt)) != NULL && !s->subscribed) {
      mqr_client_done_fn done = s->done;
      void *arg = s->arg;
      drop_sub(c, s);
      if (done) done(c, code, f, arg);
    } else if (c->state == C_HANDSHAKE && (p = take_pending(c, P_CONNECT, 0)) != NULL) {
      if (p->cb) p->cb(c, code, f, p->arg);
      mqr_free(p);
    } else if (c->opt.on_error) {
      c->opt.on_error(c, code, e, c->opt.arg);
    }
    return;
  }
  case MQR_FRAME_DISCONNECT: lost(c, MQR_ECLOSED); return;
  case MQR_FRAME_PING: { /* the broker checks that this client is there */
    mqr_frame_t pong = {MQR_FRAME_PONG, {.pong = {f->u.ping.token}}};
    if (queue_frame(c, &pong, NULL) == MQR_ENOMEM) lost(c, MQR_ENOMEM);
    return;
  }
  case MQR_FRAME_PONG: return;
  case MQR_FRAME_REDIRECT: /* (the ERROR it comes before says what was refused) */
    snprintf(c->redirect_url, sizeof c->redirect_url, "%.*s", (int)f->u.redirect.url.len, f->u.redirect.url.ptr);
    c->redirect_node = f->u.redirect.node;
    return;
  default: lost(c, MQR_EPROTOCOL); return;
  }
}

/* ---- reading ------------------------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mqr_client_t *c = h->data;
  *buf = uv_buf_init(NULL, 0);
  size_t want = c->rlen + 65536;
  if (c->rlen >= MQR_FRAME_HEADER) {
    uint32_t body = 0;
    mqr_frame_peek(c->rbuf, c->rlen, UINT32_MAX, &body);
    if ((size_t)body + MQR_FRAME_HEADER > want) want = (size_t)body + MQR_FRAME_HEADER;
  }
  if (want > c->rcap) {
    uint8_t *nb = mqr_realloc(c->rbuf, want);
    if (nb == NULL) return;
    c->rbuf = nb;
    c->rcap = want;
  }
  *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

/* Every whole frame in rbuf, handled. */
static void parse(mqr_client_t *c) {
  size_t pos = 0;
  while (c->state < C_CLOSING) {
    uint32_t body = 0;
    int rc = mqr_frame_peek(c->rbuf + pos, c->rlen - pos, c->opt.max_frame, &body);
    if (rc < 0) {
      lost(c, MQR_ELIMIT);
      return;
    }
    if (rc == 0) break;
    const uint8_t *b = c->rbuf + pos + MQR_FRAME_HEADER;
    pos += MQR_FRAME_HEADER + body;
    mqr_frame_t f;
    for (;;) {
      mqr_avro_arena_t arena = {c->arena, c->arena_cap, 0};
      rc = mqr_frame_decode(b, body, &f, &arena, NULL);
      if (rc != MQR_ENOSPC || c->arena_cap > 4 * (size_t)c->opt.max_frame) break;
      size_t ncap = c->arena_cap * 2;
      uint8_t *na = mqr_realloc(c->arena, ncap);
      if (na == NULL) break;
      c->arena = na;
      c->arena_cap = ncap;
    }
    if (rc == 0 && f.type == MQR_FRAME_MESSAGE) rc = mqr_frame_message_stored(b, body, &f.u.message.stored);
    if (rc) {
      lost(c, MQR_EPROTOCOL);
      return;
    }
    on_frame(c, &f);
  }
  if (c->state >= C_CLOSING) return;
  memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
  c->rlen -= pos;
}

/* tls:// : ciphertext in (read in place: tls_read keeps what is left); the handshake on;
 * plaintext into rbuf, frames handled. */
static void tls_take_in(mqr_client_t *c) {
  mqr_error_t err;
  int hs = mqr__ctls_handshake(c->tls, &err);
  tls_send_own(c);
  if (hs < 0) { /* the CONNECT's answer says why */
    mqr_frame_t f = {MQR_FRAME_ERROR, {.error = {hs, mqr_str(mqr_err_name(hs)), mqr_str(err.message), 0, true}}};
    pending_t *pc = take_pending(c, P_CONNECT, 0);
    if (pc && pc->cb) pc->cb(c, hs, &f, pc->arg);
    mqr_free(pc);
    lost(c, hs);
    return;
  }
  if (hs == 0 || c->state >= C_CLOSING) return;
  flush(c); /* the CONNECT waited for the handshake */
  for (;;) {
    uv_buf_t room;
    alloc_cb((uv_handle_t *)&c->tcp, 0, &room);
    if (room.len == 0) {
      lost(c, MQR_ENOMEM);
      return;
    }
    long got = mqr__ctls_read(c->tls, room.base, room.len);
    if (got < 0) {
      lost(c, MQR_ECLOSED);
      return;
    }
    if (got == 0) break;
    c->rlen += (size_t)got;
    parse(c);
    if (c->state >= C_CLOSING) return;
  }
  tls_send_own(c);
}

static void tls_read(mqr_client_t *c, const uint8_t *p, size_t n) {
  if (mqr__ctls_feed(c->tls, p, n) != 0) {
    lost(c, MQR_ENOMEM);
    return;
  }
  tls_take_in(c);
  if (c->tls && mqr__ctls_keep(c->tls) != 0) lost(c, MQR_ENOMEM);
}

static void tls_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mqr_client_t *c = h->data;
  *buf = uv_buf_init((char *)c->cin, c->cin ? 65536 : 0);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  mqr_client_t *c = st->data;
  if (nread < 0) {
    lost(c, nread == UV_EOF ? MQR_ECLOSED : MQR_EIO);
    return;
  }
  if (c->tls) {
    tls_read(c, (const uint8_t *)buf->base, (size_t)nread);
    return;
  }
  c->rlen += (size_t)nread;
  parse(c);
}

/* ---- connecting and closing ---------------------------------------------------------------- */

static void free_client(mqr_client_t *c) {
  void (*cb)(void *) = c->close_cb;
  void *arg = c->close_arg;
  mqr_avro_buf_free(&c->out);
  mqr_avro_buf_free(&c->writing);
  mqr_free(c->rbuf);
  mqr_free(c->arena);
  mqr__ctls_free(c->tls);
  mqr_free(c->scram);
  mqr_free(c->wcipher);
  mqr_free(c->cin);
  while (c->subs) drop_sub(c, c->subs);
  while (c->pending_free) {
    pending_t *p = c->pending_free;
    c->pending_free = p->next;
    mqr_free(p);
  }
  mqr_free(c);
  if (cb) cb(arg);
}

static void handle_closed(uv_handle_t *h) {
  mqr_client_t *c = h->data;
  if (--c->handles == 0 && c->user_closed) free_client(c);
}

static void fail_pending(mqr_client_t *c, int status) {
  while (c->pending) {
    pending_t *p = c->pending;
    c->pending = p->next;
    if (c->pending == NULL) c->pending_tail = NULL;
    if (p->cb) p->cb(c, status, NULL, p->arg);
    mqr_free(p);
  }
  for (mqr_client_sub_t *s = c->subs; s; s = s->next)
    if (!s->subscribed && s->done) {
      s->subscribed = true; /* told once */
      s->done(c, status, NULL, s->arg);
    }
}

/* The connection is gone (or must go): every waiting request fails with status. */
static void lost(mqr_client_t *c, int status) {
  if (c->state >= C_CLOSING) return;
  bool told = c->state == C_OPEN || c->state == C_HANDSHAKE;
  c->state = C_CLOSING;
  if (c->tcp_open) uv_read_stop((uv_stream_t *)&c->tcp);
  fail_pending(c, status);
  if (told && c->opt.on_error) c->opt.on_error(c, status, NULL, c->opt.arg);
  if (!c->write_in_flight) finish_close(c);
}

static void finish_close(mqr_client_t *c) {
  if (c->state == C_CLOSED) return;
  c->state = C_CLOSED;
  if (c->tcp_open) {
    c->tcp_open = false;
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
  }
  uv_idle_stop(&c->idle);
  uv_close((uv_handle_t *)&c->idle, handle_closed);
}

int mqr_client_create(uv_loop_t *loop, const mqr_client_options_t *opt, mqr_client_t **out) {
  mqr_client_t *c = mqr_calloc(1, sizeof *c);
  if (c == NULL) return MQR_ENOMEM;
  c->loop = loop;
  if (opt) c->opt = *opt;
  snprintf(c->client_id, sizeof c->client_id, "%s", c->opt.client_id ? c->opt.client_id : "mqr-client");
  if (c->opt.max_frame == 0) c->opt.max_frame = 64u << 20;
  mqr_avro_buf_init_growable(&c->out);
  mqr_avro_buf_init_growable(&c->writing);
  c->arena_cap = 65536;
  if ((c->arena = mqr_malloc(c->arena_cap)) == NULL) {
    mqr_free(c);
    return MQR_ENOMEM;
  }
  uv_idle_init(loop, &c->idle);
  c->idle.data = c;
  c->handles = 1;
  c->next_id = 1;
  *out = c;
  return 0;
}

static void on_connect(uv_connect_t *req, int status) {
  mqr_client_t *c = req->data;
  if (c->state >= C_CLOSING) return;
  if (status < 0) {
    pending_t *p = take_pending(c, P_CONNECT, 0);
    c->state = C_CLOSING;
    if (p && p->cb) {
      mqr_frame_t f = {MQR_FRAME_ERROR, {.error = {MQR_EIO, MQR_STR("EIO"), mqr_str(uv_strerror(status)), 0, true}}};
      p->cb(c, MQR_EIO, &f, p->arg);
    }
    mqr_free(p);
    fail_pending(c, MQR_ECLOSED);
    finish_close(c);
    return;
  }
  c->state = C_HANDSHAKE;
  uv_tcp_nodelay(&c->tcp, 1);
  if (uv_read_start((uv_stream_t *)&c->tcp, c->tls ? tls_alloc_cb : alloc_cb, read_cb) != 0) {
    lost(c, MQR_EIO);
    return;
  }
  if (c->tls) { /* the ClientHello first */
    (void)mqr__ctls_handshake(c->tls, NULL);
    tls_send_own(c);
  }
  flush(c);
}

int mqr_client_connect(mqr_client_t *c, const char *url, mqr_client_done_fn cb, void *arg, mqr_error_t *err) {
  if (c->state != C_NEW) return mqr_error_set(err, MQR_EINVAL, "the client has already connected");
  struct sockaddr_storage sa;
  bool tls = false;
  int rc = parse_url(url, &sa, &tls, c->tls_host, err);
  if (rc) return rc;
  const char *at = strchr(url + 6, '@'); /* tcp://user:password@host:port */
  if (at && c->opt.user == NULL) {
    const char *u = url + 6, *colon = memchr(u, ':', (size_t)(at - u));
    snprintf(c->url_user, sizeof c->url_user, "%.*s", (int)((colon ? colon : at) - u), u);
    snprintf(c->url_password, sizeof c->url_password, "%.*s", colon ? (int)(at - colon - 1) : 0,
             colon ? colon + 1 : "");
    c->opt.user = c->url_user;
    c->opt.password = c->url_password;
  }
  if (tls && ((rc = mqr__ctls_new(&c->opt, c->tls_host, &c->tls, err)) != 0 || (c->cin = mqr_malloc(65536)) == NULL))
    return rc ? rc : mqr_error_set(err, MQR_ENOMEM, "out of memory for TLS");
  pending_t *p = pending_new(c);
  if (p == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory connecting");
  *p = (pending_t){P_CONNECT, 0, cb, arg, NULL};
  pending_append(c, p);
  uv_tcp_init(c->loop, &c->tcp);
  c->tcp.data = c;
  c->tcp_open = true;
  c->handles++;
  c->creq.data = c;
  if ((rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&sa, on_connect)) != 0) {
    take_pending(c, P_CONNECT, 0);
    mqr_free(p);
    c->state = C_CLOSING;
    finish_close(c);
    return mqr_error_set(err, MQR_EIO, "cannot connect to %s: %s", url, uv_strerror(rc));
  }
  c->state = C_CONNECTING;
  /* Who it is: PLAIN over TLS, SCRAM-SHA-256 on a plain connection. */
  char response[1200];
  size_t rlen = 0;
  mqr_str_t mech = MQR_STR("");
  const char *user = c->opt.user, *pw = c->opt.password ? c->opt.password : "";
  if (user && *user && tls) {
    mech = MQR_STR("PLAIN");
    int n = snprintf(response, sizeof response, "%c%s%c%s", 0, user, 0, pw);
    if (n < 0 || (size_t)n >= sizeof response) return mqr_error_set(err, MQR_ELIMIT, "user name or password too long");
    rlen = (size_t)n;
  } else if (user && *user) {
    mech = MQR_STR("SCRAM-SHA-256");
    if ((c->scram = mqr_calloc(1, sizeof *c->scram)) == NULL ||
        mqr_scram_client_first(c->scram, user, NULL, response, sizeof response) != 0)
      return mqr_error_set(err, MQR_ENOMEM, "SCRAM: cannot start");
    rlen = strlen(response);
  }
  mqr_frame_t f = {MQR_FRAME_CONNECT,
                   {.connect = {MQR_PROTOCOL_VERSION, mqr_str(c->client_id), (int32_t)c->opt.max_frame, mech,
                                mqr_str_n(response, rlen)}}};
  rc = mqr_frame_encode(&f, &c->out, err);
  if (rlen) explicit_bzero(response, sizeof response);
  return rc;
}

void mqr_client_close(mqr_client_t *c, void (*cb)(void *arg), void *arg) {
  c->close_cb = cb;
  c->close_arg = arg;
  c->user_closed = true;
  if (c->state == C_CLOSED && c->handles == 0) { /* it closed itself, and is done */
    free_client(c);
    return;
  }
  if (c->state == C_OPEN) {
    mqr_frame_t f = {MQR_FRAME_DISCONNECT, {.disconnect = {MQR_STR("client closing")}}};
    mqr_frame_encode(&f, &c->out, NULL);
  }
  if (c->state >= C_CLOSING) {
    if (c->state == C_CLOSING && !c->write_in_flight) finish_close(c);
    return;
  }
  bool was_open = c->state >= C_HANDSHAKE;
  c->state = C_CLOSING;
  if (c->tcp_open && was_open) uv_read_stop((uv_stream_t *)&c->tcp);
  fail_pending(c, MQR_ECLOSED);
  if (was_open) flush(c); /* what is queued (the DISCONNECT last) goes first */
  if (!c->write_in_flight) finish_close(c);
}

/* ---- requests ------------------------------------------------------------------------------ */

static int add_pending(mqr_client_t *c, pending_kind_t kind, int64_t id, mqr_client_done_fn cb, void *arg,
                       mqr_error_t *err) {
  pending_t *p = pending_new(c);
  if (p == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  *p = (pending_t){kind, id, cb, arg, NULL};
  pending_append(c, p);
  return 0;
}

static int send_frame(mqr_client_t *c, const mqr_client_message_t *m, mqr_str_t body, mqr_client_done_fn cb, void *arg,
                      mqr_error_t *err) {
  if (m->priority < 0 || m->priority > MQR_PRIORITY_MAX)
    return mqr_error_set(err, MQR_EINVAL, "priority %d is not 0-%d", (int)m->priority, MQR_PRIORITY_MAX);
  int64_t timestamp = m->timestamp;
  if (timestamp == 0) { /* the send's time, as Artemis's producers stamp it */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    timestamp = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  }
  int64_t receipt = cb ? c->next_id++ : 0;
  mqr_frame_t f = {MQR_FRAME_SEND,
                   {.send = {m->address,
                             mqr_proto_rt_from_routing(m->routing_type),
                             m->durable,
                             m->duplicate_id,
                             receipt,
                             m->priority,
                             timestamp,
                             m->expiration,
                             m->user_id,
                             {(mqr_str_t *)m->property_keys, (void *)m->property_values, m->n_properties},
                             body}}};
  size_t mark = c->out.len;
  int rc = queue_frame(c, &f, err);
  /* The broker would end the connection for a frame over its limit: refuse it here,
   * with the limit, and keep the connection. */
  size_t frame = c->out.len - mark - MQR_FRAME_HEADER;
  if (rc == 0 && c->server_max_frame && frame > c->server_max_frame) {
    c->out.len = mark;
    return mqr_error_set(err, MQR_ELIMIT,
                         "the message makes a frame of %zu bytes, more than the broker's max-frame-size of %u bytes",
                         frame, c->server_max_frame);
  }
  if (rc == 0 && cb && (rc = add_pending(c, P_RECEIPT, receipt, cb, arg, err)) != 0) c->out.len = mark;
  return rc;
}

int mqr_client_send(mqr_client_t *c, const mqr_client_message_t *m, mqr_client_done_fn cb, void *arg,
                    mqr_error_t *err) {
  return send_frame(c, m, m->body, cb, arg, err);
}

int mqr_client_send_stored(mqr_client_t *c, const uint8_t *stored, size_t len, mqr_str_t duplicate_id,
                           mqr_client_done_fn cb, void *arg, mqr_error_t *err) {
  if (c->state >= C_CLOSING) return mqr_error_set(err, MQR_ECLOSED, "the client is closed");
  int64_t receipt = cb ? c->next_id++ : 0;
  size_t mark = c->out.len;
  int rc = mqr_frame_encode_send_stored(stored, len, duplicate_id, receipt, &c->out, err);
  if (rc == 0 && c->server_max_frame && c->out.len - mark - MQR_FRAME_HEADER > c->server_max_frame) {
    c->out.len = mark;
    return mqr_error_set(err, MQR_ELIMIT, "the message is over the broker's max-frame-size of %u bytes",
                         c->server_max_frame);
  }
  if (rc == 0 && cb && (rc = add_pending(c, P_RECEIPT, receipt, cb, arg, err)) != 0) c->out.len = mark;
  if (rc == 0) wake(c);
  return rc;
}

int mqr_client_send_avro(mqr_client_t *c, const mqr_client_message_t *m, const mqr_avro_codec_t *codec,
                         const mqr_avro_schema_t *schema, const void *value, mqr_client_done_fn cb, void *arg,
                         mqr_error_t *err) {
  uint8_t small[1024];
  mqr_avro_buf_t body;
  mqr_avro_buf_init(&body, small, sizeof small);
  int rc = mqr_avro_single_object_header(schema, &body);
  size_t needed = 0;
  if (rc == 0 && (rc = mqr_avro_encode(codec, value, &body, &needed, err)) == MQR_ENOSPC) {
    /* bigger than the stack buffer: once more into a growable one */
    mqr_avro_buf_init_growable(&body);
    if ((rc = mqr_avro_single_object_header(schema, &body)) == 0) rc = mqr_avro_encode(codec, value, &body, NULL, err);
  }
  if (rc == 0) rc = send_frame(c, m, mqr_str_n((const char *)body.data, body.len), cb, arg, err);
  if (body.growable) mqr_avro_buf_free(&body);
  return rc;
}

int mqr_client_subscribe(mqr_client_t *c, mqr_str_t target, int routing_type, mqr_str_t queue, mqr_str_t selector,
                         uint32_t credit, mqr_client_message_fn on_message, mqr_client_done_fn done, void *arg,
                         mqr_client_sub_t **out, mqr_error_t *err) {
  if (on_message == NULL) return mqr_error_set(err, MQR_EINVAL, "no message callback");
  mqr_client_sub_t *s = mqr_calloc(1, sizeof *s);
  if (s == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory subscribing");
  *s = (mqr_client_sub_t){c, c->next_id++, on_message, done, arg, false, c->subs};
  mqr_frame_t f = {MQR_FRAME_SUBSCRIBE,
                   {.subscribe = {s->id, target, mqr_proto_rt_from_routing(routing_type), queue,
                                  credit > INT32_MAX ? INT32_MAX : (int32_t)credit, selector}}};
  int rc = queue_frame(c, &f, err);
  if (rc) {
    mqr_free(s);
    return rc;
  }
  c->subs = s;
  if (out) *out = s;
  return 0;
}

const char *mqr_client_redirect(const mqr_client_t *c, int64_t *node) {
  if (c->redirect_url[0] == '\0') return NULL;
  if (node) *node = c->redirect_node;
  return c->redirect_url;
}

int mqr_client_ack(mqr_client_sub_t *s, int64_t delivery, bool cumulative) {
  mqr_frame_t f = {MQR_FRAME_ACK, {.ack = {s->id, delivery, cumulative, 0}}};
  return queue_frame(s->c, &f, NULL);
}

int mqr_client_ack_receipt(mqr_client_sub_t *s, int64_t delivery, bool cumulative, mqr_client_done_fn cb, void *arg,
                           mqr_error_t *err) {
  mqr_client_t *c = s->c;
  int64_t receipt = c->next_id++;
  mqr_frame_t f = {MQR_FRAME_ACK, {.ack = {s->id, delivery, cumulative, receipt}}};
  size_t mark = c->out.len;
  int rc = queue_frame(c, &f, err);
  if (rc == 0 && (rc = add_pending(c, P_RECEIPT, receipt, cb, arg, err)) != 0) c->out.len = mark;
  return rc;
}

int mqr_client_nack(mqr_client_sub_t *s, int64_t delivery, bool counted) {
  mqr_frame_t f = {MQR_FRAME_NACK, {.nack = {s->id, delivery, counted}}};
  return queue_frame(s->c, &f, NULL);
}

int mqr_client_credit(mqr_client_sub_t *s, uint32_t n) {
  mqr_frame_t f = {MQR_FRAME_CREDIT, {.credit = {s->id, n > INT32_MAX ? INT32_MAX : (int32_t)n}}};
  return queue_frame(s->c, &f, NULL);
}

int mqr_client_unsubscribe(mqr_client_sub_t *s) {
  mqr_client_t *c = s->c;
  mqr_frame_t f = {MQR_FRAME_UNSUBSCRIBE, {.unsubscribe = {s->id}}};
  int rc = queue_frame(c, &f, NULL);
  drop_sub(c, s);
  return rc;
}

int mqr_client_query(mqr_client_t *c, mqr_client_done_fn cb, void *arg, mqr_error_t *err) {
  int64_t id = c->next_id++;
  mqr_frame_t f = {MQR_FRAME_QUERY, {.query = {id}}};
  int rc = queue_frame(c, &f, err);
  return rc ? rc : add_pending(c, P_QUERY, id, cb, arg, err);
}

int mqr_client_manage(mqr_client_t *c, mqr_str_t operation, const mqr_str_t *args, size_t n, mqr_client_done_fn cb,
                      void *arg, mqr_error_t *err) {
  int64_t id = c->next_id++;
  mqr_frame_t f = {MQR_FRAME_MANAGE, {.manage = {id, operation, {(void *)(uintptr_t)args, n}}}};
  int rc = queue_frame(c, &f, err);
  return rc ? rc : add_pending(c, P_MANAGE, id, cb, arg, err);
}
