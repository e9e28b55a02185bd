/* The TLS transport: OpenSSL 3 through memory BIOs on the connection's libuv socket, so
 * that every head (native, MQTT, STOMP) speaks over it unchanged. Why OpenSSL: the
 * maintained TLS library Debian ships, whose memory BIOs let TLS run on a loop it does
 * not own.
 *
 * OpenSSL reads and writes through a BIO of ours (not memory BIOs, which copy each byte
 * once more and zero their buffers as they grow): its reads take ciphertext straight
 * from the buffer libuv read into (what is left when the connection stops reading is
 * kept), and plaintext comes out of SSL_read straight into the connection's buffer
 * (mqr__conn_room), as TCP's would. A write's segments are gathered into records of up
 * to 16 KiB (one record for many small deliveries, not one each), and OpenSSL's writes
 * append the records to the write request's own buffer, sized for them beforehand,
 * which goes out in one uv_write (one syscall for a loop pass's records: writing each
 * record to the socket as OpenSSL makes it saves their copy but measured 20% slower).
 * Renegotiation is refused; a handshake that never finishes is the listener's
 * handshake-timeout's to end (the head has not said hello by then). Each listener has
 * its SSL_CTX, made again from the same files at a reload (connections made under the
 * old one keep it). */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>

#include "net.h"

#define RECORD 16384 /* plaintext gathered per SSL_write: a TLS record's most */
#define SEAL 64      /* a record's header, tag and padding: at most this (22 in TLS 1.3) */

typedef struct {
  SSL_CTX *ctx;
  char *paths; /* cert, key, ca (maybe ""), ciphers (maybe ""): NUL-separated copies */
  const char *cert, *key, *ca, *ciphers;
  mqr_client_auth_t client_auth;
  uint16_t min_version;
  uint8_t cipher_in[32768]; /* a read's ciphertext (larger was slower at 1 KiB: a pass's bytes out of the cache) */
  uint8_t plain[RECORD];    /* a write's plaintext, gathered into a record */
} tls_listener_t;

/* A write of ciphertext: for a connection's write request (w), or of the TLS's own (w NULL). */
typedef struct {
  uv_write_t req;
  mqr__wreq_t *w;
  size_t len, cap;
  uint8_t data[];
} tls_write_t;

typedef struct {
  SSL *ssl; /* and its two BIOs of ours, both over this */
  tls_listener_t *tl;
  const uint8_t *in; /* ciphertext not yet read by OpenSSL: in the listener's cipher_in */
  size_t in_len;     /* during a read, else in held */
  uint8_t *held;
  size_t held_cap;
  tls_write_t *out; /* ciphertext written by OpenSSL, not yet given to uv_write */
  bool want;        /* the connection reads (read_start without read_stop) */
  bool pumping;     /* in pump: a nested read_start only says want */
  bool shaken;      /* the handshake finished */
  bool failed;      /* a TLS error closed it */
  bool released;    /* the connection closed while it pumped: pump frees it */
  char peer_cn[256];
} tls_conn_t;

static const char *ssl_error(char *buf, size_t cap) {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown TLS error";
  ERR_error_string_n(e, buf, cap);
  ERR_clear_error();
  return buf;
}

/* ---- the listener's context --------------------------------------------------------------------- */

static SSL_CTX *make_ctx(const tls_listener_t *tl, mqr_error_t *err) {
  char e[256];
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) {
    mqr_error_set(err, MQR_ENOMEM, "TLS: %s", ssl_error(e, sizeof e));
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, tl->min_version == 0x0304 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* an idle connection keeps no record buffers */
  /* TLS 1.3: AES-128-GCM first (as fast as the processor's AES allows, and as strong as
   * the handshake's curve), then ChaCha20 for clients without AES instructions. */
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  const char *what = NULL;
  if (SSL_CTX_use_certificate_chain_file(ctx, tl->cert) != 1)
    what = "cert";
  else if (SSL_CTX_use_PrivateKey_file(ctx, tl->key, SSL_FILETYPE_PEM) != 1)
    what = "key";
  else if (SSL_CTX_check_private_key(ctx) != 1)
    what = "key (it does not match cert)";
  else if (tl->ca[0] && SSL_CTX_load_verify_locations(ctx, tl->ca, NULL) != 1)
    what = "ca";
  else if (tl->ciphers[0] && SSL_CTX_set_cipher_list(ctx, tl->ciphers) != 1)
    what = "ciphers";
  if (what) {
    mqr_error_set(err, MQR_EIO, "TLS %s (%s): %s", what,
                  !strncmp(what, "cert", 4)  ? tl->cert
                  : !strncmp(what, "key", 3) ? tl->key
                  : !strcmp(what, "ca")      ? tl->ca
                                             : tl->ciphers,
                  ssl_error(e, sizeof e));
    SSL_CTX_free(ctx);
    return NULL;
  }
  if (tl->ca[0]) {
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(tl->ca);
    if (names) SSL_CTX_set_client_CA_list(ctx, names);
  }
  int mode = tl->client_auth == MQR_CLIENT_AUTH_NEED   ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
             : tl->client_auth == MQR_CLIENT_AUTH_WANT ? SSL_VERIFY_PEER
                                                       : SSL_VERIFY_NONE;
  SSL_CTX_set_verify(ctx, mode, NULL);
  return ctx;
}

