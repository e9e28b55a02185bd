/* TLS for the client (tls:// URLs): OpenSSL 3 through a BIO of ours, as the broker's
 * transport does, so the client's loop keeps its sockets. The broker's certificate is
 * checked against the CAs given (or the system's) and the URL's host; a client
 * certificate and key prove who the client is.
 *
 * The BIO copies no byte a memory BIO would copy twice: OpenSSL reads ciphertext straight
 * from the buffer libuv read into (what it leaves is kept, rarely), and writes the
 * records of a write straight into the caller's buffer; only its own records (handshake,
 * alerts, tickets) wait in the BIO for mqr__ctls_take. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../common/grow.h"
#include "client_int.h"

typedef struct {
  uint8_t *p;
  size_t len, cap;
} bytes_t;

struct mqr__ctls_s {
  SSL_CTX *ctx;
  SSL *ssl;
  const uint8_t *in; /* ciphertext fed and not yet read by OpenSSL */
  size_t in_len;
  bytes_t held; /* what OpenSSL left of a feed, kept for the next */
  bytes_t own;  /* OpenSSL's own records, for mqr__ctls_take */
  bytes_t *dst; /* during mqr__ctls_write: where its records go */
  bool shaken;
};

static bool append(bytes_t *b, const void *p, size_t n) {
  if (!mqr__grow_size((void **)&b->p, &b->cap, b->len + n, 1)) return false;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return true;
}

static int bio_write(BIO *b, const char *p, size_t n, size_t *wrote) {
  mqr__ctls_t *t = BIO_get_data(b);
  if (!append(t->dst ? t->dst : &t->own, p, n)) return 0;
  *wrote = n;
  return 1;
}

static int bio_read(BIO *b, char *p, size_t n, size_t *got) {
  mqr__ctls_t *t = BIO_get_data(b);
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
  return cmd == BIO_CTRL_FLUSH;
}

static int bio_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static BIO_METHOD *bio_method(void) {
  static BIO_METHOD *_Atomic made;
  BIO_METHOD *m = made;
  if (m) return m;
  if ((m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "mqr client")) == NULL) return NULL;
  BIO_meth_set_write_ex(m, bio_write);
  BIO_meth_set_read_ex(m, bio_read);
  BIO_meth_set_ctrl(m, bio_ctrl);
  BIO_meth_set_create(m, bio_create);
  BIO_METHOD *none = NULL;
  if (!atomic_compare_exchange_strong(&made, &none, m)) { /* another thread's first */
    BIO_meth_free(m);
    m = none;
  }
  return m;
}

static int tls_error(mqr_error_t *err, int code, const char *what) {
  char e[256] = "unknown TLS error";
  unsigned long x = ERR_get_error();
  if (x) ERR_error_string_n(x, e, sizeof e);
  ERR_clear_error();
  return mqr_error_set(err, code, "%s: %s", what, e);
}

void mqr__ctls_free(mqr__ctls_t *t) {
  if (t == NULL) return;
  SSL_free(t->ssl);
  SSL_CTX_free(t->ctx);
  mqr_free(t->held.p);
  mqr_free(t->own.p);
  mqr_free(t);
}

