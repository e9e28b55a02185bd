/* The web console's files (../../console: one page, its script and its style), compiled
 * into the broker by cmake/embed_files.cmake: served at /, /console.js and /console.css with no
 * file, CDN or network needed. Its page fetches everything else from the management API
 * (api.c), as the logged-in user. Each file goes with a Content-Security-Policy that lets
 * it load only mqrd's own files and talk only to mqrd, and may not be framed by another
 * site (clickjacking). */
#include <string.h>

#include "http.h"

struct mqr__console_file {
  const char *path;
  const unsigned char *bytes;
  size_t len;
};
extern const struct mqr__console_file mqr__console_files[];

#define SECURE_HEADERS                                                                                                 \
  "Content-Security-Policy: default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'\r\n"  \
  "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"

static const char *type_of(const char *path) {
  size_t n = strlen(path);
  if (n > 3 && strcmp(path + n - 3, ".js") == 0) return "text/javascript; charset=utf-8";
  if (n > 4 && strcmp(path + n - 4, ".css") == 0) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

int mqr__http_console(const mqr__http_request_t *r, mqr__http_answer_t *a) {
  mqr_str_t p = r->path;
  if (mqr_str_eq(p, MQR_STR("/")) || mqr_str_eq(p, MQR_STR("/console"))) p = MQR_STR("/index.html");
  for (const struct mqr__console_file *f = mqr__console_files; f->path; f++) {
    if (!mqr_str_eq(p, mqr_str(f->path))) continue;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
      a->status = 405;
      a->allow = "GET, HEAD";
      mqr__http_printf(&a->body, "the console's files take GET or HEAD\n");
      return 1;
    }
    a->status = 200;
    a->content_type = type_of(f->path);
    a->extra = SECURE_HEADERS;
    mqr__http_put(&a->body, (const char *)f->bytes, f->len);
    return 1;
  }
  return 0;
}
