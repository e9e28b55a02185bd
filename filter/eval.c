/* Filters evaluated (filter_int.h): the semantics of each operation, as JMS 2.0 and
 * Artemis define them; the tree turned into a program (postfix, over a value stack whose
 * depth is known at compile time); the program's evaluation, allocating nothing; and the
 * tree's, node by node, which the tests hold the program to.
 *
 * Values: a condition's result is a BOOL, or NULL for UNKNOWN. NULL, and a value of the
 * wrong type for an arithmetic operation, give NULL; comparing values of unlike types
 * gives FALSE (JMS: "the value of the operation is false"). Numbers are promoted as Java
 * promotes them: to double if either is a double, else to float if either is a float,
 * else to long if either is a long, else int; arithmetic on floats is done in double,
 * and / and % are always done in double (as Artemis does). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "filter_int.h"

typedef mqr_value_t val_t;

static const val_t VNULL = {MQR_VALUE_NULL, {0}};

static val_t vbool(bool b) { return (val_t){MQR_VALUE_BOOL, {.b = b}}; }

static bool is_num(const val_t *v) { return v->type >= MQR_VALUE_INT && v->type <= MQR_VALUE_DOUBLE; }

static double as_double(const val_t *v) {
  switch (v->type) {
  case MQR_VALUE_INT: return v->u.i;
  case MQR_VALUE_LONG: return (double)v->u.l;
  case MQR_VALUE_FLOAT: return v->u.f;
  default: return v->u.d;
  }
}

static int64_t as_long(const val_t *v) { return v->type == MQR_VALUE_INT ? v->u.i : v->u.l; }

static val_t arith(mqr__fkind_t op, const val_t *a, const val_t *b) {
  if (!is_num(a) || !is_num(b)) return VNULL;
  if (op == F_DIV || op == F_MOD || a->type >= MQR_VALUE_FLOAT || b->type >= MQR_VALUE_FLOAT) {
    double x = as_double(a), y = as_double(b), r;
    switch (op) {
    case F_ADD: r = x + y; break;
    case F_SUB: r = x - y; break;
    case F_MUL: r = x * y; break;
    case F_DIV: r = x / y; break;
    default: r = fmod(x, y); break;
    }
    return (val_t){MQR_VALUE_DOUBLE, {.d = r}};
  }
  /* int and long wrap, as Java's do */
  uint64_t x = (uint64_t)as_long(a), y = (uint64_t)as_long(b), r = op == F_ADD ? x + y : op == F_SUB ? x - y : x * y;
  if (a->type == MQR_VALUE_INT && b->type == MQR_VALUE_INT) return (val_t){MQR_VALUE_INT, {.i = (int32_t)(uint32_t)r}};
  return (val_t){MQR_VALUE_LONG, {.l = (int64_t)r}};
}

/* A number as Java promotes it to float: a long or an int in one rounding (through a
 * double would round twice: 4611686293305294849L is not 4.611686018427388E18f). */
static float as_float(const val_t *a) {
  switch (a->type) {
  case MQR_VALUE_INT: return (float)a->u.i;
  case MQR_VALUE_LONG: return (float)a->u.l;
  case MQR_VALUE_FLOAT: return a->u.f;
  default: return (float)as_double(a);
  }
}

static val_t negate(const val_t *a) {
  switch (a->type) {
  case MQR_VALUE_INT: return (val_t){MQR_VALUE_INT, {.i = (int32_t)(0u - (uint32_t)a->u.i)}};
  case MQR_VALUE_LONG: return (val_t){MQR_VALUE_LONG, {.l = (int64_t)(0u - (uint64_t)a->u.l)}};
  case MQR_VALUE_FLOAT: return (val_t){MQR_VALUE_FLOAT, {.f = -a->u.f}};
  case MQR_VALUE_DOUBLE: return (val_t){MQR_VALUE_DOUBLE, {.d = -a->u.d}};
  default: return VNULL;
  }
}

/* <0, 0, >0; or 2 when a and b do not compare (unlike types). */
static int order(const val_t *a, const val_t *b) {
  if (is_num(a) && is_num(b)) {
    if (a->type == MQR_VALUE_DOUBLE || b->type == MQR_VALUE_DOUBLE)
      return mqr__filter_cmp_double(as_double(a), as_double(b));
    if (a->type == MQR_VALUE_FLOAT || b->type == MQR_VALUE_FLOAT) /* compared as floats */
      return mqr__filter_cmp_double(as_float(a), as_float(b));
    int64_t x = as_long(a), y = as_long(b);
    return x < y ? -1 : x > y;
  }
  if (a->type == MQR_VALUE_STRING && b->type == MQR_VALUE_STRING) {
    size_t n = a->u.s.len < b->u.s.len ? a->u.s.len : b->u.s.len;
    int c = n ? memcmp(a->u.s.ptr, b->u.s.ptr, n) : 0;
    if (c) return c < 0 ? -1 : 1;
    return a->u.s.len < b->u.s.len ? -1 : a->u.s.len > b->u.s.len;
  }
  if (a->type == MQR_VALUE_BOOL && b->type == MQR_VALUE_BOOL) return (int)a->u.b - (int)b->u.b; /* false < true */
  return 2;
}