int mqr__ctls_new(const mqr_client_options_t *opt, const char *host, mqr__ctls_t **out, mqr_error_t *err) {
  mqr__ctls_t *t = mqr_calloc(1, sizeof *t);
  if (t == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory for TLS");
  int rc = 0;
  if ((t->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
    rc = tls_error(err, MQR_ENOMEM, "TLS");
    goto fail;
  }
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
  if (opt->tls_ca ? SSL_CTX_load_verify_locations(t->ctx, opt->tls_ca, NULL) != 1
                  : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
    rc = tls_error(err, MQR_EIO, opt->tls_ca ? opt->tls_ca : "the system's CAs");
    goto fail;
  }
  if (opt->tls_cert &&
      (SSL_CTX_use_certificate_chain_file(t->ctx, opt->tls_cert) != 1 ||
       SSL_CTX_use_PrivateKey_file(t->ctx, opt->tls_key ? opt->tls_key : opt->tls_cert, SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(t->ctx) != 1)) {
    rc = tls_error(err, MQR_EIO, opt->tls_cert);
    goto fail;
  }
  BIO_METHOD *m = bio_method();
  BIO *rbio = m ? BIO_new(m) : NULL, *wbio = m ? BIO_new(m) : NULL;
  if ((t->ssl = SSL_new(t->ctx)) == NULL || rbio == NULL || wbio == NULL) {
    BIO_free(rbio);
    BIO_free(wbio);
    rc = tls_error(err, MQR_ENOMEM, "TLS");
    goto fail;
  }
  BIO_set_data(rbio, t);
  BIO_set_data(wbio, t);
  SSL_set_bio(t->ssl, rbio, wbio);
  SSL_set_connect_state(t->ssl);
  SSL_set_tlsext_host_name(t->ssl, host);
  /* The broker's certificate must name the host the URL names (a DNS name or an IP). */
  X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
  X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) X509_VERIFY_PARAM_set1_host(vp, host, 0);
  ERR_clear_error();
  *out = t;
  return 0;
fail:
  mqr__ctls_free(t);
  return rc;
}

int mqr__ctls_feed(mqr__ctls_t *t, const void *p, size_t n) {
  if (t->in_len == 0) { /* read in place */
    t->in = p, t->in_len = n;
    return 0;
  }
  /* after what the last feed left (in held) */
  memmove(t->held.p, t->in, t->in_len);
  t->held.len = t->in_len;
  if (!append(&t->held, p, n)) return MQR_ENOMEM;
  t->in = t->held.p, t->in_len = t->held.len;
  return 0;
}

int mqr__ctls_keep(mqr__ctls_t *t) {
  if (t->in_len == 0 || t->in == t->held.p) return 0;
  t->held.len = 0;
  if (!append(&t->held, t->in, t->in_len)) return MQR_ENOMEM;
  t->in = t->held.p;
  return 0;
}

int mqr__ctls_handshake(mqr__ctls_t *t, mqr_error_t *err) {
  if (t->shaken) return 1;
  int r = SSL_do_handshake(t->ssl);
  if (r == 1) return t->shaken = true, 1;
  if (SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_READ) return 0;
  long v = SSL_get_verify_result(t->ssl);
  if (v != X509_V_OK) {
    ERR_clear_error();
    return mqr_error_set(err, MQR_EPROTOCOL, "TLS: the broker's certificate: %s", X509_verify_cert_error_string(v));
  }
  return tls_error(err, MQR_EPROTOCOL, "TLS handshake");
}

long mqr__ctls_read(mqr__ctls_t *t, void *out, size_t cap) {
  int n = SSL_read(t->ssl, out, (int)cap);
  if (n > 0) return n;
  int e = SSL_get_error(t->ssl, n);
  ERR_clear_error();
  return e == SSL_ERROR_WANT_READ ? 0 : -1;
}

int mqr__ctls_write(mqr__ctls_t *t, const void *p, size_t n, uint8_t **out, size_t *cap, size_t *len) {
  /* room for its records beforehand: 16 KiB each, with at most 64 bytes of header and tag */
  bytes_t b = {*out, 0, *cap};
  if (!mqr__grow_size((void **)&b.p, &b.cap, n + (n / 16384 + 1) * 64, 1)) return MQR_ENOMEM;
  t->dst = &b;
  int ok = SSL_write(t->ssl, p, (int)n) == (int)n;
  t->dst = NULL;
  *out = b.p, *cap = b.cap, *len = b.len;
  return ok ? 0 : MQR_EPROTOCOL;
}

size_t mqr__ctls_pending(const mqr__ctls_t *t) { return t->own.len; }

size_t mqr__ctls_take(mqr__ctls_t *t, void *out, size_t n) {
  if (n > t->own.len) n = t->own.len;
  memcpy(out, t->own.p, n);
  memmove(t->own.p, t->own.p + n, t->own.len - n);
  t->own.len -= n;
  return n;
}
