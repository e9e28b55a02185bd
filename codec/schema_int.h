/* The parsed and compiled form of an Avro schema, shared by the codec's sources.
 * Nothing here is installed.
 *
 * A schema is a graph of nodes in one arena: named references are resolved to pointers
 * when parsed (a recursive record points at itself), enum symbols have an open-addressed
 * symbol -> ordinal table, and each node knows the least number of bytes its datum can
 * take (min_size), which bounds counts in hostile input. */
#ifndef MQR_CODEC_SCHEMA_INT_H
#define MQR_CODEC_SCHEMA_INT_H

#include "binary.h"
#include "json.h"
#include "mqr/codec.h"

typedef struct mqr__avro_node_s mqr__avro_node_t;

typedef struct {
  mqr_str_t name;
  mqr__avro_node_t *type;
  const mqr__json_t *def; /* default value, or NULL */
  mqr_str_t *aliases;
  uint32_t n_aliases;
} mqr__avro_field_t;

struct mqr__avro_node_s {
  uint8_t type;    /* mqr_avro_type_t */
  uint8_t logical; /* mqr_avro_logical_t */
  bool finite;     /* a datum of it can be written in finitely many bytes */
  uint32_t n;      /* fields, symbols or branches; a fixed's size */
  uint32_t min_size;
  mqr_str_t fullname; /* named types */
  mqr_str_t *aliases; /* full names */
  uint32_t n_aliases;
  mqr__avro_field_t *fields;
  mqr_str_t *symbols;
  uint32_t *symtab; /* ordinal + 1 per slot, 0 empty; symmask + 1 slots */
  uint32_t symmask;
  int32_t enum_default;    /* ordinal, or -1 */
  mqr__avro_node_t *items; /* array items, map values */
  mqr__avro_node_t **branches;
  int32_t precision, scale; /* decimal */
};

struct mqr_avro_schema_s {
  mqr__arena_t arena;
  mqr__avro_node_t *root;
  mqr_str_t canonical;
  mqr_str_t text; /* as given to mqr_avro_schema_parse */
  uint64_t fingerprint;
  mqr__avro_node_t **named; /* named types in definition order */
  uint32_t n_named;
};

/* The primitive types' names, by mqr_avro_type_t (null to string). */
extern const char *const mqr__avro_primitive_names[8];

/* canonical.c: the Parsing Canonical Form of the graph from root, in arena. 0 or
 * MQR_ENOMEM. */
int mqr__avro_canonical(mqr__arena_t *arena, mqr__avro_node_t *root, mqr_str_t *out);

/* The ordinal of symbol s in enum e, or -1. */
int32_t mqr__avro_enum_ordinal(const mqr__avro_node_t *e, const char *s, size_t n);

/* The name a union branch goes by in JSON: a named type's full name, else the type's. */
mqr_str_t mqr__avro_branch_name(const mqr__avro_node_t *n);

/* Skips (validates) one binary datum of node n, found at nesting depth `depth` (a datum
 * deeper than MQR_AVRO_MAX_DEPTH fails, counted as every reader counts it: one level per
 * record, array or map, and union). */
int mqr__avro_skip_node(mqr__rd_t *r, const mqr__avro_node_t *n, int depth);

/* The binary encoding of a schema default (plain JSON; a union's is its first branch's
 * value) for node n, appended to out. */
int mqr__avro_encode_default(const mqr__avro_node_t *n, const mqr__json_t *v, mqr_avro_buf_t *out, mqr_error_t *err);

#endif
