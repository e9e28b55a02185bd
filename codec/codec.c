/* The compiled codec's encoder and decoder: a walk over a plan with no name lookup, no
 * allocation (but the output buffer growing, or arrays placed in the caller's arena). */
#include "plan.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define LD(type, base, off) (*(const type *)((const uint8_t *)(base) + (off)))
#define ST(type, base, off) (*(type *)((uint8_t *)(base) + (off)))

/* ---- encode ------------------------------------------------------------------------- */

/* Room for up to n more bytes at *p. Only on the slow path (the buffer short of n) is
 * exact, the bytes this value really takes, worked out and asked for: a fixed buffer of
 * exactly the datum's size takes it. */
#define ROOM(n, exact)                                                                                                 \
  do {                                                                                                                 \
    if ((size_t)(end - p) < (size_t)(n)) {                                                                             \
      o->len = (size_t)(p - o->data);                                                                                  \
      int rc_ = mqr_avro_buf_reserve(o, (exact));                                                                      \
      if (rc_) return rc_;                                                                                             \
      p = o->data + o->len;                                                                                            \
      end = o->data + o->cap;                                                                                          \
    }                                                                                                                  \
  } while (0)

/* An array of enum ordinals below lim <= 64, each one byte (its zigzag, ordinal * 2), to
 * p: 16 at a time with SSE2 (part of x86-64), the rest one by one. false if an ordinal
 * is out of range (what was written is then not used). */
static bool enum_bytes(uint8_t *p, const int32_t *v, size_t n, uint32_t lim) {
  size_t i = 0;
#ifdef __SSE2__
  const __m128i top = _mm_set1_epi32((int)lim - 1), zero = _mm_setzero_si128();
  __m128i bad = zero;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm_loadu_si128((const __m128i *)(v + i)), b = _mm_loadu_si128((const __m128i *)(v + i + 4));
    __m128i c = _mm_loadu_si128((const __m128i *)(v + i + 8)), d = _mm_loadu_si128((const __m128i *)(v + i + 12));
    /* out of range: above lim - 1, or negative */
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi32(a, top), _mm_cmplt_epi32(a, zero)));
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi32(b, top), _mm_cmplt_epi32(b, zero)));
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi32(c, top), _mm_cmplt_epi32(c, zero)));
    bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpgt_epi32(d, top), _mm_cmplt_epi32(d, zero)));
    /* in range, each fits a byte: double, then narrow 32 -> 16 -> 8 bits */
    __m128i ab = _mm_packs_epi32(_mm_slli_epi32(a, 1), _mm_slli_epi32(b, 1));
    __m128i cd = _mm_packs_epi32(_mm_slli_epi32(c, 1), _mm_slli_epi32(d, 1));
    _mm_storeu_si128((__m128i *)(p + i), _mm_packus_epi16(ab, cd));
  }
  if (_mm_movemask_epi8(bad)) return false;
#endif
  uint32_t out = 0;
  for (; i < n; i++) {
    out |= (uint32_t)v[i] >= lim;
    p[i] = (uint8_t)((uint32_t)v[i] << 1);
  }
  return out == 0;
}

/* Ints as zigzag varints to p, where end - p is at least the bytes they take. Four at a
 * time with SSE2 when the four take the same number of bytes, 1 to 4 (ids, counters,
 * anything of one magnitude: the common array), while 16 bytes are left for the wide
 * stores; one by one otherwise. The four are spread into 7-bit groups with continuation
 * bits in their 32-bit lanes, then packed to their length: 1 and 2 bytes by saturating
 * packs (the lanes fit), 3 by moving each odd lane down a byte within its 64 bits, 4 as
 * they are. The length of the last four is tried first. */
static uint8_t *put_int_varints(uint8_t *p, const uint8_t *end, const int32_t *v, size_t n) {
  size_t i = 0;
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128(), m0 = _mm_set1_epi32(0x7f), m1 = _mm_set1_epi32(0x7f00),
                m2 = _mm_set1_epi32(0x7f0000), m3 = _mm_set1_epi32(0x7f000000);
  const __m128i low24 = _mm_set1_epi64x(0xffffff), high24 = _mm_set1_epi64x(0xffffff000000ll);
  unsigned len = 1;
  for (; i + 4 <= n && end - p >= 16; i += 4) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(v + i));
    __m128i z = _mm_xor_si128(_mm_slli_epi32(x, 1), _mm_srai_epi32(x, 31));
    /* all four under 2^(7 len), and (len > 1) none under 2^(7 (len - 1)) */
