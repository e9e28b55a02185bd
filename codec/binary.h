/* Avro's binary primitives: zigzag varints, little-endian floats, and a bounded reader
 * whose every failure names the byte offset. Inline: the encoders and decoders are
 * built from these. */
#ifndef MQR_CODEC_BINARY_H
#define MQR_CODEC_BINARY_H

#include <stdarg.h>
#include <stdio.h>

#include "mqr/codec.h"

static inline uint64_t mqr__zigzag64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline uint32_t mqr__zigzag32(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }

/* Writes v as a varint (at most 10 bytes); returns the end. */
static inline uint8_t *mqr__put_varint(uint8_t *p, uint64_t z) {
  while (z >= 0x80) {
    *p++ = (uint8_t)(z | 0x80);
    z >>= 7;
  }
  *p++ = (uint8_t)z;
  return p;
}

static inline uint8_t *mqr__put_long(uint8_t *p, int64_t v) { return mqr__put_varint(p, mqr__zigzag64(v)); }
static inline uint8_t *mqr__put_int(uint8_t *p, int32_t v) { return mqr__put_varint(p, mqr__zigzag32(v)); }

static inline size_t mqr__varint_size(uint64_t z) {
  size_t n = 1;
  while (z >= 0x80) {
    z >>= 7;
    n++;
  }
  return n;
}

typedef struct {
  const uint8_t *p, *end, *start;
  mqr_error_t *err;
} mqr__rd_t;

/* A reader over in[0..len); an empty input may be NULL. */
static inline mqr__rd_t mqr__rd_init(const uint8_t *in, size_t len, mqr_error_t *err) {
  static const uint8_t empty[1];
  if (in == NULL) in = empty, len = 0;
  mqr__rd_t r = {in, in + len, in, err};
  return r;
}

static inline size_t mqr__rd_offset(const mqr__rd_t *r) { return (size_t)(r->p - r->start); }

/* A failure at the reader's offset. Defined here (a cold copy per file) so that the
 * header is whole on its own: the protocol library reads frames with it and links the
 * codec's exported API only. */
__attribute__((cold, noinline, unused, format(printf, 3, 4))) static int mqr__rd_fail(mqr__rd_t *r, int code,
                                                                                      const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mqr_error_set(r->err, code, "at byte %zu: %s", mqr__rd_offset(r), msg);
}

/* A long: zigzag varint of at most 10 bytes whose value fits in 64 bits. */
static inline int mqr__get_long(mqr__rd_t *r, int64_t *out) {
  const uint8_t *p = r->p;
  uint64_t z = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p == r->end) return mqr__rd_fail(r, MQR_ETRUNCATED, "input ends inside a varint");
    uint8_t b = *p++;
    if (shift == 63 && b > 1) return mqr__rd_fail(r, MQR_EBADDATA, "varint longer than 10 bytes or over 64 bits");
    z |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      r->p = p;
      *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
      return 0;
    }
  }
  return mqr__rd_fail(r, MQR_EBADDATA, "varint longer than 10 bytes");
}

/* An int: a varint of at most 5 bytes whose value fits in 32 bits. */
static inline int mqr__get_int(mqr__rd_t *r, int32_t *out) {
  const uint8_t *p = r->p;
  uint64_t z = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (p == r->end) return mqr__rd_fail(r, MQR_ETRUNCATED, "input ends inside a varint");
    uint8_t b = *p++;
    z |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      if (z > UINT32_MAX) return mqr__rd_fail(r, MQR_EBADDATA, "int out of range");
      r->p = p;
      *out = (int32_t)((uint32_t)(z >> 1) ^ (0u - (uint32_t)(z & 1)));
      return 0;
    }
  }
  return mqr__rd_fail(r, MQR_EBADDATA, "int varint longer than 5 bytes");
}

/* An int where at least 5 bytes are left: no bounds checks. false for anything unusual
 * (a fifth byte over 32 bits or continuing), which the caller reads again with
 * mqr__get_int for its error. */
static inline bool mqr__get_int_fast(const uint8_t **pp, int32_t *out) {
  const uint8_t *p = *pp;
  uint32_t b = p[0], z;
  if (b < 0x80) {
    z = b;
    p += 1;
  } else {
    z = b & 0x7f;
    b = p[1];
    z |= (b & 0x7f) << 7;
    if (b < 0x80) {
      p += 2;
    } else {
      b = p[2];
      z |= (b & 0x7f) << 14;
      if (b < 0x80) {
        p += 3;
      } else {
        b = p[3];
        z |= (b & 0x7f) << 21;
        if (b < 0x80) {
          p += 4;
        } else {
          b = p[4];
          if (b > 0x0f) return false;
          z |= b << 28;
          p += 5;
        }
      }
    }
  }
  *pp = p;
  *out = (int32_t)((z >> 1) ^ (0u - (z & 1)));
  return true;
}

