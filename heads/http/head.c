/* The HTTP/1.1 head (http.h): a request read through libhttp-parser into the
 * connection's state, checked against the listener's limits, authenticated when its path
 * asks for it, served by routes.c, answered with a Content-Length, and the connection
 * kept for the next request unless either side said close. */
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"

#define MAX_HEADERS 64

typedef struct {
  size_t name, name_len, value, value_len; /* offsets into buf */
} header_t;

typedef struct {
  http_parser parser;
  char *buf; /* the request being read: its url, headers and body */
  size_t len, cap;
  size_t url, url_len, body, body_len, header_bytes;
  header_t headers[MAX_HEADERS];
  uint32_t n_headers;
  bool in_value;     /* the parser's last piece was a header's value */
  int refuse;        /* 431 or 413: why the parser was stopped */
  bool complete;     /* a whole request waits to be served */
  bool keep_alive;   /* after its answer */
  uint64_t began_ms; /* its first byte came then; 0: between requests */
  uint64_t idle_ms;  /* the last answer went then */
  /* its authentication */
  mqr__auth_t *auth;
  bool auth_done;
  int auth_status;
  mqr__principal_t *who;
  char csrf[65]; /* who came from a session cookie: its CSRF token (else "") */
  bool basic;    /* who came from Basic credentials */
  /* an answer made in slices (routes.c's metrics) */
  mqr__http_answer_t pending;
  bool pending_head;  /* for a HEAD request */
  bool pending_close; /* the connection closes after it */
  bool writing;       /* its status line went: its body goes a slice per pass */
} http_t;

static int64_t option(const mqr__conn_t *c, uint32_t i) { return mqr_listener_option(c->l->cfg, &mqr__http_def, i); }

/* The loop's time, never 0 (0 marks no request under way): never ahead of the clock the
 * tick reads. */
static uint64_t stamp(const mqr__conn_t *c) {
  uint64_t now = uv_now(mqr__loop(c->b));
  return now ? now : 1;
}

/* ---- texts --------------------------------------------------------------------------------------- */

void mqr__http_put(mqr__http_text_t *t, const char *p, size_t n) {
  if (t->failed) return;
  if (!mqr__grow_size((void **)&t->p, &t->cap, t->len + n + 1, 1)) {
    t->failed = true;
    return;
  }
  memcpy(t->p + t->len, p, n);
  t->len += n;
}

void mqr__http_printf(mqr__http_text_t *t, const char *fmt, ...) {
  for (int pass = 0; pass < 2 && !t->failed; pass++) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->cap - t->len;
    int n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t want = t->len + (size_t)n + 1;
    if (want < 2 * t->cap) want = 2 * t->cap;
    char *p = mqr_realloc(t->p, want);
    if (p == NULL) {
      t->failed = true;
      return;
    }
    t->p = p, t->cap = want;
  }
}

/* ---- the answer ----------------------------------------------------------------------------------- */

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 426: return "Upgrade Required";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Unknown";
  }
}

/* n bytes of the head's own into the connection's output: false when there is no
 * memory for them (the connection is then closing). */
bool mqr__http_out(mqr__conn_t *c, const void *p, size_t n) {
  size_t off;
  uint8_t *to = mqr__conn_reserve(c, n, &off);
  if (to) memcpy(to, p, n);
  if (to == NULL || mqr__conn_commit(c, off, n) != 0) {
    mqr__conn_close(c, false);
    return false;
  }
  return true;
}

/* The status line and headers of an answer of len bytes of body. */
static bool answer_top(mqr__conn_t *c, const mqr__http_answer_t *a, size_t len, bool close) {
  char top[900];
  int n = snprintf(
      top, sizeof top,
      "HTTP/1.1 %d %s\r\nServer: mqrd/%s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
      "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s%s%s%s%s%s\r\n",
      a->status, reason(a->status), mqr_version(), a->content_type ? a->content_type : "text/plain; charset=utf-8", len,
      a->status == 401 && !a->no_challenge ? "WWW-Authenticate: Basic realm=\"mqrd\", charset=\"UTF-8\"\r\n" : "",
      a->allow ? "Allow: " : "", a->allow ? a->allow : "", a->allow ? "\r\n" : "", close ? "Connection: close\r\n" : "",
      a->extra ? a->extra : "");
  if (n > 0 && (size_t)n < sizeof top && a->cookie[0]) /* (in place of the blank line, then it) */
    n += snprintf(top + n - 2, sizeof top - (size_t)n + 2, "Set-Cookie: %s\r\n\r\n", a->cookie) - 2;
  if (n <= 0 || (size_t)n >= sizeof top) { /* (never: the parts are bounded) */
    mqr__conn_close(c, false);
    return false;
  }
  return mqr__http_out(c, top, (size_t)n);
}

