/* The leaves of the common selectors as functions of their own (filter_int.h): one leaf,
 * or two joined by AND or OR, is what most selectors are, and mqr_filter_eval answers
 * those by calling each leaf's function rather than running the program. Each function
 * is chosen when the selector is compiled, for its operation and the shape of its
 * constant (a LIKE pattern that is a prefix, a suffix, both, or a run to find; a
 * comparison with a double or an integer), and reads its constant from the leaf itself.
 * A leaf with no function of its own here calls the program's (mqr__filter_leaf_tv).
 *
 * Each answers as the program's operation does: the tests compare them on random
 * selectors and messages. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "filter_int.h"

/* mqr_filter_eval calls a leaf only with the values it reads (two.need). */
static inline const mqr_value_t *at(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n) {
  (void)n;
  return &values[l->slot];
}

/* Up to 8 bytes packed into a word, so that two runs of the same length are equal when
 * their words are: two overlapping loads of 4 bytes, or of 2, or the one byte. Reads
 * only p[0..n). */
static inline uint64_t key8(const char *p, size_t n) {
  if (n - 2 < 2) { /* 2 or 3: the lengths of many keys, with one branch */
    uint16_t a, b;
    memcpy(&a, p, 2);
    memcpy(&b, p + n - 2, 2);
    return a | (uint32_t)b << 16;
  }
  if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + n - 4, 4);
    return a | (uint64_t)b << 32;
  }
  return n ? (unsigned char)p[0] : 0;
}

static inline uint64_t load8(const char *p) {
  uint64_t x;
  memcpy(&x, p, 8);
  return x;
}

static inline __attribute__((always_inline)) int tv_general(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                            uint32_t n) {
  return mqr__filter_leaf_tv(l->f, l->op, values, n);
}

static inline __attribute__((always_inline)) int tv_const(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                          uint32_t n) {
  (void)values;
  (void)n;
  return l->value;
}

/* slot = 'text' (<> with neg): a value of another type is FALSE, for <> too. */
static inline __attribute__((always_inline)) int tv_str_eq(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                           uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  if (__builtin_expect(v->type != MQR_VALUE_STRING, 0)) return v->type == MQR_VALUE_NULL ? -1 : 0;
  return (v->u.s.len == l->len && mqr__filter_eq_bytes(v->u.s.ptr, l->p, l->len)) != l->neg;
}

static inline __attribute__((always_inline)) int tv_str_eq8(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                            uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  if (__builtin_expect(v->type != MQR_VALUE_STRING, 0)) return v->type == MQR_VALUE_NULL ? -1 : 0;
  return (v->u.s.len == l->len && key8(v->u.s.ptr, l->len) == l->key) != l->neg;
}

/* slot cmp a double constant: any number is compared as a double. */
static inline __attribute__((always_inline)) int tv_cmp_d(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                          uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  double x;
  int t = mqr__filter_as_double(v, &x);
  if (t <= 0) return (int8_t)t;
  return (int)(l->mask >> (mqr__filter_cmp_double(x, l->k.d) + 1) & 1);
}

/* slot cmp an int or long constant: ints and longs as longs, the others as the program
 * compares them. */
static inline __attribute__((always_inline)) int tv_cmp_l(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                          uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  int64_t x;
  if (v->type == MQR_VALUE_INT)
    x = v->u.i;
  else if (v->type == MQR_VALUE_LONG)
    x = v->u.l;
  else
    return mqr__filter_leaf_tv(l->f, l->op, values, n);
  return (int)(l->mask >> ((x > l->k.l) - (x < l->k.l) + 1) & 1);
}

static inline __attribute__((always_inline)) int tv_bool(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  if (__builtin_expect(v->type == MQR_VALUE_BOOL, 1)) return v->u.b;
  return v->type == MQR_VALUE_NULL ? -1 : 0;
}

static inline __attribute__((always_inline)) int tv_isnull(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                           uint32_t n) {
  return (at(l, values, n)->type == MQR_VALUE_NULL) != l->neg;
}

/* slot IN (...): a value that is not a string is UNKNOWN, as Artemis has it. */
static inline __attribute__((always_inline)) int tv_in(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  if (__builtin_expect(v->type != MQR_VALUE_STRING, 0)) return -1;
  const mqr_str_t *items = l->k.set;
  for (uint32_t i = 0; i < l->len; i++)
    if (items[i].len == v->u.s.len && mqr__filter_eq_bytes(items[i].ptr, v->u.s.ptr, v->u.s.len)) return !l->neg;
  return l->neg;
}

/* IN a list of short strings: the value's word against theirs. */
static inline __attribute__((always_inline)) int tv_in8(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n) {
  const mqr_value_t *v = at(l, values, n);
  if (__builtin_expect(v->type != MQR_VALUE_STRING, 0)) return -1;
  size_t len = v->u.s.len;
  if (len > 8 || !(l->mask >> len & 1)) return l->neg; /* no string of its length */
  uint64_t k = key8(v->u.s.ptr, len);                  /* the value's word, once */
  for (uint32_t i = 0; i < l->len; i++)
    if (l->keys[i] == k && l->lens[i] == len) return !l->neg;
  return l->neg;
}