/* A long where at least 10 bytes are left: no bounds checks. false for a varint over 10
 * bytes or 64 bits, which the caller reads again with mqr__get_long for its error. */
static inline bool mqr__get_long_fast(const uint8_t **pp, int64_t *out) {
  const uint8_t *p = *pp;
  uint64_t z = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t b = *p++;
    z |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      if (shift == 63 && b > 1) return false;
      break;
    }
    if (shift == 63) return false;
  }
  *pp = p;
  *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
  return true;
}

/* A length (of bytes or a string): non-negative and no more than what is left. */
static inline int mqr__get_len(mqr__rd_t *r, size_t *out) {
  int64_t n = 0;
  int rc = mqr__get_long(r, &n);
  if (rc) return rc;
  if (n < 0) return mqr__rd_fail(r, MQR_EBADDATA, "negative length %lld", (long long)n);
  if ((uint64_t)n > (uint64_t)(r->end - r->p))
    return mqr__rd_fail(r, MQR_ETRUNCATED, "length %lld runs past the end of the input", (long long)n);
  *out = (size_t)n;
  return 0;
}

static inline int mqr__need(mqr__rd_t *r, size_t n) {
  if ((size_t)(r->end - r->p) < n) return mqr__rd_fail(r, MQR_ETRUNCATED, "input ends inside a value of %zu bytes", n);
  return 0;
}

/* An array or map block's item count, checked against what the input can hold: items of
 * min_size bytes at least cannot outnumber the bytes left; items that may take no bytes
 * are capped at MQR_AVRO_MAX_ITEMS. A negative count is followed by the block's byte size,
 * which is read and checked. *out is 0 at the end of the array. */
static inline int mqr__get_count(mqr__rd_t *r, uint32_t min_size, uint64_t *out) {
  int64_t n = 0;
  int rc = mqr__get_long(r, &n);
  if (rc) return rc;
  uint64_t count;
  if (n < 0) {
    if (n == INT64_MIN) return mqr__rd_fail(r, MQR_EBADDATA, "block count out of range");
    count = (uint64_t)-n;
    int64_t size = 0;
    if ((rc = mqr__get_long(r, &size)) != 0) return rc;
    if (size < 0 || (uint64_t)size > (uint64_t)(r->end - r->p))
      return mqr__rd_fail(r, MQR_EBADDATA, "block byte size %lld is negative or past the end", (long long)size);
  } else {
    count = (uint64_t)n;
  }
  if (min_size ? count > (uint64_t)(r->end - r->p) / min_size : count > MQR_AVRO_MAX_ITEMS)
    return mqr__rd_fail(r, min_size ? MQR_ETRUNCATED : MQR_ELIMIT, "block count %llu is more than the input can hold",
                        (unsigned long long)count);
  *out = count;
  return 0;
}

/* Whether p[0..n) is UTF-8 (mqr_utf8_check, common.h). */
static inline bool mqr__utf8_valid(const uint8_t *p, size_t n) { return mqr_utf8_check(p, n) == n; }

/* n < 64 bytes from src to p; returns p + n. No call, and two branches to any length:
 * 16-byte moves, the last one overlapping; or overlapping 8- or 4-byte moves; or bytes. */
__attribute__((always_inline)) static inline uint8_t *mqr__copy_lt64(uint8_t *p, const void *src, size_t n) {
  const uint8_t *s = src;
  if (n >= 8) {
    if (n >= 16) {
      for (size_t k = 0; k + 16 < n; k += 16) memcpy(p + k, s + k, 16);
      memcpy(p + n - 16, s + n - 16, 16);
    } else {
      uint64_t a, b;
      memcpy(&a, s, 8);
      memcpy(&b, s + n - 8, 8);
      memcpy(p, &a, 8);
      memcpy(p + n - 8, &b, 8);
    }
  } else if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + n - 4, 4);
    memcpy(p, &a, 4);
    memcpy(p + n - 4, &b, 4);
  } else if (n) {
    p[0] = s[0];
    p[n / 2] = s[n / 2];
    p[n - 1] = s[n - 1];
  }
  return p + n;
}

/* n bytes from src to p; returns p + n. Short copies inline (never reading past
 * src + n); 64 bytes and more through memcpy. */
static inline uint8_t *mqr__copy_short(uint8_t *p, const void *src, size_t n) {
  if (n < 64) return mqr__copy_lt64(p, src, n);
  memcpy(p, src, n);
  return p + n;
}

#endif
