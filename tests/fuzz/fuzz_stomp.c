/* libFuzzer: STOMP frames as the STOMP head reads them (heads/stomp/frame.h). The first
 * byte picks the version and a cut; the rest is a client's stream. Any bytes are read as
 * frames or refused with an error; reading the stream cut in two (the first part waiting
 * for more, its progress kept for the rest) gives the same frames as reading it whole,
 * and a part that waits is left as it came; a frame read is within its limits, its headers UTF-8, and written again
 * with its headers escaped it reads back the same. */
#include <string.h>

#include "../../heads/stomp/frame.h"
#include "fuzz_check.h"

static const mqr__stomp_limits_t lim = {2048, 12, 200};

typedef struct {
  int rc;
  mqr__stomp_command_t command;
  uint32_t n_headers;
  size_t used, body_len;
  uint8_t digest[64]; /* the headers and body, as read, back to back (first 64 bytes) */
  size_t digest_len;
} seen_t;

static void digest(seen_t *s, const mqr__stomp_frame_t *f) {
  s->digest_len = 0;
  for (uint32_t h = 0; h < f->n_headers; h++)
    for (int k = 0; k < 2; k++) {
      mqr_str_t v = k ? f->headers[h].value : f->headers[h].name;
      for (size_t i = 0; i < v.len && s->digest_len < sizeof s->digest; i++)
        s->digest[s->digest_len++] = (uint8_t)v.ptr[i];
    }
  for (size_t i = 0; i < f->body.len && s->digest_len < sizeof s->digest; i++)
    s->digest[s->digest_len++] = (uint8_t)f->body.ptr[i];
}

/* Reads frames from buf[0..n) until one waits or fails: up to cap, into out. */
static int read_all(uint8_t *buf, size_t n, mqr__stomp_version_t v, seen_t *out, int cap, size_t *at,
                    mqr__stomp_progress_t *pr) {
  mqr__stomp_header_t hdrs[12];
  int k = 0;
  *at = 0;
  while (k < cap) {
    mqr__stomp_frame_t f = {.headers = hdrs, .progress = *pr};
    size_t used = 0;
    mqr_error_t err;
    int rc = mqr__stomp_parse(buf + *at, n - *at, v, &lim, &f, &used, &err);
    *pr = f.progress;
    FUZZ_CHECK(rc == MQR_ETRUNCATED || pr->stage == 0); /* an answer leaves no progress */
    FUZZ_CHECK(used <= n - *at);
    out[k] = (seen_t){.rc = rc};
    if (rc == MQR_ETRUNCATED) {
      *at += used;
      return k;
    }
    if (rc != 0) {
      FUZZ_CHECK(rc == MQR_EPROTOCOL || rc == MQR_ELIMIT);
      FUZZ_CHECK(err.message[0] != 0);
      k++;
      return k;
    }
    FUZZ_CHECK(f.n_headers <= lim.max_headers && used > 0);
    FUZZ_CHECK(f.body.ptr >= (const char *)buf + *at && f.body.ptr + f.body.len < (const char *)buf + *at + used);
    FUZZ_CHECK(f.body.ptr[f.body.len] == 0); /* the NUL ends it */
    for (uint32_t h = 0; h < f.n_headers; h++) {
      FUZZ_CHECK(f.headers[h].name.len > 0);
      FUZZ_CHECK(mqr_utf8_check(f.headers[h].name.ptr, f.headers[h].name.len) == f.headers[h].name.len);
      FUZZ_CHECK(mqr_utf8_check(f.headers[h].value.ptr, f.headers[h].value.len) == f.headers[h].value.len);
    }
    out[k].command = f.command;
    out[k].n_headers = f.n_headers;
    out[k].used = used;
    out[k].body_len = f.body.len;
    digest(&out[k], &f);
    /* written again by the broker's writer, escaped as this version and command escape,
     * it reads the same */
    static uint8_t again[8192];
    bool rewritable = true;
    for (uint32_t h = 0; h < f.n_headers; h++) {
      /* unescaped (1.0, CONNECT) a ':' in a name or an LF cannot be written again */
      mqr_str_t nm = f.headers[h].name, vl = f.headers[h].value;
      if (mqr__stomp_escaped_len(nm, v, f.command) == nm.len &&
          (memchr(nm.ptr, ':', nm.len) || memchr(nm.ptr, '\n', nm.len) || memchr(vl.ptr, '\n', vl.len)))
        rewritable = false;
      if ((nm.len && nm.ptr[nm.len - 1] == '\r') || (vl.len && vl.ptr[vl.len - 1] == '\r'))
        rewritable = rewritable && v >= MQR__STOMP_12 && mqr__stomp_escaped_len(vl, v, f.command) != vl.len;
    }
    size_t head = mqr__stomp_put_head(again, sizeof again, v, f.command, f.headers, f.n_headers, false, 0);
    FUZZ_CHECK(head + f.body.len + 1 <= sizeof again);
    uint8_t *p = again + head;
    memcpy(p, f.body.ptr, f.body.len);
    p += f.body.len;
    *p++ = 0;
    if (rewritable) {
      mqr__stomp_header_t h2[12];
      mqr__stomp_frame_t g = {.headers = h2};
      size_t used2;
      seen_t s2;
      int rc2 = mqr__stomp_parse(again, (size_t)(p - again), v, &lim, &g, &used2, NULL);
      /* escaping makes lines longer: a limit may refuse what was taken */
      if (rc2 != MQR_ELIMIT) {
        FUZZ_CHECK(rc2 == 0 && used2 == (size_t)(p - again));
        FUZZ_CHECK(g.command == f.command && g.n_headers == f.n_headers && g.body.len == f.body.len);
        digest(&s2, &g);
        FUZZ_CHECK(s2.digest_len == out[k].digest_len && memcmp(s2.digest, out[k].digest, s2.digest_len) == 0);
      }
    }
    *at += used;
    k++;
  }
  return k;
}

static uint8_t whole[8192], cut[8192];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > sizeof whole) return 0;
  mqr__stomp_version_t v = (mqr__stomp_version_t)(data[0] % 3);
  size_t n = size - 1, split = n ? (size_t)(data[0] >> 2) * n / 64 : 0;
  seen_t a[16], b[16];
  size_t at_a, at_b;
  memcpy(whole, data + 1, n);
  mqr__stomp_progress_t pa = {0}, pb = {0};
  int ka = read_all(whole, n, v, a, 16, &at_a, &pa);
  /* cut: the first part, then (from where it stopped) the whole */
  memcpy(cut, data + 1, n);
  int kb = read_all(cut, split, v, b, 16, &at_b, &pb);
  if (kb && b[kb - 1].rc != 0) return 0; /* the part failed: so may the whole, later or sooner */
  FUZZ_CHECK(memcmp(cut + at_b, data + 1 + at_b, split - at_b) == 0); /* what waits is as it came */
  size_t at_c;
  /* the rest read on from where the first part stopped, with its progress */
  int kc = kb < 16 ? read_all(cut + at_b, n - at_b, v, b + kb, 16 - kb, &at_c, &pb) : 0;
  (void)at_c;
  int kt = kb + kc;
  for (int i = 0; i < kt && i < ka; i++) {
    FUZZ_CHECK(a[i].rc == b[i].rc);
    if (a[i].rc) break;
    FUZZ_CHECK(a[i].command == b[i].command && a[i].n_headers == b[i].n_headers && a[i].body_len == b[i].body_len);
    FUZZ_CHECK(a[i].digest_len == b[i].digest_len && memcmp(a[i].digest, b[i].digest, a[i].digest_len) == 0);
  }
  return 0;
}
