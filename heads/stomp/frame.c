/* STOMP frames read and written (frame.h). A frame is read in steps as its bytes come:
 * the command line, then each header line checked (limits, ':', content-length), then
 * the body's end found (content-length octets and a NUL, or the first NUL, searched for
 * in the new bytes only); what has been read is kept as offsets in the frame's progress.
 * Only once the frame is whole are its headers' views taken and unescaped in place, so
 * that bytes of a frame still arriving are never changed. */
#include <stdio.h>
#include <string.h>

#include "frame.h"

static const char *const names[MQR__STOMP_COMMANDS] = {
    "CONNECT", "STOMP", "SEND",       "SUBSCRIBE", "UNSUBSCRIBE", "ACK",     "NACK",  "BEGIN",
    "COMMIT",  "ABORT", "DISCONNECT", "CONNECTED", "MESSAGE",     "RECEIPT", "ERROR",
};
static const uint8_t name_len[MQR__STOMP_COMMANDS] = {7, 5, 4, 9, 11, 3, 4, 5, 6, 5, 10, 9, 7, 7, 5};

#define LONGEST_COMMAND 11 /* UNSUBSCRIBE */

const char *mqr__stomp_command_name(mqr__stomp_command_t c) {
  return (unsigned)c < MQR__STOMP_COMMANDS ? names[c] : "?";
}

static bool escapes(mqr__stomp_version_t v, mqr__stomp_command_t c) {
  return v >= MQR__STOMP_11 && c != MQR__STOMP_CONNECT && c != MQR__STOMP_STOMP && c != MQR__STOMP_CONNECTED;
}

/* Up to 40 bytes of p as printable text, for an error. */
static const char *shown(const uint8_t *p, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < cap && i < 40; i++)
    o += (size_t)(p[i] >= 0x20 && p[i] < 0x7F ? snprintf(out + o, cap - o, "%c", p[i])
                                              : snprintf(out + o, cap - o, "\\x%02x", p[i]));
  out[o] = 0;
  return out;
}

/* Unescapes p[0..n) in place; the new length, or -1 for an undefined escape. */
static long unescape(uint8_t *p, size_t n, bool cr) {
  uint8_t *b = memchr(p, '\\', n);
  if (b == NULL) return (long)n;
  size_t w = (size_t)(b - p);
  for (size_t r = w; r < n; r++) {
    uint8_t c = p[r];
    if (c == '\\') {
      if (++r == n) return -1;
      switch (p[r]) {
      case 'n': c = '\n'; break;
      case 'c': c = ':'; break;
      case '\\': c = '\\'; break;
      case 'r':
        if (!cr) return -1;
        c = '\r';
        break;
      default: return -1;
      }
    }
    p[w++] = c;
  }
  return (long)w;
}

static int too_big(mqr_error_t *err, const mqr__stomp_limits_t *lim) {
  return mqr_error_set(err, MQR_ELIMIT, "a frame of more than %u bytes (the listener's max-frame-size)",
                       lim->max_frame);
}

/* A content-length value: 0, or an error. */
static int content_length(mqr_str_t v, const mqr__stomp_limits_t *lim, int64_t *out, mqr_error_t *err) {
  char text[200];
  uint64_t x = 0;
  bool ok = v.len > 0 && v.len <= 10;
  for (size_t k = 0; ok && k < v.len; k++) {
    ok = v.ptr[k] >= '0' && v.ptr[k] <= '9';
    x = x * 10 + (uint64_t)(v.ptr[k] - '0');
  }
  if (!ok)
    return mqr_error_set(err, MQR_EPROTOCOL, "content-length '%s' is not a number of octets",
                         shown((const uint8_t *)v.ptr, v.len, text, sizeof text));
  if (x > lim->max_frame) return too_big(err, lim);
  *out = (int64_t)x;
  return 0;
}

/* The header line base[i..i+len): checked, its name and value (as sent) into *h. */
static int header_line(const uint8_t *base, size_t i, size_t len, uint32_t nh, int cmd, mqr__stomp_header_t *h,
                       mqr_error_t *err) {
  char text[200];
  const uint8_t *colon = memchr(base + i, ':', len);
  if (colon == NULL)
    return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s has no ':': '%s'", nh + 1, names[cmd],
                         shown(base + i, len, text, sizeof text));
  if (colon == base + i) return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s has no name", nh + 1, names[cmd]);
  if (memchr(base + i, 0, len))
    return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s holds a NUL", nh + 1, names[cmd]);
  size_t nlen = (size_t)(colon - (base + i));
  h->name = (mqr_str_t){(const char *)base + i, nlen};
  h->value = (mqr_str_t){(const char *)colon + 1, len - nlen - 1};
  return 0;
}