#define SAME_LEN(l)                                                                                                    \
  (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srl_epi32(z, _mm_cvtsi32_si128(7 * (int)(l))), zero)) == 0xffff &&            \
   ((l) == 1 || _mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srl_epi32(z, _mm_cvtsi32_si128(7 * (int)(l)-7)), zero)) == 0))
    if (!SAME_LEN(len)) {
      len = (unsigned)mqr__varint_size(mqr__zigzag32(v[i]));
      if (len > 4 || !SAME_LEN(len)) {
        len = 1;
        for (size_t k = i; k < i + 4; k++) p = mqr__put_varint(p, mqr__zigzag32(v[k]));
        continue;
      }
    }
#undef SAME_LEN
    __m128i g =
        _mm_or_si128(_mm_or_si128(_mm_and_si128(z, m0), _mm_and_si128(_mm_slli_epi32(z, 1), m1)),
                     _mm_or_si128(_mm_and_si128(_mm_slli_epi32(z, 2), m2), _mm_and_si128(_mm_slli_epi32(z, 3), m3)));
    switch (len) {
    case 1: {
      __m128i b = _mm_packus_epi16(_mm_packs_epi32(g, g), zero);
      uint32_t w = (uint32_t)_mm_cvtsi128_si32(b);
      memcpy(p, &w, 4);
      break;
    }
    case 2: /* lanes of 0x80 | ..., 15 bits: a signed 16-bit pack keeps them */
      _mm_storel_epi64((__m128i *)(void *)p, _mm_packs_epi32(_mm_or_si128(g, _mm_set1_epi32(0x80)), zero));
      break;
    case 3: {
      g = _mm_or_si128(g, _mm_set1_epi32(0x8080));
      __m128i q = _mm_or_si128(_mm_and_si128(g, low24), _mm_and_si128(_mm_srli_epi64(g, 8), high24));
      _mm_storel_epi64((__m128i *)(void *)p, q);
      _mm_storel_epi64((__m128i *)(void *)(p + 6), _mm_unpackhi_epi64(q, q));
      break;
    }
    default: _mm_storeu_si128((__m128i *)(void *)p, _mm_or_si128(g, _mm_set1_epi32(0x808080))); break;
    }
    p += 4 * len;
  }
#else
  (void)end;
#endif
  for (; i < n; i++) p = mqr__put_varint(p, mqr__zigzag32(v[i]));
  return p;
}

/* The bytes an array of scalars takes, exactly (the slow path of a fixed buffer). */
static size_t scalar_array_size(const mqr__op_t *op, const mqr_avro_array_t *a) {
  size_t n = a->count, total = 1;
  if (n == 0) return total;
  total += mqr__varint_size(mqr__zigzag64((int64_t)n));
  switch (op->code) {
  case MQR__OP_FLOAT_ARRAY: return total + n * 4;
  case MQR__OP_DOUBLE_ARRAY: return total + n * 8;
  case MQR__OP_LONG_ARRAY:
    for (size_t i = 0; i < n; i++) total += mqr__varint_size(mqr__zigzag64(((const int64_t *)a->items)[i]));
    return total;
  default:
    for (size_t i = 0; i < n; i++) total += mqr__varint_size(mqr__zigzag32(((const int32_t *)a->items)[i]));
    return total;
  }
}

static int enc(const mqr__plan_t *pl, const uint8_t *base, mqr_avro_buf_t *o, mqr_error_t *err, int depth);

static int enc_scalar_array(const mqr__op_t *op, const mqr_avro_array_t *a, mqr_avro_buf_t *o, mqr_error_t *err) {
  uint8_t *p = o->data + o->len, *end = o->data + o->cap;
  size_t n = a->count;
  size_t per = op->code == MQR__OP_FLOAT_ARRAY    ? 4
               : op->code == MQR__OP_DOUBLE_ARRAY ? 8
               : op->code == MQR__OP_LONG_ARRAY   ? 10
                                                  : 5;
  if (n) {
    if (n > SIZE_MAX / 16) return mqr_error_set(err, MQR_EINVAL, "array of %zu items", n);
    ROOM(n * per + 20, scalar_array_size(op, a));
    p = mqr__put_long(p, (int64_t)n);
    switch (op->code) {
    case MQR__OP_INT_ARRAY: p = put_int_varints(p, end, a->items, n); break;
    case MQR__OP_ENUM_ARRAY: {
      const int32_t *v = a->items;
      uint32_t lim = op->n;
      if (lim <= 64) { /* every ordinal is one byte */
        if (!enum_bytes(p, v, n, lim))
          return mqr_error_set(err, MQR_EBADDATA, "an enum ordinal in the array is out of range");
        p += n;
      } else {
        for (size_t i = 0; i < n; i++) {
          if ((uint32_t)v[i] >= lim) return mqr_error_set(err, MQR_EBADDATA, "enum ordinal %d out of range", v[i]);
          p = mqr__put_varint(p, mqr__zigzag32(v[i]));
        }
      }
      break;
    }
    case MQR__OP_LONG_ARRAY: {
      const int64_t *v = a->items;
      for (size_t i = 0; i < n; i++) p = mqr__put_varint(p, mqr__zigzag64(v[i]));
      break;
    }
    default: /* little-endian floats: the bytes as they are */
      memcpy(p, a->items, n * per);
      p += n * per;
      break;
    }
  } else {
    ROOM(1, 1);
  }
  *p++ = 0;
  o->len = (size_t)(p - o->data);
  return 0;
}

