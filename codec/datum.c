/* Binary <-> JSON for one datum, and skipping (validating) a binary datum. These walk
 * the schema graph; they are for tools, tests and the JSON encoding, not the hot path
 * (which is the compiled struct binding). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "binary.h"
#include "path.h"
#include "schema_int.h"

/* ---- buffers ------------------------------------------------------------------------ */

void mqr_avro_buf_free(mqr_avro_buf_t *b) {
  if (b->growable) mqr_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int mqr_avro_buf_reserve(mqr_avro_buf_t *b, size_t n) {
  if (b->cap - b->len >= n && b->data != NULL) return 0;
  if (!b->growable) return MQR_ENOSPC;
  if (n > SIZE_MAX / 2 - b->len) return MQR_ENOMEM;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap - b->len < n) ncap *= 2;
  uint8_t *p = mqr_realloc(b->data, ncap);
  if (p == NULL) return MQR_ENOMEM;
  b->data = p;
  b->cap = ncap;
  return 0;
}

static int out_put(mqr_avro_buf_t *o, const void *p, size_t n) {
  int rc = mqr_avro_buf_reserve(o, n);
  if (rc) return rc;
  memcpy(o->data + o->len, p, n);
  o->len += n;
  return 0;
}

static int out_str(mqr_avro_buf_t *o, const char *s) { return out_put(o, s, strlen(s)); }

/* ---- skip --------------------------------------------------------------------------- */

static int skip(mqr__rd_t *r, const mqr__avro_node_t *n, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH) return mqr__rd_fail(r, MQR_ELIMIT, "datum nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  int rc = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  size_t len = 0;
  switch (n->type) {
  case MQR_AVRO_NULL: return 0;
  case MQR_AVRO_BOOLEAN:
    if ((rc = mqr__need(r, 1)) != 0) return rc;
    if (*r->p > 1) return mqr__rd_fail(r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r->p);
    r->p++;
    return 0;
  case MQR_AVRO_INT: return mqr__get_int(r, &i32);
  case MQR_AVRO_LONG: return mqr__get_long(r, &i64);
  case MQR_AVRO_FLOAT:
  case MQR_AVRO_DOUBLE:
  case MQR_AVRO_FIXED:
    len = n->type == MQR_AVRO_FLOAT ? 4 : n->type == MQR_AVRO_DOUBLE ? 8 : n->n;
    if ((rc = mqr__need(r, len)) != 0) return rc;
    r->p += len;
    return 0;
  case MQR_AVRO_BYTES:
  case MQR_AVRO_STRING:
    if ((rc = mqr__get_len(r, &len)) != 0) return rc;
    r->p += len;
    return 0;
  case MQR_AVRO_ENUM:
    if ((rc = mqr__get_int(r, &i32)) != 0) return rc;
    if (i32 < 0 || (uint32_t)i32 >= n->n) return mqr__rd_fail(r, MQR_EBADDATA, "enum ordinal %d out of range", i32);
    return 0;
  case MQR_AVRO_RECORD:
    for (uint32_t i = 0; i < n->n && rc == 0; i++) rc = skip(r, n->fields[i].type, depth + 1);
    return rc;
  case MQR_AVRO_UNION:
    if ((rc = mqr__get_long(r, &i64)) != 0) return rc;
    if (i64 < 0 || (uint64_t)i64 >= n->n)
      return mqr__rd_fail(r, MQR_EBADDATA, "union branch %lld out of range", (long long)i64);
    return skip(r, n->branches[i64], depth + 1);
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP:
    for (;;) {
      uint64_t count;
      uint32_t min = n->items->min_size + (n->type == MQR_AVRO_MAP);
      if ((rc = mqr__get_count(r, min, &count)) != 0) return rc;
      if (count == 0) return 0;
      for (uint64_t k = 0; k < count; k++) {
        if (n->type == MQR_AVRO_MAP) {
          if ((rc = mqr__get_len(r, &len)) != 0) return rc;
          r->p += len;
        }
        if ((rc = skip(r, n->items, depth + 1)) != 0) return rc;
      }
    }
  }
  return mqr__rd_fail(r, MQR_EINVAL, "unknown schema node");
}

