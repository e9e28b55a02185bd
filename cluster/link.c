/* The Raft links over TLS (link.h). */
#include "link.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAGIC "mqr-raft"
#define VERSION 1
#define PREAMBLE_MAX (8 + 1 + 8 + 3 * (1 + 255))
#define DEADLINE_MS 10000 /* the handshake and the preamble, from the TCP connection */
#define QUIET_MS 10000    /* the same warning again after this, not before */

struct mqr__links_s {
  uv_loop_t *loop;
  SSL_CTX *server, *client;
  char *user, *password; /* NULL: none */
  void (*warn)(void *arg, const char *why);
  void *arg;
  char said[256]; /* the last warning, and when (a peer retries its connect often) */
  uint64_t said_ms;
  uint8_t buf[65536]; /* a read's bytes, handled before the next (the loop's thread) */
};

typedef struct link_s link_t;

typedef struct {
  mqr__links_t *l;
  struct raft_uv_transport *t;
  raft_id id;
  char address[256];
  uv_tcp_t listener;
  bool listening;
  raft_uv_accept_cb accept_cb;
  link_t *links; /* every link not yet freed */
  bool closing;
  raft_uv_transport_close_cb close_cb;
} transport_t;

struct link_s {
  transport_t *tp;
  link_t *next, *prev;
  uv_tcp_t tcp;
  uv_pipe_t tun; /* this end of the socketpair; libraft has the other */
  uv_timer_t deadline;
  uv_connect_t conn;
  SSL *ssl;
  BIO *rbio, *wbio;            /* from the network into OpenSSL; from OpenSSL to the network */
  struct raft_uv_connect *req; /* connecting, until cb is called */
  raft_uv_connect_cb cb;
  bool accepting, shaken, tun_open, closing;
  int handles; /* uv handles not yet closed */
  uint8_t pre[PREAMBLE_MAX];
  size_t pre_len;
  char peer[256]; /* the address it connects to, or the peer's as it says */
};

typedef struct {
  uv_write_t req;
  uint8_t data[];
} wr_t;

/* ---- warnings -------------------------------------------------------------------------------- */