static int tls_listen(mqr__listener_t *l, mqr_error_t *err) {
  const mqr_tls_config_t *t = &l->cfg->tls;
  size_t n = strlen(t->cert) + strlen(t->key) + (t->ca ? strlen(t->ca) : 0) + (t->ciphers ? strlen(t->ciphers) : 0);
  tls_listener_t *tl = mqr_calloc(1, sizeof *tl);
  char *p = tl ? mqr_malloc(n + 4) : NULL;
  if (p == NULL) {
    mqr_free(tl);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory for TLS");
  }
  tl->paths = p;
  const char *src[4] = {t->cert, t->key, t->ca ? t->ca : "", t->ciphers ? t->ciphers : ""};
  const char **dst[4] = {&tl->cert, &tl->key, &tl->ca, &tl->ciphers};
  for (int i = 0; i < 4; i++) {
    *dst[i] = strcpy(p, src[i]);
    p += strlen(p) + 1;
  }
  tl->client_auth = t->client_auth;
  tl->min_version = t->min_version;
  if ((tl->ctx = make_ctx(tl, err)) == NULL) {
    mqr_free(tl->paths);
    mqr_free(tl);
    return err ? err->code : MQR_EIO;
  }
  l->ts = tl;
  return 0;
}

static void tls_reload(mqr__listener_t *l) {
  tls_listener_t *tl = l->ts;
  mqr_error_t err;
  SSL_CTX *ctx = make_ctx(tl, &err);
  if (ctx == NULL) {
    mqr__log(l->b, MQR_LOG_ERROR, "listener '%s': the reload kept the TLS certificate it had: %s", l->cfg->name,
             err.message);
    return;
  }
  SSL_CTX_free(tl->ctx); /* connections made under it hold their own reference */
  tl->ctx = ctx;
  mqr__log(l->b, MQR_LOG_INFO, "listener '%s': TLS certificate and key read again", l->cfg->name);
}

static void tls_unlisten(mqr__listener_t *l) {
  tls_listener_t *tl = l->ts;
  if (tl == NULL) return;
  SSL_CTX_free(tl->ctx);
  mqr_free(tl->paths);
  mqr_free(tl);
  l->ts = NULL;
}

/* ---- the BIO between OpenSSL and the connection ---------------------------------------------- */

/* Room for n more bytes of ciphertext in t->out: 0 or -1. */
static int reserve_out(tls_conn_t *t, size_t n) {
  tls_write_t *o = t->out;
  size_t len = o ? o->len : 0, cap = o ? o->cap : 0;
  if (cap - len >= n) return 0;
  size_t want = len + n < 2 * cap ? 2 * cap : len + n;
  if (want < 4096) want = 4096;
  o = mqr_realloc(o, sizeof *o + want); /* (not yet given to uv_write) */
  if (o == NULL) return -1;
  o->len = len, o->cap = want;
  t->out = o;
  return 0;
}

static int bio_write(BIO *b, const char *p, size_t n, size_t *wrote) {
  tls_conn_t *t = BIO_get_data(b);
  if (reserve_out(t, n) != 0) return 0;
  memcpy(t->out->data + t->out->len, p, n);
  t->out->len += n;
  *wrote = n;
  return 1;
}

static int bio_read(BIO *b, char *p, size_t n, size_t *got) {
  tls_conn_t *t = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (t->in_len == 0) {
    BIO_set_retry_read(b);
    return 0;
  }
  if (n > t->in_len) n = t->in_len;
  memcpy(p, t->in, n);
  t->in += n, t->in_len -= n;
  *got = n;
  return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)b, (void)num, (void)ptr;
  return cmd == BIO_CTRL_FLUSH; /* (writes are done when written; nothing else asked of a socket's) */
}

static int bio_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static BIO_METHOD *bio_method(void) {
  static BIO_METHOD *m; /* made once, on the loop's thread (every listener's loop is one) */
  if (m == NULL && (m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "mqr connection")) != NULL) {
    BIO_meth_set_write_ex(m, bio_write);
    BIO_meth_set_read_ex(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
  }
  return m;
}

