/* A compiled codec: a plan of operations over a C value, made once from a schema and a
 * C type description (compile.c), walked by the encoder and decoder (codec.c).
 *
 * Nested records are flattened into their parent's plan (offsets added up), so a record
 * of records is one straight run of operations. Arrays, maps and unions point at plans of
 * their own, relative to an item (arrays, maps) or to the enclosing value (unions). */
#ifndef MQR_CODEC_PLAN_H
#define MQR_CODEC_PLAN_H

#include "binary.h"
#include "schema_int.h"

typedef enum {
  MQR__OP_BOOL,
  MQR__OP_INT,
  MQR__OP_LONG,
  MQR__OP_FLOAT,
  MQR__OP_DOUBLE,
  MQR__OP_STR,     /* string or bytes from an mqr_str_t */
  MQR__OP_STRS,    /* n strings in a row, at offs[0..n): one op, no dispatch between them */
  MQR__OP_ENUM,    /* int32 ordinal, checked against n symbols */
  MQR__OP_FIXED,   /* n bytes inline */
  MQR__OP_DEFAULT, /* encode: write the default's bytes; decode: skip the node */
  MQR__OP_ARRAY,   /* items by the sub-plan */
  MQR__OP_MAP,
  MQR__OP_UNION,     /* int32 branch, then branches[branch] */
  MQR__OP_INT_ARRAY, /* arrays of int32 / enum ordinals / float / double / int64, one loop */
  MQR__OP_ENUM_ARRAY,
  MQR__OP_FLOAT_ARRAY,
  MQR__OP_DOUBLE_ARRAY,
  MQR__OP_LONG_ARRAY,
} mqr__opcode_t;

typedef struct mqr__plan_s mqr__plan_t;

typedef struct {
  uint8_t code;
  uint32_t off;                 /* of the C value, from the plan's base */
  uint32_t n;                   /* enum symbols, fixed size, union branches, default length */
  uint32_t size;                /* array/map item stride */
  uint32_t min;                 /* least bytes per array item (map: per entry), for counts */
  const uint8_t *bytes;         /* DEFAULT */
  uint32_t *offs;               /* STRS */
  const mqr__avro_node_t *node; /* DEFAULT, to skip on decode */
  mqr__plan_t *sub;             /* ARRAY, MAP items */
  mqr__plan_t **branches;       /* UNION, NULL for a null branch */
} mqr__op_t;

struct mqr__plan_s {
  mqr__op_t *ops;
  uint32_t n, cap;
  bool flat; /* only ops up to MQR__OP_DEFAULT: no union, array or map */
};

struct mqr_avro_codec_s {
  const mqr_avro_schema_t *schema;
  mqr__arena_t arena; /* plans, defaults */
  mqr__plan_t *root;
  /* The fast leaves (codec.c) of a flat root of at least one op: its ops, and the most
   * they write with strings, fixeds and defaults under 64 bytes. */
  uint8_t fast; /* MQR__FAST_* */
  uint32_t fast_max;
  const mqr__op_t *fast_ops, *fast_last;
  /* A root of strings and bytes only (STR and STRS ops), at most MQR__FAST_BOUND bytes:
   * their offsets, which the encoder's cheapest leaf walks with no dispatch; else NULL. */
  const uint32_t *str_offs, *str_last;
};

/* Which pair of fast leaves a root gets. BOUNDED: no STRS and at most MQR__FAST_BOUND
 * bytes, so the encoder checks room once for all the ops and its leaf, with no inner
 * loop, saves two registers; CHECKED: any other flat root, room checked per op. */
enum { MQR__FAST_NONE, MQR__FAST_BOUNDED, MQR__FAST_CHECKED };
#define MQR__FAST_BOUND 1024

#endif