int mqr_avro_skip(const mqr_avro_schema_t *s, const uint8_t *in, size_t len, size_t *used, mqr_error_t *err) {
  mqr__rd_t r = mqr__rd_init(in, len, err);
  int rc = skip(&r, s->root, 0);
  if (rc == 0 && used) *used = mqr__rd_offset(&r);
  return rc;
}

/* ---- binary -> JSON ----------------------------------------------------------------- */

static int json_string(mqr_avro_buf_t *o, const uint8_t *p, size_t n, bool bytes) {
  int rc = mqr_avro_buf_reserve(o, n * 6 + 2);
  if (rc) return rc;
  uint8_t *w = o->data + o->len;
  static const char hex[] = "0123456789abcdef";
  *w++ = '"';
  for (size_t i = 0; i < n; i++) {
    uint8_t c = p[i];
    if (c == '"' || c == '\\') {
      *w++ = '\\';
      *w++ = c;
    } else if (c < 0x20 || (bytes && c >= 0x7f)) {
      *w++ = '\\';
      *w++ = 'u';
      *w++ = '0';
      *w++ = '0';
      *w++ = (uint8_t)hex[c >> 4];
      *w++ = (uint8_t)hex[c & 15];
    } else {
      *w++ = c;
    }
  }
  *w++ = '"';
  o->len = (size_t)(w - o->data);
  return 0;
}

/* Whether p[0..n) is well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
/* The shortest decimal text that reads back as the same value. */
static int json_double(mqr_avro_buf_t *o, double d, bool single) {
  char buf[40];
  if (isnan(d)) return out_str(o, "NaN");
  if (isinf(d)) return out_str(o, d > 0 ? "Infinity" : "-Infinity");
  for (int prec = single ? 6 : 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (single ? strtof(buf, NULL) == (float)d : strtod(buf, NULL) == d) break;
  }
  /* Keep it a float in JSON readers' eyes. */
  if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
  return out_str(o, buf);
}