/* One op of a flat record (no union, array or map): inlined into both encoders. p and
 * end are the caller's write position and buffer end. */
static inline __attribute__((always_inline)) int enc_flat_op(const mqr__op_t *op, const uint8_t *base,
                                                             mqr_avro_buf_t *o, uint8_t **pp, uint8_t **pend,
                                                             mqr_error_t *err) {
  uint8_t *p = *pp, *end = *pend;
  switch (op->code) {
  case MQR__OP_BOOL:
    ROOM(1, 1);
    *p++ = LD(bool, base, op->off);
    break;
  case MQR__OP_INT:
    ROOM(5, mqr__varint_size(mqr__zigzag32(LD(int32_t, base, op->off))));
    p = mqr__put_varint(p, mqr__zigzag32(LD(int32_t, base, op->off)));
    break;
  case MQR__OP_LONG:
    ROOM(10, mqr__varint_size(mqr__zigzag64(LD(int64_t, base, op->off))));
    p = mqr__put_varint(p, mqr__zigzag64(LD(int64_t, base, op->off)));
    break;
  case MQR__OP_FLOAT:
    ROOM(4, 4);
    memcpy(p, base + op->off, 4);
    p += 4;
    break;
  case MQR__OP_DOUBLE:
    ROOM(8, 8);
    memcpy(p, base + op->off, 8);
    p += 8;
    break;
    /* A string at offset o: one for STR, a loop of them for STRS (kept apart: a lone string,
     * the common record, pays for no loop). */
#define ENC_STR(o)                                                                                                     \
  do {                                                                                                                 \
    mqr_str_t s_ = LD(mqr_str_t, base, (o));                                                                           \
    ROOM(s_.len + 10, s_.len + mqr__varint_size((uint64_t)s_.len << 1));                                               \
    if (s_.len < 64) {                                                                                                 \
      *p++ = (uint8_t)(s_.len << 1);                                                                                   \
      p = mqr__copy_short(p, s_.ptr, s_.len);                                                                          \
    } else {                                                                                                           \
      p = mqr__put_varint(p, (uint64_t)s_.len << 1);                                                                   \
      memcpy(p, s_.ptr, s_.len);                                                                                       \
      p += s_.len;                                                                                                     \
    }                                                                                                                  \
  } while (0)
  case MQR__OP_STR: ENC_STR(op->off); break;
  case MQR__OP_STRS:
    for (const uint32_t *off = op->offs, *stop = op->offs + op->n; off < stop; off++) ENC_STR(*off);
    break;
#undef ENC_STR
  case MQR__OP_ENUM: {
    int32_t v = LD(int32_t, base, op->off);
    if ((uint32_t)v >= op->n) return mqr_error_set(err, MQR_EBADDATA, "enum ordinal %d out of range", v);
    ROOM(5, mqr__varint_size(mqr__zigzag32(v)));
    p = mqr__put_varint(p, mqr__zigzag32(v));
    break;
  }
  case MQR__OP_FIXED:
    ROOM(op->n, op->n);
    memcpy(p, base + op->off, op->n);
    p += op->n;
    break;
  case MQR__OP_DEFAULT:
    ROOM(op->n, op->n);
    memcpy(p, op->bytes, op->n);
    p += op->n;
    break;
  }
  *pp = p;
  *pend = end;
  return 0;
}

/* The fast path of a flat plan of at least one op: a leaf, with a dispatch without a
 * range check, and (checked) a room check per op for the most any op here writes (a
 * 10-byte varint; a length byte and up to 63 bytes of string, fixed or default), or
 * (not checked) none, its caller having checked room for them all. NULL for what it
 * leaves to the general encoder (a buffer short of that room, a longer string, fixed or
 * default, a bad enum ordinal), which then encodes the value again from the same place. */
#define MQR__FAST_ROOM 74

