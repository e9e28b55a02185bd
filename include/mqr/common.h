/* mqr common ground: export macro, error codes, error details, string views and the
 * allocator hook that every allocation in the library goes through. */
#ifndef MQR_COMMON_H
#define MQR_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MQR_EXTERN __attribute__((visibility("default")))
#else
#define MQR_EXTERN
#endif

/* Every error is a negative int. The table is the one place codes are defined, so the
 * enum, mqr_strerror() and mqr_err_name() cannot drift apart. Codes are stable: new ones
 * go at the end. */
#define MQR_ERRNO_MAP(XX)                                                                                              \
  XX(EINVAL, -1, "invalid argument")                                                                                   \
  XX(ENOMEM, -2, "out of memory")                                                                                      \
  XX(ENOSPC, -3, "not enough room in the caller's buffer")                                                             \
  XX(EIO, -4, "input/output error")                                                                                    \
  XX(ENOADDR, -5, "address does not exist")                                                                            \
  XX(EADDREXISTS, -6, "address already exists")                                                                        \
  XX(ENOQUEUE, -7, "queue does not exist")                                                                             \
  XX(EQUEUEEXISTS, -8, "queue name already in use")                                                                    \
  XX(EEMPTYADDR, -9, "empty address name")                                                                             \
  XX(EEMPTYQUEUE, -10, "empty queue name")                                                                             \
  XX(ETYPENOTSUPPORTED, -11, "routing type not supported by the address")                                              \
  XX(ETYPEINUSE, -12, "routing type still has queues on the address")                                                  \
  XX(EADDRHASQUEUES, -13, "address still has queues")                                                                  \
  XX(EWILDCARDSEND, -14, "cannot send to a wildcard address")                                                          \
  XX(EBADPATTERN, -15, "bad match pattern")                                                                            \
  XX(EBADROUTINGTYPE, -16, "unknown routing type")                                                                     \
  XX(EMAXCONSUMERS, -17, "invalid max-consumers")                                                                      \
  XX(ECONSUMERLIMIT, -18, "queue has reached max-consumers")                                                           \
  XX(ECONFIG, -19, "invalid configuration")                                                                            \
  XX(ESYNTAX, -20, "syntax error")                                                                                     \
  XX(ENAMETOOLONG, -21, "name too long")                                                                               \
  XX(EQUEUEADDR, -22, "queue belongs to another address")                                                              \
  XX(ERANGE, -23, "value out of range")                                                                                \
  XX(ESCHEMA, -24, "invalid Avro schema")                                                                              \
  XX(EBADDATA, -25, "malformed encoded data")                                                                          \
  XX(ETRUNCATED, -26, "input ends too soon")                                                                           \
  XX(EINCOMPATIBLE, -27, "writer and reader schemas are incompatible")                                                 \
  XX(ELIMIT, -28, "input exceeds a limit")                                                                             \
  XX(ENOTFOUND, -29, "not found")                                                                                      \
  XX(EFULL, -30, "address is full")                                                                                    \
  XX(EPROTOCOL, -31, "protocol violation")                                                                             \
  XX(ENOSUB, -32, "no such subscription")                                                                              \
  XX(ECLOSED, -33, "connection closed")                                                                                \
  XX(ETIMEOUT, -34, "timed out")                                                                                       \
  XX(EQUEUEINUSE, -35, "queue has consumers")                                                                          \
  XX(EDIVERTEXISTS, -36, "divert already exists")                                                                      \
  XX(ENODIVERT, -37, "divert does not exist")                                                                          \
  XX(EBUSY, -38, "in use by another process")                                                                          \
  XX(EAUTH, -39, "authentication failed")                                                                              \
  XX(EPERM, -40, "not authorized")                                                                                     \
  XX(ENOTLEADER, -41, "not the leader of the replication group")                                                       \
  XX(EINDOUBT, -42, "outcome unknown: the leader changed before it committed")

typedef enum {
#define MQR_ERRNO_ENUM_ITEM(name, value, text) MQR_##name = (value),
  MQR_ERRNO_MAP(MQR_ERRNO_ENUM_ITEM)
#undef MQR_ERRNO_ENUM_ITEM
      MQR_ERRNO_LAST = -43
} mqr_errno_t;

/* Returns a static, human-readable description of err ("unknown error" for a code
 * outside the table, "success" for 0). Never NULL. */
MQR_EXTERN const char *mqr_strerror(int err);

/* Returns the static name of err without the MQR_ prefix ("ENOMEM"), "UNKNOWN" for a
 * code outside the table and "OK" for 0. Never NULL. */
MQR_EXTERN const char *mqr_err_name(int err);

/* Details of a failure, filled by calls that take an optional mqr_error_t *. Fixed-size
 * storage so that reporting an error never allocates. line and column are 1-based and 0
 * when the error has no position; file is empty when it has no file. */
