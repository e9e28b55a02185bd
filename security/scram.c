/* SCRAM-SHA-256 (RFC 5802, RFC 7677): a password proved without crossing the connection,
 * for the native protocol's SASL and MQTT 5's enhanced authentication. The users file
 * keeps, beside a user's argon2id hash, the salted keys SCRAM needs (StoredKey and
 * ServerKey, as PostgreSQL keeps them): SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY.
 * HMAC, SHA-256 and PBKDF2 are OpenSSL's libcrypto; nonces and base64 libsodium's. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "security_int.h"

#define KEY 32 /* SHA-256 */

static void hmac(const uint8_t *key, size_t klen, const void *msg, size_t n, uint8_t out[KEY]) {
  unsigned len = KEY;
  HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len);
}

static void sha256(const uint8_t *in, size_t n, uint8_t out[KEY]) {
  unsigned len = KEY;
  EVP_Digest(in, n, out, &len, EVP_sha256(), NULL);
}

static size_t b64(const uint8_t *in, size_t n, char *out, size_t cap) {
  if (sodium_init() < 0 || cap < sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL)) return 0;
  sodium_bin2base64(out, cap, in, n, sodium_base64_VARIANT_ORIGINAL);
  return strlen(out);
}

static int unb64(const char *in, size_t n, uint8_t *out, size_t cap) {
  size_t bin = 0;
  if (sodium_init() < 0 || sodium_base642bin(out, cap, in, n, NULL, &bin, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
    return -1;
  return (int)bin;
}

/* SaltedPassword -> ClientKey, StoredKey, ServerKey. */
static void keys(const char *pw, size_t len, const uint8_t *salt, size_t slen, uint32_t iter, uint8_t stored[KEY],
                 uint8_t server[KEY]) {
  uint8_t salted[KEY], client[KEY];
  PKCS5_PBKDF2_HMAC(pw, (int)len, salt, (int)slen, (int)iter, EVP_sha256(), KEY, salted);
  hmac(salted, KEY, "Client Key", 10, client);
  sha256(client, KEY, stored);
  hmac(salted, KEY, "Server Key", 10, server);
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client, sizeof client);
}

int mqr_scram_credentials(const char *password, size_t len, uint32_t iterations, char *out, size_t cap,
                          mqr_error_t *err) {
  if (len > MQR_PASSWORD_MAX) return mqr_error_set(err, MQR_ELIMIT, "the password is too long");
  if (iterations < 4096) iterations = 4096; /* RFC 7677's least */
  uint8_t salt[16], stored[KEY], server[KEY];
  if (mqr_random_bytes(salt, sizeof salt) != 0) return mqr_error_set(err, MQR_EIO, "no random source");
  keys(password, len, salt, sizeof salt, iterations, stored, server);
  char s[32], k1[64], k2[64];
  b64(salt, sizeof salt, s, sizeof s);
  b64(stored, KEY, k1, sizeof k1);
  b64(server, KEY, k2, sizeof k2);
  int n = snprintf(out, cap, "SCRAM-SHA-256$%u:%s$%s:%s", iterations, s, k1, k2);
  if (n < 0 || (size_t)n >= cap) return mqr_error_set(err, MQR_ENOSPC, "no room for SCRAM credentials");
  return 0;
}

/* A stored credential read back: 0, or -1 when it does not parse. */
static int parse_credentials(const char *cred, uint32_t *iter, uint8_t *salt, int *slen, uint8_t stored[KEY],
                             uint8_t server[KEY]) {
  if (strncmp(cred, "SCRAM-SHA-256$", 14) != 0) return -1;
  const char *p = cred + 14, *colon = strchr(p, ':'), *dollar = colon ? strchr(colon, '$') : NULL;
  const char *colon2 = dollar ? strchr(dollar, ':') : NULL;
  if (colon2 == NULL) return -1;
  char *end;
  unsigned long it = strtoul(p, &end, 10);
  if (end != colon || it < 1 || it > 10000000) return -1;
  *iter = (uint32_t)it;
  *slen = unb64(colon + 1, (size_t)(dollar - colon - 1), salt, 64);
  if (*slen <= 0 || unb64(dollar + 1, (size_t)(colon2 - dollar - 1), stored, KEY) != KEY ||
      unb64(colon2 + 1, strlen(colon2 + 1), server, KEY) != KEY)
    return -1;
  return 0;
}

bool mqr_scram_credentials_valid(const char *cred) {
  uint32_t it;
  uint8_t salt[64], a[KEY], b[KEY];
  int sl;
  return parse_credentials(cred, &it, salt, &sl, a, b) == 0;
}

/* ---- the server's side ----------------------------------------------------------------------------- */

/* The value of attribute c ("r", "p", ...) in a comma-separated message, or NULL. */
static mqr_str_t attr(mqr_str_t msg, char c, bool *found) {
  const char *p = msg.ptr, *end = msg.ptr + msg.len;
  *found = false;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *e = comma ? comma : end;
    if (e - p >= 2 && p[0] == c && p[1] == '=') {
      *found = true;
      return mqr_str_n(p + 2, (size_t)(e - p - 2));
    }
    p = comma ? comma + 1 : end;
  }
  return mqr_str_n("", 0);
}

