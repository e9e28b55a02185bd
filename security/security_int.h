/* The security library's insides (nothing here is installed):
 *
 *   hash.c   password hashes: argon2id (libsodium), and mosquitto's and Artemis's
 *   users.c  users files read; a name and password checked
 *   edit.c   a users file changed in place (`mqr user`)
 *   scram.c  SCRAM-SHA-256, both sides
 *   access.c security-settings compiled: roles as bits, entries by precedence (built into
 *            the broker's library, over the config) */
#ifndef MQR_SECURITY_INT_H
#define MQR_SECURITY_INT_H

#include "../common/grow.h"
#include "mqr/security.h"

#define MQR__SEC_NAME_MAX 256 /* bytes of a user name */

/* The whole file, NUL-terminated (*len without it); NULL with err set. */
char *mqr__sec_read_file(const char *path, size_t *len, mqr_error_t *err);
/* A user name (1 to 256 bytes of UTF-8, no white space, ':', '=', '#' or ','); roles (names
 * of [A-Za-z0-9_.-] separated by commas; empty is none). */
bool mqr__sec_name_ok(mqr_str_t name);
bool mqr__sec_roles_ok(mqr_str_t roles);

#endif