typedef struct {
  int code;
  uint32_t line;
  uint32_t column;
  char file[256];
  char message[512];
} mqr_error_t;

/* Resets e (may be NULL) to "no error". */
MQR_EXTERN void mqr_error_clear(mqr_error_t *e);

/* Fills e (may be NULL) with code and a printf-formatted message; returns code, so that
 * a failing path reads `return mqr_error_set(err, MQR_EINVAL, "...")`. */
MQR_EXTERN int mqr_error_set(mqr_error_t *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* As mqr_error_set, with a source position. file may be NULL. */
MQR_EXTERN int mqr_error_set_at(mqr_error_t *e, int code, const char *file, uint32_t line, uint32_t column,
                                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* As mqr_error_set_at, with a va_list. A message longer than mqr_error_t holds is cut
 * at the end of a word and ends with " ...". */
MQR_EXTERN int mqr_error_vset_at(mqr_error_t *e, int code, const char *file, uint32_t line, uint32_t column,
                                 const char *fmt, va_list ap);

/* Writes "file:line:column: message" (omitting what is absent) into buf, always NUL
 * terminated; returns buf. */
MQR_EXTERN const char *mqr_error_format(const mqr_error_t *e, char *buf, size_t cap);

/* A borrowed string: a pointer and a length, not NUL terminated in general. Whoever
 * hands one out says how long the bytes stay valid. */
typedef struct {
  const char *ptr;
  size_t len;
} mqr_str_t;

/* A view of a string literal, its length taken at compile time. */
#define MQR_STR(lit) ((mqr_str_t){(lit), sizeof(lit) - 1})

/* A view of a NUL-terminated string (NULL gives the empty view). Not for the hot path. */
static inline mqr_str_t mqr_str(const char *s) {
  mqr_str_t v = {s, s ? strlen(s) : 0};
  return v;
}

static inline mqr_str_t mqr_str_n(const char *s, size_t n) {
  mqr_str_t v = {s, n};
  return v;
}

static inline bool mqr_str_eq(mqr_str_t a, mqr_str_t b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The allocator hook, in the manner of uv_replace_allocator: every allocation mqr makes
 * goes through these four functions (libraft's too, in a cluster), from the loop's
 * thread and from libuv's worker threads: they must be thread-safe. */
typedef void *(*mqr_malloc_func)(size_t size);
typedef void *(*mqr_realloc_func)(void *ptr, size_t size);
typedef void *(*mqr_calloc_func)(size_t count, size_t size);
typedef void (*mqr_free_func)(void *ptr);

/* Replaces the allocator. Call it before any other mqr function, or only while nothing
 * allocated by the previous allocator is alive: memory is freed through the allocator
 * in force at the time. Passing all four NULL restores the C library's. Returns 0, or
 * MQR_EINVAL if only some are NULL. */
MQR_EXTERN int mqr_set_allocator(mqr_malloc_func malloc_func, mqr_realloc_func realloc_func,
                                 mqr_calloc_func calloc_func, mqr_free_func free_func);

/* The library's allocation entry points, exported for mqr's own layers and for
 * embedders that want their allocations counted with mqr's. */
MQR_EXTERN void *mqr_malloc(size_t size);
MQR_EXTERN void *mqr_realloc(void *ptr, size_t size);
MQR_EXTERN void *mqr_calloc(size_t count, size_t size);
MQR_EXTERN void mqr_free(void *ptr);

/* Version of the library, "MAJOR.MINOR.PATCH". */
MQR_EXTERN const char *mqr_version(void);

/* Checks that text[0..n) is well-formed UTF-8 (RFC 3629: shortest forms, no surrogates,
 * nothing past U+10FFFF), as Avro strings and every name mqr takes must be. Returns n
 * when it is, else the offset of the first byte that is not. Any thread; no allocation. */
MQR_EXTERN size_t mqr_utf8_check(const void *text, size_t n);

/* Whether host is one mqr_resolve takes: an IPv4 or IPv6 literal, or a host name as RFC
 * 1123 has it (dot-separated labels, at most 63 bytes each and 253 in all, of letters,
 * digits and hyphens, none starting or ending with one). */
MQR_EXTERN bool mqr_host_check(mqr_str_t host);

struct sockaddr_storage;
/* host (an IPv4 or IPv6 literal, or a name: getaddrinfo(3), which may block while it asks
 * a resolver; an IPv4 address is taken first when the name has both) and port into *out.
 * 0, or MQR_ENOTFOUND (err says why: an unknown name, no resolver), MQR_EINVAL (neither
 * an IP literal nor a host name: no resolver is asked). */
MQR_EXTERN int mqr_resolve(const char *host, uint16_t port, struct sockaddr_storage *out, mqr_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* MQR_COMMON_H */