/* The line at base[i..m): its length without the EOL and *next after it, or false when
 * its LF has not come. */
static bool line_at(const uint8_t *base, size_t i, size_t m, size_t *len, size_t *next) {
  const uint8_t *nl = memchr(base + i, '\n', m - i);
  if (nl == NULL) return false;
  size_t end = (size_t)(nl - base);
  *len = end - i - (end > i && base[end - 1] == '\r');
  *next = end + 1;
  return true;
}

static int parse(uint8_t *buf, size_t n, mqr__stomp_version_t version, const mqr__stomp_limits_t *lim,
                 mqr__stomp_frame_t *f, size_t *used, mqr_error_t *err) {
  char text[200];
  mqr__stomp_progress_t *pr = &f->progress;
  size_t i = 0, beats = 0;
  /* heart-beats: EOLs between frames */
  while (pr->stage == 0 && i < n) {
    if (buf[i] == '\n') {
      i++;
    } else if (buf[i] == '\r' && i + 1 < n && buf[i + 1] == '\n') {
      i += 2;
    } else {
      break;
    }
    beats++;
  }
  f->heartbeats = beats;
  *used = i;
  uint8_t *base = buf + i; /* the frame */
  size_t m = n - i, len = 0, next = 0;
  if (pr->stage == 0) { /* the command */
    if (!line_at(base, 0, m, &len, &next)) {
      if (m > LONGEST_COMMAND + 1)
        return mqr_error_set(err, MQR_EPROTOCOL, "not a STOMP command: '%s'", shown(base, m, text, sizeof text));
      return MQR_ETRUNCATED;
    }
    int cmd = -1;
    for (int c = 0; c < MQR__STOMP_COMMANDS && cmd < 0; c++)
      if (name_len[c] == len && memcmp(names[c], base, len) == 0) cmd = c;
    if (cmd < 0)
      return mqr_error_set(err, MQR_EPROTOCOL, "unknown STOMP command '%s'", shown(base, len, text, sizeof text));
    *pr = (mqr__stomp_progress_t){.stage = 1, .command = (int8_t)cmd, .first = next, .at = next, .length = -1};
  }
  int cmd = pr->command;
  /* the header lines, checked as they come; their views are taken once the frame is whole */
  while (pr->stage == 1) {
    if (pr->at > lim->max_frame) return too_big(err, lim);
    if (!line_at(base, pr->at, m, &len, &next)) {
      if (m - pr->at > (size_t)lim->max_header_bytes + 1) /* + 1: its CR may be there, its LF not yet */
        return mqr_error_set(err, MQR_ELIMIT, "a header line of more than %u bytes", lim->max_header_bytes);
      if (m > lim->max_frame) return too_big(err, lim);
      return MQR_ETRUNCATED;
    }
    if (len == 0) {
      pr->stage = 2;
      pr->body = pr->at = next;
      break;
    }
    if (len > lim->max_header_bytes)
      return mqr_error_set(err, MQR_ELIMIT, "a header line of %zu bytes: at most %u", len, lim->max_header_bytes);
    if (pr->n_headers == lim->max_headers)
      return mqr_error_set(err, MQR_ELIMIT, "more than %u headers in a %s frame", lim->max_headers, names[cmd]);
    mqr__stomp_header_t h;
    int rc = header_line(base, pr->at, len, pr->n_headers, cmd, &h, err);
    if (rc) return rc;
    /* content-length, the first one (its name and digits hold nothing escaping changes) */
    if (pr->length < 0 && h.name.len == 14 && memcmp(h.name.ptr, "content-length", 14) == 0 &&
        (rc = content_length(h.value, lim, &pr->length, err)) != 0)
      return rc;
    pr->n_headers++;
    pr->at = next;
  }
  /* the body: content-length octets and a NUL, or up to the first NUL */
  size_t body_end;
  if (pr->length >= 0) {
    size_t v = (size_t)pr->length;
    if (pr->body + v + 1 > lim->max_frame) return too_big(err, lim);
    if (m < pr->body + v + 1) return MQR_ETRUNCATED;
    body_end = pr->body + v;
    if (base[body_end] != 0)
      return mqr_error_set(err, MQR_EPROTOCOL, "%s: no NUL after the %zu octets of content-length", names[cmd], v);
  } else {
    const uint8_t *z = pr->at < m ? memchr(base + pr->at, 0, m - pr->at) : NULL;
    if (z == NULL) {
      pr->at = m;
      if (m > lim->max_frame) return too_big(err, lim);
      return MQR_ETRUNCATED;
    }
    body_end = (size_t)(z - base);
    if (body_end + 1 > lim->max_frame) return too_big(err, lim);
  }
  /* whole: the headers' views, unescaped, and UTF-8 */
  f->command = (mqr__stomp_command_t)cmd;
  f->n_headers = pr->n_headers;
  bool esc = escapes(version, f->command);
  size_t at = pr->first;
  for (uint32_t h = 0; h < f->n_headers; h++) {
    line_at(base, at, m, &len, &next);
    header_line(base, at, len, h, cmd, &f->headers[h], NULL); /* checked as it came */
    at = next;
    mqr_str_t *s[2] = {&f->headers[h].name, &f->headers[h].value};
    for (int k = 0; k < 2; k++) {
      if (esc) {
        long nl2 = unescape((uint8_t *)s[k]->ptr, s[k]->len, version >= MQR__STOMP_12);
        if (nl2 < 0)
          return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s: an undefined escape in '%s'", h + 1, names[cmd],
                               shown((const uint8_t *)s[k]->ptr, s[k]->len, text, sizeof text));
        s[k]->len = (size_t)nl2;
      }
      if (mqr_utf8_check(s[k]->ptr, s[k]->len) != s[k]->len)
        return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s is not UTF-8", h + 1, names[cmd]);
    }
  }
  f->body = (mqr_str_t){(const char *)base + pr->body, body_end - pr->body};
  *used = i + body_end + 1;
  return 0;
}

