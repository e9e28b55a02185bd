/* STOMP frames read and written (frame.h). A frame is looked at whole before anything in
 * it is changed: the lines are found and checked, the body's end found (content-length or
 * the NUL), and only then are the headers unescaped in place, so that a frame whose bytes
 * are still coming is read again from the same bytes. */
#include <stdio.h>
#include <string.h>

#include "frame.h"

static const char *const names[MQR__STOMP_COMMANDS] = {
    "CONNECT", "STOMP", "SEND",       "SUBSCRIBE", "UNSUBSCRIBE", "ACK",     "NACK",  "BEGIN",
    "COMMIT",  "ABORT", "DISCONNECT", "CONNECTED", "MESSAGE",     "RECEIPT", "ERROR",
};

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

int mqr__stomp_parse(uint8_t *buf, size_t n, mqr__stomp_version_t version, const mqr__stomp_limits_t *lim,
                     mqr__stomp_frame_t *f, size_t *used, mqr_error_t *err) {
  char text[200];
  size_t i = 0, beats = 0;
  /* heart-beats: EOLs between frames */
  while (i < n) {
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
  size_t start = i;
  /* the command */
  const uint8_t *nl = memchr(buf + i, '\n', n - i);
  if (nl == NULL) {
    if (n - start > LONGEST_COMMAND + 1)
      return mqr_error_set(err, MQR_EPROTOCOL, "not a STOMP command: '%s'",
                           shown(buf + start, n - start, text, sizeof text));
    return MQR_ETRUNCATED;
  }
  size_t end = (size_t)(nl - buf), len = end - start;
  if (len && buf[end - 1] == '\r') len--;
  int cmd = -1;
  for (int c = 0; c < MQR__STOMP_COMMANDS; c++)
    if (strlen(names[c]) == len && memcmp(names[c], buf + start, len) == 0) cmd = c;
  if (cmd < 0)
    return mqr_error_set(err, MQR_EPROTOCOL, "unknown STOMP command '%s'", shown(buf + start, len, text, sizeof text));
  i = end + 1;
  /* the header lines, found and checked; unescaped only once the frame is whole */
  uint32_t nh = 0;
  for (;;) {
    if (i - start > lim->max_frame) return too_big(err, lim);
    nl = memchr(buf + i, '\n', n - i);
    if (nl == NULL) {
      if (n - i > (size_t)lim->max_header_bytes + 1) /* + 1: its CR may be there, its LF not yet */
        return mqr_error_set(err, MQR_ELIMIT, "a header line of more than %u bytes", lim->max_header_bytes);
      if (n - start > lim->max_frame) return too_big(err, lim);
      return MQR_ETRUNCATED;
    }
    end = (size_t)(nl - buf);
    len = end - i;
    if (len && buf[end - 1] == '\r') len--;
    if (len == 0) {
      i = end + 1;
      break;
    }
    if (len > lim->max_header_bytes)
      return mqr_error_set(err, MQR_ELIMIT, "a header line of %zu bytes: at most %u", len, lim->max_header_bytes);
    if (nh == lim->max_headers)
      return mqr_error_set(err, MQR_ELIMIT, "more than %u headers in a %s frame", lim->max_headers, names[cmd]);
    const uint8_t *colon = memchr(buf + i, ':', len);
    if (colon == NULL)
      return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s has no ':': '%s'", nh + 1, names[cmd],
                           shown(buf + i, len, text, sizeof text));
    if (colon == buf + i) return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s has no name", nh + 1, names[cmd]);
    if (memchr(buf + i, 0, len))
      return mqr_error_set(err, MQR_EPROTOCOL, "header %u of %s holds a NUL", nh + 1, names[cmd]);
    size_t nlen = (size_t)(colon - (buf + i));
    f->headers[nh].name = (mqr_str_t){(const char *)buf + i, nlen};
    f->headers[nh].value = (mqr_str_t){(const char *)colon + 1, len - nlen - 1};
    nh++;
    i = end + 1;
  }
  f->command = (mqr__stomp_command_t)cmd;
  f->n_headers = nh;
  /* the body: content-length octets and a NUL, or up to the first NUL (content-length's
   * name and digits hold nothing that escaping changes) */
  const mqr_str_t *cl = mqr__stomp_header(f, "content-length");
  size_t body_end;
  if (cl) {
    uint64_t v = 0;
    if (cl->len == 0 || cl->len > 10)
      return mqr_error_set(err, MQR_EPROTOCOL, "content-length '%s' is not a number of octets",
                           shown((const uint8_t *)cl->ptr, cl->len, text, sizeof text));
    for (size_t k = 0; k < cl->len; k++) {
      if (cl->ptr[k] < '0' || cl->ptr[k] > '9')
        return mqr_error_set(err, MQR_EPROTOCOL, "content-length '%s' is not a number of octets",
                             shown((const uint8_t *)cl->ptr, cl->len, text, sizeof text));
      v = v * 10 + (uint64_t)(cl->ptr[k] - '0');
    }
    if (v > lim->max_frame || i - start + v + 1 > lim->max_frame) return too_big(err, lim);
    if (n - i < v + 1) return MQR_ETRUNCATED;
    body_end = i + (size_t)v;
    if (buf[body_end] != 0)
      return mqr_error_set(err, MQR_EPROTOCOL, "%s: no NUL after the %llu octets of content-length", names[cmd],
                           (unsigned long long)v);
  } else {
    const uint8_t *z = memchr(buf + i, 0, n - i);
    if (z == NULL) {
      if (n - start > lim->max_frame) return too_big(err, lim);
      return MQR_ETRUNCATED;
    }
    body_end = (size_t)(z - buf);
    if (body_end + 1 - start > lim->max_frame) return too_big(err, lim);
  }
  /* whole: the headers unescaped, and UTF-8 */
  bool esc = escapes(version, f->command);
  for (uint32_t h = 0; h < nh; h++) {
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
  f->body = (mqr_str_t){(const char *)buf + i, body_end - i};
  *used = body_end + 1;
  return 0;
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
  size_t need = strlen(names[c]) + 1 + 1 + (with_length ? 15 + (size_t)nl + 1 : 0);
  for (uint32_t i = 0; i < n; i++)
    need += mqr__stomp_escaped_len(h[i].name, version, c) + 1 + mqr__stomp_escaped_len(h[i].value, version, c) + 1;
  if (need > cap) return need;
  uint8_t *p = out;
  memcpy(p, names[c], strlen(names[c]));
  p += strlen(names[c]);
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