static void warn(mqr__links_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(mqr__links_t *l, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  uint64_t now = uv_now(l->loop);
  if (strcmp(why, l->said) == 0 && now - l->said_ms < QUIET_MS) return;
  snprintf(l->said, sizeof l->said, "%s", why);
  l->said_ms = now;
  if (l->warn) l->warn(l->arg, why);
}

/* OpenSSL's last error (or the certificate's verification's), its queue emptied. */
static const char *ssl_why(SSL *ssl, char *buf, size_t cap) {
  long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
  unsigned long e = ERR_get_error();
  if (v != X509_V_OK)
    snprintf(buf, cap, "certificate: %s", X509_verify_cert_error_string(v));
  else if (e)
    ERR_error_string_n(e, buf, cap);
  else
    snprintf(buf, cap, "the peer closed it");
  ERR_clear_error();
  return buf;
}

/* ---- a link's end ------------------------------------------------------------------------------ */

static void maybe_closed(transport_t *tp) {
  if (!tp->closing || tp->listening || tp->links) return;
  raft_uv_transport_close_cb cb = tp->close_cb;
  tp->close_cb = NULL;
  if (cb) cb(tp->t);
}

static void handle_closed(uv_handle_t *h) {
  link_t *k = h->data;
  if (--k->handles) return;
  transport_t *tp = k->tp;
  SSL_free(k->ssl); /* (and its BIOs) */
  if (k->prev)
    k->prev->next = k->next;
  else
    tp->links = k->next;
  if (k->next) k->next->prev = k->prev;
  mqr_free(k);
  maybe_closed(tp);
}

static void close_handle(link_t *k, uv_handle_t *h) {
  h->data = k;
  uv_close(h, handle_closed);
}

/* Ends the link (a connect not yet answered is answered: failed, or cancelled when the
 * transport closes). */
static void link_close(link_t *k) {
  if (k->closing) return;
  k->closing = true;
  if (k->req) {
    struct raft_uv_connect *req = k->req;
    k->req = NULL;
    k->cb(req, NULL, k->tp->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
  }
  close_handle(k, (uv_handle_t *)&k->tcp);
  close_handle(k, (uv_handle_t *)&k->deadline);
  if (k->tun_open) close_handle(k, (uv_handle_t *)&k->tun);
}

static void link_fail(link_t *k, const char *fmt, const char *what) {
  if (k->closing) return;
  warn(k->tp->l, fmt, k->accepting ? "from" : "to", k->peer, what);
  link_close(k);
}

static void deadline_cb(uv_timer_t *h) {
  link_t *k = h->data;
  link_fail(k, "cluster: a Raft link %s %s did not finish its TLS handshake and preamble in time (%s); closed", "10 s");
}

/* ---- bytes ------------------------------------------------------------------------------------- */

static void wrote(uv_write_t *req, int status) {
  (void)status; /* (a failed write: the read side sees the connection go) */
  mqr_free(req->data);
}

/* n bytes onto s, written now where the socket takes them, the rest queued. */
static int put(uv_stream_t *s, const uint8_t *p, size_t n) {
  uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
  int r = uv_try_write(s, &b, 1);
  if (r == (int)n) return 0;
  if (r < 0 && r != UV_EAGAIN) return r;
  if (r > 0) p += r, n -= (size_t)r;
  wr_t *w = mqr_malloc(sizeof *w + n);
  if (w == NULL) return UV_ENOMEM;
  memcpy(w->data, p, n);
  w->req.data = w;
  b = uv_buf_init((char *)w->data, (unsigned)n);
  r = uv_write(&w->req, s, &b, 1, wrote);
  if (r) mqr_free(w);
  return r;
}

/* What OpenSSL wrote goes to the network: false when the link closed. */
static bool flush(link_t *k) {
  int n;
  while ((n = BIO_read(k->wbio, k->tp->l->buf, sizeof k->tp->l->buf)) > 0)
    if (put((uv_stream_t *)&k->tcp, k->tp->l->buf, (size_t)n) != 0) {
      link_close(k);
      return false;
    }
  return true;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  link_t *k = h->data;
  *buf = uv_buf_init((char *)k->tp->l->buf, sizeof k->tp->l->buf);
}

/* libraft's bytes, out through TLS. */
static void tun_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  link_t *k = s->data;
  if (nread < 0) { /* libraft closed its end */
    link_close(k);
    return;
  }
  if (nread == 0 || k->closing) return;
  if (SSL_write(k->ssl, buf->base, (int)nread) != (int)nread) {
    char e[256];
    link_fail(k, "cluster: a Raft link %s %s failed: %s; closed", ssl_why(NULL, e, sizeof e));
    return;
  }
  flush(k);
}

/* The socketpair: this end read, the other made a stream for libraft (*out), or false. */
static bool open_tunnel(link_t *k, uv_stream_t **out) {
  uv_loop_t *loop = k->tp->l->loop;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
    link_fail(k, "cluster: a Raft link %s %s: %s; closed", "no socketpair");
    return false;
  }
  uv_pipe_t *theirs = raft_malloc(sizeof *theirs); /* (libraft frees it with raft_free) */
  if (theirs == NULL) {
    close(fds[0]), close(fds[1]);
    link_close(k);
    return false;
  }
  uv_pipe_init(loop, &k->tun, 0);
  k->tun.data = k;
  k->tun_open = true;
  k->handles++;
  uv_pipe_init(loop, theirs, 0);
  if (uv_pipe_open(&k->tun, fds[0]) != 0 || uv_pipe_open(theirs, fds[1]) != 0 ||
      uv_read_start((uv_stream_t *)&k->tun, alloc_cb, tun_read) != 0) {
    close(fds[1]);
    uv_close((uv_handle_t *)theirs, (uv_close_cb)raft_free);
    link_close(k); /* (closes fds[0] with the pipe) */
    return false;
  }
  uv_timer_stop(&k->deadline);
  *out = (uv_stream_t *)theirs;
  return true;
}

/* The preamble's length once enough of it is here (0: not yet). */
static size_t preamble_len(const uint8_t *p, size_t n) {
  size_t at = 8 + 1 + 8;
  for (int i = 0; i < 3; i++) {
    if (n <= at) return 0;
    at += 1 + p[at];
  }
  return at;
}

static bool field(const uint8_t *p, size_t *at, char *out) {
  size_t n = p[(*at)++];
  memcpy(out, p + *at, n);
  out[n] = 0;
  *at += n;
  return memchr(out, 0, n) == NULL;
}

