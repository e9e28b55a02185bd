#include "json.h"

#include "binary.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  mqr__arena_t *arena;
  const char *p, *end, *line_start;
  uint32_t line;
  mqr_error_t *err;
  bool unique; /* a repeated object key is an error */
} parser_t;

static uint32_t column_of(const parser_t *ps, const char *at) { return (uint32_t)(at - ps->line_start) + 1; }

static int fail(parser_t *ps, const char *at, const char *what) {
  if (at >= ps->end)
    return mqr_error_set_at(ps->err, MQR_ESYNTAX, NULL, ps->line, column_of(ps, at), "JSON: %s at end of input", what);
  return mqr_error_set_at(ps->err, MQR_ESYNTAX, NULL, ps->line, column_of(ps, at), "JSON: %s", what);
}

static void skip_ws(parser_t *ps) {
  while (ps->p < ps->end) {
    char c = *ps->p;
    if (c == '\n') {
      ps->line++;
      ps->line_start = ++ps->p;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ps->p++;
    } else {
      break;
    }
  }
}

static int nomem(parser_t *ps) { return mqr_error_set(ps->err, MQR_ENOMEM, "out of memory parsing JSON"); }

static mqr__json_t *node(parser_t *ps, int kind, const char *at) {
  mqr__json_t *v = mqr__arena_alloc(ps->arena, sizeof *v);
  if (v) {
    v->kind = (uint8_t)kind;
    v->line = ps->line;
    v->column = column_of(ps, at);
  }
  return v;
}

static int hex4(const char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (uint32_t)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Parses a string at ps->p (on the opening quote) into *out. Unescaped text is never
 * longer than the escaped text, so one allocation of the raw length suffices. */
static int parse_string(parser_t *ps, mqr_str_t *out) {
  const char *start = ++ps->p, *q = start;
  bool plain = true, ascii = true;
  while (q < ps->end && *q != '"') {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20) return fail(ps, q, "control character in a string");
    if (c >= 0x80) ascii = false;
    if (c == '\\') {
      plain = false;
      if (++q >= ps->end) break;
    }
    q++;
  }
  if (q >= ps->end) return fail(ps, ps->end, "unterminated string");
  if (!ascii && !mqr__utf8_valid((const uint8_t *)start, (size_t)(q - start)))
    return fail(ps, start - 1, "invalid UTF-8 in a string");
  size_t raw = (size_t)(q - start);
  char *buf = mqr__arena_alloc(ps->arena, raw + 1);
  if (buf == NULL) return nomem(ps);
  if (plain) {
    memcpy(buf, start, raw);
    *out = mqr_str_n(buf, raw);
    ps->p = q + 1;
    return 0;
  }
  size_t n = 0;
  for (const char *s = start; s < q;) {
    if (*s != '\\') {
      buf[n++] = *s++;
      continue;
    }
    char e = s[1];
    const char *esc = s;
    s += 2;
    switch (e) {
    case '"': buf[n++] = '"'; break;
    case '\\': buf[n++] = '\\'; break;
    case '/': buf[n++] = '/'; break;
    case 'b': buf[n++] = '\b'; break;
    case 'f': buf[n++] = '\f'; break;
    case 'n': buf[n++] = '\n'; break;
    case 'r': buf[n++] = '\r'; break;
    case 't': buf[n++] = '\t'; break;
    case 'u': {
      uint32_t cp, lo;
      if (q - s < 4 || hex4(s, &cp) != 0) return fail(ps, esc, "bad \\u escape");
      s += 4;
      if (cp >= 0xD800 && cp < 0xDC00) {
        if (q - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
          return fail(ps, esc, "unpaired surrogate in a \\u escape");
        s += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return fail(ps, esc, "unpaired surrogate in a \\u escape");
      }
      n += put_utf8(buf + n, cp);
      break;
    }
    default: return fail(ps, esc, "bad escape in a string");
    }
  }
  buf[n] = '\0';
  *out = mqr_str_n(buf, n);
  ps->p = q + 1;
  return 0;
}

static bool literal(parser_t *ps, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0) return false;
  ps->p += n;
  return true;
}

