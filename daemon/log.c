/* mqrd's log writer (log.h). In JSON, a line's fields are read from the prefixes the
 * broker's messages keep: "connection N (PEER): ..." and "connection N from PEER ..." give
 * the connection's id and peer (component "connection"); "WORD: ..." gives the component
 * (security, reload, SIGHUP, ...); a line that starts "journal", "listener" or "mqrd" is
 * of that component. The message is the rest. */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static mqr_log_level_t level_kept = MQR_LOG_INFO;
static bool as_json;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
static const char *const json_levels[] = {"error", "warn", "info", "debug"};

void mqrd_log_set(mqr_log_level_t level, bool json) {
  level_kept = level;
  as_json = json;
}

mqr_log_level_t mqrd_log_level(void) { return level_kept; }

/* s as a JSON string's contents (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch == '\n')
      fputs("\\n", f);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
}

/* The prefixes of line: its component, connection id (-1: none), peer and message. */
static void fields(const char *line, char *component, size_t cap, long long *conn, const char **peer, size_t *peer_len,
                   const char **msg) {
  *conn = -1;
  *peer = NULL;
  *peer_len = 0;
  *msg = line;
  snprintf(component, cap, "broker");
  long long id;
  int at = 0;
  if (sscanf(line, "connection %lld%n", &id, &at) == 1 && at > 0) {
    const char *p = line + at;
    snprintf(component, cap, "connection");
    *conn = id;
    if (strncmp(p, " (", 2) == 0) {
      const char *end = strstr(p, "): ");
      if (end) {
        *peer = p + 2;
        *peer_len = (size_t)(end - *peer);
        *msg = end + 3;
      }
    } else if (strncmp(p, " from ", 6) == 0) {
      *peer = p + 6;
      *peer_len = strcspn(*peer, " ");
    }
    return;
  }
  size_t word = strcspn(line, " :");
  if (word > 0 && word < cap && line[word] == ':' && line[word + 1] == ' ') {
    snprintf(component, cap, "%.*s", (int)word, line);
    *msg = line + word + 2;
  } else if (!strncmp(line, "journal", 7) || !strncmp(line, "listener", 8) || !strncmp(line, "mqrd", 4)) {
    snprintf(component, cap, "%.*s", (int)word, line);
  }
}

void mqrd_log_line(void *ctx, mqr_log_level_t level, const char *line) {
  (void)ctx;
  if (level > level_kept) return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!as_json) {
    fprintf(stderr, "%s.%03dZ %-5s %s\n", when, (int)(tv.tv_usec / 1000), level_names[level], line);
    return;
  }
  char component[32];
  long long conn;
  const char *peer, *msg;
  size_t peer_len;
  fields(line, component, sizeof component, &conn, &peer, &peer_len, &msg);
  flockfile(stderr);
  fprintf(stderr, "{\"time\":\"%s.%03dZ\",\"level\":\"%s\",\"component\":\"", when, (int)(tv.tv_usec / 1000),
          json_levels[level]);
  json_str(stderr, component, strlen(component));
  fputc('"', stderr);
  if (conn >= 0) fprintf(stderr, ",\"connection\":%lld", conn);
  if (peer) {
    fputs(",\"peer\":\"", stderr);
    json_str(stderr, peer, peer_len);
    fputc('"', stderr);
  }
  fputs(",\"message\":\"", stderr);
  json_str(stderr, msg, strlen(msg));
  fputs("\"}\n", stderr);
  funlockfile(stderr);
}