int mqr_scram_server_start(mqr_scram_server_t *s, mqr_str_t client_first, mqr_error_t *err) {
  memset(s, 0, sizeof *s);
  /* gs2-header "n,," (no channel binding, no authzid), then n=NAME,r=NONCE. */
  if (client_first.len < 3 || memcmp(client_first.ptr, "n,,", 3) != 0)
    return mqr_error_set(err, MQR_EPROTOCOL, "SCRAM: the client-first message must start with n,, (no binding)");
  mqr_str_t bare = mqr_str_n(client_first.ptr + 3, client_first.len - 3);
  bool fn, fr;
  mqr_str_t name = attr(bare, 'n', &fn), nonce = attr(bare, 'r', &fr);
  if (!fn || !fr || name.len == 0 || name.len >= sizeof s->user || nonce.len == 0 || nonce.len > 128 ||
      bare.len >= sizeof s->client_first_bare)
    return mqr_error_set(err, MQR_EPROTOCOL, "SCRAM: a bad client-first message");
  /* The name as saslname: =2C is ',' and =3D is '='. */
  size_t n = 0;
  for (size_t i = 0; i < name.len; i++) {
    if (name.ptr[i] == '=' && i + 2 < name.len && name.ptr[i + 1] == '2' && name.ptr[i + 2] == 'C')
      s->user[n++] = ',', i += 2;
    else if (name.ptr[i] == '=' && i + 2 < name.len && name.ptr[i + 1] == '3' && name.ptr[i + 2] == 'D')
      s->user[n++] = '=', i += 2;
    else
      s->user[n++] = name.ptr[i];
  }
  s->user[n] = '\0';
  memcpy(s->client_first_bare, bare.ptr, bare.len);
  s->client_first_bare[bare.len] = '\0';
  uint8_t rnd[18];
  if (mqr_random_bytes(rnd, sizeof rnd) != 0) return mqr_error_set(err, MQR_EIO, "no random source");
  char snonce[32];
  b64(rnd, sizeof rnd, snonce, sizeof snonce);
  int k = snprintf(s->nonce, sizeof s->nonce, "%.*s%s", (int)nonce.len, nonce.ptr, snonce);
  if (k < 0 || (size_t)k >= sizeof s->nonce) return mqr_error_set(err, MQR_EPROTOCOL, "SCRAM: nonce too long");
  s->step = 1;
  return 0;
}

int mqr_scram_server_challenge(mqr_scram_server_t *s, const char *cred, char *out, size_t cap, mqr_error_t *err) {
  uint8_t salt[64];
  int slen;
  if (s->step != 1) return mqr_error_set(err, MQR_EPROTOCOL, "SCRAM: out of order");
  if (cred == NULL || parse_credentials(cred, &s->iter, salt, &slen, s->stored, s->server) != 0) {
    /* An unknown user (or one without SCRAM keys) gets a made-up challenge, so that the
     * exchange fails only at the proof and does not tell which names exist. */
    s->unknown = true;
    slen = 16;
    mqr_random_bytes(salt, 16);
    s->iter = 4096;
  }
  char sb[96];
  b64(salt, (size_t)slen, sb, sizeof sb);
  int n = snprintf(out, cap, "r=%s,s=%s,i=%u", s->nonce, sb, s->iter);
  if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof s->server_first)
    return mqr_error_set(err, MQR_ENOSPC, "SCRAM: no room");
  memcpy(s->server_first, out, (size_t)n + 1);
  s->step = 2;
  return 0;
}

int mqr_scram_server_final(mqr_scram_server_t *s, mqr_str_t client_final, char *out, size_t cap, mqr_error_t *err) {
  if (s->step != 2) return mqr_error_set(err, MQR_EPROTOCOL, "SCRAM: out of order");
  s->step = 3;
  bool fc, fr, fp;
  mqr_str_t cb = attr(client_final, 'c', &fc), nonce = attr(client_final, 'r', &fr),
            proof = attr(client_final, 'p', &fp);
  const char *pp = fp ? proof.ptr - 3 : NULL; /* ",p=" ends the message without proof */
  if (!fc || !fr || !fp || !mqr_str_eq(cb, MQR_STR("biws")) || !mqr_str_eq(nonce, mqr_str(s->nonce)) ||
      pp < client_final.ptr || *pp != ',')
    return mqr_error_set(err, MQR_EAUTH, "SCRAM: a bad client-final message");
  char auth[1024];
  int n = snprintf(auth, sizeof auth, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)(pp - client_final.ptr),
                   client_final.ptr);
  uint8_t p[KEY], sig[KEY], client_key[KEY], check[KEY];
  if (n < 0 || (size_t)n >= sizeof auth || unb64(proof.ptr, proof.len, p, sizeof p) != KEY)
    return mqr_error_set(err, MQR_EAUTH, "SCRAM: a bad proof");
  hmac(s->stored, KEY, auth, (size_t)n, sig);
  for (int i = 0; i < KEY; i++) client_key[i] = p[i] ^ sig[i];
  sha256(client_key, KEY, check);
  if (s->unknown || CRYPTO_memcmp(check, s->stored, KEY) != 0)
    return mqr_error_set(err, MQR_EAUTH, "SCRAM: the proof does not verify");
  uint8_t server_sig[KEY];
  hmac(s->server, KEY, auth, (size_t)n, server_sig);
  char v[64];
  b64(server_sig, KEY, v, sizeof v);
  n = snprintf(out, cap, "v=%s", v);
  if (n < 0 || (size_t)n >= cap) return mqr_error_set(err, MQR_ENOSPC, "SCRAM: no room");
  return 0;
}