static int to_json(mqr__rd_t *r, const mqr__avro_node_t *n, mqr_avro_buf_t *o, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH) return mqr__rd_fail(r, MQR_ELIMIT, "datum nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  int rc = 0;
  char num[32];
  int32_t i32 = 0;
  int64_t i64 = 0;
  size_t len = 0;
  switch (n->type) {
  case MQR_AVRO_NULL: return out_str(o, "null");
  case MQR_AVRO_BOOLEAN:
    if ((rc = mqr__need(r, 1)) != 0) return rc;
    if (*r->p > 1) return mqr__rd_fail(r, MQR_EBADDATA, "boolean byte %u is neither 0 nor 1", *r->p);
    return out_str(o, *r->p++ ? "true" : "false");
  case MQR_AVRO_INT:
    if ((rc = mqr__get_int(r, &i32)) != 0) return rc;
    snprintf(num, sizeof num, "%d", i32);
    return out_str(o, num);
  case MQR_AVRO_LONG:
    if ((rc = mqr__get_long(r, &i64)) != 0) return rc;
    snprintf(num, sizeof num, "%lld", (long long)i64);
    return out_str(o, num);
  case MQR_AVRO_FLOAT: {
    float f;
    if ((rc = mqr__need(r, 4)) != 0) return rc;
    memcpy(&f, r->p, 4);
    r->p += 4;
    return json_double(o, f, true);
  }
  case MQR_AVRO_DOUBLE: {
    double d;
    if ((rc = mqr__need(r, 8)) != 0) return rc;
    memcpy(&d, r->p, 8);
    r->p += 8;
    return json_double(o, d, false);
  }
  case MQR_AVRO_FIXED:
    if ((rc = mqr__need(r, n->n)) != 0) return rc;
    r->p += n->n;
    return json_string(o, r->p - n->n, n->n, true);
  case MQR_AVRO_BYTES:
  case MQR_AVRO_STRING:
    if ((rc = mqr__get_len(r, &len)) != 0) return rc;
    if (n->type == MQR_AVRO_STRING && !mqr__utf8_valid(r->p, len))
      return mqr__rd_fail(r, MQR_EBADDATA, "string of %zu bytes is not valid UTF-8", len);
    r->p += len;
    return json_string(o, r->p - len, len, n->type == MQR_AVRO_BYTES);
  case MQR_AVRO_ENUM:
    if ((rc = mqr__get_int(r, &i32)) != 0) return rc;
    if (i32 < 0 || (uint32_t)i32 >= n->n) return mqr__rd_fail(r, MQR_EBADDATA, "enum ordinal %d out of range", i32);
    return json_string(o, (const uint8_t *)n->symbols[i32].ptr, n->symbols[i32].len, false);
  case MQR_AVRO_RECORD:
    if ((rc = out_str(o, "{")) != 0) return rc;
    for (uint32_t i = 0; i < n->n; i++) {
      const mqr__avro_field_t *f = &n->fields[i];
      if (i && (rc = out_str(o, ",")) != 0) return rc;
      if ((rc = json_string(o, (const uint8_t *)f->name.ptr, f->name.len, false)) != 0) return rc;
      if ((rc = out_str(o, ":")) != 0) return rc;
      if ((rc = to_json(r, f->type, o, depth + 1)) != 0) return rc;
    }
    return out_str(o, "}");
  case MQR_AVRO_UNION: {
    if ((rc = mqr__get_long(r, &i64)) != 0) return rc;
    if (i64 < 0 || (uint64_t)i64 >= n->n)
      return mqr__rd_fail(r, MQR_EBADDATA, "union branch %lld out of range", (long long)i64);
    const mqr__avro_node_t *b = n->branches[i64];
    if (b->type == MQR_AVRO_NULL) return out_str(o, "null");
    mqr_str_t name = mqr__avro_branch_name(b);
    if ((rc = out_str(o, "{")) != 0) return rc;
    if ((rc = json_string(o, (const uint8_t *)name.ptr, name.len, false)) != 0) return rc;
    if ((rc = out_str(o, ":")) != 0) return rc;
    if ((rc = to_json(r, b, o, depth + 1)) != 0) return rc;
    return out_str(o, "}");
  }
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP: {
    bool map = n->type == MQR_AVRO_MAP;
    if ((rc = out_str(o, map ? "{" : "[")) != 0) return rc;
    bool first = true;
    for (;;) {
      uint64_t count;
      if ((rc = mqr__get_count(r, n->items->min_size + map, &count)) != 0) return rc;
      if (count == 0) break;
      for (uint64_t k = 0; k < count; k++) {
        if (!first && (rc = out_str(o, ",")) != 0) return rc;
        first = false;
        if (map) {
          if ((rc = mqr__get_len(r, &len)) != 0) return rc;
          if (!mqr__utf8_valid(r->p, len)) return mqr__rd_fail(r, MQR_EBADDATA, "map key is not valid UTF-8");
          r->p += len;
          if ((rc = json_string(o, r->p - len, len, false)) != 0) return rc;
          if ((rc = out_str(o, ":")) != 0) return rc;
        }
        if ((rc = to_json(r, n->items, o, depth + 1)) != 0) return rc;
      }
    }
    return out_str(o, map ? "}" : "]");
  }
  }
  return mqr__rd_fail(r, MQR_EINVAL, "unknown schema node");
}

int mqr_avro_binary_to_json(const mqr_avro_schema_t *s, const uint8_t *in, size_t len, size_t *used,
                            mqr_avro_buf_t *out, mqr_error_t *err) {
  mqr__rd_t r = mqr__rd_init(in, len, err);
  size_t mark = out->len;
  int rc = mqr_avro_buf_reserve(out, 1); /* never a NULL buffer below */
  if (rc == 0) rc = to_json(&r, s->root, out, 0);
  if (rc) {
    out->len = mark;
    if (rc == MQR_ENOSPC || rc == MQR_ENOMEM) mqr_error_set(err, rc, "%s writing JSON", mqr_strerror(rc));
    return rc;
  }
  if (used) *used = mqr__rd_offset(&r);
  return 0;
}

/* ---- JSON -> binary ----------------------------------------------------------------- */

typedef struct {
  mqr_avro_buf_t *o;
  mqr_error_t *err;
  mqr__path_t path;
  /* Encoding a schema default rather than an Avro-JSON datum. The Avro 1.11
   * specification: "Default values for union fields correspond to the first schema in
   * the union", given as that schema's plain JSON value, not wrapped as {"type": value};
   * everything inside a default is a default too. */
  bool dflt;
} enc_t;

__attribute__((format(printf, 3, 4))) static int mismatch(enc_t *e, const mqr__json_t *at, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mqr_error_set_at(e->err, MQR_EBADDATA, NULL, at->line, at->column, "%s: %s",
                          mqr__path_str(&e->path, "(datum)"), msg);
}

