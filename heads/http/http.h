/* The HTTP/1.1 head: requests parsed by libhttp-parser (Debian's http-parser 2.9, the
 * parser Node.js used for a decade: maintained, fuzzed, and no HTTP parser of ours), one
 * at a time per connection (a pipelined request waits in the read buffer), answered on
 * the connection layer like any head's bytes.
 *
 *   head.c     the head: sniff, parsing, limits (431, 413, 400, 408), keep-alive,
 *              authentication (Basic over TLS, or anonymous), the answer's framing
 *   routes.c   what a path serves: /healthz, /readyz, /metrics, /api/v1/...
 *   api.c      the management API: JSON for the native MANAGE frame's operations
 *   api_broker.c  its broker-wide part: connections, the console's session (api.h)
 *   session.c  the console's sessions (a cookie after one Basic login)
 *   console.c  the console's files, compiled in (../../console)
 *   metrics.c  the Prometheus text exposition (format 0.0.4), Artemis's names
 *
 * docs/observability.md is the user's view. */
#ifndef MQR_HEADS_HTTP_H
#define MQR_HEADS_HTTP_H

#include <http_parser.h>

#include "../../net/net.h"

/* A listener's http block (the order of the options table in head.c). */
enum {
  HTTP_OPT_MAX_HEADER_SIZE,    /* request line and headers, bytes: past it 431 */
  HTTP_OPT_MAX_BODY_SIZE,      /* a request's body, bytes: past it 413 */
  HTTP_OPT_REQUEST_TIMEOUT,    /* from a request's first byte to its last: past it 408 */
  HTTP_OPT_KEEP_ALIVE_TIMEOUT, /* an idle kept-alive connection closes after it */
  HTTP_OPT_ANONYMOUS_HEALTH,   /* /healthz and /readyz without credentials */
  HTTP_OPT_ANONYMOUS_METRICS,  /* /metrics without credentials (everything it has) */
};

/* A growing text: what an answer's body is built in. */
typedef struct {
  char *p;
  size_t len, cap;
  bool failed; /* out of memory: the answer is a 500 */
} mqr__http_text_t;

__attribute__((format(printf, 2, 3))) void mqr__http_printf(mqr__http_text_t *t, const char *fmt, ...);
void mqr__http_put(mqr__http_text_t *t, const char *p, size_t n);

/* A request, whole, as the routes see it. Strings point into the head's buffer. */
typedef struct {
  enum http_method method;
  mqr_str_t path, query, body;
  mqr__principal_t *who; /* who asks (NULL: not authenticated; the route said anonymous is fine) */
  const char *csrf;      /* who was known by a session cookie: the session's CSRF token (else NULL) */
  bool basic;            /* who gave Basic credentials with this request */
  void *head;            /* the head's state (mqr__http_header reads its headers) */
} mqr__http_request_t;

/* The value of the request's header name (case-insensitive): false when it has none. */
bool mqr__http_header(const mqr__http_request_t *r, const char *name, mqr_str_t *out);

/* An answer: status, content type and body (owned by the caller), sent by the head; or
 * (metrics set) its body to be made in slices first. */
typedef struct mqr__http_metrics_s mqr__http_metrics_t;
typedef struct {
  int status;
  const char *content_type;
  mqr__http_text_t body;
  const char *allow;            /* 405: the methods the path takes */
  const char *extra;            /* more header lines, each ending in CRLF (may be NULL) */
  char cookie[192];             /* a Set-Cookie value ("": none) */
  bool no_challenge;            /* a 401 without WWW-Authenticate (a script asked: no browser dialog) */
  mqr__http_metrics_t *metrics; /* the body is this, once made */
} mqr__http_answer_t;

/* What a path needs before it is served (routes.c): the route's permission check runs
 * after. */
typedef enum { MQR__HTTP_PUBLIC, MQR__HTTP_HEALTH, MQR__HTTP_METRICS, MQR__HTTP_USER } mqr__http_access_t;
mqr__http_access_t mqr__http_route_access(mqr_str_t path);
/* Serves the request into a (a->status 0 on entry). */
void mqr__http_route(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a);
/* A request under /api/v1/ (api.c): the management API. */
void mqr__http_api(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a);
/* The Prometheus text of the broker, as who may see it, made in slices: started (NULL:
 * no memory), a slice made each pass until step says it is done (true), then finished
 * into t (t->failed: out of memory), and freed. */
mqr__http_metrics_t *mqr__http_metrics_start(mqr__conn_t *c, mqr__principal_t *who);
bool mqr__http_metrics_step(mqr__http_metrics_t *m);
/* Once step said done: the body's bytes (SIZE_MAX: out of memory), then written to c at
 * most `bytes` a call (true once all of it went; false: more to write, or c is closing). */
size_t mqr__http_metrics_length(mqr__http_metrics_t *m, mqr__conn_t *c);
bool mqr__http_metrics_emit(mqr__http_metrics_t *m, mqr__conn_t *c, size_t bytes);
void mqr__http_metrics_free(mqr__http_metrics_t *m); /* NULL is allowed */

/* What one pass writes of a long answer, at most. */
#define MQR__HTTP_SLICE_BYTES (512u << 10)
/* n bytes into the connection's output: false when there is no memory (it then closes). */
bool mqr__http_out(mqr__conn_t *c, const void *p, size_t n);

extern const mqr_protocol_def_t mqr__http_def;
extern const mqr__head_t mqr__http_head;

/* The console's sessions (session.c): made for who (0, with the cookie's token and the
 * CSRF token, each 64 hex digits and a NUL; or MQR_ENOMEM); who a Cookie header's session
 * stands for (held: the caller releases it; NULL when none is live) and its CSRF token
 * (copied);
 * ended (false: there was none); the stale ones ended each tick; all freed. */
int mqr__http_session_new(mqr_broker_t *b, mqr__principal_t *who, char token[65], char csrf[65]);
mqr__principal_t *mqr__http_session_find(mqr_broker_t *b, mqr_str_t cookies, char csrf[65]);
bool mqr__http_session_end(mqr_broker_t *b, mqr_str_t cookies);
void mqr__http_sessions_tick(mqr_broker_t *b, uint64_t now);
void mqr__http_sessions_free(mqr_broker_t *b);

/* The console's files, compiled in (console.c): 1 when path is one (a answered), else 0. */
int mqr__http_console(const mqr__http_request_t *r, mqr__http_answer_t *a);

#endif
