/* Who may connect: password hashes and users files (docs/security.md).
 *
 * A users file holds, per user, a name, roles and a password hash, never a password:
 *
 *   # NAME:ROLES:HASH [SCRAM]
 *   alice:admin,ops:$argon2id$v=19$m=65536,t=2,p=1$<salt>$<hash> SCRAM-SHA-256$8192:<salt>$<keys>
 *
 * New hashes are argon2id (libsodium's crypto_pwhash_str: the algorithm, its version,
 * memory and time cost and a random salt live in the string, so a cost raised later
 * leaves older lines valid). For migration the loader also reads mosquitto's
 * password_file (NAME:$7$... PBKDF2-SHA512, NAME:$6$... salted SHA-512) and Artemis's
 * artemis-users.properties (NAME = ENC(iterations:salt:hash), PBKDF2-SHA1) with its
 * artemis-roles.properties (ROLE = user1,user2). A plaintext password is refused.
 *
 * Hashing and verifying cost a memory-hard KDF on purpose (tens of milliseconds): call
 * them off any event loop. Everything here is thread-safe except where it says not. */
#ifndef MQR_SECURITY_H
#define MQR_SECURITY_H

#include "mqr/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- password hashes ---------------------------------------------------------------------- */

#define MQR_PASSWORD_HASH_MAX 256 /* a hash's text, its NUL included */
#define MQR_PASSWORD_MAX 1024     /* the longest password taken */

/* The argon2id hash of password[0..len) into out (MQR_PASSWORD_HASH_MAX bytes), with a
 * random salt: 0, MQR_ELIMIT (longer than MQR_PASSWORD_MAX), MQR_ENOMEM (the KDF's
 * memory), MQR_EIO (no random source). */
MQR_EXTERN int mqr_password_hash(const char *password, size_t len, char *out, mqr_error_t *err);

/* Whether password[0..len) is the one hash was made from. Every kind named above;
 * false for a hash of no known kind. Compares in constant time. */
MQR_EXTERN bool mqr_password_verify(const char *hash, const char *password, size_t len);

/* The kind of a hash ("argon2id", "mosquitto-pbkdf2-sha512", "mosquitto-sha512",
 * "artemis-pbkdf2-sha1"), or NULL for none known (a plaintext password, say). */
MQR_EXTERN const char *mqr_password_kind(const char *hash);

/* A keyed digest of name and password (BLAKE2b-256, fast): what an authentication cache
 * keeps instead of the password. key: 32 random bytes of the cache's own. */
MQR_EXTERN void mqr_password_digest(const uint8_t key[32], mqr_str_t name, const char *password, size_t len,
                                    uint8_t out[32]);
/* n random bytes into out (libsodium's randombytes): 0 or MQR_EIO. */
MQR_EXTERN int mqr_random_bytes(void *out, size_t n);

/* ---- users ----------------------------------------------------------------------------------- */

/* Users loaded from a file. Immutable once loaded: threads may verify at once. */
typedef struct mqr_users_s mqr_users_t;

/* Loads path, of any format above (told line by line: "NAME = ..." is Artemis's,
 * "NAME:$..." mosquitto's, "NAME:ROLES:HASH" mqr's); roles_path (may be NULL) is an
 * Artemis roles file whose roles are added to its users'. 0 with *out, or MQR_EIO (cannot
 * read), MQR_ECONFIG (err names the file, line and why: a malformed line, a user named
 * twice, a plaintext password, a hash of no known kind), MQR_ENOMEM. */
MQR_EXTERN int mqr_users_load(const char *path, const char *roles_path, mqr_users_t **out, mqr_error_t *err);
MQR_EXTERN void mqr_users_destroy(mqr_users_t *u); /* NULL is allowed */

/* A user as loaded; views valid as long as u. roles: comma-separated, may be empty. */
typedef struct {
  mqr_str_t name, roles;
  const char *hash;
  const char *scram; /* its SCRAM-SHA-256 keys (below); NULL: none (a migrated user) */
} mqr_user_t;

