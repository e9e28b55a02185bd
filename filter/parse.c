/* A selector's text into a tree of nodes (filter_int.h): a lexer and a recursive-descent
 * parser of the JMS selector grammar, with the checks Artemis makes while it parses (NULL
 * compared with =, a string or a boolean compared with <, IN on something not a
 * property, a condition where a value is wanted and the reverse). Every error names its
 * column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter_int.h"

/* ---- tokens ------------------------------------------------------------------------------ */

typedef enum {
  T_END,
  T_IDENT,
  T_STRING,
  T_INT,   /* u: the magnitude; is_long: an L suffix */
  T_FLOAT, /* d */
  T_NOT,
  T_AND,
  T_OR,
  T_BETWEEN,
  T_LIKE,
  T_ESCAPE,
  T_IN,
  T_IS,
  T_NULL,
  T_TRUE,
  T_FALSE,
  T_EQ,
  T_NE,
  T_LT,
  T_LE,
  T_GT,
  T_GE,
  T_PLUS,
  T_MINUS,
  T_STAR,
  T_SLASH,
  T_PERCENT,
  T_LPAREN,
  T_RPAREN,
  T_COMMA
} tok_t;

typedef struct {
  mqr_filter_t *f;
  const char *s;
  size_t len, pos;
  mqr_filter_resolve_fn resolve;
  void *ctx;
  int32_t next_slot;
  mqr_error_t *err;
  int rc;
  uint32_t nest; /* parentheses and unary operators open: the parser's recursion */
  /* the current token */
  tok_t t;
  size_t start; /* its offset */
  mqr_str_t text;
  uint64_t u;
  bool is_long;
  double d;
  uint32_t str_off, str_len; /* T_STRING: in f->strings */
} px_t;