static val_t compare(mqr__fkind_t op, const val_t *a, const val_t *b) {
  if (a->type == MQR_VALUE_NULL || b->type == MQR_VALUE_NULL) return VNULL;
  int c = order(a, b);
  if (c == 2) return vbool(false);
  switch (op) {
  case F_EQ: return vbool(c == 0);
  case F_NE: return vbool(c != 0);
  case F_LT: return vbool(c < 0);
  case F_LE: return vbool(c <= 0);
  case F_GT: return vbool(c > 0);
  default: return vbool(c >= 0);
  }
}

/* Three-valued logic: UNKNOWN is NULL. */
static int tv(const val_t *v) { return v->type == MQR_VALUE_BOOL ? v->u.b : -1; }
static val_t from_tv(int t) { return t < 0 ? VNULL : vbool(t != 0); }

static val_t and3(const val_t *a, const val_t *b) {
  int x = tv(a), y = tv(b);
  return from_tv(x == 0 || y == 0 ? 0 : x < 0 || y < 0 ? -1 : 1);
}

static val_t or3(const val_t *a, const val_t *b) {
  int x = tv(a), y = tv(b);
  return from_tv(x == 1 || y == 1 ? 1 : x < 0 || y < 0 ? -1 : 0);
}

static val_t not3(const val_t *a) {
  int x = tv(a);
  return from_tv(x < 0 ? -1 : !x);
}

static val_t boolcast(const val_t *a) {
  if (a->type == MQR_VALUE_NULL) return VNULL;
  return vbool(a->type == MQR_VALUE_BOOL && a->u.b);
}

/* convert_string_expressions: (Artemis's selector prefix): a string compared with a number
 * or a boolean is read as that type first, as Java's valueOf reads it (Integer.valueOf
 * for an int, ...; Boolean.valueOf: "true" in any case); one that does not read makes
 * the comparison FALSE. */
static bool read_as(const val_t *s, mqr_value_type_t type, val_t *out) {
  char buf[128];
  if (s->u.s.len == 0 || s->u.s.len >= sizeof buf) return type == MQR_VALUE_BOOL ? (*out = vbool(false), true) : false;
  memcpy(buf, s->u.s.ptr, s->u.s.len);
  buf[s->u.s.len] = 0;
  char *end;
  errno = 0;
  switch (type) {
  case MQR_VALUE_BOOL: *out = vbool(strcasecmp(buf, "true") == 0); return true;
  case MQR_VALUE_INT:
  case MQR_VALUE_LONG: {
    if (buf[0] == ' ' || buf[0] == '\t') return false; /* valueOf takes no white space */
    long long v = strtoll(buf, &end, 10);
    if (*end || errno || (type == MQR_VALUE_INT && (v < INT32_MIN || v > INT32_MAX))) return false;
    *out = type == MQR_VALUE_INT ? (val_t){MQR_VALUE_INT, {.i = (int32_t)v}} : (val_t){MQR_VALUE_LONG, {.l = v}};
    return true;
  }
  case MQR_VALUE_FLOAT:
  case MQR_VALUE_DOUBLE: {
    double d = strtod(buf, &end);
    while (*end == ' ' || *end == '\t') end++; /* Double.valueOf trims */
    if (*end || end == buf) return false;
    *out = type == MQR_VALUE_FLOAT ? (val_t){MQR_VALUE_FLOAT, {.f = (float)d}} : (val_t){MQR_VALUE_DOUBLE, {.d = d}};
    return true;
  }
  default: return false;
  }
}

static bool convertible(const val_t *v) { return is_num(v) || v->type == MQR_VALUE_BOOL; }

static val_t compare_f(const mqr_filter_t *f, mqr__fkind_t op, const val_t *a, const val_t *b) {
  if (f->convert_strings) {
    val_t c;
    if (a->type == MQR_VALUE_STRING && convertible(b))
      return read_as(a, b->type, &c) ? compare(op, &c, b) : vbool(false);
    if (b->type == MQR_VALUE_STRING && convertible(a))
      return read_as(b, a->type, &c) ? compare(op, a, &c) : vbool(false);
  }
  return compare(op, a, b);
}

static val_t between(const mqr_filter_t *f, const val_t *v, const val_t *lo, const val_t *hi, bool neg) {
  if (neg) { /* v < lo OR v > hi */
    val_t x = compare_f(f, F_LT, v, lo), y = compare_f(f, F_GT, v, hi);
    return or3(&x, &y);
  }
  val_t x = compare_f(f, F_GE, v, lo), y = compare_f(f, F_LE, v, hi);
  return and3(&x, &y);
}

/* Whether s matches the pattern p[0..n): % any run of code points, _ one. The classic
 * backtracking on the last %, which needs no memory and is O(len(s) * n) at worst. */
static bool like_match(const int32_t *p, uint32_t n, mqr_str_t str) {
  static const unsigned char none[1];
  const unsigned char *s = str.len ? (const unsigned char *)str.ptr : none, *end = s + str.len;
  const unsigned char *star_s = NULL;
  uint32_t i = 0, star_i = 0;
  bool star = false;
  while (s < end) {
    const unsigned char *at = s;
    if (i < n && p[i] == MQR__LIKE_ANY) {
      star = true;
      star_i = ++i;
      star_s = s;
      continue;
    }
    int32_t c = mqr__filter_code_point(&s, end);
    if (i < n && (p[i] == MQR__LIKE_ONE || p[i] == c)) {
      i++;
      continue;
    }
    s = at;
    if (!star) return false;
    mqr__filter_code_point(&star_s, end); /* the last % takes one more code point */
    s = star_s;
    i = star_i;
  }
  while (i < n && p[i] == MQR__LIKE_ANY) i++;
  return i == n;
}