/* Writes the answer (the body left out for HEAD); close: the connection closes after it. */
static void answer(mqr__conn_t *c, const mqr__http_answer_t *a, bool head, bool close) {
  size_t len = a->body.failed ? 0 : a->body.len;
  if (!answer_top(c, a, len, close) || (!head && len && !mqr__http_out(c, a->body.p, len))) return;
  if (close) mqr__conn_close(c, true);
}

/* A plain-text answer of the head's own (an error), the connection closing after it. */
static void refuse(mqr__conn_t *c, int status, const char *text) {
  mqr__http_answer_t a = {.status = status};
  mqr__http_printf(&a.body, "%s\n", text);
  mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): HTTP %d: %s", (long long)c->sess.id, c->peer, status, text);
  answer(c, &a, false, true);
  mqr_free(a.body.p);
}

/* ---- parsing ------------------------------------------------------------------------------------- */

static int keep(http_parser *p, const char *at, size_t n, bool counts) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  if (counts && (h->header_bytes += n) > (size_t)option(c, HTTP_OPT_MAX_HEADER_SIZE)) {
    h->refuse = 431;
    return -1;
  }
  if (!mqr__grow_size((void **)&h->buf, &h->cap, h->len + n, 1)) return -1;
  memcpy(h->buf + h->len, at, n);
  h->len += n;
  return 0;
}

static int on_begin(http_parser *p) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  h->len = h->url_len = h->body_len = h->header_bytes = 0;
  h->n_headers = 0;
  h->in_value = false;
  if (h->began_ms == 0) h->began_ms = stamp(c); /* (the first: since the connection came) */
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  http_t *h = ((mqr__conn_t *)p->data)->hs;
  if (h->url_len == 0) h->url = h->len;
  h->url_len += n;
  return keep(p, at, n, true);
}

static int on_field(http_parser *p, const char *at, size_t n) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  if (h->n_headers == 0 || h->in_value) {
    if (h->n_headers == MAX_HEADERS) {
      h->refuse = 431;
      return -1;
    }
    h->headers[h->n_headers++] = (header_t){h->len, 0, 0, 0};
    h->in_value = false;
  }
  h->headers[h->n_headers - 1].name_len += n;
  return keep(p, at, n, true);
}

static int on_value(http_parser *p, const char *at, size_t n) {
  http_t *h = ((mqr__conn_t *)p->data)->hs;
  if (h->n_headers == 0) return -1;
  header_t *x = &h->headers[h->n_headers - 1];
  if (!h->in_value) x->value = h->len, h->in_value = true;
  x->value_len += n;
  return keep(p, at, n, true);
}

static int on_headers_complete(http_parser *p) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  if (p->content_length != ULLONG_MAX && p->content_length > (uint64_t)option(c, HTTP_OPT_MAX_BODY_SIZE)) {
    h->refuse = 413;
    return -1;
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  if (h->body_len == 0) h->body = h->len;
  if ((h->body_len += n) > (size_t)option(c, HTTP_OPT_MAX_BODY_SIZE)) { /* (chunked) */
    h->refuse = 413;
    return -1;
  }
  return keep(p, at, n, false);
}

