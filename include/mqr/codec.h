/* mqr codec: Avro schemas parsed and compiled once, then binary and JSON encoding with no
 * name lookup per datum. Byte-identical with Apache Avro 1.11.
 *
 * A schema (mqr_avro_schema_t) is immutable once parsed: named types are resolved, enum
 * symbol tables built, defaults validated, its Parsing Canonical Form and CRC-64-AVRO
 * fingerprint computed. Any number of threads may read one at a time. */
#ifndef MQR_CODEC_H
#define MQR_CODEC_H

#include "mqr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Avro types. */
typedef enum {
  MQR_AVRO_NULL,
  MQR_AVRO_BOOLEAN,
  MQR_AVRO_INT,
  MQR_AVRO_LONG,
  MQR_AVRO_FLOAT,
  MQR_AVRO_DOUBLE,
  MQR_AVRO_BYTES,
  MQR_AVRO_STRING,
  MQR_AVRO_RECORD,
  MQR_AVRO_ENUM,
  MQR_AVRO_ARRAY,
  MQR_AVRO_MAP,
  MQR_AVRO_UNION,
  MQR_AVRO_FIXED,
} mqr_avro_type_t;

/* Logical types, kept as annotations; an unknown or invalid one is NONE. */
typedef enum {
  MQR_AVRO_LOGICAL_NONE,
  MQR_AVRO_LOGICAL_DECIMAL,
  MQR_AVRO_LOGICAL_UUID,
  MQR_AVRO_LOGICAL_DATE,
  MQR_AVRO_LOGICAL_TIME_MILLIS,
  MQR_AVRO_LOGICAL_TIME_MICROS,
  MQR_AVRO_LOGICAL_TIMESTAMP_MILLIS,
  MQR_AVRO_LOGICAL_TIMESTAMP_MICROS,
  MQR_AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS,
  MQR_AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS,
  MQR_AVRO_LOGICAL_DURATION,
} mqr_avro_logical_t;

/* Limits that hostile input meets. */
#define MQR_AVRO_MAX_DEPTH 128        /* nesting of a datum (records, arrays, maps, unions) */
#define MQR_AVRO_MAX_ITEMS (1u << 24) /* items in one array or map block whose items may take 0 bytes */

typedef struct mqr_avro_schema_s mqr_avro_schema_t;

/* Parses and compiles a schema from JSON text. On success *out owns everything it needs
 * (the text may be freed). Errors: MQR_ESYNTAX (bad JSON) and MQR_ESCHEMA (not a valid
 * Avro schema), with err's line and column pointing into the text and its message naming
 * the path (`fields[3].type.items: ...`); MQR_ENOMEM. *out is written only on success. */
MQR_EXTERN int mqr_avro_schema_parse(const char *json, size_t len, mqr_avro_schema_t **out, mqr_error_t *err);

/* Frees a schema; NULL is accepted. */
MQR_EXTERN void mqr_avro_schema_destroy(mqr_avro_schema_t *s);

/* The schema's Parsing Canonical Form, valid as long as the schema. */
MQR_EXTERN mqr_str_t mqr_avro_schema_canonical(const mqr_avro_schema_t *s);

/* The CRC-64-AVRO fingerprint of the canonical form. */
MQR_EXTERN uint64_t mqr_avro_schema_fingerprint(const mqr_avro_schema_t *s);

/* The type of the schema's root. */
MQR_EXTERN mqr_avro_type_t mqr_avro_schema_type(const mqr_avro_schema_t *s);

/* CRC-64-AVRO of n bytes. */
MQR_EXTERN uint64_t mqr_avro_crc64(const void *p, size_t n);

/* ---------------------------------------------------------------------------------- */
/* Output buffers                                                                       */
/* ---------------------------------------------------------------------------------- */

/* Where encoders write: caller storage of fixed size, or a buffer that grows through
 * mqr_realloc. len is what has been written. */
typedef struct {
  uint8_t *data;
  size_t len;
  size_t cap;
  bool growable;
} mqr_avro_buf_t;

/* A fixed buffer over caller storage: an encode that does not fit fails with
 * MQR_ENOSPC and says the size it needed. */