/* A string of under 64 bytes (one length byte); NULL for a longer one. */
__attribute__((always_inline)) static inline uint8_t *enc_str_fast(uint8_t *p, mqr_str_t v) {
  if (v.len >= 64) return NULL;
  *p++ = (uint8_t)(v.len << 1);
  return mqr__copy_lt64(p, v.ptr, v.len);
}

__attribute__((always_inline)) static inline uint8_t *enc_flat_fast(const mqr__op_t *op, const mqr__op_t *last,
                                                                    const uint8_t *base, uint8_t *p, const uint8_t *end,
                                                                    const bool checked) {
  do {
    if (checked && end - p < MQR__FAST_ROOM) return NULL;
    switch ((mqr__opcode_t)op->code) {
    case MQR__OP_BOOL: *p++ = LD(bool, base, op->off); break;
    case MQR__OP_INT: p = mqr__put_varint(p, mqr__zigzag32(LD(int32_t, base, op->off))); break;
    case MQR__OP_LONG: p = mqr__put_varint(p, mqr__zigzag64(LD(int64_t, base, op->off))); break;
    case MQR__OP_FLOAT:
      memcpy(p, base + op->off, 4);
      p += 4;
      break;
    case MQR__OP_DOUBLE:
      memcpy(p, base + op->off, 8);
      p += 8;
      break;
    case MQR__OP_STR:
      if ((p = enc_str_fast(p, LD(mqr_str_t, base, op->off))) == NULL) return NULL;
      break;
    case MQR__OP_STRS:
      if (!checked) __builtin_unreachable(); /* compiled out of the bounded leaf */
      for (const uint32_t *off = op->offs, *stop = op->offs + op->n; off < stop; off++)
        if (end - p < MQR__FAST_ROOM || (p = enc_str_fast(p, LD(mqr_str_t, base, *off))) == NULL) return NULL;
      break;
    case MQR__OP_ENUM: {
      int32_t v = LD(int32_t, base, op->off);
      if ((uint32_t)v >= op->n) return NULL;
      p = mqr__put_varint(p, mqr__zigzag32(v));
      break;
    }
    case MQR__OP_FIXED:
      if (op->n >= 64) return NULL;
      p = mqr__copy_lt64(p, base + op->off, op->n);
      break;
    case MQR__OP_DEFAULT:
      if (op->n >= 64) return NULL;
      p = mqr__copy_lt64(p, op->bytes, op->n);
      break;
    default: __builtin_unreachable(); /* a flat plan has no other op */
    }
  } while (++op < last);
  return p;
}

/* A flat plan: one straight run of scalar ops (most records). */
static int enc_flat(const mqr__plan_t *pl, const uint8_t *base, mqr_avro_buf_t *o, mqr_error_t *err) {
  uint8_t *p = o->data + o->len, *end = o->data + o->cap;
  for (const mqr__op_t *op = pl->ops, *last = pl->ops + pl->n; op < last; op++) {
    int rc = enc_flat_op(op, base, o, &p, &end, err);
    if (rc) return rc;
  }
  o->len = (size_t)(p - o->data);
  return 0;
}

static int enc(const mqr__plan_t *pl, const uint8_t *base, mqr_avro_buf_t *o, mqr_error_t *err, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH)
    return mqr_error_set(err, MQR_ELIMIT, "value nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  uint8_t *p = o->data + o->len, *end = o->data + o->cap;
  const mqr__op_t *op = pl->ops, *last = pl->ops + pl->n;
  for (; op < last; op++) {
    switch (op->code) {
    case MQR__OP_UNION: {
      int32_t b = LD(int32_t, base, op->off);
      if ((uint32_t)b >= op->n) return mqr_error_set(err, MQR_EBADDATA, "union branch %d out of range", b);
      ROOM(5, mqr__varint_size(mqr__zigzag32(b)));
      p = mqr__put_varint(p, mqr__zigzag32(b));
      if (op->branches[b]) {
        o->len = (size_t)(p - o->data);
        int rc = enc(op->branches[b], base, o, err, depth + 1);
        if (rc) return rc;
        p = o->data + o->len;
        end = o->data + o->cap;
      }
      break;
    }
    case MQR__OP_ARRAY:
    case MQR__OP_MAP: {
      bool map = op->code == MQR__OP_MAP;
      size_t n = map ? LD(mqr_avro_map_t, base, op->off).count : LD(mqr_avro_array_t, base, op->off).count;
      const uint8_t *items = map ? LD(mqr_avro_map_t, base, op->off).values : LD(mqr_avro_array_t, base, op->off).items;
      const mqr_str_t *keys = map ? LD(mqr_avro_map_t, base, op->off).keys : NULL;
      ROOM(10, n ? mqr__varint_size(mqr__zigzag64((int64_t)n)) : 0);
      if (n) p = mqr__put_long(p, (int64_t)n);
      o->len = (size_t)(p - o->data);
      for (size_t i = 0; i < n; i++) {
        if (map) {
          int rc = mqr_avro_buf_reserve(o, keys[i].len + mqr__varint_size(mqr__zigzag64((int64_t)keys[i].len)));
          if (rc) return rc;
          p = mqr__put_long(o->data + o->len, (int64_t)keys[i].len);
          memcpy(p, keys[i].ptr, keys[i].len);
          o->len = (size_t)(p - o->data) + keys[i].len;
        }
        int rc = enc(op->sub, items + i * op->size, o, err, depth + 1);
        if (rc) return rc;
      }
      p = o->data + o->len;
      end = o->data + o->cap;
      ROOM(1, 1);
      *p++ = 0;
      break;
    }
    case MQR__OP_INT_ARRAY:
    case MQR__OP_ENUM_ARRAY:
    case MQR__OP_FLOAT_ARRAY:
    case MQR__OP_DOUBLE_ARRAY:
    case MQR__OP_LONG_ARRAY: {
      o->len = (size_t)(p - o->data);
      int rc = enc_scalar_array(op, &LD(mqr_avro_array_t, base, op->off), o, err);
      if (rc) return rc;
      p = o->data + o->len;
      end = o->data + o->cap;
      break;
    }
    default: {
      int rc = enc_flat_op(op, base, o, &p, &end, err);
      if (rc) return rc;
    }
    }
  }
  o->len = (size_t)(p - o->data);
  return 0;
}