static int fail(px_t *p, size_t at, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(px_t *p, size_t at, int code, const char *fmt, ...) {
  if (p->rc) return p->rc;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  p->rc = mqr_error_set(p->err, code, "%s (column %zu)", msg, at + 1);
  if (p->err) {
    p->err->line = 1;
    p->err->column = (uint32_t)(at + 1);
  }
  return p->rc;
}

static bool is_digit(char c) { return (unsigned)(c - '0') < 10u; }
static bool ident_start(unsigned char c) {
  return c == '_' || c == '$' || (unsigned)((c | 32) - 'a') < 26u || c >= 0x80;
}
static bool ident_part(unsigned char c) { return ident_start(c) || is_digit((char)c); }

static bool keyword(mqr_str_t w, const char *k) {
  if (w.len != strlen(k)) return false;
  for (size_t i = 0; i < w.len; i++)
    if ((w.ptr[i] | 32) != (k[i] | 32)) return false;
  return true;
}

/* The string literal at pos (after its quote), unescaped into f->strings. */
static void lex_string(px_t *p) {
  mqr_filter_t *f = p->f;
  size_t at = p->pos + 1;
  uint32_t off = (uint32_t)f->n_strings;
  for (;;) {
    if (at >= p->len) {
      fail(p, p->start, MQR_ESYNTAX, "a string that does not end");
      return;
    }
    char c = p->s[at++];
    if (c == '\'') {
      if (at < p->len && p->s[at] == '\'')
        at++; /* '' is a quote */
      else
        break;
    }
    if (!mqr__grow_size((void **)&f->strings, &f->cap_strings, f->n_strings + 1, 1)) {
      fail(p, p->start, MQR_ENOMEM, "out of memory");
      return;
    }
    f->strings[f->n_strings++] = c;
  }
  p->pos = at;
  p->t = T_STRING;
  p->str_off = off;
  p->str_len = (uint32_t)f->n_strings - off;
}

/* The text [at, end) read as a double: a T_FLOAT token that ends at next. */
static void lex_double(px_t *p, size_t at, size_t end, size_t next) {
  char buf[128];
  if (end - at >= sizeof buf) {
    fail(p, p->start, MQR_ESYNTAX, "a number too long");
    return;
  }
  memcpy(buf, p->s + at, end - at);
  buf[end - at] = 0;
  p->d = strtod(buf, NULL);
  p->t = T_FLOAT;
  p->pos = next;
}

static void lex_number(px_t *p) {
  const char *s = p->s;
  size_t at = p->pos, n = p->len;
  /* Hex and octal: exact numbers only. */
  if (s[at] == '0' && at + 1 < n && (s[at + 1] | 32) == 'x') {
    uint64_t v = 0;
    size_t digits = 0;
    for (at += 2; at < n; at++, digits++) {
      char c = s[at];
      int d = is_digit(c) ? c - '0' : (unsigned)((c | 32) - 'a') < 6u ? (c | 32) - 'a' + 10 : -1;
      if (d < 0) break;
      if (v >> 60) {
        fail(p, p->start, MQR_ESYNTAX, "a number too large");
        return;
      }
      v = v * 16 + (uint64_t)d;
    }
    if (digits == 0) {
      fail(p, p->start, MQR_ESYNTAX, "a hexadecimal number without digits");
      return;
    }
    p->is_long = at < n && (s[at] | 32) == 'l';
    if (p->is_long) at++;
    p->t = T_INT;
    p->u = v;
    p->pos = at;
    return;
  }
  size_t end = at;
  bool fp = false;
  while (end < n && is_digit(s[end])) end++;
  if (end < n && s[end] == '.') {
    fp = true;
    end++;
    while (end < n && is_digit(s[end])) end++;
  }
  if (end < n && (s[end] | 32) == 'e') {
    size_t e = end + 1;
    if (e < n && (s[e] == '+' || s[e] == '-')) e++;
    if (e < n && is_digit(s[e])) {
      fp = true;
      end = e;
      while (end < n && is_digit(s[end])) end++;
    }
  }
  if (fp || (end < n && ((s[end] | 32) == 'd' || (s[end] | 32) == 'f'))) {
    bool suffix = end < n && ((s[end] | 32) == 'd' || (s[end] | 32) == 'f');
    lex_double(p, at, end, end + suffix);
    return;
  }
  /* Decimal, or octal with a leading 0. */
  bool octal = s[at] == '0' && end - at > 1;
  uint64_t v = 0;
  for (size_t i = at; i < end; i++) {
    unsigned d = (unsigned)(s[i] - '0');
    if (octal && d > 7) {
      fail(p, i, MQR_ESYNTAX, "'%c' in an octal number", s[i]);
      return;
    }
    uint64_t base = octal ? 8 : 10;
    if (v > (UINT64_MAX - d) / base || (!octal && v * base + d > (uint64_t)INT64_MAX + 1)) {
      if (octal) {
        fail(p, p->start, MQR_ESYNTAX, "a number too large");
        return;
      }
      lex_double(p, at, end, end); /* past the long range, as Artemis reads it: a double */
      return;
    }
    v = v * base + d;
  }
  p->is_long = end < n && (s[end] | 32) == 'l';
  if (p->is_long) end++;
  p->t = T_INT;
  p->u = v;
  p->pos = end;
}

/* White space (a form feed too) and comments, from "--" to the end of the line and from
 * slash-star to star-slash, as Artemis's grammar skips them. */
static void skip_space(px_t *p) {
  const char *s = p->s;
  for (;;) {
    while (p->pos < p->len &&
           (s[p->pos] == ' ' || s[p->pos] == '\t' || s[p->pos] == '\n' || s[p->pos] == '\r' || s[p->pos] == '\f'))
      p->pos++;
    if (p->pos + 1 < p->len && s[p->pos] == '-' && s[p->pos + 1] == '-') {
      while (p->pos < p->len && s[p->pos] != '\n' && s[p->pos] != '\r') p->pos++;
      continue;
    }
    if (p->pos + 1 < p->len && s[p->pos] == '/' && s[p->pos + 1] == '*') {
      size_t at = p->pos;
      const char *end = NULL;
      for (size_t i = p->pos + 2; i + 1 < p->len; i++)
        if (s[i] == '*' && s[i + 1] == '/') {
          end = s + i;
          break;
        }
      if (end == NULL) {
        fail(p, at, MQR_ESYNTAX, "a comment that does not end");
        p->pos = p->len;
        return;
      }
      p->pos = (size_t)(end - s) + 2;
      continue;
    }
    return;
  }
}

static void next(px_t *p) {
  const char *s = p->s;
  skip_space(p);
  p->start = p->pos;
  if (p->pos >= p->len) {
    p->t = T_END;
    return;
  }
  unsigned char c = (unsigned char)s[p->pos];
  if (ident_start(c)) {
    size_t at = p->pos + 1;
    while (at < p->len && (ident_part((unsigned char)s[at]) || (p->f->hyphenated && s[at] == '-' && at + 1 < p->len &&
                                                                ident_part((unsigned char)s[at + 1]))))
      at++;
    p->text = mqr_str_n(s + p->pos, at - p->pos);
    p->pos = at;
    static const struct {
      const char *k;
      tok_t t;
    } kw[] = {{"NOT", T_NOT},   {"AND", T_AND},       {"OR", T_OR},      {"BETWEEN", T_BETWEEN},
              {"LIKE", T_LIKE}, {"ESCAPE", T_ESCAPE}, {"IN", T_IN},      {"IS", T_IS},
              {"NULL", T_NULL}, {"TRUE", T_TRUE},     {"FALSE", T_FALSE}};
    p->t = T_IDENT;
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
      if (keyword(p->text, kw[i].k)) p->t = kw[i].t;
    return;
  }
  if (is_digit((char)c) || (c == '.' && p->pos + 1 < p->len && is_digit(s[p->pos + 1]))) return lex_number(p);
  if (c == '\'') return lex_string(p);
  char d = p->pos + 1 < p->len ? s[p->pos + 1] : 0;
  p->pos++;
  switch (c) {
  case '=': p->t = T_EQ; return;
  case '<':
    if (d == '>' || d == '=') p->pos++;
    p->t = d == '>' ? T_NE : d == '=' ? T_LE : T_LT;
    return;
  case '>':
    if (d == '=') p->pos++;
    p->t = d == '=' ? T_GE : T_GT;
    return;
  case '+': p->t = T_PLUS; return;
  case '-': p->t = T_MINUS; return;
  case '*': p->t = T_STAR; return;
  case '/': p->t = T_SLASH; return;
  case '%': p->t = T_PERCENT; return;
  case '(': p->t = T_LPAREN; return;
  case ')': p->t = T_RPAREN; return;
  case ',': p->t = T_COMMA; return;
  default: fail(p, p->start, MQR_ESYNTAX, "unexpected '%c'", c); p->t = T_END;
  }
}

/* ---- nodes --------------------------------------------------------------------------------- */

static int32_t node(px_t *p, mqr__fkind_t kind, int32_t a, int32_t b, int32_t c, size_t at) {
  mqr_filter_t *f = p->f;
  if (p->rc) return -1;
  if (!mqr__grow((void **)&f->nodes, &f->cap_nodes, f->n_nodes + 1, sizeof *f->nodes)) {
    fail(p, at, MQR_ENOMEM, "out of memory");
    return -1;
  }
  uint32_t start = a >= 0 && f->nodes[a].start < (uint32_t)at + 1 ? f->nodes[a].start : (uint32_t)at + 1;
  f->nodes[f->n_nodes] = (mqr__fnode_t){kind, a, b, c, -1, 0, (uint32_t)at + 1, start, {MQR_VALUE_NULL, {0}}};
  return (int32_t)f->n_nodes++;
}

static bool is_cond(const mqr_filter_t *f, int32_t n) {
  const mqr__fnode_t *x = &f->nodes[n];
  return (x->kind >= F_EQ && x->kind <= F_BOOLCAST) || (x->kind == F_CONST && x->v.type == MQR_VALUE_BOOL);
}

/* n where a condition is wanted: a property is read as a boolean; any other value is a
 * mistake. */
static int32_t cond(px_t *p, int32_t n, size_t at) {
  if (n < 0) return n;
  if (is_cond(p->f, n)) return n;
  if (p->f->nodes[n].kind == F_IDENT) return node(p, F_BOOLCAST, n, -1, -1, at);
  const mqr__fnode_t *x = &p->f->nodes[n];
  if (x->kind == F_CONST && x->v.type == MQR_VALUE_NULL) return n; /* NULL: UNKNOWN, as Artemis takes it */
  fail(p, p->f->nodes[n].start - 1, MQR_ESYNTAX, "a condition is wanted here, not a value");
  return -1;
}

/* n where a value is wanted (compared, computed): not a condition, except a boolean
 * compared with = or <> (equality true). */
static bool value_ok(px_t *p, int32_t n, bool equality) {
  if (n < 0) return false;
  const mqr__fnode_t *x = &p->f->nodes[n];
  if (x->kind == F_CONST && x->v.type == MQR_VALUE_NULL && equality) {
    fail(p, x->column - 1, MQR_ESYNTAX, "NULL cannot be compared with = or <>: use IS NULL");
    return false;
  }
  if (!equality && is_cond(p->f, n)) {
    fail(p, x->start - 1, MQR_ESYNTAX, "a condition cannot be compared with < or >");
    return false;
  }
  if (!equality && x->kind == F_CONST && x->v.type != MQR_VALUE_INT && x->v.type != MQR_VALUE_LONG &&
      x->v.type != MQR_VALUE_DOUBLE) {
    fail(p, x->column - 1, MQR_ESYNTAX, "only numbers can be compared with < or >");
    return false;
  }
  return true;
}

static int32_t parse_or(px_t *p);

static int32_t slot_of(px_t *p, mqr_str_t name, size_t at) {
  mqr_filter_t *f = p->f;
  for (uint32_t i = 0; i < f->n_slots; i++)
    if (f->slot_names[i].ptr && mqr_str_eq(f->slot_names[i], name)) return (int32_t)i;
  int32_t s = p->resolve ? p->resolve(p->ctx, name) : -1;
  if (s < -1) {
    fail(p, at, s, "%s", s == MQR_ELIMIT ? "too many identifiers in the filters" : mqr_strerror(s));
    return -1;
  }
  if (s < 0) s = p->next_slot;
  if (s >= (int32_t)f->n_slots) {
    uint32_t old = f->n_slots;
    if (!mqr__grow((void **)&f->slot_names, &f->cap_slots, (uint32_t)s + 1, sizeof *f->slot_names)) {
      fail(p, at, MQR_ENOMEM, "out of memory");
      return -1;
    }
    for (uint32_t i = old; i <= (uint32_t)s; i++) f->slot_names[i] = mqr_str_n(NULL, 0);
    f->n_slots = (uint32_t)s + 1;
  }
  f->slot_names[s] = name;
  if (s >= p->next_slot) p->next_slot = s + 1;
  return s;
}

static int32_t number(px_t *p, uint64_t u, bool negate, bool is_long, double d, bool fp, size_t at) {
  int32_t n = node(p, F_CONST, -1, -1, -1, at);
  if (n < 0) return n;
  mqr_value_t *v = &p->f->nodes[n].v;
  if (fp) {
    *v = (mqr_value_t){MQR_VALUE_DOUBLE, {.d = negate ? -d : d}};
    return n;
  }
  if (u > (uint64_t)INT64_MAX) { /* past the long range, before the sign too: a double, as Artemis reads it */
    *v = (mqr_value_t){MQR_VALUE_DOUBLE, {.d = negate ? -(double)u : (double)u}};
    return n;
  }
  int64_t x = negate ? (int64_t)(0 - u) : (int64_t)u;
  /* Its type is the literal's before the sign, as Artemis negates a literal when it runs:
   * -2147483648 is a long (2147483648 is one), so -2147483648 - 1 does not wrap. */
  if (!is_long && u <= INT32_MAX)
    *v = (mqr_value_t){MQR_VALUE_INT, {.i = (int32_t)x}};
  else
    *v = (mqr_value_t){MQR_VALUE_LONG, {.l = x}};
  return n;
}

static int32_t parse_primary(px_t *p) {
  size_t at = p->start;
  switch (p->t) {
  case T_LPAREN: {
    if (++p->nest > 256) return fail(p, at, MQR_ELIMIT, "the selector nests deeper than 256"), -1;
    next(p);
    int32_t n = parse_or(p);
    if (p->t != T_RPAREN) return fail(p, p->start, MQR_ESYNTAX, "')' expected"), -1;
    next(p);
    p->nest--;
    return n;
  }
  case T_IDENT: {
    mqr_str_t name = p->text;
    next(p);
    int32_t n = node(p, F_IDENT, -1, -1, -1, at);
    if (n >= 0) p->f->nodes[n].slot = slot_of(p, name, at);
    return p->rc ? -1 : n;
  }
  case T_STRING: {
    int32_t n = node(p, F_CONST, -1, -1, -1, at);
    if (n >= 0) {
      p->f->nodes[n].v.type = MQR_VALUE_STRING;
      p->f->nodes[n].v.u.l = ((int64_t)p->str_off << 32) | p->str_len; /* fixed up to a view after parsing */
    }
    next(p);
    return n;
  }
  case T_INT: {
    int32_t n = number(p, p->u, false, p->is_long, 0, false, at);
    next(p);
    return n;
  }
  case T_FLOAT: {
    int32_t n = number(p, 0, false, false, p->d, true, at);
    next(p);
    return n;
  }
  case T_TRUE:
  case T_FALSE:
  case T_NULL: {
    int32_t n = node(p, F_CONST, -1, -1, -1, at);
    if (n >= 0)
      p->f->nodes[n].v =
          p->t == T_NULL ? (mqr_value_t){MQR_VALUE_NULL, {0}} : (mqr_value_t){MQR_VALUE_BOOL, {.b = p->t == T_TRUE}};
    next(p);
    return n;
  }
  case T_END: return fail(p, at, MQR_ESYNTAX, "the selector ends where a value is expected"), -1;
  default: return fail(p, at, MQR_ESYNTAX, "a value is expected here"), -1;
  }
}

static int32_t parse_unary(px_t *p) {
  if (p->t == T_PLUS || p->t == T_MINUS) {
    bool neg = p->t == T_MINUS;
    size_t at = p->start;
    next(p);
    if (neg && (p->t == T_INT || p->t == T_FLOAT)) { /* a negative literal, typed by its magnitude */
      int32_t n = number(p, p->u, true, p->is_long, p->d, p->t == T_FLOAT, at);
      next(p);
      return n;
    }
    if (++p->nest > 256) return fail(p, at, MQR_ELIMIT, "the selector nests deeper than 256"), -1;
    int32_t a = parse_unary(p);
    p->nest--;
    if (a < 0 || !value_ok(p, a, false)) return -1;
    return neg ? node(p, F_NEG, a, -1, -1, at) : a;
  }
  return parse_primary(p);
}

static int32_t parse_product(px_t *p) {
  int32_t a = parse_unary(p);
  while (a >= 0 && (p->t == T_STAR || p->t == T_SLASH || p->t == T_PERCENT)) {
    mqr__fkind_t k = p->t == T_STAR ? F_MUL : p->t == T_SLASH ? F_DIV : F_MOD;
    size_t at = p->start;
    next(p);
    int32_t b = parse_unary(p);
    if (b < 0 || !value_ok(p, a, false) || !value_ok(p, b, false)) return -1;
    a = node(p, k, a, b, -1, at);
  }
  return a;
}

static int32_t parse_sum(px_t *p) {
  int32_t a = parse_product(p);
  while (a >= 0 && (p->t == T_PLUS || p->t == T_MINUS)) {
    mqr__fkind_t k = p->t == T_PLUS ? F_ADD : F_SUB;
    size_t at = p->start;
    next(p);
    int32_t b = parse_product(p);
    if (b < 0 || !value_ok(p, a, false) || !value_ok(p, b, false)) return -1;
    a = node(p, k, a, b, -1, at);
  }
  return a;
}

/* A string literal (LIKE's pattern, ESCAPE's character, IN's items): its bytes. */
static bool string_literal(px_t *p, mqr_str_t *out, const char *what) {
  if (p->t != T_STRING) {
    fail(p, p->start, MQR_ESYNTAX, "%s must be a string literal", what);
    return false;
  }
  *out = mqr_str_n(NULL, 0);
  out->len = p->str_len;
  out->ptr = (const char *)(uintptr_t)p->str_off; /* an offset until parsing is done */
  next(p);
  return true;
}

/* A pattern without _: its literal runs, as UTF-8 bytes, for matching with memcmp and
 * memmem. False: out of memory. */
static bool like_segments(mqr_filter_t *f, uint32_t k) {
  const int32_t *cp = f->pat ? f->pat + f->pats[k].off : NULL; /* an empty pattern has none */
  uint32_t n = f->pats[k].len;
  f->pats[k].simple = true;
  for (uint32_t i = 0; i < n; i++)
    if (cp[i] == MQR__LIKE_ONE) f->pats[k].simple = false;
  f->pats[k].lead = n && cp[0] == MQR__LIKE_ANY;
  f->pats[k].trail = n && cp[n - 1] == MQR__LIKE_ANY;
  f->pats[k].seg = f->n_segs;
  f->pats[k].n_seg = 0;
  if (!f->pats[k].simple) return true;
  for (uint32_t i = 0; i < n;) {
    while (i < n && cp[i] == MQR__LIKE_ANY) i++;
    if (i == n) break;
    uint32_t start = f->n_lbytes;
    for (; i < n && cp[i] != MQR__LIKE_ANY; i++) {
      uint32_t c = (uint32_t)cp[i];
      uint8_t b[4];
      int len = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (len == 1)
        b[0] = (uint8_t)c;
      else {
        for (int j = len - 1; j > 0; j--, c >>= 6) b[j] = (uint8_t)(0x80 | (c & 0x3F));
        b[0] = (uint8_t)((0xF00u >> len) | c); /* 110x, 1110x, 11110x */
      }
      if (!mqr__grow((void **)&f->lbytes, &f->cap_lbytes, f->n_lbytes + 4, 1)) return false;
      memcpy(f->lbytes + f->n_lbytes, b, (size_t)len);
      f->n_lbytes += (uint32_t)len;
    }
    if (!mqr__grow((void **)&f->segs, &f->cap_segs, f->n_segs + 1, sizeof *f->segs)) return false;
    f->segs[f->n_segs].off = start;
    f->segs[f->n_segs].len = f->n_lbytes - start;
    f->n_segs++;
    f->pats[k].n_seg++;
  }
  return true;
}

static int32_t parse_like(px_t *p, int32_t a, bool neg, size_t at) {
  mqr_filter_t *f = p->f;
  mqr_str_t pat, esc = {NULL, 0};
  if (!string_literal(p, &pat, "LIKE's pattern")) return -1;
  int32_t escape = -3; /* none */
  if (p->t == T_ESCAPE) {
    size_t eat = p->start;
    next(p);
    if (!string_literal(p, &esc, "ESCAPE's character")) return -1;
    const unsigned char *e = (const unsigned char *)f->strings + (uintptr_t)esc.ptr, *ee = e + esc.len;
    if (esc.len == 0) return fail(p, eat, MQR_ESYNTAX, "ESCAPE's string must be one character"), -1;
    escape = mqr__filter_code_point(&e, ee);
    if (e != ee) return fail(p, eat, MQR_ESYNTAX, "ESCAPE's string must be one character"), -1;
  }
  /* The pattern as code points and wildcards. As Artemis does, the escape character
   * escapes only %, _ and itself; before anything else it is itself. */
  uint32_t off = f->n_pat;
  const unsigned char *s = (const unsigned char *)f->strings + (uintptr_t)pat.ptr, *end = s + pat.len;
  while (s < end) {
    int32_t c = mqr__filter_code_point(&s, end);
    bool escaped = false;
    if (c == escape && s < end) {
      const unsigned char *peek = s;
      int32_t nx = mqr__filter_code_point(&peek, end);
      if (nx == '%' || nx == '_' || nx == escape) {
        c = nx;
        s = peek;
        escaped = true;
      }
    }
    if (!escaped && c == '%')
      c = MQR__LIKE_ANY;
    else if (!escaped && c == '_')
      c = MQR__LIKE_ONE;
    if (!mqr__grow((void **)&f->pat, &f->cap_pat, f->n_pat + 1, sizeof *f->pat))
      return fail(p, at, MQR_ENOMEM, "out of memory"), -1;
    f->pat[f->n_pat++] = c;
  }
  if (!mqr__grow((void **)&f->pats, &f->cap_pats, f->n_pats + 1, sizeof *f->pats))
    return fail(p, at, MQR_ENOMEM, "out of memory"), -1;
  f->pats[f->n_pats].off = off;
  f->pats[f->n_pats].len = f->n_pat - off;
  if (!like_segments(f, f->n_pats)) return fail(p, at, MQR_ENOMEM, "out of memory"), -1;
  int32_t n = node(p, neg ? F_NOT_LIKE : F_LIKE, a, -1, -1, at);
  if (n >= 0) f->nodes[n].aux = f->n_pats++;
  return n;
}

static int32_t parse_in(px_t *p, int32_t a, bool neg, size_t at) {
  mqr_filter_t *f = p->f;
  if (f->nodes[a].kind != F_IDENT) return fail(p, f->nodes[a].column - 1, MQR_ESYNTAX, "IN applies to a property"), -1;
  if (p->t != T_LPAREN) return fail(p, p->start, MQR_ESYNTAX, "'(' expected after IN"), -1;
  next(p);
  uint32_t off = f->n_set;
  for (;;) {
    mqr_str_t item;
    if (!string_literal(p, &item, "an IN list's item")) return -1;
    if (!mqr__grow((void **)&f->set, &f->cap_set, f->n_set + 1, sizeof *f->set))
      return fail(p, at, MQR_ENOMEM, "out of memory"), -1;
    f->set[f->n_set++] = item;
    if (p->t == T_COMMA) {
      next(p);
      continue;
    }
    if (p->t != T_RPAREN) return fail(p, p->start, MQR_ESYNTAX, "',' or ')' expected in an IN list"), -1;
    next(p);
    break;
  }
  if (!mqr__grow((void **)&f->sets, &f->cap_sets, f->n_sets + 1, sizeof *f->sets))
    return fail(p, at, MQR_ENOMEM, "out of memory"), -1;
  f->sets[f->n_sets].off = off;
  f->sets[f->n_sets].len = f->n_set - off;
  int32_t n = node(p, neg ? F_NOT_IN : F_IN, a, -1, -1, at);
  if (n >= 0) f->nodes[n].aux = f->n_sets++;
  return n;
}

/* A relational comparison (<, <=, >, >=, BETWEEN, LIKE, IN) or a value; equality binds
 * looser (parse_comparison), as in Artemis's grammar: a < b = TRUE is (a < b) = TRUE. */
static int32_t parse_relational(px_t *p) {
  int32_t a = parse_sum(p);
  if (a < 0) return -1;
  size_t at = p->start;
  static const struct {
    tok_t t;
    mqr__fkind_t k;
  } ops[] = {{T_LT, F_LT}, {T_LE, F_LE}, {T_GT, F_GT}, {T_GE, F_GE}};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (p->t == ops[i].t) {
      next(p);
      int32_t b = parse_sum(p);
      if (b < 0 || !value_ok(p, a, false) || !value_ok(p, b, false)) return -1;
      return node(p, ops[i].k, a, b, -1, at);
    }
  bool neg = false;
  if (p->t == T_NOT) {
    neg = true;
    next(p);
    if (p->t != T_BETWEEN && p->t != T_LIKE && p->t != T_IN)
      return fail(p, p->start, MQR_ESYNTAX, "BETWEEN, LIKE or IN expected after NOT"), -1;
  }
  if (p->t == T_BETWEEN) {
    next(p);
    int32_t lo = parse_sum(p);
    if (lo < 0) return -1;
    if (p->t != T_AND) return fail(p, p->start, MQR_ESYNTAX, "AND expected in BETWEEN"), -1;
    next(p);
    int32_t hi = parse_sum(p);
    if (hi < 0 || !value_ok(p, a, false) || !value_ok(p, lo, false) || !value_ok(p, hi, false)) return -1;
    return node(p, neg ? F_NOT_BETWEEN : F_BETWEEN, a, lo, hi, at);
  }
  if (p->t == T_LIKE) {
    next(p);
    return parse_like(p, a, neg, at);
  }
  if (p->t == T_IN) {
    next(p);
    return parse_in(p, a, neg, at);
  }
  return a;
}

/* Equality over relational comparisons, left to right (a = 1 = TRUE is (a = 1) = TRUE),
 * and IS [NOT] NULL. Values of unlike types compare FALSE (JMS), constants too. */
static int32_t parse_comparison(px_t *p) {
  int32_t a = parse_relational(p);
  while (a >= 0) {
    size_t at = p->start;
    if (p->t == T_EQ || p->t == T_NE) {
      mqr__fkind_t k = p->t == T_EQ ? F_EQ : F_NE;
      next(p);
      int32_t b = parse_relational(p);
      if (b < 0 || !value_ok(p, a, true) || !value_ok(p, b, true)) return -1;
      a = node(p, k, a, b, -1, at);
    } else if (p->t == T_IS) {
      next(p);
      bool neg = p->t == T_NOT;
      if (neg) next(p);
      if (p->t != T_NULL) return fail(p, p->start, MQR_ESYNTAX, "NULL expected after IS"), -1;
      next(p);
      a = node(p, neg ? F_IS_NOT_NULL : F_IS_NULL, a, -1, -1, at);
    } else {
      break;
    }
  }
  return a;
}

static int32_t parse_not(px_t *p) {
  if (p->t == T_NOT) {
    size_t at = p->start;
    if (++p->nest > 256) return fail(p, at, MQR_ELIMIT, "the selector nests deeper than 256"), -1;
    next(p);
    int32_t a = cond(p, parse_not(p), at);
    p->nest--;
    return a < 0 ? -1 : node(p, F_NOT, a, -1, -1, at);
  }
  return parse_comparison(p);
}

/* operand (tok operand)*: AND over NOTs, OR over ANDs; both sides must be conditions. */
static int32_t parse_logic(px_t *p, tok_t tok, mqr__fkind_t kind, int32_t (*operand)(px_t *)) {
  size_t at0 = p->start;
  int32_t a = operand(p);
  while (a >= 0 && p->t == tok) {
    size_t at = p->start;
    next(p);
    size_t bt = p->start;
    int32_t b = cond(p, operand(p), bt);
    a = cond(p, a, at0);
    if (a < 0 || b < 0) return -1;
    a = node(p, kind, a, b, -1, at);
  }
  return a;
}

static int32_t parse_and(px_t *p) { return parse_logic(p, T_AND, F_AND, parse_not); }

static int32_t parse_or(px_t *p) { return parse_logic(p, T_OR, F_OR, parse_and); }

int mqr__filter_parse(mqr_filter_t *f, mqr_filter_resolve_fn resolve, void *ctx, mqr_error_t *err) {
  px_t p = {.f = f, .s = f->text, .len = f->text_len, .resolve = resolve, .ctx = ctx, .err = err};
  next(&p);
  if (p.rc) return p.rc;
  if (p.t == T_END) return fail(&p, 0, MQR_ESYNTAX, "an empty selector");
  int32_t root = cond(&p, parse_or(&p), 0);
  if (p.rc == 0 && p.t != T_END) fail(&p, p.start, MQR_ESYNTAX, "unexpected text after the selector");
  if (p.rc) return p.rc;
  f->root = root;
  /* String constants and items were offsets while f->strings grew: views now. */
  for (uint32_t i = 0; i < f->n_nodes; i++)
    if (f->nodes[i].kind == F_CONST && f->nodes[i].v.type == MQR_VALUE_STRING) {
      uint64_t x = (uint64_t)f->nodes[i].v.u.l;
      f->nodes[i].v.u.s = mqr_str_n(f->strings + (x >> 32), (size_t)(x & 0xffffffffu));
    }
  for (uint32_t i = 0; i < f->n_set; i++) f->set[i].ptr = f->strings + (uintptr_t)f->set[i].ptr;
  return 0;
}
