/* What the blocking wrapper needs of the async client's insides (not installed). */
#ifndef MQR_CLIENT_INT_H
#define MQR_CLIENT_INT_H

#include "mqr/client.h"

int64_t mqr__client_sub_id(const mqr_client_sub_t *s);
mqr_client_sub_t *mqr__client_find_sub(mqr_client_t *c, int64_t id);
/* Whether every queued frame has been handed to the kernel (or the client is closed). */
bool mqr__client_written(const mqr_client_t *c);

/* tls.c: TLS for a tls:// URL (OpenSSL 3, through a BIO of its own). */
typedef struct mqr__ctls_s mqr__ctls_t;
int mqr__ctls_new(const mqr_client_options_t *opt, const char *host, mqr__ctls_t **out, mqr_error_t *err);
void mqr__ctls_free(mqr__ctls_t *t);
/* Ciphertext read: OpenSSL reads it in place in the calls that follow, until
 * mqr__ctls_keep copies what it left (to be called before p is reused). 0 or MQR_ENOMEM. */
int mqr__ctls_feed(mqr__ctls_t *t, const void *p, size_t n);
int mqr__ctls_keep(mqr__ctls_t *t);
int mqr__ctls_handshake(mqr__ctls_t *t, mqr_error_t *err);  /* 1 done, 0 more to read, or an error */
long mqr__ctls_read(mqr__ctls_t *t, void *out, size_t cap); /* plaintext: >0, 0 (more to read), -1 */
/* Plaintext in; its records written over *out (capacity *cap, grown with mqr_realloc),
 * *len their bytes. 0, MQR_ENOMEM or MQR_EPROTOCOL. */
int mqr__ctls_write(mqr__ctls_t *t, const void *p, size_t n, uint8_t **out, size_t *cap, size_t *len);
size_t mqr__ctls_pending(const mqr__ctls_t *t); /* OpenSSL's own ciphertext to send */
size_t mqr__ctls_take(mqr__ctls_t *t, void *out, size_t n);

#endif
