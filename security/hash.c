/* Password hashes: argon2id for new ones (libsodium), and for migration mosquitto's
 * PBKDF2-SHA512 and salted SHA-512 and Artemis's PBKDF2-SHA1 (OpenSSL's libcrypto). Why
 * these libraries: libsodium's crypto_pwhash is the maintained argon2id with its
 * parameters in the string; libcrypto has the PBKDF2 and SHA-2 the migrated hashes need
 * (and TLS will need it anyway). */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "mqr/security.h"

static bool sodium_ready(void) {
  static int state; /* 0 not tried, 1 ready, -1 failed; sodium_init is itself thread-safe */
  if (state == 0) state = sodium_init() >= 0 ? 1 : -1;
  return state == 1;
}

int mqr_password_hash(const char *password, size_t len, char *out, mqr_error_t *err) {
  if (len > MQR_PASSWORD_MAX)
    return mqr_error_set(err, MQR_ELIMIT, "a password of %zu bytes is longer than %d", len, MQR_PASSWORD_MAX);
  if (!sodium_ready()) return mqr_error_set(err, MQR_EIO, "libsodium cannot start (no random source)");
  _Static_assert(crypto_pwhash_STRBYTES <= MQR_PASSWORD_HASH_MAX, "a hash fits");
  if (crypto_pwhash_str(out, password, len, crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE) !=
      0)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory hashing a password (argon2id takes %u MiB)",
                         (unsigned)(crypto_pwhash_MEMLIMIT_INTERACTIVE >> 20));
  return 0;
}

/* Standard base64 (with or without its padding) into out: the bytes, or -1. */
static int unbase64(const char *s, size_t n, uint8_t *out, size_t cap) {
  size_t bin = 0;
  if (!sodium_ready()) return -1;
  if (sodium_base642bin(out, cap, s, n, NULL, &bin, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 &&
      sodium_base642bin(out, cap, s, n, NULL, &bin, NULL, sodium_base64_VARIANT_ORIGINAL_NO_PADDING) != 0)
    return -1;
  return (int)bin;
}

static int unhex(const char *s, size_t n, uint8_t *out, size_t cap) {
  size_t bin = 0;
  if (!sodium_ready() || sodium_hex2bin(out, cap, s, n, NULL, &bin, NULL) != 0 || bin * 2 != n) return -1;
  return (int)bin;
}

/* The next field of a '$'-separated hash: [*p, '$' or end). */
static mqr_str_t field(const char **p) {
  const char *s = *p, *e = strchr(s, '$');
  if (e == NULL) e = s + strlen(s);
  *p = *e ? e + 1 : e;
  return mqr_str_n(s, (size_t)(e - s));
}

/* mosquitto: $7$ITERATIONS$SALT$HASH (PBKDF2-HMAC-SHA512) or $6$SALT$HASH (SHA-512 of
 * the password then the salt), base64. */
static bool verify_mosquitto(const char *hash, const char *pw, size_t len) {
  const char *p = hash + 3;
  bool pbkdf2 = hash[1] == '7';
  long iterations = 1;
  if (pbkdf2) {
    mqr_str_t it = field(&p);
    char num[16];
    if (it.len == 0 || it.len >= sizeof num) return false;
    memcpy(num, it.ptr, it.len);
    num[it.len] = '\0';
    char *end;
    iterations = strtol(num, &end, 10);
    if (*end || iterations < 1 || iterations > 100000000) return false;
  }
  mqr_str_t s = field(&p), h = field(&p);
  uint8_t salt[128], want[64], got[64];
  int sl = unbase64(s.ptr, s.len, salt, sizeof salt), hl = unbase64(h.ptr, h.len, want, sizeof want);
  if (sl <= 0 || hl != 64 || *p) return false;
  if (pbkdf2) {
    if (PKCS5_PBKDF2_HMAC(pw, (int)len, salt, sl, (int)iterations, EVP_sha512(), 64, got) != 1) return false;
  } else {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned n = 0;
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha512(), NULL) == 1 && EVP_DigestUpdate(md, pw, len) == 1 &&
              EVP_DigestUpdate(md, salt, (size_t)sl) == 1 && EVP_DigestFinal_ex(md, got, &n) == 1 && n == 64;
    EVP_MD_CTX_free(md);
    if (!ok) return false;
  }
  return CRYPTO_memcmp(got, want, 64) == 0;
}

/* Artemis: ENC(ITERATIONS:SALT:HASH), hex, PBKDF2-HMAC-SHA1 with a key as long as HASH
 * (DefaultSensitiveStringCodec's one-way algorithm; the password as UTF-8). */
static bool verify_artemis(const char *hash, const char *pw, size_t len) {
  size_t n = strlen(hash);
  if (n < 6 || hash[n - 1] != ')') return false;
  char body[600];
  if (n - 5 >= sizeof body) return false;
  memcpy(body, hash + 4, n - 5);
  body[n - 5] = '\0';
  char *c1 = strchr(body, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (c2 == NULL || strchr(c2 + 1, ':')) return false;
  *c1 = *c2 = '\0';
  char *end;
  long iterations = strtol(body, &end, 10);
  if (*end || end == body || iterations < 1 || iterations > 100000000) return false;
  uint8_t salt[128], want[128], got[128];
  int sl = unhex(c1 + 1, strlen(c1 + 1), salt, sizeof salt), hl = unhex(c2 + 1, strlen(c2 + 1), want, sizeof want);
  if (sl <= 0 || hl <= 0) return false;
  if (PKCS5_PBKDF2_HMAC(pw, (int)len, salt, sl, (int)iterations, EVP_sha1(), hl, got) != 1) return false;
  return CRYPTO_memcmp(got, want, (size_t)hl) == 0;
}

const char *mqr_password_kind(const char *hash) {
  if (strncmp(hash, "$argon2id$", 10) == 0) return "argon2id";
  if (strncmp(hash, "$argon2i$", 9) == 0) return "argon2i";
  if (strncmp(hash, "$7$", 3) == 0) return "mosquitto-pbkdf2-sha512";
  if (strncmp(hash, "$6$", 3) == 0) return "mosquitto-sha512";
  if (strncmp(hash, "ENC(", 4) == 0) return "artemis-pbkdf2-sha1";
  return NULL;
}

bool mqr_password_verify(const char *hash, const char *password, size_t len) {
  const char *kind = mqr_password_kind(hash);
  if (kind == NULL || len > MQR_PASSWORD_MAX) return false;
  if (strncmp(kind, "argon2", 6) == 0) return sodium_ready() && crypto_pwhash_str_verify(hash, password, len) == 0;
  if (strncmp(kind, "mosquitto", 9) == 0) return verify_mosquitto(hash, password, len);
  return verify_artemis(hash, password, len);
}

void mqr_password_digest(const uint8_t key[32], mqr_str_t name, const char *password, size_t len, uint8_t out[32]) {
  crypto_generichash_state st;
  uint8_t zero = 0;
  crypto_generichash_init(&st, key, 32, 32);
  crypto_generichash_update(&st, (const uint8_t *)name.ptr, name.len);
  crypto_generichash_update(&st, &zero, 1); /* (name, password) pairs never run together */
  crypto_generichash_update(&st, (const uint8_t *)password, len);
  crypto_generichash_final(&st, out, 32);
}

int mqr_random_bytes(void *out, size_t n) {
  if (!sodium_ready()) return MQR_EIO;
  randombytes_buf(out, n);
  return 0;
}