/* A pattern of literal runs between %s (no _): the first run a prefix unless the pattern
 * begins with %, the last a suffix unless it ends with one, the ones between found in
 * order, leftmost first (which is optimal). */
static inline __attribute__((always_inline)) bool like_simple(const mqr_filter_t *f, uint32_t k, mqr_str_t str) {
  const char *s = str.len ? str.ptr : "";
  size_t pos = 0, end = str.len;
  uint32_t first = f->pats[k].seg, n = f->pats[k].n_seg;
  if (n == 0) return f->pats[k].lead || str.len == 0; /* %...% matches anything, '' only '' */
  uint32_t i = 0;
  if (!f->pats[k].lead) {
    uint32_t l = f->segs[first].len;
    if (l > end || !mqr__filter_eq_bytes(s, f->lbytes + f->segs[first].off, l)) return false;
    pos = l;
    i = 1;
    if (n == 1 && !f->pats[k].trail) return pos == end;
  }
  if (!f->pats[k].trail && i < n) {
    uint32_t l = f->segs[first + n - 1].len;
    if (l > end - pos || !mqr__filter_eq_bytes(s + end - l, f->lbytes + f->segs[first + n - 1].off, l)) return false;
    end -= l;
    n--;
  }
  for (; i < n; i++) {
    uint32_t l = f->segs[first + i].len;
    const char *at = l <= end - pos ? memmem(s + pos, end - pos, f->lbytes + f->segs[first + i].off, l) : NULL;
    if (at == NULL) return false;
    pos = (size_t)(at - s) + l;
  }
  return true;
}

/* LIKE and IN as truth values (1, 0, -1 UNKNOWN), inlined into the program's loop. */
static inline __attribute__((always_inline)) int like_tv(const mqr_filter_t *f, uint32_t pat, const val_t *v,
                                                         bool neg) {
  if (v->type == MQR_VALUE_NULL) return -1;
  if (v->type != MQR_VALUE_STRING) return neg; /* false, then NOT */
  bool m;
  if (f->pats[pat].simple) {
    m = like_simple(f, pat, v->u.s);
  } else {
    const int32_t *p = f->pats[pat].len ? f->pat + f->pats[pat].off : NULL; /* '' has none */
    m = like_match(p, f->pats[pat].len, v->u.s);
  }
  return m != neg;
}

static inline __attribute__((always_inline)) int in_tv(const mqr_filter_t *f, uint32_t set, const val_t *v, bool neg) {
  if (v->type != MQR_VALUE_STRING) return -1; /* as Artemis: not a string is UNKNOWN */
  const mqr_str_t *items = f->set + f->sets[set].off;
  for (uint32_t i = 0; i < f->sets[set].len; i++)
    if (items[i].len == v->u.s.len && mqr__filter_eq_bytes(items[i].ptr, v->u.s.ptr, v->u.s.len)) return !neg;
  return neg;
}

static val_t like(const mqr_filter_t *f, uint32_t pat, const val_t *v, bool neg) {
  int t = like_tv(f, pat, v, neg);
  return t < 0 ? VNULL : vbool(t);
}

static val_t in(const mqr_filter_t *f, uint32_t set, const val_t *v, bool neg) {
  int t = in_tv(f, set, v, neg);
  return t < 0 ? VNULL : vbool(t);
}

static val_t load(const val_t *values, uint32_t n, int32_t slot) { return (uint32_t)slot < n ? values[slot] : VNULL; }

/* An operation (not F_CONST or F_IDENT) on its operands arg[0..arity): aux is a LIKE's
 * pattern or an IN's set. Shared by the tree and the value program. */
static val_t apply(const mqr_filter_t *f, mqr__fkind_t kind, uint32_t aux, const val_t *arg) {
  switch (kind) {
  case F_NEG: return negate(arg);
  case F_ADD:
  case F_SUB:
  case F_MUL:
  case F_DIV:
  case F_MOD: return arith(kind, &arg[0], &arg[1]);
  case F_EQ:
  case F_NE:
  case F_LT:
  case F_LE:
  case F_GT:
  case F_GE: return compare_f(f, kind, &arg[0], &arg[1]);
  case F_AND: return and3(&arg[0], &arg[1]);
  case F_OR: return or3(&arg[0], &arg[1]);
  case F_NOT: return not3(arg);
  case F_BETWEEN:
  case F_NOT_BETWEEN: return between(f, &arg[0], &arg[1], &arg[2], kind == F_NOT_BETWEEN);
  case F_LIKE:
  case F_NOT_LIKE: return like(f, aux, arg, kind == F_NOT_LIKE);
  case F_IN:
  case F_NOT_IN: return in(f, aux, arg, kind == F_NOT_IN);
  case F_IS_NULL:
  case F_IS_NOT_NULL: return vbool((arg->type == MQR_VALUE_NULL) == (kind == F_IS_NULL));
  case F_BOOLCAST: return boolcast(arg);
  case F_CONST:
  case F_IDENT: break;
  }
  return VNULL;
}

/* How many operands an operation takes off the value program's stack. */
static uint32_t arity(mqr__fkind_t kind) {
  switch (kind) {
  case F_CONST:
  case F_IDENT: return 0;
  case F_BETWEEN:
  case F_NOT_BETWEEN: return 3;
  case F_NEG:
  case F_NOT:
  case F_LIKE:
  case F_NOT_LIKE:
  case F_IN:
  case F_NOT_IN:
  case F_IS_NULL:
  case F_IS_NOT_NULL:
  case F_BOOLCAST: return 1;
  default: return 2;
  }
}