/* How many users u holds. */
MQR_EXTERN uint32_t mqr_users_count(const mqr_users_t *u);
/* The i-th user by name order, or false past the end. */
MQR_EXTERN bool mqr_users_at(const mqr_users_t *u, uint32_t i, mqr_user_t *out);
/* The user named name, or false. */
MQR_EXTERN bool mqr_users_find(const mqr_users_t *u, mqr_str_t name, mqr_user_t *out);

/* Checks name and password: 0 with *out set (the user), or MQR_EAUTH, alike for an
 * unknown user and a wrong password (an unknown one still costs a verification, so
 * that timing does not tell). Costs the KDF: not on an event loop. */
MQR_EXTERN int mqr_users_verify(const mqr_users_t *u, mqr_str_t name, const char *password, size_t len,
                                mqr_user_t *out);

/* ---- editing a users file (`mqr user`) ------------------------------------------------------- */

/* Adds user name (add), or changes an existing one's password and/or roles: password
 * NULL keeps it (not for add), roles NULL keeps them. The file is written whole to a
 * temporary file beside it and renamed over it (mode 0600 for a new one), its comments
 * and other users kept. A name holds no ':', '=', '#' or white space. Errors: MQR_EINVAL
 * (a bad name or roles, or add of an existing user: err says which), MQR_ENOTFOUND (a
 * change of a missing user), MQR_EIO, MQR_ENOMEM. Not thread-safe for one file; for
 * mqr's own files (not mosquitto's or Artemis's). */
MQR_EXTERN int mqr_users_file_set(const char *path, mqr_str_t name, const char *roles, const char *password,
                                  size_t password_len, bool add, mqr_error_t *err);
/* Removes user name: 0, MQR_ENOTFOUND, MQR_EIO, MQR_ENOMEM. */
MQR_EXTERN int mqr_users_file_remove(const char *path, mqr_str_t name, mqr_error_t *err);

/* ---- SCRAM-SHA-256 (RFC 5802, RFC 7677) ---------------------------------------------------------
 *
 * A password proved without crossing the connection: the server keeps only salted keys
 * (SCRAM-SHA-256$ITERATIONS:SALT$STOREDKEY:SERVERKEY, base64, as PostgreSQL keeps them),
 * which a users file holds beside a user's argon2id hash. The exchange, both sides:
 *   client-first  n,,n=NAME,r=CNONCE
 *   server-first  r=CNONCE+SNONCE,s=SALT,i=ITERATIONS
 *   client-final  c=biws,r=CNONCE+SNONCE,p=PROOF
 *   server-final  v=SIGNATURE
 * No channel binding (c=biws), as the native protocol and MQTT 5 carry it. */

#define MQR_SCRAM_CREDENTIALS_MAX 192 /* the stored keys' text, its NUL included */
#define MQR_SCRAM_ITERATIONS 8192     /* what mqr_users_file_set stores */

/* The stored keys of password (a random salt; at least 4096 iterations) into out. 0,
 * MQR_ELIMIT, MQR_EIO (no random source), MQR_ENOSPC. */
MQR_EXTERN int mqr_scram_credentials(const char *password, size_t len, uint32_t iterations, char *out, size_t cap,
                                     mqr_error_t *err);
/* Whether cred reads as stored keys. */
MQR_EXTERN bool mqr_scram_credentials_valid(const char *cred);

/* The server's side of one exchange (caller storage). */
typedef struct {
  char user[260]; /* the name the client-first message gives (decoded) */
  char nonce[200];
  char client_first_bare[512];
  char server_first[512];
  uint32_t iter;
  uint8_t stored[32], server[32];
  bool unknown; /* no keys for the user: the exchange runs on and fails at the proof */
  int step;
} mqr_scram_server_t;