/* An encode failed with rc: out back to mark, and the error said (cold: the hot path
 * carries none of it). */
static __attribute__((noinline, cold)) int encode_failed(const mqr_avro_codec_t *c, const void *value,
                                                         mqr_avro_buf_t *out, size_t mark, size_t *needed,
                                                         mqr_error_t *err, int rc) {
  out->len = mark;
  if (rc == MQR_ENOSPC) {
    /* Measure by encoding into a scratch buffer. */
    mqr_avro_buf_t tmp;
    mqr_avro_buf_init_growable(&tmp);
    size_t datum = 0;
    if (mqr_avro_buf_reserve(&tmp, 256) == 0 && enc(c->root, value, &tmp, NULL, 0) == 0) {
      datum = tmp.len;
      if (needed) *needed = mark + datum;
    }
    mqr_avro_buf_free(&tmp);
    return mqr_error_set(err, MQR_ENOSPC, "the datum needs %zu bytes, the buffer has %zu", datum, out->cap - mark);
  }
  if (rc == MQR_ENOMEM) mqr_error_set(err, rc, "out of memory growing the output");
  return rc;
}

/* The general encoder: every value, every error. */
int mqr_avro_encode_general(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out, size_t *needed,
                            mqr_error_t *err) {
  size_t mark = out->len;
  int rc;
  if (out->data != NULL && c->root->flat) {
    rc = enc_flat(c->root, value, out, err);
  } else {
    rc = out->data ? 0 : mqr_avro_buf_reserve(out, 1); /* a first use: never a NULL buffer below */
    if (rc == 0) rc = enc(c->root, value, out, err, 0);
  }
  if (__builtin_expect(rc == 0, 1)) return 0;
  return encode_failed(c, value, out, mark, needed, err, rc);
}

/* The encoder's fast leaves, one for each kind of flat root (plan.h): three arguments
 * (mqr_avro_encode keeps the other two for the general encoder), and the bounded one has
 * no inner loop for STRS and no room check per op, which keeps the registers saved on
 * entry few. */
__attribute__((always_inline)) static inline int enc_fast(const mqr_avro_codec_t *c, const void *value,
                                                          mqr_avro_buf_t *out, const bool checked) {
  if (__builtin_expect(out->data == NULL, 0)) return 1;
  if (!checked && out->cap - out->len < c->fast_max) return 1;
  uint8_t *end = enc_flat_fast(c->fast_ops, c->fast_last, value, out->data + out->len, out->data + out->cap, checked);
  if (__builtin_expect(end == NULL, 0)) return 1;
  out->len = (size_t)(end - out->data);
  return 0;
}

__attribute__((noinline)) static int enc_fast_checked(const mqr_avro_codec_t *c, const void *value,
                                                      mqr_avro_buf_t *out) {
  return enc_fast(c, value, out, true);
}

__attribute__((noinline)) static int enc_fast_bounded(const mqr_avro_codec_t *c, const void *value,
                                                      mqr_avro_buf_t *out) {
  return enc_fast(c, value, out, false);
}