/* LIKE: NULL is UNKNOWN, a value of another type does not match. These have no _ and a
 * fixed shape: 'p%', '%q', 'p%q', '%p%', or 'p' (no %). */
#define LIKE_OPEN(v)                                                                                                   \
  const mqr_value_t *v = at(l, values, n);                                                                             \
  if (__builtin_expect(v->type != MQR_VALUE_STRING, 0)) return v->type == MQR_VALUE_NULL ? -1 : l->neg

static inline __attribute__((always_inline)) int tv_like_prefix(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                uint32_t n) {
  LIKE_OPEN(v);
  return (v->u.s.len >= l->len && mqr__filter_eq_bytes(v->u.s.ptr, l->p, l->len)) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_suffix(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                uint32_t n) {
  LIKE_OPEN(v);
  return (v->u.s.len >= l->len2 && mqr__filter_eq_bytes(v->u.s.ptr + v->u.s.len - l->len2, l->q, l->len2)) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_both(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                              uint32_t n) {
  LIKE_OPEN(v);
  size_t len = v->u.s.len;
  return (len >= (size_t)l->len + l->len2 && mqr__filter_eq_bytes(v->u.s.ptr, l->p, l->len) &&
          mqr__filter_eq_bytes(v->u.s.ptr + len - l->len2, l->q, l->len2)) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_exact(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                               uint32_t n) {
  LIKE_OPEN(v);
  return (v->u.s.len == l->len && mqr__filter_eq_bytes(v->u.s.ptr, l->p, l->len)) != l->neg;
}

/* The same with runs of 8 bytes or fewer, compared as words: a value of 8 bytes or more
 * as its first and last 8, masked; a shorter one packed as the runs are. */
static inline __attribute__((always_inline)) int tv_like_prefix8(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                 uint32_t n) {
  LIKE_OPEN(v);
  size_t len = v->u.s.len;
  if (len >= 8) return ((load8(v->u.s.ptr) & l->pm) == l->pk) != l->neg;
  return (len >= l->len && key8(v->u.s.ptr, l->len) == l->key) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_suffix8(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                 uint32_t n) {
  LIKE_OPEN(v);
  size_t len = v->u.s.len;
  if (len >= 8) return ((load8(v->u.s.ptr + len - 8) & l->qm) == l->qk) != l->neg;
  return (len >= l->len2 && key8(v->u.s.ptr + len - l->len2, l->len2) == l->key2) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_both8(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                               uint32_t n) {
  LIKE_OPEN(v);
  size_t len = v->u.s.len;
  const char *s = v->u.s.ptr;
  if (len < (size_t)l->len + l->len2) return l->neg;
  if (len >= 8) return (((load8(s) & l->pm) ^ l->pk) | ((load8(s + len - 8) & l->qm) ^ l->qk)) == 0 ? !l->neg : l->neg;
  return (key8(s, l->len) == l->key && key8(s + len - l->len2, l->len2) == l->key2) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_exact8(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                uint32_t n) {
  LIKE_OPEN(v);
  return (v->u.s.len == l->len && key8(v->u.s.ptr, l->len) == l->key) != l->neg;
}

static inline __attribute__((always_inline)) int tv_like_contains(const mqr__fleaf_t *l, const mqr_value_t *values,
                                                                  uint32_t n) {
  LIKE_OPEN(v);
  bool m = v->u.s.len >= l->len && memmem(v->u.s.len ? v->u.s.ptr : "", v->u.s.len, l->p, l->len) != NULL;
  return m != l->neg;
}

#undef LIKE_OPEN

/* The leaves as functions: each answers its truth value t, or, when a second leaf
 * follows it, passes t on to that one's function in a tail call, so that two leaves run
 * as two jumps with no frame between them. The last leaf answers tab[acc][t + 1]: acc is
 * the first one's t + 1, or 0 when it is the only leaf (tab[0] then answers t). */
#define LEAF(name)                                                                                                     \
  static int name##_one(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc) {                       \
    (void)acc;                                                                                                         \
    return tv_##name(l, values, n);                                                                                    \
  }                                                                                                                    \
  static int name##_first(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc) {                     \
    (void)acc;                                                                                                         \
    int t = tv_##name(l, values, n);                                                                                   \
    if (t == l->stop) return l->stopped;                                                                               \
    return l[1].fn(&l[1], values, n, t + 1);                                                                           \
  }                                                                                                                    \
  static int name##_last(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc) {                      \
    return l->tab[acc][tv_##name(l, values, n) + 1];                                                                   \
  }                                                                                                                    \
  static const mqr__fleaf_fn leaf_##name[3] = {name##_one, name##_first, name##_last};
LEAF(general)
LEAF(const)
LEAF(str_eq)
LEAF(str_eq8)
LEAF(cmp_d)
LEAF(cmp_l)
LEAF(bool)
LEAF(isnull)
LEAF(in)
LEAF(in8)
LEAF(like_prefix)
LEAF(like_suffix)
LEAF(like_both)
LEAF(like_exact)
LEAF(like_prefix8)
LEAF(like_suffix8)
LEAF(like_both8)
LEAF(like_exact8)
LEAF(like_contains)
#undef LEAF

/* A run of n bytes (8 or fewer) placed at byte at of a word, in memory order (so in any
 * byte order): the word, and the mask of its bytes. */
static void word_of(const char *run, size_t n, size_t at, uint64_t *word, uint64_t *mask) {
  char w[8] = {0}, m[8] = {0};
  memcpy(w + at, run, n);
  memset(m + at, 0xFF, n);
  *word = load8(w);
  *mask = load8(m);
}

/* A LIKE pattern's function, if its shape has one; its runs into l->p/len, l->q/len2. */
static const mqr__fleaf_fn *like_shape(const mqr_filter_t *f, uint32_t k, mqr__fleaf_t *l) {
  if (!f->pats[k].simple || f->pats[k].n_seg == 0 || f->pats[k].n_seg > 2) return NULL;
  uint32_t first = f->pats[k].seg, nseg = f->pats[k].n_seg, last = first + nseg - 1;
  bool lead = f->pats[k].lead, trail = f->pats[k].trail;
  l->p = f->lbytes + f->segs[first].off;
  l->len = f->segs[first].len;
  l->q = f->lbytes + f->segs[last].off;
  l->len2 = f->segs[last].len;
  bool short_runs = l->len <= 8 && l->len2 <= 8;
  l->key = key8(l->p, l->len);
  l->key2 = key8(l->q, l->len2);
  if (short_runs) {
    word_of(l->p, l->len, 0, &l->pk, &l->pm);
    word_of(l->q, l->len2, 8 - l->len2, &l->qk, &l->qm);
  }
  if (nseg == 2) return lead || trail ? NULL : short_runs ? leaf_like_both8 : leaf_like_both;
  if (lead && trail) return leaf_like_contains;
  if (lead) return short_runs ? leaf_like_suffix8 : leaf_like_suffix;
  if (trail) return short_runs ? leaf_like_prefix8 : leaf_like_prefix;
  return short_runs ? leaf_like_exact8 : leaf_like_exact;
}

/* An IN list's function: as words when it is short and its strings are. */
static const mqr__fleaf_fn *in_shape(const mqr_filter_t *f, uint32_t k, mqr__fleaf_t *l) {
  l->k.set = f->set + f->sets[k].off;
  l->len = f->sets[k].len;
  if (l->len > MQR__LEAF_IN_MAX) return leaf_in;
  memset(l->lens, 0xFF, sizeof l->lens); /* no length: the places the list leaves */
  for (uint32_t i = 0; i < l->len; i++) {
    if (l->k.set[i].len > 8) return leaf_in;
    l->keys[i] = key8(l->k.set[i].ptr, l->k.set[i].len);
    l->lens[i] = (uint8_t)l->k.set[i].len;
    l->mask |= 1u << l->lens[i];
  }
  return leaf_in8;
}

void mqr__filter_leaf(const mqr_filter_t *f, const mqr__cop_t *op, int role, mqr__fleaf_t *l) {
  *l = (mqr__fleaf_t){.slot = (uint32_t)op->slot, .neg = op->neg, .f = f, .op = op};
  const mqr_value_t *k = op->op == C_STR_EQ || op->op == C_CMP_D || op->op == C_CMP_L ? &f->nodes[op->arg].v : NULL;
  const mqr__fleaf_fn *fn = NULL;
  switch ((mqr__cop_kind_t)op->op) {
  case C_CONST:
    l->value = (int8_t)op->arg;
    fn = leaf_const;
    break;
  case C_STR_EQ:
    l->p = k->u.s.len ? k->u.s.ptr : "";
    l->len = (uint32_t)k->u.s.len;
    l->key = key8(l->p, l->len);
    fn = l->len <= 8 ? leaf_str_eq8 : leaf_str_eq;
    break;
  case C_CMP_D:
    l->k.d = k->u.d;
    l->mask = (uint32_t)op->arg2;
    fn = leaf_cmp_d;
    break;
  case C_CMP_L:
    l->k.l = k->type == MQR_VALUE_INT ? k->u.i : k->u.l;
    l->mask = (uint32_t)op->arg2;
    fn = leaf_cmp_l;
    break;
  case C_BOOL: fn = leaf_bool; break;
  case C_ISNULL: fn = leaf_isnull; break;
  case C_IN: fn = in_shape(f, (uint32_t)op->arg, l); break;
  case C_LIKE: fn = like_shape(f, (uint32_t)op->arg, l); break;
  default: break;
  }
  l->fn = (fn ? fn : leaf_general)[role];
}