/* An accepting link's preamble, read whole: the link handed to libraft, or closed. */
static void accept_peer(link_t *k, size_t len) {
  mqr__links_t *l = k->tp->l;
  const uint8_t *p = k->pre;
  char addr[256], user[256], pass[256];
  size_t at = 8 + 1 + 8;
  uint64_t id = 0;
  for (int i = 0; i < 8; i++) id |= (uint64_t)p[9 + i] << (8 * i);
  bool ok = field(p, &at, addr);
  ok = field(p, &at, user) && ok;
  ok = field(p, &at, pass) && ok;
  if (!ok || memcmp(p, MAGIC, 8) != 0 || p[8] != VERSION || id == 0 || addr[0] == 0) {
    link_fail(k, "cluster: a Raft link %s %s: %s; closed", "not an mqr node's preamble");
    return;
  }
  snprintf(k->peer, sizeof k->peer, "node %llu (%.200s)", (unsigned long long)id, addr);
  size_t want = l->password ? strlen(l->password) : 0, got = strlen(pass);
  bool user_ok = l->user ? strcmp(user, l->user) == 0 : user[0] == 0;
  bool pass_ok = want == got && (want == 0 || CRYPTO_memcmp(pass, l->password, want) == 0);
  if (!user_ok || !pass_ok) {
    link_fail(k, "cluster: a Raft link %s %s: %s; closed",
              l->user ? "not this cluster's user and password" : "a cluster user, where this node has none");
    return;
  }
  uv_stream_t *s;
  if (!open_tunnel(k, &s)) return;
  transport_t *tp = k->tp;
  tp->accept_cb(tp->t, id, addr, s);
  if (len < k->pre_len && !k->closing) /* libraft's first bytes, come with the preamble */
    if (put((uv_stream_t *)&k->tun, k->pre + len, k->pre_len - len) != 0) link_close(k);
}

/* Plaintext from the peer: the preamble first (accepting), then libraft's. */
static void take(link_t *k, const uint8_t *p, size_t n) {
  if (k->tun_open) {
    if (put((uv_stream_t *)&k->tun, p, n) != 0) link_close(k);
    return;
  }
  if (!k->accepting) return; /* (a connecting link opens its tunnel at the handshake's end) */
  size_t room = sizeof k->pre - k->pre_len, m = n < room ? n : room;
  memcpy(k->pre + k->pre_len, p, m);
  k->pre_len += m;
  size_t len = preamble_len(k->pre, k->pre_len); /* (never 0 with the buffer full: it holds the longest) */
  if (len == 0 || len > k->pre_len) return;
  size_t extra = n - m; /* (bytes past the buffer: libraft's, after the tunnel opens) */
  accept_peer(k, len);
  if (extra && k->tun_open && !k->closing && put((uv_stream_t *)&k->tun, p + m, extra) != 0) link_close(k);
}

/* The connecting side's preamble, and its link handed to libraft. */
static void connected(link_t *k) {
  mqr__links_t *l = k->tp->l;
  transport_t *tp = k->tp;
  uint8_t p[PREAMBLE_MAX];
  size_t at = 0;
  memcpy(p, MAGIC, 8), at = 8;
  p[at++] = VERSION;
  for (int i = 0; i < 8; i++) p[at++] = (uint8_t)(tp->id >> (8 * i));
  const char *f[3] = {tp->address, l->user ? l->user : "", l->password ? l->password : ""};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(f[i]);
    p[at++] = (uint8_t)n;
    memcpy(p + at, f[i], n);
    at += n;
  }
  if (SSL_write(k->ssl, p, (int)at) != (int)at) {
    char e[256];
    link_fail(k, "cluster: a Raft link %s %s failed: %s; closed", ssl_why(NULL, e, sizeof e));
    return;
  }
  OPENSSL_cleanse(p, sizeof p);
  if (!flush(k)) return;
  uv_stream_t *s;
  if (!open_tunnel(k, &s)) return;
  struct raft_uv_connect *req = k->req;
  k->req = NULL;
  k->cb(req, s, 0);
}

static void pump(link_t *k) {
  char e[256];
  if (!k->shaken) {
    int r = SSL_do_handshake(k->ssl);
    if (!flush(k)) return;
    if (r != 1) {
      if (SSL_get_error(k->ssl, r) != SSL_ERROR_WANT_READ)
        link_fail(k, "cluster: a Raft link %s %s: TLS handshake failed: %s; closed", ssl_why(k->ssl, e, sizeof e));
      return;
    }
    k->shaken = true;
    if (!k->accepting) connected(k);
  }
  while (!k->closing) {
    int n = SSL_read(k->ssl, k->tp->l->buf, sizeof k->tp->l->buf);
    if (n > 0) {
      take(k, k->tp->l->buf, (size_t)n);
      continue;
    }
    int err = SSL_get_error(k->ssl, n);
    if (err == SSL_ERROR_ZERO_RETURN)
      link_close(k);
    else if (err != SSL_ERROR_WANT_READ)
      link_fail(k, "cluster: a Raft link %s %s failed: %s; closed", ssl_why(k->ssl, e, sizeof e));
    break;
  }
  if (!k->closing) flush(k); /* (session tickets, key updates) */
}