static int on_complete(http_parser *p) {
  mqr__conn_t *c = p->data;
  http_t *h = c->hs;
  h->complete = true;
  h->keep_alive = http_should_keep_alive(p) != 0;
  http_parser_pause(p, 1); /* one request at a time: the next waits in the read buffer */
  return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_begin,
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

/* The value of the request's header name (case-insensitive), or NULL. */
static const mqr_str_t *header(http_t *h, const char *name, mqr_str_t *out) {
  size_t n = strlen(name);
  for (uint32_t i = 0; i < h->n_headers; i++)
    if (h->headers[i].name_len == n && strncasecmp(h->buf + h->headers[i].name, name, n) == 0) {
      *out = mqr_str_n(h->buf + h->headers[i].value, h->headers[i].value_len);
      return out;
    }
  return NULL;
}

bool mqr__http_header(const mqr__http_request_t *r, const char *name, mqr_str_t *out) {
  return header(r->head, name, out) != NULL;
}

/* ---- authentication ------------------------------------------------------------------------------ */

#define MQR__HTTP_PLAINTEXT_BASIC (-1000) /* Basic credentials on a connection without TLS */

static int serve(mqr__conn_t *c, http_t *h);

/* The answer to a request's authentication: the request is served now (its bytes were
 * all taken), then the connection reads on. */
static void auth_answered(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  http_t *h = c->hs;
  h->auth = NULL;
  h->auth_done = true;
  h->auth_status = status;
  h->who = who;
  if (serve(c, h) > 0) mqr__conn_hold(c, false);
}

/* Basic credentials ("Basic base64(user:password)") into user and password (pointing
 * into out): false when they are not that. */
static bool basic(mqr_str_t v, char *out, size_t cap, mqr_str_t *user, mqr_str_t *password) {
  if (v.len < 6 || strncasecmp(v.ptr, "Basic ", 6) != 0) return false;
  mqr_str_t b64 = mqr_str_n(v.ptr + 6, v.len - 6);
  while (b64.len && b64.ptr[0] == ' ') b64.ptr++, b64.len--;
  while (b64.len && b64.ptr[b64.len - 1] == ' ') b64.len--;
  if (b64.len == 0 || b64.len % 4 || b64.len / 4 * 3 >= cap) return false;
  int n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)b64.ptr, (int)b64.len);
  if (n < 0) return false;
  for (size_t i = b64.len; i > 0 && b64.ptr[i - 1] == '='; i--) n--; /* (the padding decodes to zeros) */
  const char *colon = memchr(out, ':', (size_t)n);
  if (colon == NULL) return false;
  *user = mqr_str_n(out, (size_t)(colon - out));
  *password = mqr_str_n(colon + 1, (size_t)n - (size_t)(colon - out) - 1);
  return user->len > 0;
}

/* Who asks: true when the answer is in (h->auth_status, h->who), false when it comes
 * later (the connection held). */
static bool authenticate(mqr__conn_t *c, http_t *h) {
  if (h->auth_done) return true;
  mqr_str_t v, user = MQR_STR(""), password = MQR_STR("");
  char creds[1024];
  int rc;
  mqr__principal_t *who = NULL;
  if (header(h, "Authorization", &v)) {
    if (!basic(v, creds, sizeof creds, &user, &password)) {
      rc = MQR_EAUTH;
    } else if (!mqr__conn_secure(c)) {
      rc = MQR__HTTP_PLAINTEXT_BASIC;
    } else {
      rc = mqr__authenticate(c->b, user, password, c->peer, auth_answered, c, &who, &h->auth);
      h->basic = true;
    }
    OPENSSL_cleanse(creds, sizeof creds);
  } else if (header(h, "Cookie", &v) && (who = mqr__http_session_find(c->b, v, h->csrf)) != NULL) {
    rc = 0; /* a console's session */
  } else if (mqr__conn_identity(c)) {
    rc = mqr__authenticate_certificate(c->b, mqr__conn_identity(c), c->peer, &who);
  } else {
    rc = mqr__authenticate(c->b, MQR_STR(""), MQR_STR(""), c->peer, auth_answered, c, &who, &h->auth);
  }
  if (rc == MQR__PENDING) {
    mqr__conn_hold(c, true);
    return false;
  }
  h->auth_done = true;
  h->auth_status = rc;
  h->who = who;
  return true;
}

/* ---- serving -------------------------------------------------------------------------------------- */

static void next_request(mqr__conn_t *c, http_t *h) {
  mqr__principal_release(h->who);
  h->who = NULL;
  h->csrf[0] = 0;
  h->basic = false;
  h->auth_done = h->complete = false;
  h->began_ms = 0;
  h->idle_ms = uv_now(mqr__loop(c->b));
  h->len = 0;
  http_parser_pause(&h->parser, 0);
}

/* Sends the answer (a->body freed): 1, or -1 when the connection closes after it. */
static int finish(mqr__conn_t *c, http_t *h, mqr__http_answer_t *a, bool head) {
  if (a->body.failed) {
    mqr_free(a->body.p);
    *a = (mqr__http_answer_t){.status = 500};
    mqr__http_printf(&a->body, "out of memory\n");
  }
  bool close = !h->keep_alive || mqr__closing(c->b);
  next_request(c, h); /* (before the answer: a close frees h) */
  answer(c, a, head, close);
  mqr_free(a->body.p);
  return close ? -1 : 1;
}