/* ---- the tree ------------------------------------------------------------------------------ */

mqr_value_t mqr__filter_eval_tree(const mqr_filter_t *f, int32_t node, const mqr_value_t *values, uint32_t n) {
  const mqr__fnode_t *x = &f->nodes[node];
  if (x->kind == F_CONST) return x->v;
  if (x->kind == F_IDENT) return load(values, n, x->slot);
  val_t arg[3];
  const int32_t child[3] = {x->a, x->b, x->c}; /* -1: none */
  for (int i = 0; i < 3 && child[i] >= 0; i++) arg[i] = mqr__filter_eval_tree(f, child[i], values, n);
  return apply(f, x->kind, x->aux, arg);
}

/* ---- the program ------------------------------------------------------------------------------ */

typedef struct {
  mqr_filter_t *f;
  uint32_t depth, max;
  int rc;
} emit_t;

static void emit(emit_t *e, mqr__fkind_t op, int32_t arg, int pops, int pushes) {
  mqr_filter_t *f = e->f;
  if (e->rc) return;
  if (!mqr__grow((void **)&f->prog, &f->cap_prog, f->n_prog + 1, sizeof *f->prog)) {
    e->rc = MQR_ENOMEM;
    return;
  }
  f->prog[f->n_prog++] = (mqr__fop_t){(uint8_t)op, arg};
  e->depth = e->depth - (uint32_t)pops + (uint32_t)pushes;
  if (e->depth > e->max) e->max = e->depth;
}

static void gen(emit_t *e, int32_t node) {
  const mqr__fnode_t *x = &e->f->nodes[node];
  switch (x->kind) {
  case F_CONST: emit(e, F_CONST, node, 0, 1); return;
  case F_IDENT: emit(e, F_IDENT, x->slot, 0, 1); return;
  case F_BETWEEN:
  case F_NOT_BETWEEN:
    gen(e, x->a);
    gen(e, x->b);
    gen(e, x->c);
    emit(e, x->kind, 0, 3, 1);
    return;
  case F_LIKE:
  case F_NOT_LIKE:
  case F_IN:
  case F_NOT_IN:
    gen(e, x->a);
    emit(e, x->kind, (int32_t)x->aux, 1, 1);
    return;
  default:
    gen(e, x->a);
    if (x->b >= 0) gen(e, x->b);
    emit(e, x->kind, 0, x->b >= 0 ? 2 : 1, 1);
  }
}

/* ---- the condition program ------------------------------------------------------------------ */

typedef struct {
  emit_t *e; /* the value programs' */
  uint32_t depth, max;
  int rc;
} cemit_t;

static int32_t cemit(cemit_t *c, mqr__cop_t op, int pops, int pushes) {
  mqr_filter_t *f = c->e->f;
  if (c->rc) return -1;
  if (!mqr__grow((void **)&f->cprog, &f->cap_cprog, f->n_cprog + 1, sizeof *f->cprog)) {
    c->rc = MQR_ENOMEM;
    return -1;
  }
  f->cprog[f->n_cprog] = op;
  c->depth = c->depth - (uint32_t)pops + (uint32_t)pushes;
  if (c->depth > c->max) c->max = c->depth;
  return (int32_t)f->n_cprog++;
}

static bool is_ident(const mqr_filter_t *f, int32_t n) { return n >= 0 && f->nodes[n].kind == F_IDENT; }
static bool is_const(const mqr_filter_t *f, int32_t n, bool number) {
  if (n < 0 || f->nodes[n].kind != F_CONST) return false;
  mqr_value_type_t t = f->nodes[n].v.type;
  return number ? t == MQR_VALUE_INT || t == MQR_VALUE_LONG || t == MQR_VALUE_DOUBLE : t == MQR_VALUE_STRING;
}

/* c's comparison with its operands swapped: 1 < x is x > 1. */
static mqr__fkind_t flip(mqr__fkind_t k) {
  switch (k) {
  case F_LT: return F_GT;
  case F_LE: return F_GE;
  case F_GT: return F_LT;
  case F_GE: return F_LE;
  default: return k;
  }
}

/* What a condition costs to evaluate as fused operations, roughly in leaves; more than
 * CHEAP_MAX when it needs a value program or a long scan. The right side of an AND or OR
 * that is cheap is evaluated whatever the left side gave: a short-circuit jump taken
 * one time and not the next costs a mispredicted branch, more than a leaf or two. */
#define CHEAP_MAX 4

static int cost(const mqr_filter_t *f, int32_t node) {
  const mqr__fnode_t *x = &f->nodes[node];
  switch (x->kind) {
  case F_AND:
  case F_OR: return cost(f, x->a) + cost(f, x->b);
  case F_NOT: return cost(f, x->a);
  case F_CONST: return x->v.type == MQR_VALUE_BOOL ? 1 : CHEAP_MAX + 1;
  case F_EQ:
  case F_NE:
  case F_LT:
  case F_LE:
  case F_GT:
  case F_GE:
    return (is_ident(f, x->a) && (is_const(f, x->b, true) || is_const(f, x->b, false))) ||
                   (is_ident(f, x->b) && (is_const(f, x->a, true) || is_const(f, x->a, false)))
               ? 1
               : CHEAP_MAX + 1;
  case F_IS_NULL:
  case F_IS_NOT_NULL:
  case F_BOOLCAST: return is_ident(f, x->a) ? 1 : CHEAP_MAX + 1;
  case F_BETWEEN:
  case F_NOT_BETWEEN:
    return is_ident(f, x->a) && is_const(f, x->b, true) && is_const(f, x->c, true) ? 2 : CHEAP_MAX + 1;
  case F_IN:
  case F_NOT_IN: return is_ident(f, x->a) ? 1 + (int)f->sets[x->aux].len / 2 : CHEAP_MAX + 1;
  case F_LIKE:
  case F_NOT_LIKE: return is_ident(f, x->a) && f->pats[x->aux].simple ? 2 : CHEAP_MAX + 1;
  default: return CHEAP_MAX + 1;
  }
}