/* ---- the client's side ----------------------------------------------------------------------------- */

int mqr_scram_client_first(mqr_scram_client_t *c, const char *user, const char *nonce, char *out, size_t cap) {
  memset(c, 0, sizeof *c);
  char rnd_b64[32];
  if (nonce == NULL) {
    uint8_t rnd[18];
    if (mqr_random_bytes(rnd, sizeof rnd) != 0) return MQR_EIO;
    b64(rnd, sizeof rnd, rnd_b64, sizeof rnd_b64);
    nonce = rnd_b64;
  }
  char name[300];
  size_t n = 0;
  for (const char *p = user; *p && n + 4 < sizeof name; p++) {
    if (*p == ',')
      memcpy(name + n, "=2C", 3), n += 3;
    else if (*p == '=')
      memcpy(name + n, "=3D", 3), n += 3;
    else
      name[n++] = *p;
  }
  name[n] = '\0';
  int k = snprintf(c->client_first_bare, sizeof c->client_first_bare, "n=%s,r=%s", name, nonce);
  if (k < 0 || (size_t)k >= sizeof c->client_first_bare) return MQR_ENOSPC;
  snprintf(c->nonce, sizeof c->nonce, "%s", nonce);
  k = snprintf(out, cap, "n,,%s", c->client_first_bare);
  return k < 0 || (size_t)k >= cap ? MQR_ENOSPC : 0;
}

int mqr_scram_client_final(mqr_scram_client_t *c, const char *password, size_t len, mqr_str_t server_first, char *out,
                           size_t cap) {
  bool fr, fs, fi;
  mqr_str_t nonce = attr(server_first, 'r', &fr), salt = attr(server_first, 's', &fs),
            iter = attr(server_first, 'i', &fi);
  if (!fr || !fs || !fi || nonce.len <= strlen(c->nonce) || memcmp(nonce.ptr, c->nonce, strlen(c->nonce)) != 0)
    return MQR_EPROTOCOL;
  uint8_t s[64];
  int slen = unb64(salt.ptr, salt.len, s, sizeof s);
  char num[16];
  snprintf(num, sizeof num, "%.*s", (int)(iter.len < 15 ? iter.len : 15), iter.ptr);
  unsigned long it = strtoul(num, NULL, 10);
  if (slen <= 0 || it < 1 || it > 10000000) return MQR_EPROTOCOL;
  uint8_t salted[KEY], client_key[KEY], stored[KEY], sig[KEY], proof[KEY];
  PKCS5_PBKDF2_HMAC(password, (int)len, s, slen, (int)it, EVP_sha256(), KEY, salted);
  hmac(salted, KEY, "Client Key", 10, client_key);
  sha256(client_key, KEY, stored);
  hmac(salted, KEY, "Server Key", 10, c->server_key);
  char without_proof[300];
  int k = snprintf(without_proof, sizeof without_proof, "c=biws,r=%.*s", (int)nonce.len, nonce.ptr);
  char auth[1024];
  int n = snprintf(auth, sizeof auth, "%s,%.*s,%s", c->client_first_bare, (int)server_first.len, server_first.ptr,
                   without_proof);
  if (k < 0 || n < 0 || (size_t)n >= sizeof auth || (size_t)n >= sizeof c->auth) return MQR_ENOSPC;
  memcpy(c->auth, auth, (size_t)n + 1);
  hmac(stored, KEY, auth, (size_t)n, sig);
  for (int i = 0; i < KEY; i++) proof[i] = client_key[i] ^ sig[i];
  char pb[64];
  b64(proof, KEY, pb, sizeof pb);
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client_key, sizeof client_key);
  k = snprintf(out, cap, "%s,p=%s", without_proof, pb);
  return k < 0 || (size_t)k >= cap ? MQR_ENOSPC : 0;
}

bool mqr_scram_client_verify(const mqr_scram_client_t *c, mqr_str_t server_final) {
  bool fv;
  mqr_str_t v = attr(server_final, 'v', &fv);
  uint8_t want[KEY], got[KEY];
  if (!fv || unb64(v.ptr, v.len, got, sizeof got) != KEY) return false;
  hmac(c->server_key, KEY, c->auth, strlen(c->auth), want);
  return CRYPTO_memcmp(want, got, KEY) == 0;
}