/* The request read whole: 1 served, 0 waiting (for its authentication, or its answer
 * made in slices), -1 closing. */
static int serve(mqr__conn_t *c, http_t *h) {
  mqr_str_t url = mqr_str_n(h->buf + h->url, h->url_len);
  const char *q = memchr(url.ptr, '?', url.len);
  mqr__http_request_t r = {.method = (enum http_method)h->parser.method,
                           .path = q ? mqr_str_n(url.ptr, (size_t)(q - url.ptr)) : url,
                           .query = q ? mqr_str_n(q + 1, url.len - (size_t)(q - url.ptr) - 1) : MQR_STR(""),
                           .body = h->body_len ? mqr_str_n(h->buf + h->body, h->body_len) : MQR_STR(""),
                           .head = h};
  mqr__http_answer_t a = {0};
  mqr__http_access_t access = mqr__http_route_access(r.path);
  bool anonymous = access == MQR__HTTP_PUBLIC || (access == MQR__HTTP_HEALTH && option(c, HTTP_OPT_ANONYMOUS_HEALTH)) ||
                   (access == MQR__HTTP_METRICS && option(c, HTTP_OPT_ANONYMOUS_METRICS));
  if (!anonymous) {
    if (!authenticate(c, h)) return 0;
    if (h->auth_status == MQR__HTTP_PLAINTEXT_BASIC) {
      a.status = 403;
      mqr__http_printf(&a.body, "Basic credentials are taken only over TLS (https): this listener has no tls block\n");
    } else if (h->auth_status != 0) {
      a.status = 401;
      mqr__http_printf(&a.body, "%s\n",
                       h->auth_status == MQR_EPERM ? "credentials are needed (anonymous clients are refused)"
                                                   : "the user name or password is wrong");
    }
    r.who = h->who;
    r.csrf = h->csrf[0] ? h->csrf : NULL;
    r.basic = h->basic;
  }
  mqr_str_t xrw;
  a.no_challenge = header(h, "X-Requested-With", &xrw) != NULL;
  if (a.status == 0) mqr__http_route(c, &r, &a);
  if (a.metrics) { /* made a slice per pass (resume): the connection waits meanwhile */
    h->pending = a;
    h->pending_head = r.method == HTTP_HEAD;
    mqr__conn_hold(c, true);
    mqr__conn_schedule(c);
    return 0;
  }
  return finish(c, h, &a, r.method == HTTP_HEAD);
}

/* The next slice of the answer being made, then of its writing; when it has all gone,
 * the connection reads on. */
static void resume(mqr__conn_t *c) {
  http_t *h = c->hs;
  mqr__http_metrics_t *m = h ? h->pending.metrics : NULL;
  if (m == NULL) return;
  if (!h->writing) {
    if (!mqr__http_metrics_step(m)) {
      mqr__conn_schedule(c);
      return;
    }
    size_t len = mqr__http_metrics_length(m, c);
    if (len == SIZE_MAX) { /* out of memory on the way */
      mqr__http_metrics_free(m);
      h->pending = (mqr__http_answer_t){.status = 500};
      if (finish(c, h, &h->pending, h->pending_head) > 0) mqr__conn_hold(c, false);
      return;
    }
    h->pending_close = !h->keep_alive || mqr__closing(c->b);
    if (!answer_top(c, &h->pending, len, h->pending_close)) return;
    h->writing = true;
  }
  if (!h->pending_head && !mqr__http_metrics_emit(m, c, MQR__HTTP_SLICE_BYTES)) {
    if (c->state != MQR__CONN_CLOSING) mqr__conn_schedule(c);
    return;
  }
  mqr__http_metrics_free(m);
  h->pending = (mqr__http_answer_t){0};
  h->writing = false;
  bool close = h->pending_close;
  next_request(c, h);
  if (close)
    mqr__conn_close(c, true);
  else
    mqr__conn_hold(c, false);
}

static void release(mqr__conn_t *c);

/* ---- the WebSocket upgrade ------------------------------------------------------------------------ */

/* Whether the comma-separated list v holds token t (case-insensitive). */
static bool has_token(mqr_str_t v, const char *t) {
  size_t n = strlen(t);
  for (size_t i = 0; i < v.len;) {
    while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == ',' || v.ptr[i] == '\t')) i++;
    size_t s = i;
    while (i < v.len && v.ptr[i] != ',') i++;
    size_t e = i;
    while (e > s && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t')) e--;
    if (e - s == n && strncasecmp(v.ptr + s, t, n) == 0) return true;
  }
  return false;
}