static void cgen(cemit_t *c, int32_t node) {
  mqr_filter_t *f = c->e->f;
  const mqr__fnode_t *x = &f->nodes[node];
  mqr__cop_t op = {0, 0, 0, -1, 0, 0};
  switch (x->kind) {
  case F_AND:
  case F_OR: {
    cgen(c, x->a);
    int32_t jump = cost(f, x->b) <= CHEAP_MAX
                       ? -1
                       : cemit(c, (mqr__cop_t){x->kind == F_AND ? C_AND_JUMP : C_OR_JUMP, 0, 0, -1, 0, 0}, 0, 0);
    cgen(c, x->b);
    cemit(c, (mqr__cop_t){x->kind == F_AND ? C_AND : C_OR, 0, 0, -1, 0, 0}, 2, 1);
    if (jump >= 0 && !c->rc) f->cprog[jump].arg = (int32_t)f->n_cprog;
    return;
  }
  case F_NOT:
    cgen(c, x->a);
    cemit(c, (mqr__cop_t){C_NOT, 0, 0, -1, 0, 0}, 1, 1);
    return;
  case F_CONST:
    if (x->v.type == MQR_VALUE_BOOL) {
      cemit(c, (mqr__cop_t){C_CONST, 0, 0, -1, x->v.u.b, 0}, 0, 1);
      return;
    }
    break;
  case F_EQ:
  case F_NE:
  case F_LT:
  case F_LE:
  case F_GT:
  case F_GE: {
    int32_t id = is_ident(f, x->a) ? x->a : is_ident(f, x->b) ? x->b : -1;
    int32_t k = id == x->a ? x->b : x->a;
    if (id < 0 || f->convert_strings) break; /* converting strings: the general compare */
    if ((x->kind == F_EQ || x->kind == F_NE) && is_const(f, k, false)) {
      op = (mqr__cop_t){C_STR_EQ, x->kind == F_NE, 0, f->nodes[id].slot, k, 0};
    } else if (is_const(f, k, true)) {
      mqr__fkind_t kind = id == x->a ? x->kind : flip(x->kind);
      /* A number constant: the common value types compare without promotion rules
       * (against a double everything is compared as a double; against an int or a long,
       * ints and longs as longs), the rest through compare(). */
      op = (mqr__cop_t){f->nodes[k].v.type == MQR_VALUE_DOUBLE ? C_CMP_D : C_CMP_L,
                        0,
                        (uint8_t)kind,
                        f->nodes[id].slot,
                        k,
                        MQR__CMP_MASK(kind)};
    } else {
      break;
    }
    cemit(c, op, 0, 1);
    return;
  }
  case F_LIKE:
  case F_NOT_LIKE:
  case F_IN:
  case F_NOT_IN:
  case F_IS_NULL:
  case F_IS_NOT_NULL:
  case F_BOOLCAST:
    if (!is_ident(f, x->a)) break;
    op.slot = f->nodes[x->a].slot;
    op.arg = (int32_t)x->aux;
    op.op = x->kind <= F_NOT_LIKE ? C_LIKE : x->kind <= F_NOT_IN ? C_IN : x->kind == F_BOOLCAST ? C_BOOL : C_ISNULL;
    op.neg = x->kind == F_NOT_LIKE || x->kind == F_NOT_IN || x->kind == F_IS_NOT_NULL;
    cemit(c, op, 0, 1);
    return;
  case F_BETWEEN:
  case F_NOT_BETWEEN:
    if (!is_ident(f, x->a) || !is_const(f, x->b, true) || !is_const(f, x->c, true) || f->convert_strings) break;
    cemit(c, (mqr__cop_t){C_BETWEEN, x->kind == F_NOT_BETWEEN, 0, f->nodes[x->a].slot, x->b, x->c}, 0, 1);
    return;
  default: break;
  }
  /* Anything else: a value program, its result read as a truth value. */
  uint32_t start = f->n_prog;
  c->e->depth = 0;
  gen(c->e, node);
  cemit(c, (mqr__cop_t){C_VALUE, 0, 0, -1, (int32_t)start, (int32_t)f->n_prog}, 0, 1);
}

/* Three-valued AND and OR by table, indexed by truth value + 1 (UNKNOWN, FALSE, TRUE):
 * no branch on the data. */
static const int8_t and_tab[3][3] = {{-1, 0, -1}, {0, 0, 0}, {-1, 0, 1}};
static const int8_t or_tab[3][3] = {{-1, -1, 1}, {-1, 0, 1}, {1, 1, 1}};
static const int8_t not_tab[3] = {-1, 1, 0};

/* What a leaf roughly costs, to run the cheaper of two first; of two alike, the one
 * written first runs first, as its writer ordered them. */