static int put_varint(enc_t *e, uint64_t z) {
  int rc = mqr_avro_buf_reserve(e->o, mqr__varint_size(z));
  if (rc) return rc;
  e->o->len = (size_t)(mqr__put_varint(e->o->data + e->o->len, z) - e->o->data);
  return 0;
}

/* Bytes and fixed in JSON: each character a code point 0-255, stored as one byte. With
 * dst NULL, only counts and checks. */
static int latin1(enc_t *e, const mqr__json_t *v, uint8_t *dst, size_t *n) {
  size_t k = 0;
  const uint8_t *p = (const uint8_t *)v->str.ptr;
  for (size_t i = 0; i < v->str.len; i++) {
    uint8_t c = p[i];
    if (c < 0x80) {
      if (dst) dst[k] = c;
      k++;
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < v->str.len) {
      if (dst) dst[k] = (uint8_t)((c & 0x03) << 6 | (p[i + 1] & 0x3F));
      i++, k++;
    } else {
      return mismatch(e, v, "bytes must be a string of code points 0-255");
    }
  }
  *n = k;
  return 0;
}

static int encode(enc_t *e, const mqr__avro_node_t *n, const mqr__json_t *v, int depth);

static int encode_number(enc_t *e, const mqr__avro_node_t *n, const mqr__json_t *v) {
  if (v->kind != MQR__JSON_NUMBER && !(v->kind == MQR__JSON_STRING && n->type >= MQR_AVRO_FLOAT))
    return mismatch(e, v, "expected a number, found %s", mqr__json_kind_name(v->kind));
  int rc;
  switch (n->type) {
  case MQR_AVRO_INT:
    if (!v->is_int || v->i < INT32_MIN || v->i > INT32_MAX)
      return mismatch(e, v, "%.*s is not an int", (int)v->str.len, v->str.ptr);
    return put_varint(e, mqr__zigzag32((int32_t)v->i));
  case MQR_AVRO_LONG:
    if (!v->is_int) return mismatch(e, v, "%.*s is not a long", (int)v->str.len, v->str.ptr);
    return put_varint(e, mqr__zigzag64(v->i));
  default: {
    double d = v->d;
    if (v->kind == MQR__JSON_STRING) { /* "NaN", "Infinity", "-Infinity" as strings */
      if (mqr__json_is_str(v, "NaN"))
        d = NAN;
      else if (mqr__json_is_str(v, "Infinity"))
        d = INFINITY;
      else if (mqr__json_is_str(v, "-Infinity"))
        d = -INFINITY;
      else
        return mismatch(e, v, "expected a number, found a string");
    } else if (v->is_int) {
      d = (double)v->i; /* exact for the integers a double holds */
    }
    if ((rc = mqr_avro_buf_reserve(e->o, n->type == MQR_AVRO_FLOAT ? 4 : 8)) != 0) return rc;
    if (n->type == MQR_AVRO_FLOAT) {
      float f = (float)d;
      memcpy(e->o->data + e->o->len, &f, 4);
      e->o->len += 4;
    } else {
      memcpy(e->o->data + e->o->len, &d, 8);
      e->o->len += 8;
    }
    return 0;
  }
  }
}

static int encode_union(enc_t *e, const mqr__avro_node_t *n, const mqr__json_t *v, int depth) {
  if (e->dflt) {
    if (n->n == 0) return mismatch(e, v, "an empty union has no values");
    int rc = put_varint(e, 0);
    return rc ? rc : encode(e, n->branches[0], v, depth + 1);
  }
  if (v->kind == MQR__JSON_NULL) {
    for (uint32_t i = 0; i < n->n; i++)
      if (n->branches[i]->type == MQR_AVRO_NULL) return put_varint(e, mqr__zigzag64(i));
    return mismatch(e, v, "null is not a branch of this union");
  }
  if (v->kind != MQR__JSON_OBJECT || v->n != 1)
    return mismatch(e, v, "a union value must be null or an object of one member {\"type\": value}");
  mqr_str_t key = v->members[0].key;
  for (uint32_t i = 0; i < n->n; i++) {
    const mqr__avro_node_t *b = n->branches[i];
    mqr_str_t name = mqr__avro_branch_name(b);
    /* Named types also answer to their short name when it is unambiguous. */
    bool match = mqr_str_eq(name, key);
    if (!match && b->fullname.len > key.len && b->fullname.ptr[b->fullname.len - key.len - 1] == '.' &&
        memcmp(b->fullname.ptr + b->fullname.len - key.len, key.ptr, key.len) == 0)
      match = true;
    if (match) {
      int rc = put_varint(e, mqr__zigzag64(i));
      if (rc) return rc;
      size_t mark = mqr__path_push(&e->path, "<%.*s>", (int)key.len, key.ptr);
      rc = encode(e, b, v->members[0].value, depth + 1);
      if (rc == 0) mqr__path_pop(&e->path, mark);
      return rc;
    }
  }
  return mismatch(e, v, "'%.*s' is not a branch of this union", (int)key.len, key.ptr);
}