/* The cheapest leaf, here, for a bounded root of strings and bytes only: their offsets in
 * a row, no dispatch. The other roots jump to theirs. 0, or 1 having written nothing, for
 * the general encoder. */
int mqr_avro_encode_fast(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out) {
  const uint32_t *o = c->str_offs;
  if (o == NULL) {
    if (c->fast == MQR__FAST_BOUNDED) return enc_fast_bounded(c, value, out);
    return c->fast == MQR__FAST_CHECKED ? enc_fast_checked(c, value, out) : 1;
  }
  uint8_t *p = out->data;
  if (__builtin_expect(p == NULL || out->cap - out->len < c->fast_max, 0)) return 1;
  p += out->len;
  const uint32_t *last = c->str_last;
  do {
    if ((p = enc_str_fast(p, LD(mqr_str_t, value, *o))) == NULL) return 1;
  } while (++o < last);
  out->len = (size_t)(p - out->data);
  return 0;
}

/* ---- decode ------------------------------------------------------------------------- */

static void *arena_take(mqr_avro_arena_t *a, size_t n) {
  size_t at = (a->used + 15) & ~(size_t)15;
  if (at > a->cap || a->cap - at < n) return NULL;
  a->used = at + n;
  return a->base + at;
}

static int arena_full(mqr__rd_t *r, size_t n) {
  return mqr__rd_fail(r, MQR_ENOSPC, "the arena has no room for %zu more bytes", n);
}

static int dec(const mqr__plan_t *pl, mqr__rd_t *r, uint8_t *base, mqr_avro_arena_t *arena, int depth);

/* Reads blocks of items, each block's items appended to one run in the arena. */
static int dec_items(const mqr__op_t *op, mqr__rd_t *r, mqr_avro_arena_t *arena, int depth, void **items_out,
                     mqr_str_t **keys_out, size_t *count_out) {
  bool map = op->code == MQR__OP_MAP;
  uint8_t *items = NULL;
  mqr_str_t *keys = NULL;
  size_t total = 0;
  for (;;) {
    uint64_t count = 0;
    int rc = mqr__get_count(r, op->min, &count);
    if (rc) return rc;
    if (count == 0) break;
    size_t nt = total + (size_t)count;
    uint8_t *ni = arena_take(arena, nt * op->size);
    mqr_str_t *nk = map ? arena_take(arena, nt * sizeof *nk) : NULL;
    if (ni == NULL || (map && nk == NULL)) return arena_full(r, nt * (op->size + (map ? sizeof *nk : 0)));
    if (total) { /* a later block: move the earlier items next to it (rare: writers use one block) */
      memcpy(ni, items, total * op->size);
      if (map) memcpy(nk, keys, total * sizeof *nk);
    }
    items = ni;
    keys = nk;
    if (op->code == MQR__OP_FLOAT_ARRAY || op->code == MQR__OP_DOUBLE_ARRAY) {
      /* Little-endian floats: the block's bytes are the items. */
      size_t bytes = (size_t)count * op->size;
      if ((rc = mqr__need(r, bytes)) != 0) return rc;
      memcpy(items + total * op->size, r->p, bytes);
      r->p += bytes;
      total = nt;
      continue;
    }
    if (op->code == MQR__OP_INT_ARRAY || op->code == MQR__OP_ENUM_ARRAY) {
      /* The hot loop of int arrays: unchecked varints while 5 bytes are left. */
      int32_t *dst = (int32_t *)items;
      for (size_t i = total; i < nt; i++) {
        int32_t v = 0;
        if (r->end - r->p < 5 || !mqr__get_int_fast(&r->p, &v))
          if ((rc = mqr__get_int(r, &v)) != 0) return rc;
        if (op->code == MQR__OP_ENUM_ARRAY && (uint32_t)v >= op->n)
          return mqr__rd_fail(r, MQR_EBADDATA, "enum ordinal %d out of range", v);
        dst[i] = v;
      }
      total = nt;
      continue;
    }
    for (size_t i = total; i < nt; i++) {
      if (map) {
        size_t len = 0;
        if ((rc = mqr__get_len(r, &len)) != 0) return rc;
        keys[i] = mqr_str_n((const char *)r->p, len);
        r->p += len;
      }
      switch (op->code) {
      case MQR__OP_LONG_ARRAY:
        if ((rc = mqr__get_long(r, &((int64_t *)items)[i])) != 0) return rc;
        break;
      default:
        memset(items + i * op->size, 0, op->size);
        if ((rc = dec(op->sub, r, items + i * op->size, arena, depth + 1)) != 0) return rc;
      }
    }
    total = nt;
  }
  *items_out = items;
  if (keys_out) *keys_out = keys;
  *count_out = total;
  return 0;
}