static int leaf_rank(const mqr__cop_t *op) {
  switch (op->op) {
  case C_CONST:
  case C_BOOL:
  case C_ISNULL: return 0;
  case C_CMP_D:
  case C_CMP_L:
  case C_STR_EQ: return 1;
  case C_IN: return 2;
  default: return 3;
  }
}

int mqr__filter_program(mqr_filter_t *f, mqr_error_t *err) {
  emit_t e = {f, 0, 0, 0};
  cemit_t c = {&e, 0, 0, 0};
  cgen(&c, f->root);
  cemit(&c, (mqr__cop_t){C_END, 0, 0, -1, 0, 0}, 0, 0);
  if (e.rc || c.rc) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a filter");
  if (e.max > MQR_FILTER_MAX_DEPTH || c.max > MQR_FILTER_MAX_DEPTH)
    return mqr_error_set(err, MQR_ELIMIT, "the selector nests deeper than %d", MQR_FILTER_MAX_DEPTH);
  f->depth = e.max;
  f->cdepth = c.max;
  /* One leaf, or two joined, the short-circuit jumps aside (leaves have no effects):
   * [A, END], [A, (jump,) B, (NOT,) AND|OR, END]. */
  const mqr__cop_t *p = f->cprog, *end = f->cprog + f->n_cprog;
  const mqr__cop_t *leaves[2];
  int nl = 0, joins = 0;
  bool not_b = false, or = false, shape = true;
  for (; p < end && shape; p++) {
    switch (p->op) {
    case C_STR_EQ:
    case C_CMP_D:
    case C_CMP_L:
    case C_IN:
    case C_LIKE:
    case C_BOOL:
    case C_ISNULL:
    case C_BETWEEN:
    case C_CONST:
      if (nl == 2 || joins || not_b)
        shape = false;
      else
        leaves[nl++] = p;
      break;
    case C_AND_JUMP:
    case C_OR_JUMP: shape = nl == 1; break;
    case C_NOT:
      shape = nl == 2 && !not_b && joins == 0;
      not_b = true;
      break;
    case C_AND:
    case C_OR:
      shape = nl == 2 && joins == 0;
      joins++;
      or = p->op == C_OR;
      break;
    case C_END: break;
    default: shape = false;
    }
  }
  f->two.l[0] = (mqr__fleaf_t){.fn = mqr__filter_run_leaf, .f = f};
  if (shape && nl == 1 && joins == 0 && !not_b) {
    f->two.ops = 1;
    f->two.need = (uint32_t)leaves[0]->slot + 1;
    mqr__filter_leaf(f, leaves[0], MQR__LEAF_ONE, &f->two.l[0]);
  } else if (shape && nl == 2 && joins == 1) {
    /* The cheaper leaf first, where it may decide alone (AND and OR are commutative in
     * three-valued logic too, and leaves have no effects). */
    bool swap = leaf_rank(leaves[1]) < leaf_rank(leaves[0]);
    const mqr__cop_t *first = leaves[swap], *second = leaves[!swap];
    bool not_first = not_b && swap, not_second = not_b && !swap;
    f->two.ops = 2;
    f->two.need = (uint32_t)(first->slot > second->slot ? first->slot : second->slot) + 1;
    mqr__filter_leaf(f, first, MQR__LEAF_FIRST, &f->two.l[0]);
    mqr__filter_leaf(f, second, MQR__LEAF_LAST, &f->two.l[1]);
    /* AND is FALSE once one side is, OR TRUE */
    f->two.l[0].stopped = or ? 1 : 0;
    f->two.l[0].stop = (int8_t)(f->two.l[0].stopped != not_first);
    for (int x = 0; x < 3; x++)
      for (int y = 0; y < 3; y++) {
        int a = not_first ? not_tab[x] + 1 : x, b = not_second ? not_tab[y] + 1 : y;
        f->two.l[1].tab[x][y] = or ? or_tab[a][b] : and_tab[a][b];
      }
  }
  return 0;
}

/* The value program prog[start..end): its result. */
__attribute__((noinline)) static val_t run_values(const mqr_filter_t *f, uint32_t start, uint32_t end,
                                                  const mqr_value_t *values, uint32_t n) {
  val_t st[MQR_FILTER_MAX_DEPTH];
  uint32_t sp = 0;
  for (uint32_t pc = start; pc < end; pc++) {
    const mqr__fop_t *op = &f->prog[pc];
    mqr__fkind_t kind = (mqr__fkind_t)op->op;
    if (kind == F_CONST) {
      st[sp++] = f->nodes[op->arg].v;
    } else if (kind == F_IDENT) {
      st[sp++] = load(values, n, op->arg);
    } else {
      sp -= arity(kind);
      st[sp] = apply(f, kind, (uint32_t)op->arg, &st[sp]);
      sp++;
    }
  }
  return sp == 1 ? st[0] : VNULL;
}

static const val_t *slot_value(const mqr_value_t *values, uint32_t n, int32_t slot) {
  return (uint32_t)slot < n ? &values[slot] : &VNULL;
}

/* The leaves, each a truth value (1, 0, -1 UNKNOWN) of op on the message's values: the
 * threaded program's operations, and the general leaf of leaf.c. */
static inline __attribute__((always_inline)) int8_t tv_str_eq(const mqr_filter_t *f, const mqr__cop_t *op,
                                                              const val_t *values, uint32_t n) {
  const val_t *v = slot_value(values, n, op->slot);
  const mqr_str_t *k = &f->nodes[op->arg].v.u.s;
  return v->type == MQR_VALUE_NULL ? -1
         : v->type != MQR_VALUE_STRING
             ? 0 /* unlike types: false, for <> too */
             : (int8_t)((v->u.s.len == k->len && mqr__filter_eq_bytes(v->u.s.ptr, k->ptr, k->len)) != op->neg);
}