static inline void mqr_avro_buf_init(mqr_avro_buf_t *b, void *storage, size_t cap) {
  b->data = (uint8_t *)storage;
  b->len = 0;
  b->cap = cap;
  b->growable = false;
}

/* A growable buffer, empty; release with mqr_avro_buf_free. */
static inline void mqr_avro_buf_init_growable(mqr_avro_buf_t *b) {
  b->data = NULL;
  b->len = b->cap = 0;
  b->growable = true;
}

MQR_EXTERN void mqr_avro_buf_free(mqr_avro_buf_t *b);

/* Makes room for n more bytes: 0, MQR_ENOSPC (fixed buffer) or MQR_ENOMEM. */
MQR_EXTERN int mqr_avro_buf_reserve(mqr_avro_buf_t *b, size_t n);

/* ---------------------------------------------------------------------------------- */
/* JSON encoding <-> binary                                                             */
/* ---------------------------------------------------------------------------------- */

/* Encodes one datum given in Avro's JSON encoding (unions as {"name": value}, null bare;
 * bytes and fixed as strings of code points 0-255) as binary, appended to out. A record
 * field that is absent takes its default. Errors: MQR_ESYNTAX, MQR_EBADDATA (the JSON
 * does not match the schema; err names the path and the line and column), MQR_ENOSPC,
 * MQR_ENOMEM. On error out->len is unchanged. */
MQR_EXTERN int mqr_avro_json_to_binary(const mqr_avro_schema_t *s, const char *json, size_t len, mqr_avro_buf_t *out,
                                       mqr_error_t *err);

/* Decodes one binary datum from in[0..len) and appends it to out as JSON text (no
 * newline). *used (may be NULL) gets the bytes the datum took. Errors: MQR_ETRUNCATED,
 * MQR_EBADDATA (bad union index or enum ordinal, int out of range, overlong varint,
 * negative length), MQR_ELIMIT, with the byte offset in err's message; MQR_ENOSPC,
 * MQR_ENOMEM. On error out->len is unchanged. */
MQR_EXTERN int mqr_avro_binary_to_json(const mqr_avro_schema_t *s, const uint8_t *in, size_t len, size_t *used,
                                       mqr_avro_buf_t *out, mqr_error_t *err);

/* Checks that in[0..len) starts with one valid datum and says how many bytes it took.
 * Errors as mqr_avro_binary_to_json's, but strings are not checked for UTF-8 (as Avro C
 * and Java's decoders do not): skipping reads no string's bytes. */
MQR_EXTERN int mqr_avro_skip(const mqr_avro_schema_t *s, const uint8_t *in, size_t len, size_t *used, mqr_error_t *err);

/* ---------------------------------------------------------------------------------- */
/* Single-object encoding: C3 01, the schema's fingerprint little-endian, the datum      */
/* ---------------------------------------------------------------------------------- */

#define MQR_AVRO_SINGLE_OBJECT_HEADER 10 /* bytes before the datum */

/* Appends s's single-object header to out. 0, MQR_ENOSPC or MQR_ENOMEM. */
MQR_EXTERN int mqr_avro_single_object_header(const mqr_avro_schema_t *s, mqr_avro_buf_t *out);

/* Reads the header at in: the writer schema's fingerprint into *fingerprint; the datum
 * starts MQR_AVRO_SINGLE_OBJECT_HEADER bytes in. Errors: MQR_ETRUNCATED (fewer bytes
 * than a header), MQR_EBADDATA (no C3 01 marker). */
MQR_EXTERN int mqr_avro_single_object_fingerprint(const uint8_t *in, size_t len, uint64_t *fingerprint,
                                                  mqr_error_t *err);

/* ---------------------------------------------------------------------------------- */
/* Compiled codecs over C structs                                                       */
/* ---------------------------------------------------------------------------------- */