/* A string or bytes as a view into the input. */
static inline int dec_str(mqr__rd_t *r, mqr_str_t *out) {
  size_t len = 0;
  if (r->p < r->end && *r->p < 0x80 && !(*r->p & 1)) { /* a short length, the common case */
    len = *r->p >> 1;
    if ((size_t)(r->end - r->p - 1) < len)
      return mqr__rd_fail(r, MQR_ETRUNCATED, "length %zu runs past the end of the input", len);
    r->p++;
  } else {
    int rc = mqr__get_len(r, &len);
    if (rc) return rc;
  }
  *out = mqr_str_n((const char *)r->p, len);
  r->p += len;
  return 0;
}

static int dec(const mqr__plan_t *pl, mqr__rd_t *r, uint8_t *base, mqr_avro_arena_t *arena, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH) return mqr__rd_fail(r, MQR_ELIMIT, "datum nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  int rc = 0;
  const mqr__op_t *op = pl->ops, *last = pl->ops + pl->n;
  for (; op < last; op++) {
    switch (op->code) {
    case MQR__OP_BOOL:
      if ((rc = mqr__need(r, 1)) != 0) return rc;
      if (*r->p > 1) return mqr__rd_fail(r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r->p);
      ST(bool, base, op->off) = *r->p++;
      break;
    case MQR__OP_INT:
      if ((rc = mqr__get_int(r, &ST(int32_t, base, op->off))) != 0) return rc;
      break;
    case MQR__OP_LONG:
      if ((rc = mqr__get_long(r, &ST(int64_t, base, op->off))) != 0) return rc;
      break;
    case MQR__OP_FLOAT:
    case MQR__OP_DOUBLE: {
      size_t n = op->code == MQR__OP_FLOAT ? 4 : 8;
      if ((rc = mqr__need(r, n)) != 0) return rc;
      memcpy(base + op->off, r->p, n);
      r->p += n;
      break;
    }
    case MQR__OP_STR:
      if ((rc = dec_str(r, &ST(mqr_str_t, base, op->off))) != 0) return rc;
      break;
    case MQR__OP_STRS:
      for (const uint32_t *off = op->offs, *stop = op->offs + op->n; off < stop; off++)
        if ((rc = dec_str(r, &ST(mqr_str_t, base, *off))) != 0) return rc;
      break;
    case MQR__OP_ENUM: {
      int32_t v = 0;
      if ((rc = mqr__get_int(r, &v)) != 0) return rc;
      if ((uint32_t)v >= op->n) return mqr__rd_fail(r, MQR_EBADDATA, "enum ordinal %d out of range", v);
      ST(int32_t, base, op->off) = v;
      break;
    }
    case MQR__OP_FIXED:
      if ((rc = mqr__need(r, op->n)) != 0) return rc;
      memcpy(base + op->off, r->p, op->n);
      r->p += op->n;
      break;
    case MQR__OP_DEFAULT:
      if ((rc = mqr__avro_skip_node(r, op->node, depth)) != 0) return rc;
      break;
    case MQR__OP_UNION: {
      int32_t b = 0;
      if ((rc = mqr__get_int(r, &b)) != 0) return rc;
      if ((uint32_t)b >= op->n) return mqr__rd_fail(r, MQR_EBADDATA, "union branch %d out of range", b);
      ST(int32_t, base, op->off) = b;
      if (op->branches[b] && (rc = dec(op->branches[b], r, base, arena, depth + 1)) != 0) return rc;
      break;
    }
    case MQR__OP_MAP: {
      mqr_avro_map_t *m = &ST(mqr_avro_map_t, base, op->off);
      if ((rc = dec_items(op, r, arena, depth, &m->values, &m->keys, &m->count)) != 0) return rc;
      break;
    }
    default: {
      mqr_avro_array_t *a = &ST(mqr_avro_array_t, base, op->off);
      if ((rc = dec_items(op, r, arena, depth, &a->items, NULL, &a->count)) != 0) return rc;
      break;
    }
    }
  }
  return 0;
}

/* A varint of one byte, the common case: true and *z set, else false and nothing read. */
#define ONE_BYTE(p, end, z) ((p) < (end) && *(p) < 0x80 && ((z) = *(p), (p)++, true))

/* A string with a one-byte length, as a view; NULL for anything else. */
__attribute__((always_inline)) static inline const uint8_t *dec_str_fast(const uint8_t *p, const uint8_t *end,
                                                                         mqr_str_t *out) {
  uint32_t z;
  if (!ONE_BYTE(p, end, z) || (z & 1) || (size_t)(end - p) < (z >> 1)) return NULL;
  *out = mqr_str_n((const char *)p, z >> 1);
  return p + (z >> 1);
}