static inline __attribute__((always_inline)) int8_t tv_cmp_d(const mqr_filter_t *f, const mqr__cop_t *op,
                                                             const val_t *values, uint32_t n) {
  const val_t *v = slot_value(values, n, op->slot);
  double x;
  int t = mqr__filter_as_double(v, &x);
  if (t <= 0) return (int8_t)t;
  return (int8_t)(op->arg2 >> (mqr__filter_cmp_double(x, f->nodes[op->arg].v.u.d) + 1) & 1);
}

static inline __attribute__((always_inline)) int8_t tv_cmp_l(const mqr_filter_t *f, const mqr__cop_t *op,
                                                             const val_t *values, uint32_t n) {
  const val_t *v = slot_value(values, n, op->slot);
  int64_t x;
  if (v->type == MQR_VALUE_INT) {
    x = v->u.i;
  } else if (v->type == MQR_VALUE_LONG) {
    x = v->u.l;
  } else {
    val_t r = compare((mqr__fkind_t)op->cmp, v, &f->nodes[op->arg].v);
    return (int8_t)tv(&r);
  }
  int64_t k = f->nodes[op->arg].v.type == MQR_VALUE_INT ? f->nodes[op->arg].v.u.i : f->nodes[op->arg].v.u.l;
  return (int8_t)(op->arg2 >> ((x > k) - (x < k) + 1) & 1);
}

static inline __attribute__((always_inline)) int8_t tv_bool(const mqr__cop_t *op, const val_t *values, uint32_t n) {
  const val_t *v = slot_value(values, n, op->slot);
  return v->type == MQR_VALUE_NULL ? -1 : (int8_t)(v->type == MQR_VALUE_BOOL && v->u.b);
}

static inline __attribute__((always_inline)) int8_t tv_between(const mqr_filter_t *f, const mqr__cop_t *op,
                                                               const val_t *values, uint32_t n) {
  val_t r = between(f, slot_value(values, n, op->slot), &f->nodes[op->arg].v, &f->nodes[op->arg2].v, op->neg);
  return (int8_t)tv(&r);
}

int mqr__filter_leaf_tv(const mqr_filter_t *f, const mqr__cop_t *op, const val_t *values, uint32_t n) {
  switch (op->op) {
  case C_STR_EQ: return tv_str_eq(f, op, values, n);
  case C_CMP_D: return tv_cmp_d(f, op, values, n);
  case C_CMP_L: return tv_cmp_l(f, op, values, n);
  case C_IN: return (int8_t)in_tv(f, (uint32_t)op->arg, slot_value(values, n, op->slot), op->neg);
  case C_LIKE: return (int8_t)like_tv(f, (uint32_t)op->arg, slot_value(values, n, op->slot), op->neg);
  case C_BOOL: return tv_bool(op, values, n);
  case C_ISNULL: return (int8_t)((slot_value(values, n, op->slot)->type == MQR_VALUE_NULL) != op->neg);
  case C_BETWEEN: return tv_between(f, op, values, n);
  case C_CONST: return (int8_t)op->arg;
  default: return -1; /* not a leaf: never asked */
  }
}

/* The condition program, threaded: each operation jumps straight to the next one's code
 * (a computed goto, GCC's and Clang's), so that the processor predicts each jump from its
 * own place rather than from one shared switch. */
/* The program, run: the threaded interpreter (its own function, so that the two-leaf
 * path in mqr_filter_eval keeps a small frame). */
__attribute__((noinline)) static int run_program(const mqr_filter_t *f, const mqr_value_t *values, uint32_t n) {
  static const void *const code[] = {
      [C_CONST] = &&l_const, [C_STR_EQ] = &&l_str_eq,     [C_LIKE] = &&l_like,       [C_IN] = &&l_in,
      [C_BOOL] = &&l_bool,   [C_ISNULL] = &&l_isnull,     [C_BETWEEN] = &&l_between, [C_VALUE] = &&l_value,
      [C_NOT] = &&l_not,     [C_AND_JUMP] = &&l_and_jump, [C_OR_JUMP] = &&l_or_jump, [C_AND] = &&l_and,
      [C_OR] = &&l_or,       [C_CMP_D] = &&l_cmp_d,       [C_CMP_L] = &&l_cmp_l,     [C_END] = &&done};
  /* The top of the stack is kept in tos, the rest in st (st[0] holds nothing: the first
   * push saves tos's first value there), so that an operation on the top reads no memory
   * just written. */
  int8_t st[MQR_FILTER_MAX_DEPTH + 1], tos = 0;
  uint32_t sp = 0;
  const mqr__cop_t *op = f->cprog;
  val_t r;
#define JUMP(to)                                                                                                       \
  do {                                                                                                                 \
    op = (to);                                                                                                         \
    goto *code[op->op];                                                                                                \
  } while (0)
#define NEXT() JUMP(op + 1)
#define PUSH(v)                                                                                                        \
  do {                                                                                                                 \
    int8_t v_ = (int8_t)(v);                                                                                           \
    st[sp++] = tos;                                                                                                    \
    tos = v_;                                                                                                          \
  } while (0)
  JUMP(op);
l_const:
  PUSH((int8_t)op->arg);
  NEXT();
l_str_eq:
  PUSH(tv_str_eq(f, op, values, n));
  NEXT();
l_cmp_d:
  PUSH(tv_cmp_d(f, op, values, n));
  NEXT();
l_cmp_l:
  PUSH(tv_cmp_l(f, op, values, n));
  NEXT();
l_like:
  PUSH(like_tv(f, (uint32_t)op->arg, slot_value(values, n, op->slot), op->neg));
  NEXT();
l_in:
  PUSH(in_tv(f, (uint32_t)op->arg, slot_value(values, n, op->slot), op->neg));
  NEXT();
l_bool:
  PUSH(tv_bool(op, values, n));
  NEXT();
l_isnull:
  PUSH((slot_value(values, n, op->slot)->type == MQR_VALUE_NULL) != op->neg);
  NEXT();
l_between:
  PUSH(tv_between(f, op, values, n));
  NEXT();
l_value:
  r = run_values(f, (uint32_t)op->arg, (uint32_t)op->arg2, values, n);
  PUSH(tv(&r));
  NEXT();
l_not:
  tos = not_tab[tos + 1];
  NEXT();
l_and_jump:
  if (tos == 0) JUMP(f->cprog + op->arg); /* FALSE AND anything is FALSE */
  NEXT();
l_or_jump:
  if (tos == 1) JUMP(f->cprog + op->arg); /* TRUE OR anything is TRUE */
  NEXT();
l_and:
  tos = and_tab[st[--sp] + 1][tos + 1];
  NEXT();
l_or:
  tos = or_tab[st[--sp] + 1][tos + 1];
  NEXT();
#undef PUSH
#undef NEXT
#undef JUMP
done:
  return sp == 1 ? tos : MQR_FILTER_UNKNOWN;
}