/* The subprotocols of MQTT, STOMP and AMQP over WebSockets (Artemis's and mosquitto's
 * names; AMQP's WebSocket binding's), and the protocol each one is. */
static const struct {
  const char *sub, *protocol;
} subprotocols[] = {{"mqtt", "mqtt"},       {"mqttv3.1", "mqtt"}, {"v12.stomp", "stomp"}, {"v11.stomp", "stomp"},
                    {"v10.stomp", "stomp"}, {"stomp", "stomp"},   {"amqp", "amqp"}};

/* A GET with Upgrade: websocket (RFC 6455 4.2): 101 and the connection becomes a
 * WebSocket for the head its subprotocol names (1), or refused and closed (-1). */
static int upgrade(mqr__conn_t *c, http_t *h) {
  mqr_str_t v, key = MQR_STR(""), protocols = MQR_STR("");
  const char *why = NULL;
  int status = 400;
  if (h->parser.method != HTTP_GET || h->parser.http_major != 1 || h->parser.http_minor < 1)
    why = "a WebSocket upgrade is a GET in HTTP/1.1";
  else if (!header(h, "Upgrade", &v) || !has_token(v, "websocket"))
    why = "only an upgrade to websocket is offered";
  else if (!header(h, "Connection", &v) || !has_token(v, "upgrade"))
    why = "Connection does not say Upgrade";
  else if (!header(h, "Sec-WebSocket-Version", &v) || !mqr_str_eq(v, MQR_STR("13")))
    why = "only WebSocket version 13 is spoken", status = 426;
  else if (!header(h, "Sec-WebSocket-Key", &key) || key.len != 24 || key.ptr[22] != '=' || key.ptr[23] != '=')
    why = "Sec-WebSocket-Key is not 16 bytes in base64";
  else if (!header(h, "Sec-WebSocket-Protocol", &protocols))
    why = "no Sec-WebSocket-Protocol: mqrd speaks mqtt, mqttv3.1, v10.stomp, v11.stomp, v12.stomp and amqp";
  const char *sub = NULL;
  const mqr__head_t *to = NULL;
  for (size_t i = 0; why == NULL && to == NULL && i < sizeof subprotocols / sizeof *subprotocols; i++) {
    const mqr__head_t *x = mqr__head_named(subprotocols[i].protocol);
    if (has_token(protocols, subprotocols[i].sub) && x && (c->l->cfg->protocols & x->def->bit))
      to = x, sub = subprotocols[i].sub;
  }
  if (why == NULL && to == NULL)
    why = "none of its subprotocols is a protocol of this listener (mqtt, mqttv3.1, v1x.stomp, amqp)";
  if (why) {
    mqr__http_answer_t a = {.status = status};
    mqr__http_printf(&a.body, "%s\n", why);
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): WebSocket upgrade refused: %s", (long long)c->sess.id, c->peer,
             why);
    if (status == 426) a.extra = "Sec-WebSocket-Version: 13\r\n";
    answer(c, &a, false, true);
    mqr_free(a.body.p);
    return -1;
  }
  /* Sec-WebSocket-Accept: base64(SHA-1(key + the RFC's GUID)). */
  char in[64];
  memcpy(in, key.ptr, 24);
  memcpy(in + 24, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
  unsigned char md[EVP_MAX_MD_SIZE], accept[64];
  unsigned int mdn = 0;
  if (EVP_Digest(in, 60, md, &mdn, EVP_sha1(), NULL) != 1) {
    mqr__conn_close(c, false);
    return -1;
  }
  EVP_EncodeBlock(accept, md, (int)mdn);
  char top[320];
  int n = snprintf(top, sizeof top,
                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
                   accept, sub);
  if (!mqr__http_out(c, top, (size_t)n)) return -1;
  /* Each frame at most what the protocol's own limit lets one packet or frame be, and room
   * for its header. */
  uint64_t max = (uint64_t)mqr_listener_option(c->l->cfg, to->def, 0) + 64;
  mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): WebSocket, subprotocol %s", (long long)c->sess.id, c->peer, sub);
  release(c); /* the HTTP head's state (h) goes */
  if (mqr__conn_websocket(c, to, max) != 0) {
    mqr__conn_close(c, false);
    return -1;
  }
  return 1;
}