int mqr__stomp_parse(uint8_t *buf, size_t n, mqr__stomp_version_t version, const mqr__stomp_limits_t *lim,
                     mqr__stomp_frame_t *f, size_t *used, mqr_error_t *err) {
  int rc = parse(buf, n, version, lim, f, used, err);
  if (rc != MQR_ETRUNCATED) f->progress = (mqr__stomp_progress_t){0};
  return rc;
}

const mqr_str_t *mqr__stomp_header(const mqr__stomp_frame_t *f, const char *name) {
  size_t len = strlen(name);
  for (uint32_t h = 0; h < f->n_headers; h++)
    if (f->headers[h].name.len == len && memcmp(f->headers[h].name.ptr, name, len) == 0) return &f->headers[h].value;
  return NULL;
}

/* The escape of c in this version, or NULL. */
static const char *escape_of(uint8_t c, bool cr) {
  switch (c) {
  case '\n': return "\\n";
  case ':': return "\\c";
  case '\\': return "\\\\";
  case '\r': return cr ? "\\r" : NULL;
  default: return NULL;
  }
}

size_t mqr__stomp_escaped_len(mqr_str_t s, mqr__stomp_version_t version, mqr__stomp_command_t c) {
  if (!escapes(version, c)) return s.len;
  size_t n = s.len;
  for (size_t i = 0; i < s.len; i++) n += escape_of((uint8_t)s.ptr[i], version >= MQR__STOMP_12) != NULL;
  return n;
}

uint8_t *mqr__stomp_put_escaped(uint8_t *p, mqr_str_t s, mqr__stomp_version_t version, mqr__stomp_command_t c) {
  if (!escapes(version, c)) {
    if (s.len) memcpy(p, s.ptr, s.len);
    return p + s.len;
  }
  for (size_t i = 0; i < s.len; i++) {
    const char *e = escape_of((uint8_t)s.ptr[i], version >= MQR__STOMP_12);
    if (e) {
      *p++ = (uint8_t)e[0];
      *p++ = (uint8_t)e[1];
    } else {
      *p++ = (uint8_t)s.ptr[i];
    }
  }
  return p;
}

size_t mqr__stomp_put_head(uint8_t *out, size_t cap, mqr__stomp_version_t version, mqr__stomp_command_t c,
                           const mqr__stomp_header_t *h, uint32_t n, bool with_length, size_t body_len) {
  char num[24];
  int nl = snprintf(num, sizeof num, "%zu", body_len);
  size_t need = name_len[c] + 1u + 1 + (with_length ? 15 + (size_t)nl + 1 : 0);
  for (uint32_t i = 0; i < n; i++)
    need += mqr__stomp_escaped_len(h[i].name, version, c) + 1 + mqr__stomp_escaped_len(h[i].value, version, c) + 1;
  if (need > cap) return need;
  uint8_t *p = out;
  memcpy(p, names[c], name_len[c]);
  p += name_len[c];
  *p++ = '\n';
  if (with_length) { /* first: of repeated headers the first counts */
    memcpy(p, "content-length:", 15);
    memcpy(p + 15, num, (size_t)nl);
    p += 15 + (size_t)nl;
    *p++ = '\n';
  }
  for (uint32_t i = 0; i < n; i++) {
    p = mqr__stomp_put_escaped(p, h[i].name, version, c);
    *p++ = ':';
    p = mqr__stomp_put_escaped(p, h[i].value, version, c);
    *p++ = '\n';
  }
  *p++ = '\n';
  return (size_t)(p - out);
}