/* What was read and not taken when the connection stopped reading, kept for later. */
static int hold_rest(tls_conn_t *t) {
  if (t->in_len == 0 || (t->held && t->in >= t->held && t->in < t->held + t->held_cap)) return 0;
  if (t->held_cap < t->in_len) {
    uint8_t *h = mqr_malloc(t->in_len);
    if (h == NULL) return -1;
    mqr_free(t->held);
    t->held = h, t->held_cap = t->in_len;
  }
  memmove(t->held, t->in, t->in_len);
  t->in = t->held;
  return 0;
}

/* ---- writes ------------------------------------------------------------------------------------- */

static void write_cb(uv_write_t *req, int status) {
  tls_write_t *tw = req->data;
  if (tw->w) mqr__conn_written(tw->w, status);
  mqr_free(tw);
}

/* What OpenSSL wrote goes out (for w, or the TLS's own when w is NULL): 0 or a libuv
 * error. */
static int flush(mqr__conn_t *c, mqr__wreq_t *w) {
  tls_conn_t *t = c->ts;
  tls_write_t *tw = t->out;
  if (tw == NULL || tw->len == 0) return w ? UV_EPROTO : 0; /* (bytes written always make a record) */
  t->out = NULL;
  tw->w = w;
  tw->req.data = tw;
  uv_buf_t b = uv_buf_init((char *)tw->data, (unsigned)tw->len);
  int rc = uv_write(&tw->req, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
  if (rc) mqr_free(tw);
  return rc;
}

static int tls_write(mqr__conn_t *c, mqr__wreq_t *w) {
  tls_conn_t *t = c->ts;
  uint8_t *plain = t->tl->plain;
  size_t fill = 0;
  if (reserve_out(t, w->total + (w->total / RECORD + 1) * SEAL) != 0) return UV_ENOMEM;
  for (uint32_t i = 0; i < w->n_segs; i++) {
    const uint8_t *p = (const uint8_t *)w->bufs[i].base;
    size_t left = w->bufs[i].len;
    while (left) { /* gathered into records, each encrypted once full */
      size_t k = left < RECORD - fill ? left : RECORD - fill;
      memcpy(plain + fill, p, k);
      fill += k, p += k, left -= k;
      if (fill == RECORD) {
        if (SSL_write(t->ssl, plain, (int)fill) != (int)fill) return UV_EPROTO;
        fill = 0;
      }
    }
  }
  if (fill && SSL_write(t->ssl, plain, (int)fill) != (int)fill) return UV_EPROTO;
  return flush(c, w);
}

/* ---- reads ---------------------------------------------------------------------------------------- */

static void fail(mqr__conn_t *c, const char *when) {
  tls_conn_t *t = c->ts;
  char e[256];
  const char *why = ssl_error(e, sizeof e);
  if (t == NULL || c->state == MQR__CONN_CLOSING) return;
  t->failed = true;
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): TLS %s failed: %s; closing it", (long long)c->sess.id, c->peer,
           when, why);
  (void)flush(c, NULL); /* the alert, if OpenSSL wrote one */
  mqr__conn_close(c, true);
}

/* The subject CN of a verified client certificate. */
static void note_peer(tls_conn_t *t) {
  X509 *cert = SSL_get0_peer_certificate(t->ssl);
  if (cert == NULL || SSL_get_verify_result(t->ssl) != X509_V_OK) return;
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, t->peer_cn, sizeof t->peer_cn);
}

static void conn_free(tls_conn_t *t) {
  SSL_free(t->ssl); /* and its BIOs; writes in flight have their own bytes */
  mqr_free(t->out);
  mqr_free(t->held);
  mqr_free(t);
}

/* The handshake on, then plaintext into the connection while it reads. The connection
 * may close from inside (a head's fault, a hold): its state then goes at the end. */
static void pump(mqr__conn_t *c) {
  tls_conn_t *t = c->ts;
  if (t == NULL || t->pumping || t->failed) return;
  t->pumping = true;
  const char *failed = NULL;
  if (!t->shaken) {
    int r = SSL_do_handshake(t->ssl);
    if (flush(c, NULL) != 0) {
      mqr__conn_close(c, false);
      goto out;
    }
    if (r != 1) {
      if (SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) failed = "handshake";
      goto out;
    }
    t->shaken = true;
    note_peer(t);
    mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): %s, %s%s%s", (long long)c->sess.id, c->peer,
             SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl), t->peer_cn[0] ? ", client " : "", t->peer_cn);
  }
  while (t->want && !t->released && c->state != MQR__CONN_CLOSING) {
    uv_buf_t room = mqr__conn_room(c);
    if (room.len == 0) {
      mqr__conn_received(c, UV_ENOBUFS);
      break;
    }
    int n = SSL_read(t->ssl, room.base, (int)room.len);
    if (n > 0) {
      mqr__conn_received(c, n);
      continue;
    }
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_ZERO_RETURN) { /* the peer's close_notify */
      mqr__conn_received(c, UV_EOF);
    } else if (e != SSL_ERROR_WANT_READ) {
      failed = "read";
    } else if (c->state != MQR__CONN_CLOSING) {
      mqr__conn_room_unused(c);
    }
    break;
  }
  if (!t->released && !failed && c->state != MQR__CONN_CLOSING && flush(c, NULL) != 0) /* (session tickets) */
    mqr__conn_close(c, false);