static void tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  link_t *k = s->data;
  if (k->closing) return;
  if (nread < 0) {
    if (!k->shaken && k->accepting) /* (a connect that fails is libraft's to retry, quietly) */
      link_fail(k, "cluster: a Raft link %s %s: %s; closed", "closed before its TLS handshake finished");
    link_close(k);
    return;
  }
  if (nread == 0) return;
  if (BIO_write(k->rbio, buf->base, (int)nread) != (int)nread) {
    link_close(k);
    return;
  }
  pump(k);
}

/* A link with its TCP handle, timer and TLS; NULL (nothing open) when out of memory. */
static link_t *link_new(transport_t *tp, bool accepting) {
  link_t *k = mqr_calloc(1, sizeof *k);
  if (k == NULL) return NULL;
  k->tp = tp;
  k->accepting = accepting;
  k->ssl = SSL_new(accepting ? tp->l->server : tp->l->client);
  k->rbio = BIO_new(BIO_s_mem());
  k->wbio = BIO_new(BIO_s_mem());
  if (k->ssl == NULL || k->rbio == NULL || k->wbio == NULL) {
    SSL_free(k->ssl);
    BIO_free(k->rbio), BIO_free(k->wbio);
    mqr_free(k);
    return NULL;
  }
  SSL_set_bio(k->ssl, k->rbio, k->wbio);
  if (accepting)
    SSL_set_accept_state(k->ssl);
  else
    SSL_set_connect_state(k->ssl);
  uv_tcp_init(tp->l->loop, &k->tcp);
  uv_timer_init(tp->l->loop, &k->deadline);
  k->tcp.data = k->deadline.data = k;
  k->handles = 2;
  uv_timer_start(&k->deadline, deadline_cb, DEADLINE_MS, 0);
  k->next = tp->links;
  if (tp->links) tp->links->prev = k;
  tp->links = k;
  return k;
}

/* ---- the transport's ops ---------------------------------------------------------------------------- */

static int tp_init(struct raft_uv_transport *t, raft_id id, const char *address) {
  transport_t *tp = t->impl;
  tp->id = id;
  if (snprintf(tp->address, sizeof tp->address, "%s", address) >= (int)sizeof tp->address) return RAFT_NAMETOOLONG;
  return 0;
}

/* "IPV4:PORT" into sa. */
static int parse(const char *address, struct sockaddr_in *sa) {
  char host[64];
  const char *colon = strrchr(address, ':');
  if (colon == NULL || colon - address >= (int)sizeof host) return UV_EINVAL;
  memcpy(host, address, (size_t)(colon - address));
  host[colon - address] = 0;
  return uv_ip4_addr(host, atoi(colon + 1), sa);
}

static void on_connection(uv_stream_t *server, int status) {
  transport_t *tp = server->data;
  if (status < 0 || tp->closing) return;
  link_t *k = link_new(tp, true);
  if (k == NULL) return; /* (the connection waits in the backlog; the peer retries) */
  snprintf(k->peer, sizeof k->peer, "a peer");
  if (uv_accept(server, (uv_stream_t *)&k->tcp) != 0) {
    link_close(k);
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[64];
  if (uv_tcp_getpeername(&k->tcp, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET &&
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip) == 0)
    snprintf(k->peer, sizeof k->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
  uv_tcp_nodelay(&k->tcp, 1);
  if (uv_read_start((uv_stream_t *)&k->tcp, alloc_cb, tcp_read) != 0) link_close(k);
}

static int tp_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb) {
  transport_t *tp = t->impl;
  struct sockaddr_in sa;
  tp->accept_cb = cb;
  int rc = parse(tp->address, &sa);
  if (rc == 0) {
    uv_tcp_init(tp->l->loop, &tp->listener);
    tp->listener.data = tp;
    tp->listening = true;
    rc = uv_tcp_bind(&tp->listener, (struct sockaddr *)&sa, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&tp->listener, 128, on_connection);
  }
  if (rc) {
    snprintf(t->errmsg, sizeof t->errmsg, "listen on %.64s: %s", tp->address, uv_strerror(rc));
    return RAFT_IOERR;
  }
  return 0;
}

static void connect_cb(uv_connect_t *req, int status) {
  link_t *k = req->data;
  if (k->closing) return;
  if (status < 0) { /* (libraft tries again after its delay; a peer down is no news) */
    link_close(k);
    return;
  }
  uv_tcp_nodelay(&k->tcp, 1);
  if (uv_read_start((uv_stream_t *)&k->tcp, alloc_cb, tcp_read) != 0) {
    link_close(k);
    return;
  }
  pump(k); /* (the ClientHello) */
}

static int tp_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id, const char *address,
                      raft_uv_connect_cb cb) {
  (void)id;
  transport_t *tp = t->impl;
  struct sockaddr_in sa;
  if (parse(address, &sa) != 0) return RAFT_NOCONNECTION;
  link_t *k = link_new(tp, false);
  if (k == NULL) return RAFT_NOMEM;
  snprintf(k->peer, sizeof k->peer, "%s", address);
  k->conn.data = k;
  if (uv_tcp_connect(&k->conn, &k->tcp, (struct sockaddr *)&sa, connect_cb) != 0) {
    link_close(k); /* (no cb yet: req is not k's) */
    return RAFT_NOCONNECTION;
  }
  k->req = req, k->cb = cb;
  return 0;
}