static int parse_number(parser_t *ps, mqr__json_t *v) {
  const char *s = ps->p, *q = s;
  if (q < ps->end && *q == '-') q++;
  if (ps->end - q >= 8 && memcmp(q, "Infinity", 8) == 0) {
    ps->p = q + 8;
    v->d = *s == '-' ? -INFINITY : INFINITY;
    v->str = mqr_str_n(s, (size_t)(ps->p - s));
    return 0;
  }
  if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, s, "bad number");
  if (*q == '0' && q + 1 < ps->end && q[1] >= '0' && q[1] <= '9') return fail(ps, s, "number with a leading zero");
  while (q < ps->end && *q >= '0' && *q <= '9') q++;
  bool integer = true;
  if (q < ps->end && *q == '.') {
    integer = false;
    if (++q >= ps->end || *q < '0' || *q > '9') return fail(ps, s, "bad number");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < ps->end && (*q == 'e' || *q == 'E')) {
    integer = false;
    q++;
    if (q < ps->end && (*q == '+' || *q == '-')) q++;
    if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, s, "bad number");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  size_t n = (size_t)(q - s);
  char tmp[400];
  if (n >= sizeof tmp) return fail(ps, s, "number too long");
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  v->str = mqr_str_n(s, n);
  v->d = strtod(tmp, NULL);
  if (integer) {
    /* Exact int64 parse; a value outside int64 is a number but not an int. */
    bool neg = *s == '-';
    uint64_t acc = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool fits = true;
    for (const char *d = s + neg; d < q; d++) {
      uint64_t dig = (uint64_t)(*d - '0');
      if (acc > (lim - dig) / 10) {
        fits = false;
        break;
      }
      acc = acc * 10 + dig;
    }
    if (fits) {
      v->is_int = true;
      v->i = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    }
  }
  ps->p = q;
  return 0;
}

static int parse_value(parser_t *ps, mqr__json_t **out, int depth);

static int grow(void **buf, uint32_t *cap, uint32_t n, size_t size) {
  if (n < *cap) return 0;
  uint32_t ncap = *cap ? *cap * 2 : 8;
  void *p = mqr_realloc(*buf, (size_t)ncap * size);
  if (p == NULL) return MQR_ENOMEM;
  *buf = p;
  *cap = ncap;
  return 0;
}

static int parse_array(parser_t *ps, mqr__json_t *v, int depth) {
  mqr__json_t **tmp = NULL;
  uint32_t n = 0, cap = 0;
  int rc = 0;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == ']') {
    ps->p++;
    goto done;
  }
  for (;;) {
    mqr__json_t *item;
    if ((rc = parse_value(ps, &item, depth + 1)) != 0) goto out;
    if (grow((void **)&tmp, &cap, n, sizeof *tmp) != 0) {
      rc = nomem(ps);
      goto out;
    }
    tmp[n++] = item;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == ']') {
      ps->p++;
      break;
    }
    rc = fail(ps, ps->p, "expected ',' or ']' in an array");
    goto out;
  }
done:
  v->n = n;
  if (n) {
    v->items = mqr__arena_alloc(ps->arena, n * sizeof *tmp);
    if (v->items == NULL) {
      rc = nomem(ps);
      goto out;
    }
    memcpy(v->items, tmp, n * sizeof *tmp);
  }
out:
  mqr_free(tmp);
  return rc;
}

static int cmp_member(const void *a, const void *b) {
  const mqr__json_member_t *x = *(const mqr__json_member_t *const *)a, *y = *(const mqr__json_member_t *const *)b;
  size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
  int c = n ? memcmp(x->key.ptr, y->key.ptr, n) : 0;
  if (c) return c;
  if (x->key.len != y->key.len) return x->key.len < y->key.len ? -1 : 1;
  return x < y ? -1 : x > y; /* the earlier member first */
}

/* A repeated key among m[0..n), reported at the second one's value. */
static int check_unique(parser_t *ps, mqr__json_member_t *m, uint32_t n) {
  const mqr__json_member_t **order = mqr_malloc(n * sizeof *order);
  if (order == NULL) return mqr_error_set(ps->err, MQR_ENOMEM, "out of memory parsing JSON");
  for (uint32_t i = 0; i < n; i++) order[i] = &m[i];
  qsort(order, n, sizeof *order, cmp_member);
  int rc = 0;
  for (uint32_t i = 1; i < n && rc == 0; i++)
    if (mqr_str_eq(order[i - 1]->key, order[i]->key))
      rc = mqr_error_set_at(ps->err, MQR_ESYNTAX, NULL, order[i]->value->line, order[i]->value->column,
                            "JSON: repeated key \"%.*s\" in an object", (int)order[i]->key.len, order[i]->key.ptr);
  mqr_free(order);
  return rc;
}