static int take(mqr__conn_t *c) {
  http_t *h = c->hs;
  if (!h->complete) {
    size_t avail = c->rlen - c->rpos;
    size_t n = http_parser_execute(&h->parser, &settings, (const char *)c->rbuf + c->rpos, avail);
    c->rpos += n;
    enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
    if (e != HPE_OK && e != HPE_PAUSED) {
      char text[160];
      if (h->refuse == 431)
        snprintf(text, sizeof text, "the request line and headers are over %lld bytes (or %d headers)",
                 (long long)option(c, HTTP_OPT_MAX_HEADER_SIZE), MAX_HEADERS);
      else if (h->refuse == 413)
        snprintf(text, sizeof text, "the body is over %lld bytes", (long long)option(c, HTTP_OPT_MAX_BODY_SIZE));
      else
        snprintf(text, sizeof text, "bad request: %s", http_errno_description(e));
      refuse(c, h->refuse ? h->refuse : 400, text);
      return -1;
    }
    if (!h->complete) return 0;
    if (h->parser.upgrade) return upgrade(c, h);
  }
  return serve(c, h);
}

/* ---- the connection ------------------------------------------------------------------------------ */

static int http_open(mqr__conn_t *c) {
  http_t *h = mqr_calloc(1, sizeof *h);
  if (h == NULL) return MQR_ENOMEM;
  http_parser_init(&h->parser, HTTP_REQUEST);
  h->parser.data = c;
  h->began_ms = h->idle_ms = stamp(c); /* its first request is due within request-timeout */
  c->hs = h;
  c->state = MQR__CONN_OPEN; /* (HTTP has no hello: the head's clocks are request-timeout and keep-alive-timeout) */
  return 0;
}

static void tick(mqr__conn_t *c, uint64_t now) {
  http_t *h = c->hs;
  if (h->complete) return; /* being served (its authentication under way) */
  if (h->began_ms && now - h->began_ms > (uint64_t)option(c, HTTP_OPT_REQUEST_TIMEOUT))
    refuse(c, 408, "the request did not come whole in time (request-timeout)");
  else if (!h->began_ms && now - h->idle_ms > (uint64_t)option(c, HTTP_OPT_KEEP_ALIVE_TIMEOUT))
    mqr__conn_close(c, true);
}

/* The read buffer is full with part of a request held (its authentication under way): room
 * for the rest, within the limits the parser checks. */
static size_t room(const mqr__conn_t *c) { return c->rcap * 2; }

static void fail(mqr__conn_t *c, int code, const char *text) {
  (void)code;
  refuse(c, code == MQR_ETIMEOUT ? 408 : 400, text);
}

static void release(mqr__conn_t *c) {
  http_t *h = c->hs;
  if (h == NULL) return;
  mqr__auth_cancel(h->auth);
  mqr__principal_release(h->who);
  mqr__http_metrics_free(h->pending.metrics);
  mqr_free(h->pending.body.p);
  mqr_free(h->buf);
  mqr_free(h);
  c->hs = NULL;
}

/* A request line's method and its space: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS
 * (not CONNECT, which is STOMP's). */
static int sniff(const uint8_t *p, size_t n) {
  static const char *const methods[] = {"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "PATCH ", "OPTIONS "};
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) {
    size_t k = strlen(methods[i]);
    if (memcmp(p, methods[i], n < k ? n : k) == 0) return n < k ? -1 : 1;
  }
  return 0;
}

/* A listener's http block (the order of HTTP_OPT_*). */
static const mqr_option_def_t options[] = {
    {"max-header-size", MQR_OPTION_SIZE, 1024, 1 << 20, 8192},
    {"max-body-size", MQR_OPTION_SIZE, 0, 64 << 20, 1 << 20},
    {"request-timeout", MQR_OPTION_DURATION, 100, 3600000, 30000},
    {"keep-alive-timeout", MQR_OPTION_DURATION, 100, 86400000, 60000},
    {"anonymous-health", MQR_OPTION_BOOL, 0, 1, 1},
    {"anonymous-metrics", MQR_OPTION_BOOL, 0, 1, 0},
};
const mqr_protocol_def_t mqr__http_def = {"http", MQR_PROTOCOL_HTTP, options, sizeof options / sizeof *options};

const mqr__head_t mqr__http_head = {
    .name = "HTTP",
    .def = &mqr__http_def,
    .sniff = sniff,
    .open = http_open,
    .take = take,
    .room = room,
    .tick = tick,
    .resume = resume,
    .tick_all = mqr__http_sessions_tick,
    .free = mqr__http_sessions_free,
    .fail = fail,
    .release = release,
};