static void listener_closed(uv_handle_t *h) {
  transport_t *tp = h->data;
  tp->listening = false;
  maybe_closed(tp);
}

static void tp_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb) {
  transport_t *tp = t->impl;
  tp->closing = true;
  tp->close_cb = cb;
  if (tp->listening) uv_close((uv_handle_t *)&tp->listener, listener_closed);
  for (link_t *k = tp->links; k; k = k->next) link_close(k);
  maybe_closed(tp);
}

int mqr__links_transport(mqr__links_t *l, struct raft_uv_transport *t) {
  transport_t *tp = mqr_calloc(1, sizeof *tp);
  if (tp == NULL) return MQR_ENOMEM;
  tp->l = l, tp->t = t;
  memset(t, 0, sizeof *t);
  t->impl = tp;
  t->init = tp_init;
  t->listen = tp_listen;
  t->connect = tp_connect;
  t->close = tp_close;
  return 0;
}

void mqr__links_transport_free(struct raft_uv_transport *t) {
  mqr_free(t->impl);
  t->impl = NULL;
}

/* ---- the node's TLS ---------------------------------------------------------------------------------- */

static SSL_CTX *make_ctx(const mqr__links_options_t *opt, bool server, mqr_error_t *err) {
  SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  char e[256];
  const char *what = NULL;
  if (ctx == NULL) {
    mqr_error_set(err, MQR_ENOMEM, "cluster: out of memory for TLS");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
  if (SSL_CTX_load_verify_locations(ctx, opt->ca, NULL) != 1)
    what = opt->ca;
  else if (SSL_CTX_use_certificate_chain_file(ctx, opt->cert) != 1)
    what = opt->cert;
  else if (SSL_CTX_use_PrivateKey_file(ctx, opt->key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    what = opt->key;
  if (what == NULL) return ctx;
  mqr_error_set(err, MQR_EINVAL, "cluster tls: %s: %s", what, ssl_why(NULL, e, sizeof e));
  SSL_CTX_free(ctx);
  return NULL;
}

static char *copy(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = mqr_malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

int mqr__links_new(uv_loop_t *loop, const mqr__links_options_t *opt, mqr__links_t **out, mqr_error_t *err) {
  if (opt->ca == NULL || opt->cert == NULL || opt->key == NULL)
    return mqr_error_set(err, MQR_EINVAL, "cluster: Raft links over TLS need tls ca, cert and key");
  if (opt->user && (strlen(opt->user) > 255 || (opt->password && strlen(opt->password) > 255)))
    return mqr_error_set(err, MQR_EINVAL, "cluster: a user or password over 255 bytes");
  mqr__links_t *l = mqr_calloc(1, sizeof *l);
  if (l == NULL) return mqr_error_set(err, MQR_ENOMEM, "cluster: out of memory for TLS");
  l->loop = loop;
  l->warn = opt->warn, l->arg = opt->arg;
  int rc = 0;
  if ((l->server = make_ctx(opt, true, err)) == NULL || (l->client = make_ctx(opt, false, err)) == NULL)
    rc = err ? err->code : MQR_EINVAL;
  else if ((opt->user && (l->user = copy(opt->user)) == NULL) ||
           (opt->password && (l->password = copy(opt->password)) == NULL))
    rc = mqr_error_set(err, MQR_ENOMEM, "cluster: out of memory for TLS");
  if (rc) {
    mqr__links_free(l);
    return rc ? rc : MQR_EINVAL;
  }
  *out = l;
  return 0;
}

void mqr__links_free(mqr__links_t *l) {
  if (l == NULL) return;
  SSL_CTX_free(l->server);
  SSL_CTX_free(l->client);
  mqr_free(l->user);
  if (l->password) OPENSSL_cleanse(l->password, strlen(l->password));
  mqr_free(l->password);
  mqr_free(l);
}