static int parse_object(parser_t *ps, mqr__json_t *v, int depth) {
  mqr__json_member_t *tmp = NULL;
  uint32_t n = 0, cap = 0;
  int rc = 0;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == '}') {
    ps->p++;
    goto done;
  }
  for (;;) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') {
      rc = fail(ps, ps->p, "expected a string key in an object");
      goto out;
    }
    const char *key_at = ps->p;
    uint32_t key_line = ps->line;
    mqr_str_t key;
    if ((rc = parse_string(ps, &key)) != 0) goto out;
    /* Repeated keys: checked here for small objects, by sorting for big ones (below),
     * so that a hostile object of many keys costs n log n, not n squared. */
    for (uint32_t i = 0; ps->unique && n <= 16 && i < n; i++)
      if (mqr_str_eq(tmp[i].key, key)) {
        rc = mqr_error_set_at(ps->err, MQR_ESYNTAX, NULL, key_line, column_of(ps, key_at),
                              "JSON: repeated key \"%.*s\" in an object", (int)key.len, key.ptr);
        goto out;
      }
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
      rc = fail(ps, ps->p, "expected ':' after an object key");
      goto out;
    }
    ps->p++;
    mqr__json_t *val;
    if ((rc = parse_value(ps, &val, depth + 1)) != 0) goto out;
    if (grow((void **)&tmp, &cap, n, sizeof *tmp) != 0) {
      rc = nomem(ps);
      goto out;
    }
    tmp[n].key = key;
    tmp[n++].value = val;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == '}') {
      ps->p++;
      break;
    }
    rc = fail(ps, ps->p, "expected ',' or '}' in an object");
    goto out;
  }
done:
  if (ps->unique && n > 17 && (rc = check_unique(ps, tmp, n)) != 0) goto out;
  v->n = n;
  if (n) {
    v->members = mqr__arena_alloc(ps->arena, n * sizeof *tmp);
    if (v->members == NULL) {
      rc = nomem(ps);
      goto out;
    }
    memcpy(v->members, tmp, n * sizeof *tmp);
  }
out:
  mqr_free(tmp);
  return rc;
}

static int parse_value(parser_t *ps, mqr__json_t **out, int depth) {
  skip_ws(ps);
  if (depth > MQR__JSON_DEPTH)
    return mqr_error_set_at(ps->err, MQR_ELIMIT, NULL, ps->line, column_of(ps, ps->p), "JSON: nesting deeper than %d",
                            MQR__JSON_DEPTH);
  if (ps->p >= ps->end) return fail(ps, ps->p, "expected a value");
  const char *at = ps->p;
  char c = *at;
  mqr__json_t *v;
  int rc = 0;
  switch (c) {
  case '{':
    if ((v = node(ps, MQR__JSON_OBJECT, at)) == NULL) return nomem(ps);
    rc = parse_object(ps, v, depth);
    break;
  case '[':
    if ((v = node(ps, MQR__JSON_ARRAY, at)) == NULL) return nomem(ps);
    rc = parse_array(ps, v, depth);
    break;
  case '"':
    if ((v = node(ps, MQR__JSON_STRING, at)) == NULL) return nomem(ps);
    rc = parse_string(ps, &v->str);
    break;
  default:
    if (literal(ps, "null")) {
      if ((v = node(ps, MQR__JSON_NULL, at)) == NULL) return nomem(ps);
    } else if (literal(ps, "true") || literal(ps, "false")) {
      if ((v = node(ps, MQR__JSON_BOOL, at)) == NULL) return nomem(ps);
      v->boolean = c == 't';
    } else if (literal(ps, "NaN")) {
      if ((v = node(ps, MQR__JSON_NUMBER, at)) == NULL) return nomem(ps);
      v->d = NAN;
      v->str = mqr_str_n(at, 3);
    } else if (c == '-' || c == 'I' || (c >= '0' && c <= '9')) {
      if ((v = node(ps, MQR__JSON_NUMBER, at)) == NULL) return nomem(ps);
      if (c == 'I') {
        if (!literal(ps, "Infinity")) return fail(ps, at, "unexpected character");
        v->d = INFINITY;
        v->str = mqr_str_n(at, 8);
      } else {
        rc = parse_number(ps, v);
      }
    } else {
      return fail(ps, at, "unexpected character");
    }
  }
  if (rc == 0) *out = v;
  return rc;
}

int mqr__json_parse(mqr__arena_t *arena, const char *text, size_t len, bool unique_keys, mqr__json_t **out,
                    mqr_error_t *err) {
  parser_t ps = {arena, text, text + len, text, 1, err, unique_keys};
  mqr__json_t *v;
  int rc = parse_value(&ps, &v, 0);
  if (rc) return rc;
  skip_ws(&ps);
  if (ps.p != ps.end) return fail(&ps, ps.p, "text after the JSON value");
  *out = v;
  return 0;
}

const mqr__json_t *mqr__json_get_str(const mqr__json_t *obj, mqr_str_t key) {
  if (obj == NULL || obj->kind != MQR__JSON_OBJECT) return NULL;
  for (uint32_t i = 0; i < obj->n; i++)
    if (mqr_str_eq(obj->members[i].key, key)) return obj->members[i].value;
  return NULL;
}

const char *mqr__json_kind_name(int kind) {
  static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
  return kind >= 0 && kind <= MQR__JSON_OBJECT ? names[kind] : "?";
}