static int encode(enc_t *e, const mqr__avro_node_t *n, const mqr__json_t *v, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH) return mismatch(e, v, "datum nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  int rc = 0;
  switch (n->type) {
  case MQR_AVRO_NULL:
    if (v->kind != MQR__JSON_NULL) return mismatch(e, v, "expected null, found %s", mqr__json_kind_name(v->kind));
    return 0;
  case MQR_AVRO_BOOLEAN:
    if (v->kind != MQR__JSON_BOOL)
      return mismatch(e, v, "expected true or false, found %s", mqr__json_kind_name(v->kind));
    if ((rc = mqr_avro_buf_reserve(e->o, 1)) != 0) return rc;
    e->o->data[e->o->len++] = v->boolean;
    return 0;
  case MQR_AVRO_INT:
  case MQR_AVRO_LONG:
  case MQR_AVRO_FLOAT:
  case MQR_AVRO_DOUBLE: return encode_number(e, n, v);
  case MQR_AVRO_STRING:
    if (v->kind != MQR__JSON_STRING) return mismatch(e, v, "expected a string, found %s", mqr__json_kind_name(v->kind));
    if ((rc = put_varint(e, mqr__zigzag64((int64_t)v->str.len))) != 0) return rc;
    return out_put(e->o, v->str.ptr, v->str.len);
  case MQR_AVRO_BYTES:
  case MQR_AVRO_FIXED: {
    if (v->kind != MQR__JSON_STRING) return mismatch(e, v, "expected a string, found %s", mqr__json_kind_name(v->kind));
    /* Counted first, so that exactly what is written is reserved. */
    size_t nb = 0;
    if ((rc = latin1(e, v, NULL, &nb)) != 0) return rc;
    if (n->type == MQR_AVRO_FIXED && nb != n->n) return mismatch(e, v, "fixed of size %u given %zu bytes", n->n, nb);
    uint64_t z = mqr__zigzag64((int64_t)nb);
    if ((rc = mqr_avro_buf_reserve(e->o, nb + (n->type == MQR_AVRO_BYTES ? mqr__varint_size(z) : 0))) != 0) return rc;
    uint8_t *p = e->o->data + e->o->len;
    if (n->type == MQR_AVRO_BYTES) p = mqr__put_varint(p, z);
    latin1(e, v, p, &nb);
    e->o->len = (size_t)(p - e->o->data) + nb;
    return 0;
  }
  case MQR_AVRO_ENUM: {
    if (v->kind != MQR__JSON_STRING)
      return mismatch(e, v, "expected an enum symbol, found %s", mqr__json_kind_name(v->kind));
    int32_t ord = mqr__avro_enum_ordinal(n, v->str.ptr, v->str.len);
    if (ord < 0)
      return mismatch(e, v, "'%.*s' is not a symbol of %.*s", (int)v->str.len, v->str.ptr, (int)n->fullname.len,
                      n->fullname.ptr);
    return put_varint(e, mqr__zigzag32(ord));
  }
  case MQR_AVRO_RECORD: {
    if (v->kind != MQR__JSON_OBJECT)
      return mismatch(e, v, "expected an object, found %s", mqr__json_kind_name(v->kind));
    uint32_t matched = 0;
    for (uint32_t i = 0; i < n->n; i++) {
      const mqr__avro_field_t *f = &n->fields[i];
      const mqr__json_t *fv = mqr__json_get_str(v, f->name);
      bool was = e->dflt;
      if (fv)
        matched++;
      else if ((fv = f->def) == NULL)
        return mismatch(e, v, "field '%.*s' is missing and has no default", (int)f->name.len, f->name.ptr);
      else
        e->dflt = true; /* the field's own default, in default form */
      size_t mark = mqr__path_push(&e->path, "%.*s", (int)f->name.len, f->name.ptr);
      rc = encode(e, f->type, fv, depth + 1);
      e->dflt = was;
      if (rc) return rc;
      mqr__path_pop(&e->path, mark);
    }
    if (matched != v->n) {
      for (uint32_t k = 0; k < v->n; k++) {
        bool known = false;
        for (uint32_t i = 0; i < n->n && !known; i++) known = mqr_str_eq(v->members[k].key, n->fields[i].name);
        if (!known)
          return mismatch(e, v->members[k].value, "'%.*s' is not a field of %.*s", (int)v->members[k].key.len,
                          v->members[k].key.ptr, (int)n->fullname.len, n->fullname.ptr);
      }
      /* Every key is a field, so one is given twice: name it. */
      for (uint32_t i = 0; i < n->n; i++) {
        const mqr__json_t *first = NULL;
        for (uint32_t k = 0; k < v->n; k++) {
          if (!mqr_str_eq(v->members[k].key, n->fields[i].name)) continue;
          if (first)
            return mismatch(e, v->members[k].value, "field '%.*s' is given twice", (int)n->fields[i].name.len,
                            n->fields[i].name.ptr);
          first = v->members[k].value;
        }
      }
    }
    return 0;
  }
  case MQR_AVRO_UNION: return encode_union(e, n, v, depth);
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP: {
    bool map = n->type == MQR_AVRO_MAP;
    if (v->kind != (map ? MQR__JSON_OBJECT : MQR__JSON_ARRAY))
      return mismatch(e, v, "expected %s, found %s", map ? "an object" : "an array", mqr__json_kind_name(v->kind));
    if (v->n) {
      if ((rc = put_varint(e, mqr__zigzag64(v->n))) != 0) return rc;
      for (uint32_t i = 0; i < v->n; i++) {
        size_t mark;
        const mqr__json_t *item;
        if (map) {
          mqr_str_t k = v->members[i].key;
          if ((rc = put_varint(e, mqr__zigzag64((int64_t)k.len))) != 0) return rc;
          if ((rc = out_put(e->o, k.ptr, k.len)) != 0) return rc;
          mark = mqr__path_push(&e->path, "[\"%.*s\"]", (int)k.len, k.ptr);
          item = v->members[i].value;
        } else {
          mark = mqr__path_push(&e->path, "[%u]", i);
          item = v->items[i];
        }
        if ((rc = encode(e, n->items, item, depth + 1)) != 0) return rc;
        mqr__path_pop(&e->path, mark);
      }
    }
    return put_varint(e, 0);
  }
  }
  return mismatch(e, v, "unknown schema node");
}