/* How a C value is laid out, for binding a struct to a schema. */
typedef enum {
  MQR_AVRO_C_NULL,   /* nothing stored */
  MQR_AVRO_C_BOOL,   /* bool */
  MQR_AVRO_C_INT32,  /* int32_t: int, or an enum's ordinal */
  MQR_AVRO_C_INT64,  /* int64_t: long */
  MQR_AVRO_C_FLOAT,  /* float */
  MQR_AVRO_C_DOUBLE, /* double */
  MQR_AVRO_C_STR,    /* mqr_str_t: string or bytes */
  MQR_AVRO_C_FIXED,  /* uint8_t[size], inline */
  MQR_AVRO_C_RECORD, /* a struct, inline, described by fields */
  MQR_AVRO_C_ARRAY,  /* mqr_avro_array_t of items */
  MQR_AVRO_C_MAP,    /* mqr_avro_map_t of values */
  MQR_AVRO_C_UNION,  /* int32_t branch at offset 0, the branch's value at payload_off */
} mqr_avro_ckind_t;

/* An array in C: count items of the item type's size, back to back. */
typedef struct {
  void *items;
  size_t count;
} mqr_avro_array_t;

/* A map in C: count keys and count values, in the same order. */
typedef struct {
  mqr_str_t *keys;
  void *values;
  size_t count;
} mqr_avro_map_t;

typedef struct mqr_avro_ctype_s mqr_avro_ctype_t;

/* A record field in C: the Avro field it binds by name, where it is, what it is. */
typedef struct {
  const char *name;
  size_t offset;
  const mqr_avro_ctype_t *type;
} mqr_avro_cfield_t;

struct mqr_avro_ctype_s {
  mqr_avro_ckind_t kind;
  size_t size;                     /* sizeof the C value: the stride of an array of them */
  const mqr_avro_cfield_t *fields; /* RECORD */
  size_t n_fields;
  const mqr_avro_ctype_t *items;           /* ARRAY items, MAP values */
  const mqr_avro_ctype_t *const *branches; /* UNION, in the schema's branch order; NULL for null */
  size_t n_branches;
  size_t payload_off; /* UNION: where the branch's value is */
};

/* The scalar C types, for use in descriptions. */
MQR_EXTERN extern const mqr_avro_ctype_t mqr_avro_c_null, mqr_avro_c_bool, mqr_avro_c_int32, mqr_avro_c_int64,
    mqr_avro_c_float, mqr_avro_c_double, mqr_avro_c_str;

/* Memory that decoding puts arrays and maps in: a bump allocator over caller storage.
 * Reset it (used = 0) between datums to reuse it. */
typedef struct {
  uint8_t *base;
  size_t cap;
  size_t used;
} mqr_avro_arena_t;

typedef struct mqr_avro_codec_s mqr_avro_codec_t;

/* Compiles a codec that encodes C values described by ctype with schema s and decodes
 * them back. The binding is checked here, once: every C field must name a field of the
 * record with a compatible type (C_INT32 for int and enum, C_INT64 for long, C_STR for
 * string and bytes, C_FIXED of the fixed's size, C_UNION with the union's branch count);
 * a schema field the C struct lacks must have a default, which encoding writes and
 * decoding skips. The schema must outlive the codec; ctype need not. Errors: MQR_EINVAL
 * with the path of the mismatch, MQR_ENOMEM. */
MQR_EXTERN int mqr_avro_codec_compile(const mqr_avro_schema_t *s, const mqr_avro_ctype_t *ctype, mqr_avro_codec_t **out,
                                      mqr_error_t *err);

/* Frees a codec; NULL is accepted. */
MQR_EXTERN void mqr_avro_codec_destroy(mqr_avro_codec_t *c);

/* Encodes the C value at value, appending to out. No allocation unless out grows.
 * Errors: MQR_EBADDATA (an enum ordinal or union branch out of range), MQR_ENOSPC (a fixed
 * buffer: *needed, when not NULL, gets the total size out would need), MQR_ENOMEM. On
 * error out->len is unchanged. */
MQR_EXTERN int mqr_avro_encode(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out, size_t *needed,
                               mqr_error_t *err);

/* Decodes one datum from in[0..len) into the C value at value. Strings and bytes become
 * views into in (valid while in is); arrays and maps are placed in arena. *used (may be
 * NULL) gets the bytes read. No heap allocation. Errors: those of mqr_avro_skip, and
 * MQR_ENOSPC when the arena is full. */
MQR_EXTERN int mqr_avro_decode(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, size_t *used, void *value,
                               mqr_avro_arena_t *arena, mqr_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* MQR_CODEC_H */