out:
  t->pumping = false;
  if (t->released) {
    conn_free(t);
    return;
  }
  if (failed) fail(c, failed);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mqr__conn_t *c = h->data;
  tls_conn_t *t = c->ts;
  *buf = uv_buf_init((char *)t->tl->cipher_in, sizeof t->tl->cipher_in);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mqr__conn_t *c = s->data;
  tls_conn_t *t = c->ts;
  if (t == NULL) return;
  if (nread < 0) {
    mqr__conn_received(c, nread);
    return;
  }
  if (nread == 0) return;
  c->heard_ms = uv_now(mqr__loop(c->b));
  if (t->in_len) { /* after what was held (the handshake reads on while the head holds) */
    memmove(t->held, t->in, t->in_len);
    if (t->held_cap < t->in_len + (size_t)nread) {
      uint8_t *h = mqr_realloc(t->held, t->in_len + (size_t)nread);
      if (h == NULL) {
        mqr__conn_close(c, false);
        return;
      }
      t->held = h, t->held_cap = t->in_len + (size_t)nread;
    }
    memcpy(t->held + t->in_len, buf->base, (size_t)nread);
    t->in = t->held, t->in_len += (size_t)nread;
  } else {
    t->in = (const uint8_t *)buf->base, t->in_len = (size_t)nread;
  }
  pump(c);
  if ((t = c->ts) != NULL && hold_rest(t) != 0) /* (the listener's buffer is the next read's) */
    mqr__conn_close(c, false);
}

static int tls_read_start(mqr__conn_t *c) {
  tls_conn_t *t = c->ts;
  t->want = true;
  int rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
  if (rc == UV_EALREADY) rc = 0;
  if (rc == 0 && !t->pumping && t->shaken && (SSL_pending(t->ssl) > 0 || t->in_len > 0))
    pump(c); /* what came while it was held */
  return rc;
}

static void tls_read_stop(mqr__conn_t *c) {
  tls_conn_t *t = c->ts;
  t->want = false;
  if (t->shaken) uv_read_stop((uv_stream_t *)&c->tcp); /* (the handshake reads on) */
}

/* ---- the connection ----------------------------------------------------------------------------- */

static int tls_open(mqr__conn_t *c) {
  tls_listener_t *tl = c->l->ts;
  tls_conn_t *t = mqr_calloc(1, sizeof *t);
  if (t == NULL) return MQR_ENOMEM;
  t->tl = tl;
  t->ssl = SSL_new(tl->ctx);
  BIO_METHOD *m = bio_method();
  BIO *rbio = m ? BIO_new(m) : NULL, *wbio = m ? BIO_new(m) : NULL;
  if (t->ssl == NULL || rbio == NULL || wbio == NULL) {
    BIO_free(rbio);
    BIO_free(wbio);
    SSL_free(t->ssl);
    mqr_free(t);
    ERR_clear_error();
    return MQR_ENOMEM;
  }
  BIO_set_data(rbio, t);
  BIO_set_data(wbio, t);
  SSL_set_bio(t->ssl, rbio, wbio);
  SSL_set_accept_state(t->ssl);
  c->ts = t;
  return 0;
}

static void tls_release(mqr__conn_t *c) {
  tls_conn_t *t = c->ts;
  if (t == NULL) return;
  c->ts = NULL;
  if (t->pumping) /* pump, further up the stack, frees it */
    t->released = true;
  else
    conn_free(t);
}

static const char *tls_peer_name(mqr__conn_t *c) {
  tls_conn_t *t = c->ts;
  return t && t->peer_cn[0] ? t->peer_cn : NULL;
}

const mqr__transport_t mqr__tls_transport = {
    .name = "tls",
    .secure = true,
    .listen = tls_listen,
    .reload = tls_reload,
    .unlisten = tls_unlisten,
    .peer_name = tls_peer_name,
    .open = tls_open,
    .read_start = tls_read_start,
    .read_stop = tls_read_stop,
    .write = tls_write,
    .release = tls_release,
};
