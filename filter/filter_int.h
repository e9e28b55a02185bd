/* Filters' insides (mqr/filter.h), shared by parse.c (text to a tree of nodes) and eval.c
 * (the tree to a program; the semantics; the program's evaluation, and the tree's, which
 * the tests compare with it). Nothing here is installed. */
#ifndef MQR_FILTER_INT_H
#define MQR_FILTER_INT_H

#include <math.h>
#include <string.h>

#include "../common/grow.h"
#include "mqr/filter.h"

typedef enum {
  F_CONST, /* v */
  F_IDENT, /* slot */
  F_NEG,
  F_ADD,
  F_SUB,
  F_MUL,
  F_DIV,
  F_MOD,
  F_EQ,
  F_NE,
  F_LT,
  F_LE,
  F_GT,
  F_GE,
  F_AND,
  F_OR,
  F_NOT,
  F_BETWEEN, /* a BETWEEN b AND c */
  F_NOT_BETWEEN,
  F_LIKE, /* a LIKE pattern aux */
  F_NOT_LIKE,
  F_IN, /* a IN set aux */
  F_NOT_IN,
  F_IS_NULL,
  F_IS_NOT_NULL,
  F_BOOLCAST /* a value where a condition is wanted */
} mqr__fkind_t;

typedef struct {
  mqr__fkind_t kind;
  int32_t a, b, c; /* children (node indices), -1: none */
  int32_t slot;    /* F_IDENT */
  uint32_t aux;    /* F_LIKE: pattern; F_IN: set */
  uint32_t column; /* 1-based, of its operator or token */
  uint32_t start;  /* 1-based, where its subtree's text begins */
  mqr_value_t v;   /* F_CONST */
} mqr__fnode_t;

/* A LIKE pattern: code points, with these for the wildcards. */
#define MQR__LIKE_ANY (-1) /* % */
#define MQR__LIKE_ONE (-2) /* _ */

/* One UTF-8 code point at *s (advanced); a bad byte reads as itself. */
static inline int32_t mqr__filter_code_point(const unsigned char **s, const unsigned char *end) {
  unsigned c = *(*s)++;
  if (c < 0x80 || *s >= end) return (int32_t)c;
  int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  uint32_t v = c & (0x3Fu >> more);
  while (more-- > 0 && *s < end && (**s & 0xC0) == 0x80) v = (v << 6) | (*(*s)++ & 0x3F);
  return (int32_t)v;
}

/* Bytes equal: short runs compared inline (a property value, a literal) with two
 * overlapping loads from each end, where a call of memcmp costs more than the
 * comparison. */
