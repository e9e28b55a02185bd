/* What each path of the HTTP head serves (http.h):
 *
 *   /healthz  200 while the process serves (a liveness probe)
 *   /readyz   200 once it can take durable messages; 503 while the journal refuses them
 *             after an I/O error, or while the broker shuts down (a readiness probe)
 *   /metrics  the Prometheus text (metrics.c)
 *   /api/v1/  the management API (api.c; authenticated, as the other heads are)
 *   /         the web console (console.c: its files; it uses the API)
 *
 * GET and HEAD only but for the API; another method is 405, another path 404. */
#include <string.h>

#include "http.h"

mqr__http_access_t mqr__http_route_access(mqr_str_t path) {
  if (mqr_str_eq(path, MQR_STR("/healthz")) || mqr_str_eq(path, MQR_STR("/readyz"))) return MQR__HTTP_HEALTH;
  if (mqr_str_eq(path, MQR_STR("/metrics"))) return MQR__HTTP_METRICS;
  if (path.len >= 5 && memcmp(path.ptr, "/api/", 5) == 0) return MQR__HTTP_USER;
  /* (the console's files are public: what they show comes from the API, as its user) */
  return MQR__HTTP_PUBLIC; /* (nothing else is served: a 404 tells no secret) */
}

static void ready(mqr__conn_t *c, mqr__http_answer_t *a) {
  mqr_broker_stats_t st;
  mqr_broker_stats(c->b, &st);
  if (mqr__closing(c->b)) {
    a->status = 503;
    mqr__http_printf(&a->body, "not ready: the broker is shutting down\n");
  } else if (st.journal_failed) {
    a->status = 503;
    mqr__http_printf(&a->body, "not ready: the journal cannot write, durable sends are refused until it can\n");
  } else {
    a->status = 200;
    mqr__http_printf(&a->body, "ready\n");
  }
}

void mqr__http_route(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a) {
  if (r->path.len >= 8 && memcmp(r->path.ptr, "/api/v1/", 8) == 0) {
    mqr__http_api(c, r, a);
    return;
  }
  if (mqr__http_console(r, a)) return;
  int what = mqr_str_eq(r->path, MQR_STR("/healthz"))   ? 1
             : mqr_str_eq(r->path, MQR_STR("/readyz"))  ? 2
             : mqr_str_eq(r->path, MQR_STR("/metrics")) ? 3
                                                        : 0;
  if (what == 0) {
    a->status = 404;
    mqr__http_printf(&a->body, "no such path: %.*s (mqrd serves /, /healthz, /readyz, /metrics and /api/v1/)\n",
                     (int)(r->path.len > 200 ? 200 : r->path.len), r->path.ptr);
    return;
  }
  if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
    a->status = 405;
    a->allow = "GET, HEAD";
    mqr__http_printf(&a->body, "%s takes GET or HEAD\n", what == 1 ? "/healthz" : what == 2 ? "/readyz" : "/metrics");
    return;
  }
  if (what == 1) {
    a->status = 200;
    mqr__http_printf(&a->body, "ok\n");
  } else if (what == 2) {
    ready(c, a);
  } else {
    a->status = 200;
    a->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if ((a->metrics = mqr__http_metrics_start(c, r->who)) == NULL) a->body.failed = true;
  }
}
