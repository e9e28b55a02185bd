/* What the mqr tool's commands share: errors and usage, option values, files and
 * schemas, interrupts. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"

int cli_usage_error(const char *usage, const char *fmt, ...) {
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    fputs("mqr: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
  fputs(usage, stderr);
  return 2;
}

int cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("mqr: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

int cli_broker_error(const mqr_error_t *err) {
  return cli_error("%s (%d): %s", mqr_err_name(err->code), err->code, err->message);
}

bool cli_long(const char *opt, const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno || v < min || v > max) {
    cli_error("%s takes a whole number from %ld to %ld, not '%s'", opt, min, max, s);
    return false;
  }
  *out = v;
  return true;
}

bool cli_seconds(const char *opt, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*s == '\0' || *end != '\0' || errno || !isfinite(v) || v < 0 || v > 86400 * 365) {
    cli_error("%s takes seconds (a number, 0 or more, such as 2 or 0.5), not '%s'", opt, s);
    return false;
  }
  *out = v;
  return true;
}

bool cli_routing_type(const char *s, int *rt) {
  if (!strcasecmp(s, "anycast")) return *rt = MQR_ANYCAST, true;
  if (!strcasecmp(s, "multicast")) return *rt = MQR_MULTICAST, true;
  cli_error("--routing-type takes ANYCAST or MULTICAST, not '%s'", s);
  return false;
}

bool cli_url(const char *s) {
  struct sockaddr_storage sa;
  mqr_error_t err;
  char urls[CLI_MAX_URLS][512];
  int n = cli_urls(s, urls);
  if (n == 0) {
    cli_error("--url: at most %d URLs, comma-separated", CLI_MAX_URLS);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (mqr_client_parse_url(urls[i], &sa, &err) != 0) {
      cli_error("--url: %s", err.message);
      return false;
    }
  return true;
}

int cli_read_all(FILE *f, uint8_t **out, size_t *len) {
  size_t cap = 65536, n = 0;
  uint8_t *buf = malloc(cap);
  if (buf == NULL) return -1;
  for (;;) {
    if (n == cap) {
      uint8_t *p = realloc(buf, cap *= 2);
      if (p == NULL) {
        free(buf);
        return -1;
      }
      buf = p;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    cli_error("%s: %s", path, strerror(errno));
    return NULL;
  }
  uint8_t *data = NULL;
  if (cli_read_all(f, &data, len) != 0) cli_error("%s: cannot read it", path);
  fclose(f);
  return (char *)data;
}

const mqr_avro_schema_t *cli_load_schema(const char *path, mqr_avro_cache_t *cache, mqr_avro_schema_t **own) {
  size_t len;
  char *text = cli_read_file(path, &len);
  if (text == NULL) return NULL;
  const mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  mqr_error_clear(&err);
  int rc = cache ? mqr_avro_cache_add(cache, text, len, &s, &err) : mqr_avro_schema_parse(text, len, own, &err);
  if (rc == 0 && !cache) s = *own;
  if (rc) {
    char line[1024];
    snprintf(err.file, sizeof err.file, "%s", path);
    cli_error("%s", mqr_error_format(&err, line, sizeof line));
    s = NULL;
  }
  free(text);
  return s;
}

const char *cli_connect_error(const mqr_error_t *err, char *buf, size_t cap) {
  const char *m = err->message;
  /* The caller names the URL: the library's own "cannot connect to URL: " goes. */
  static const char said[] = "cannot connect to ";
  const char *colon = strncmp(m, said, sizeof said - 1) == 0 ? strstr(m + sizeof said - 1, ": ") : NULL;
  if (colon) m = colon + 2;
  if (strstr(m, "refused"))
    snprintf(buf, cap, "connection refused (is mqrd running and listening there?)");
  else if (err->code == MQR_ETIMEOUT)
    snprintf(buf, cap, "no answer in time (%s)", m);
  else
    snprintf(buf, cap, "%s", m);
  return buf;
}

volatile int cli_interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  cli_interrupted = 1;
}

void cli_catch_interrupt(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt; /* no SA_RESTART: a blocked wait returns */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

bool cli_property(const char *arg, const char *eq, mqr_str_t *key, mqr_value_t *value) {
  *key = mqr_str_n(arg, (size_t)(eq - arg));
  mqr_value_type_t t = MQR_VALUE_STRING;
  const char *colon = NULL;
  for (const char *p = arg; p < eq; p++)
    if (*p == ':') colon = p;
  if (colon && colon > arg && mqr_value_type_parse(mqr_str_n(colon + 1, (size_t)(eq - colon - 1)), &t) == 0)
    *key = mqr_str_n(arg, (size_t)(colon - arg));
  return mqr_value_parse(t, mqr_str(eq + 1), value, NULL) == 0;
}

const char *cli_tls_ca, *cli_tls_cert, *cli_tls_key, *cli_user, *cli_password;

void cli_client_options(mqr_client_options_t *opt) {
  opt->tls_ca = cli_tls_ca;
  opt->tls_cert = cli_tls_cert;
  opt->tls_key = cli_tls_key;
  opt->user = cli_user;
  opt->password = cli_password;
}

int cli_bconnect(const char *url, const char *client_id, int timeout_ms, mqr_bclient_t **out, mqr_error_t *err) {
  mqr_client_options_t opt = {.client_id = client_id};
  cli_client_options(&opt);
  char urls[CLI_MAX_URLS][512];
  int n = cli_urls(url, urls), rc = MQR_EINVAL;
  if (n == 0) return mqr_error_set(err, MQR_EINVAL, "--url: at most %d URLs, comma-separated", CLI_MAX_URLS);
  for (int i = 0; i < n; i++) /* the first that answers (any node of a cluster will do) */
    if ((rc = mqr_bclient_connect_opt(urls[i], &opt, timeout_ms, out, err)) == 0) break;
  return rc;
}

int cli_urls(const char *list, char urls[][512]) {
  int n = 0;
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len && (n == CLI_MAX_URLS || len >= 512)) return 0;
    if (len) {
      memcpy(urls[n], p, len);
      urls[n++][len] = 0;
    }
    p += len + (end != NULL);
  }
  return n;
}