static inline bool mqr__filter_eq_bytes(const char *a, const char *b, size_t n) {
  if (n > 16) return memcmp(a, b, n) == 0;
  if (n >= 8) {
    uint64_t x, y, z, w;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    memcpy(&z, a + n - 8, 8);
    memcpy(&w, b + n - 8, 8);
    return ((x ^ y) | (z ^ w)) == 0;
  }
  if (n >= 4) {
    uint32_t x, y, z, w;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    memcpy(&z, a + n - 4, 4);
    memcpy(&w, b + n - 4, 4);
    return ((x ^ y) | (z ^ w)) == 0;
  }
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

/* Java's Double.compare: NaN equals itself and is above everything, -0.0 below 0.0
 * (Artemis compares numbers with compareTo). */
static inline int mqr__filter_cmp_double(double x, double y) {
  if (x < y) return -1;
  if (x > y) return 1;
  bool nx = isnan(x), ny = isnan(y);
  if (nx || ny) return nx && ny ? 0 : nx ? 1 : -1;
  bool sx = signbit(x), sy = signbit(y); /* equal: only the sign of a zero can differ */
  return sx == sy ? 0 : sx ? -1 : 1;
}

/* A value compared with a double constant: a number as a double, into *x, and 1; -1
 * (UNKNOWN) for NULL; 0 (FALSE: unlike types) for anything else. */
static inline int mqr__filter_as_double(const mqr_value_t *v, double *x) {
  /* tests in the order of the common types rather than a switch's jump table */
  mqr_value_type_t t = v->type;
  if (t == MQR_VALUE_DOUBLE)
    *x = v->u.d;
  else if (t == MQR_VALUE_INT)
    *x = v->u.i;
  else if (t == MQR_VALUE_LONG)
    *x = (double)v->u.l;
  else if (t == MQR_VALUE_FLOAT)
    *x = v->u.f;
  else
    return t == MQR_VALUE_NULL ? -1 : 0;
  return 1;
}

typedef struct {
  uint8_t op;  /* an mqr__fkind_t */
  int32_t arg; /* F_CONST: node; F_IDENT: slot; F_LIKE/F_IN: pattern/set */
} mqr__fop_t;

/* A leaf of the condition program made self-contained (leaf.c): its function, chosen at
 * compile time for its operation and its constant's shape (a LIKE's prefix, suffix or
 * both; a comparison's type), with the constant at hand. Answers a truth value: 1, 0, or
 * -1 for UNKNOWN. */
#define MQR__LEAF_IN_MAX 4
typedef struct mqr__fleaf_s mqr__fleaf_t;
typedef int (*mqr__fleaf_fn)(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc);
struct mqr__fleaf_s {
  mqr__fleaf_fn fn;
  uint32_t slot;
  int8_t stop, stopped; /* a first leaf's truth value that decides, and the answer then */
  int8_t tab[3][3];     /* the last leaf's: the answer, by the first's truth value and its own */
  uint8_t neg;          /* <>, NOT LIKE, NOT IN, IS NOT NULL */
  int8_t value;         /* a constant's truth value */
  uint32_t mask;        /* a comparison's truth mask (MQR__CMP_MASK) */
  const char *p, *q;    /* a string constant; a LIKE's first and last runs */
  uint32_t len, len2;
  uint64_t key, key2; /* p's and q's bytes packed (leaf.c's key8), when 8 or fewer */
  /* The same as the first and last bytes of a word (leaf.c's LIKE on a value of 8 bytes
   * or more): p in the low bytes of pk, q in the high bytes of qk, pm and qm their masks */
  uint64_t pm, pk, qm, qk;
  /* IN of MQR__LEAF_IN_MAX or fewer strings of 8 bytes or fewer: theirs */
  uint64_t keys[MQR__LEAF_IN_MAX];
  uint8_t lens[MQR__LEAF_IN_MAX];
  union {
    double d;
    int64_t l;
    const mqr_str_t *set; /* IN: len items */
  } k;
  const struct mqr_filter_s *f; /* what the general leaf needs */
  const struct mqr__cop_s *op;
};

struct mqr_filter_s {
  /* First, so that mqr_filter_eval finds it at f itself: what it calls. The program's
   * shape when it is one leaf, or two leaves joined by AND or OR (the second perhaps under
   * NOT): the first leaf's own function, which calls the second's, without the program
   * (ops 1 or 2); ops 0: l[0] is a leaf whose function runs the program. */
  struct {
    mqr__fleaf_t l[2];
    uint32_t need; /* the leaves read values[0..need) unchecked: fewer runs the program */
    uint8_t ops;
  } two;
  char *text; /* the selector, copied; string constants point into strings */
  size_t text_len;
  char *strings; /* unescaped string literals */
  size_t n_strings, cap_strings;
  mqr__fnode_t *nodes;
  uint32_t n_nodes, cap_nodes;
  int32_t root;
  int32_t *pat; /* LIKE patterns, back to back */
  uint32_t n_pat, cap_pat;
  struct {
    uint32_t off, len;
    /* Without _, a pattern is literal runs between %s, matched as bytes: segs[seg..seg +
     * n_seg) in lbytes, with whether it begins and ends with %. */
    bool simple, lead, trail;
    uint32_t seg, n_seg;
  } * pats;
  char *lbytes;
  uint32_t n_lbytes, cap_lbytes;
  struct {
    uint32_t off, len;
  } * segs;
  uint32_t n_segs, cap_segs;
  uint32_t n_pats, cap_pats;
  mqr_str_t *set; /* IN lists, back to back */
  uint32_t n_set, cap_set;
  struct {
    uint32_t off, len;
  } * sets;
  uint32_t n_sets, cap_sets;
  mqr_str_t *slot_names; /* by slot */
  uint32_t n_slots, cap_slots;
  mqr__fop_t *prog; /* value programs, for the conditions that need one */
  uint32_t n_prog, cap_prog;
  uint32_t depth;           /* the value stack they need */
  struct mqr__cop_s *cprog; /* the condition program: what mqr_filter_eval runs */
  uint32_t n_cprog, cap_cprog;
  uint32_t cdepth; /* its stack of truth values */
  bool hyphenated;
  bool convert_strings; /* convert_string_expressions: (eval.c) */
};

/* The condition program: truth values (1, 0, -1 for UNKNOWN) on a stack; the common
 * leaves fused into one operation each (a property compared with a constant, LIKE, IN,
 * IS NULL, BETWEEN constants, read as a boolean); AND and OR short-circuit (a FALSE left
 * side of AND is the answer); any other condition runs a value program. */
typedef enum {
  C_CONST,   /* arg: 1 or 0 */
  C_STR_EQ,  /* slot = (or <> with neg) the string constant node arg */
  C_LIKE,    /* slot [NOT] LIKE pattern arg */
  C_IN,      /* slot [NOT] IN set arg */
  C_BOOL,    /* slot read as a boolean */
  C_ISNULL,  /* slot IS [NOT] NULL */
  C_BETWEEN, /* slot [NOT] BETWEEN constant nodes arg AND arg2 */
  C_VALUE,   /* the value program prog[arg..arg2) */
  C_NOT,
  C_AND_JUMP, /* the top is FALSE: go to arg, leaving it */
  C_OR_JUMP,  /* the top is TRUE: go to arg, leaving it */
  C_AND,
  C_OR,
  C_CMP_D, /* slot cmp the double constant node arg; arg2 the truth mask (below) */
  C_CMP_L, /* slot cmp the int or long constant node arg; arg2 the truth mask */
  C_END    /* the program's last operation: the answer is on the stack */
} mqr__cop_kind_t;

/* A comparison's truth mask: bit (c + 1) is set when an order c (-1, 0, 1) makes it
 * true, so that one shift answers any of the six comparisons. */
#define MQR__CMP_MASK(kind)                                                                                            \
  ((kind) == F_EQ ? 2 : (kind) == F_NE ? 5 : (kind) == F_LT ? 1 : (kind) == F_LE ? 3 : (kind) == F_GT ? 4 : 6)

typedef struct mqr__cop_s {
  uint8_t op;  /* an mqr__cop_kind_t */
  uint8_t neg; /* NOT LIKE, NOT IN, IS NOT NULL, NOT BETWEEN, <> */
  uint8_t cmp; /* C_CMP_D, C_CMP_L: an mqr__fkind_t from F_EQ to F_GE */
  int32_t slot;
  int32_t arg, arg2;
} mqr__cop_t;

/* parse.c: the tree of text into f (nodes, root, patterns, sets, slots). 0 or an error. */
int mqr__filter_parse(mqr_filter_t *f, mqr_filter_resolve_fn resolve, void *ctx, mqr_error_t *err);

/* eval.c */
/* Any leaf of the condition program as a truth value, op on f's own tables: the general
 * leaf function. */
int mqr__filter_leaf_tv(const mqr_filter_t *f, const struct mqr__cop_s *op, const mqr_value_t *values, uint32_t n);
/* leaf.c: the leaf for op (a leaf operation of f's condition program), into *out; role
 * MQR__LEAF_ONE (the selector is this leaf), _FIRST (of two: out[1] follows) or _LAST. */
enum { MQR__LEAF_ONE, MQR__LEAF_FIRST, MQR__LEAF_LAST };
void mqr__filter_leaf(const mqr_filter_t *f, const struct mqr__cop_s *op, int role, mqr__fleaf_t *out);
/* eval.c: the leaf function that runs l->f's whole condition program. */
int mqr__filter_run_leaf(const mqr__fleaf_t *l, const mqr_value_t *values, uint32_t n, int acc);

int mqr__filter_program(mqr_filter_t *f, mqr_error_t *err); /* the tree into a program */
/* The tree walked, node by node: what the program must agree with (tests). */
mqr_value_t mqr__filter_eval_tree(const mqr_filter_t *f, int32_t node, const mqr_value_t *values, uint32_t n);

#endif
