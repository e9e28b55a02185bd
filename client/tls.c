/* TLS for the client (tls:// URLs): OpenSSL 3 through memory BIOs, as the broker's
 * transport does, so the client's loop keeps its sockets. The broker's certificate is
 * checked against the CAs given (or the system's) and the URL's host; a client
 * certificate and key prove who the client is. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

struct mqr__ctls_s {
  SSL_CTX *ctx;
  SSL *ssl;
  BIO *rbio, *wbio;
  bool shaken;
};

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
  if ((t->ssl = SSL_new(t->ctx)) == NULL || (t->rbio = BIO_new(BIO_s_mem())) == NULL ||
      (t->wbio = BIO_new(BIO_s_mem())) == NULL) {
    BIO_free(t->rbio);
    t->rbio = NULL;
    rc = tls_error(err, MQR_ENOMEM, "TLS");
    goto fail;
  }
  SSL_set_bio(t->ssl, t->rbio, t->wbio);
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
  return BIO_write(t->rbio, p, (int)n) == (int)n ? 0 : MQR_ENOMEM;
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

int mqr__ctls_write(mqr__ctls_t *t, const void *p, size_t n) {
  return SSL_write(t->ssl, p, (int)n) == (int)n ? 0 : MQR_EPROTOCOL;
}

size_t mqr__ctls_pending(const mqr__ctls_t *t) { return (size_t)BIO_ctrl_pending(t->wbio); }

size_t mqr__ctls_take(mqr__ctls_t *t, void *out, size_t n) {
  int got = BIO_read(t->wbio, out, (int)n);
  return got > 0 ? (size_t)got : 0;
}