/* The fast path of a flat plan of at least one op: a leaf. NULL for what it leaves to
 * dec (varints of more than a byte near the end of the input, a fixed of 64 bytes or
 * more, a DEFAULT to skip, and every error, whose message dec writes), which then decodes
 * the value again from the start: every op writes its field, so nothing of this attempt
 * survives. Only the checked kind's leaf meets STRS. */
__attribute__((always_inline)) static inline const uint8_t *dec_flat_fast(const mqr__op_t *op, const mqr__op_t *last,
                                                                          uint8_t *base, const uint8_t *p,
                                                                          const uint8_t *end, const bool checked) {
  do {
    switch ((mqr__opcode_t)op->code) {
    case MQR__OP_BOOL:
      if (p == end || *p > 1) return NULL;
      ST(bool, base, op->off) = *p++;
      break;
    case MQR__OP_INT:
    case MQR__OP_ENUM: {
      int32_t v;
      uint32_t z;
      if (ONE_BYTE(p, end, z))
        v = (int32_t)((z >> 1) ^ (0u - (z & 1)));
      else if (end - p < 5 || !mqr__get_int_fast(&p, &v))
        return NULL;
      if (op->code == MQR__OP_ENUM && (uint32_t)v >= op->n) return NULL;
      ST(int32_t, base, op->off) = v;
      break;
    }
    case MQR__OP_LONG: {
      int64_t v;
      uint32_t z;
      if (ONE_BYTE(p, end, z))
        v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
      else if (end - p < 10 || !mqr__get_long_fast(&p, &v))
        return NULL;
      ST(int64_t, base, op->off) = v;
      break;
    }
    case MQR__OP_FLOAT:
      if (end - p < 4) return NULL;
      memcpy(base + op->off, p, 4);
      p += 4;
      break;
    case MQR__OP_DOUBLE:
      if (end - p < 8) return NULL;
      memcpy(base + op->off, p, 8);
      p += 8;
      break;
    case MQR__OP_STR:
      if ((p = dec_str_fast(p, end, &ST(mqr_str_t, base, op->off))) == NULL) return NULL;
      break;
    case MQR__OP_STRS:
      if (!checked) __builtin_unreachable(); /* compiled out of the bounded root's leaf */
      for (const uint32_t *off = op->offs, *stop = op->offs + op->n; off < stop; off++)
        if ((p = dec_str_fast(p, end, &ST(mqr_str_t, base, *off))) == NULL) return NULL;
      break;
    case MQR__OP_FIXED: /* no call to memcpy: the leaf would save registers for it */
      if (op->n >= 64 || (size_t)(end - p) < op->n) return NULL;
      mqr__copy_lt64(base + op->off, p, op->n);
      p += op->n;
      break;
    case MQR__OP_DEFAULT: return NULL;
    default: __builtin_unreachable(); /* a flat plan has no other op */
    }
  } while (++op < last);
  return p;
}
#undef ONE_BYTE

/* The general decoder: every value, every error. */
int mqr_avro_decode_general(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, size_t *used, void *value,
                            mqr_avro_arena_t *arena, mqr_error_t *err) {
  mqr_avro_arena_t none = {NULL, 0, 0};
  mqr__rd_t r = mqr__rd_init(in, len, err);
  int rc = dec(c->root, &r, value, arena ? arena : &none, 0);
  if (rc == 0 && used) *used = mqr__rd_offset(&r);
  return rc;
}

/* The decoder's fast leaves, as the encoder's: three arguments and a length
 * (mqr_avro_decode keeps used, arena and err), and the bounded root's without the STRS
 * loop. */
__attribute__((always_inline)) static inline ptrdiff_t dec_fast(const mqr_avro_codec_t *c, const uint8_t *in,
                                                                size_t len, void *value, const bool checked) {
  if (__builtin_expect(in == NULL, 0)) return -1;
  const uint8_t *end = dec_flat_fast(c->fast_ops, c->fast_last, value, in, in + len, checked);
  return __builtin_expect(end != NULL, 1) ? end - in : -1;
}

__attribute__((noinline)) static ptrdiff_t dec_fast_checked(const mqr_avro_codec_t *c, const uint8_t *in, size_t len,
                                                            void *value) {
  return dec_fast(c, in, len, value, true);
}

/* The bytes read, or -1 for the general decoder. */
ptrdiff_t mqr_avro_decode_fast(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, void *value) {
  if (__builtin_expect(c->fast != MQR__FAST_BOUNDED, 0))
    return c->fast == MQR__FAST_CHECKED ? dec_fast_checked(c, in, len, value) : -1;
  return dec_fast(c, in, len, value, false);
}