int mqr__avro_encode_default(const mqr__avro_node_t *n, const mqr__json_t *v, mqr_avro_buf_t *out, mqr_error_t *err) {
  enc_t e = {out, err, {{0}, 0}, true};
  int rc = mqr_avro_buf_reserve(out, 1); /* never a NULL buffer below */
  return rc ? rc : encode(&e, n, v, 0);
}

int mqr__avro_skip_node(mqr__rd_t *r, const mqr__avro_node_t *n, int depth) { return skip(r, n, depth); }

int mqr_avro_json_to_binary(const mqr_avro_schema_t *s, const char *json, size_t len, mqr_avro_buf_t *out,
                            mqr_error_t *err) {
  mqr__arena_t arena;
  mqr__arena_init(&arena);
  mqr__json_t *doc;
  size_t mark = out->len;
  int rc = mqr__json_parse(&arena, json, len, false, &doc, err);
  if (rc == 0 && out->growable) rc = mqr_avro_buf_reserve(out, 1); /* never a NULL buffer below */
  if (rc == 0) {
    enc_t e = {out, err, {{0}, 0}, false};
    rc = encode(&e, s->root, doc, 0);
    if (rc == MQR_ENOSPC || rc == MQR_ENOMEM) mqr_error_set(err, rc, "%s writing the binary datum", mqr_strerror(rc));
  }
  mqr__arena_free(&arena);
  if (rc) out->len = mark;
  return rc;
}