int mqr_filter_eval(const mqr_filter_t *f, const mqr_value_t *values, uint32_t n) {
  if (f == NULL) return MQR_FILTER_TRUE;
  /* The common selectors (one leaf, or two joined by AND or OR, the second perhaps under
   * NOT): their leaves' own functions (leaf.c), without the program's dispatch and
   * stack. */
  if (__builtin_expect(n < f->two.need, 0)) return run_program(f, values, n); /* checks each slot */
  const mqr__fleaf_t *l = f->two.l;                                           /* at f itself */
  return l->fn(l, values, n, 0);
}

int mqr__filter_run_leaf(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc) {
  (void)acc;
  return run_program(l->f, values, n);
}

/* ---- the public calls ------------------------------------------------------------------------- */

#define HYPHENATED "hyphenated_props:"
#define CONVERT "convert_string_expressions:"

void mqr_filter_free(mqr_filter_t *f) {
  if (f == NULL) return;
  mqr_free(f->text);
  mqr_free(f->strings);
  mqr_free(f->nodes);
  mqr_free(f->pat);
  mqr_free(f->pats);
  mqr_free(f->lbytes);
  mqr_free(f->segs);
  mqr_free(f->set);
  mqr_free(f->sets);
  mqr_free(f->slot_names);
  mqr_free(f->prog);
  mqr_free(f->cprog);
  mqr_free(f);
}

int mqr_filter_compile(mqr_str_t text, mqr_filter_resolve_fn resolve, void *ctx, mqr_filter_t **out, mqr_error_t *err) {
  if (text.len > 65536) return mqr_error_set(err, MQR_ELIMIT, "a selector of %zu bytes: at most 65536", text.len);
  mqr_filter_t *f = mqr_calloc(1, sizeof *f);
  if (f == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a filter");
  /* Artemis's prefixes, in either order: hyphenated_props: (a '-' inside a name) and
   * convert_string_expressions: (strings compared with numbers read as numbers). */
  size_t skip = 0;
  for (bool more = true; more;) {
    more = false;
    mqr_str_t rest = mqr_str_n(text.ptr + skip, text.len - skip);
    if (!f->hyphenated && rest.len >= strlen(HYPHENATED) && memcmp(rest.ptr, HYPHENATED, strlen(HYPHENATED)) == 0)
      skip += strlen(HYPHENATED), f->hyphenated = more = true;
    if (!f->convert_strings && rest.len >= strlen(CONVERT) && memcmp(rest.ptr, CONVERT, strlen(CONVERT)) == 0)
      skip += strlen(CONVERT), f->convert_strings = more = true;
  }
  f->text_len = text.len - skip;
  f->text = mqr_malloc(f->text_len + 1);
  f->strings = mqr_malloc(16);
  f->cap_strings = 16;
  if (f->text == NULL || f->strings == NULL) {
    mqr_filter_free(f);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a filter");
  }
  if (f->text_len) memcpy(f->text, text.ptr + skip, f->text_len);
  f->text[f->text_len] = 0;
  int rc = mqr__filter_parse(f, resolve, ctx, err);
  if (rc == 0) rc = mqr__filter_program(f, err);
  if (rc) {
    if (err && skip && err->column) err->column += (uint32_t)skip; /* columns of the text as given */
    mqr_filter_free(f);
    return rc;
  }
  *out = f;
  return 0;
}

uint32_t mqr_filter_slot_count(const mqr_filter_t *f) { return f->n_slots; }

mqr_str_t mqr_filter_slot_name(const mqr_filter_t *f, uint32_t slot) {
  return slot < f->n_slots ? f->slot_names[slot] : mqr_str_n(NULL, 0);
}

mqr_str_t mqr_filter_text(const mqr_filter_t *f) { return mqr_str_n(f->text, f->text_len); }