/* The client-first message read (s->user then names who): 0 or MQR_EPROTOCOL. */
MQR_EXTERN int mqr_scram_server_start(mqr_scram_server_t *s, mqr_str_t client_first, mqr_error_t *err);
/* The server-first message into out, for cred, the user's stored keys (NULL: an unknown
 * user, answered alike). 0 or an error. */
MQR_EXTERN int mqr_scram_server_challenge(mqr_scram_server_t *s, const char *cred, char *out, size_t cap,
                                          mqr_error_t *err);
/* The client-final message checked: 0 with the server-final message in out (the user is
 * who it said), MQR_EAUTH (a wrong password, an unknown user), MQR_EPROTOCOL. */
MQR_EXTERN int mqr_scram_server_final(mqr_scram_server_t *s, mqr_str_t client_final, char *out, size_t cap,
                                      mqr_error_t *err);

/* The client's side. */
typedef struct {
  char nonce[64];
  char client_first_bare[400];
  char auth[1024];
  uint8_t server_key[32];
} mqr_scram_client_t;

/* The client-first message for user into out; nonce NULL: a random one. 0 or an error. */
MQR_EXTERN int mqr_scram_client_first(mqr_scram_client_t *c, const char *user, const char *nonce, char *out,
                                      size_t cap);
/* The client-final message, the proof of password, for the server-first message. 0 or
 * MQR_EPROTOCOL (a server-first that does not continue the client's nonce, ...). */
MQR_EXTERN int mqr_scram_client_final(mqr_scram_client_t *c, const char *password, size_t len, mqr_str_t server_first,
                                      char *out, size_t cap);
/* Whether the server-final message proves the server knew the keys. */
MQR_EXTERN bool mqr_scram_client_verify(const mqr_scram_client_t *c, mqr_str_t server_final);

/* ---- security-settings compiled (authorization) -------------------------------------------- */

/* A set of roles: one bit per role the security-settings name (at most 64). */
typedef uint64_t mqr_roles_t;

/* What each role may do on the addresses one security-settings entry matches. */
typedef struct mqr_access_row_s {
  mqr_str_t match;
  mqr_roles_t allow[MQR_PERMISSIONS];
} mqr_access_row_t;

/* The security-settings of a config compiled: roles numbered, entries by precedence (the
 * most specific first, as address-settings order them). Immutable once built. These
 * calls are in libmqr_broker (over the config), the rest of this header in
 * libmqr_security. */
typedef struct mqr_access_s mqr_access_t;

/* Builds it from cfg's security-settings and wildcard syntax: 0, MQR_ELIMIT (more than
 * 64 roles named; err says so), MQR_ENOMEM. With no entries, enabled says false: then
 * nothing is checked (every client that may connect may do everything). */
MQR_EXTERN int mqr_access_build(const mqr_config_t *cfg, mqr_access_t **out, mqr_error_t *err);
MQR_EXTERN void mqr_access_destroy(mqr_access_t *a); /* NULL is allowed */
MQR_EXTERN bool mqr_access_enabled(const mqr_access_t *a);

/* The roles of a comma-separated list that the settings name (others grant nothing). */
MQR_EXTERN mqr_roles_t mqr_access_roles(const mqr_access_t *a, mqr_str_t roles);

/* The entry that governs address (a concrete name, or a wildcard subscription's address,
 * matched as a name as Artemis does): the most specific match; NULL: none, so every
 * permission is denied. Scans the entries: cache it per address (the broker does). */
MQR_EXTERN const mqr_access_row_t *mqr_access_lookup(const mqr_access_t *a, mqr_str_t address);

/* Whether roles who may do p where row governs. */
static inline bool mqr_access_allows(const mqr_access_row_t *row, mqr_permission_t p, mqr_roles_t who) {
  return row != NULL && (row->allow[p] & who) != 0;
}

#ifdef __cplusplus
}
#endif
#endif /* MQR_SECURITY_H */
