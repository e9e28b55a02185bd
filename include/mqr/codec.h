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

/* The schema's Parsing Canonical Form, valid as long as the schema. The form identifies
 * a schema (its fingerprint is taken of it) but drops what resolution and re-reading
 * need: namespaces of names it has already made full, defaults, aliases, logical types
 * and every other attribute. Hand a schema on with mqr_avro_schema_json instead. */
MQR_EXTERN mqr_str_t mqr_avro_schema_canonical(const mqr_avro_schema_t *s);

/* The schema's JSON text exactly as given to mqr_avro_schema_parse, valid as long as the
 * schema. This is what container files store as avro.schema. */
MQR_EXTERN mqr_str_t mqr_avro_schema_json(const mqr_avro_schema_t *s);

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

/* Frees a growable buffer's storage (a fixed one's is the caller's and is left alone) and
 * empties it; it may be used again. */
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

/* The two halves of mqr_avro_encode, each a documented call of its own. _fast encodes a
 * flat record (no union, array or map) when out has room for it and its strings, fixeds
 * and defaults are under 64 bytes: 0, or 1 having written nothing. _general encodes any
 * value and reports every error, as mqr_avro_encode says. A binding from another language
 * may call _general alone, or both as mqr_avro_encode does. */
MQR_EXTERN int mqr_avro_encode_fast(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out);
MQR_EXTERN int mqr_avro_encode_general(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out,
                                       size_t *needed, mqr_error_t *err);

/* Encodes the C value at value (laid out as the codec's ctype says), appending its
 * binary datum to out. No allocation unless out is growable and grows. Errors:
 * MQR_EBADDATA (an enum ordinal or union branch out of range, err says where),
 * MQR_ENOSPC (a fixed buffer too small: *needed, when not NULL, gets the total size out
 * would need), MQR_ENOMEM. On error out->len is unchanged. needed and err may be NULL.
 * Any thread, for a codec and a buffer no other thread uses at the time. Inline over the
 * two halves: the common case is one call of three arguments, the caller keeping needed
 * and err, which only the general encoder reads. */
static inline int mqr_avro_encode(const mqr_avro_codec_t *c, const void *value, mqr_avro_buf_t *out, size_t *needed,
                                  mqr_error_t *err) {
  return mqr_avro_encode_fast(c, value, out) == 0 ? 0 : mqr_avro_encode_general(c, value, out, needed, err);
}

/* The two halves of mqr_avro_decode. _fast decodes a flat record whose lengths and most
 * varints are one byte: the bytes read, or -1 having decided nothing (value may be partly
 * written). _general decodes any datum and reports every error, as mqr_avro_decode says. */
MQR_EXTERN ptrdiff_t mqr_avro_decode_fast(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, void *value);
MQR_EXTERN int mqr_avro_decode_general(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, size_t *used,
                                       void *value, mqr_avro_arena_t *arena, mqr_error_t *err);

/* Decodes one datum from in[0..len) into the C value at value. Strings and bytes become
 * views into in (valid while in is); arrays and maps are placed in arena (may be NULL for
 * a schema with none). *used (may be NULL) gets the bytes read. No heap allocation.
 * Errors: those of mqr_avro_skip, and MQR_ENOSPC when the arena is full; *value is then
 * partly written. Any thread, as mqr_avro_encode. Inline over its two halves. */
static inline int mqr_avro_decode(const mqr_avro_codec_t *c, const uint8_t *in, size_t len, size_t *used, void *value,
                                  mqr_avro_arena_t *arena, mqr_error_t *err) {
  ptrdiff_t n = mqr_avro_decode_fast(c, in, len, value);
  if (n < 0) return mqr_avro_decode_general(c, in, len, used, value, arena, err);
  if (used) *used = (size_t)n;
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* Streaming writer and reader                                                          */
/* ---------------------------------------------------------------------------------- */

/* One datum as a sequence of calls, each checked against the schema as it comes: a
 * record's fields in order between _record_begin and _record_end, an array's items, a
 * map's keys and values. A mistake (the wrong type, a field too few, a symbol not in the
 * enum) fails with MQR_EINVAL and a message naming where in the datum it is (`tags[2]`);
 * after any failure every call fails until the next _begin. The objects hold the stack
 * of open values (MQR_AVRO_MAX_DEPTH deep), so a datum allocates nothing. The schema must
 * outlive them. */
typedef struct mqr_avro_writer_s mqr_avro_writer_t;
typedef struct mqr_avro_reader_s mqr_avro_reader_t;

/* A streaming writer for datums of s (which must outlive it): 0, or MQR_ENOMEM with *out
 * untouched. _destroy frees it (NULL is accepted). */
MQR_EXTERN int mqr_avro_writer_create(const mqr_avro_schema_t *s, mqr_avro_writer_t **out);
MQR_EXTERN void mqr_avro_writer_destroy(mqr_avro_writer_t *w);

/* Starts a datum appended to out. A datum that fails, or is not complete at _end, is
 * removed from out again. */
MQR_EXTERN void mqr_avro_writer_begin(mqr_avro_writer_t *w, mqr_avro_buf_t *out);
/* 0 when the datum is complete; MQR_EINVAL naming what is still expected. */
MQR_EXTERN int mqr_avro_writer_end(mqr_avro_writer_t *w);
/* Why the last call failed. */
MQR_EXTERN const mqr_error_t *mqr_avro_writer_error(const mqr_avro_writer_t *w);

/* Scalars. Where the schema has a union, the first branch of the value's type is taken
 * (use mqr_avro_write_union for another); an int may be written where a long is. */
MQR_EXTERN int mqr_avro_write_null(mqr_avro_writer_t *w);
MQR_EXTERN int mqr_avro_write_boolean(mqr_avro_writer_t *w, bool v);
MQR_EXTERN int mqr_avro_write_int(mqr_avro_writer_t *w, int32_t v);
MQR_EXTERN int mqr_avro_write_long(mqr_avro_writer_t *w, int64_t v);
MQR_EXTERN int mqr_avro_write_float(mqr_avro_writer_t *w, float v);
MQR_EXTERN int mqr_avro_write_double(mqr_avro_writer_t *w, double v);
MQR_EXTERN int mqr_avro_write_string(mqr_avro_writer_t *w, const char *s, size_t len);
MQR_EXTERN int mqr_avro_write_bytes(mqr_avro_writer_t *w, const void *p, size_t len);
MQR_EXTERN int mqr_avro_write_fixed(mqr_avro_writer_t *w, const void *p, size_t len); /* len: the fixed's size */
/* An enum by ordinal, or by symbol (looked up in the schema's symbol table). */
MQR_EXTERN int mqr_avro_write_enum(mqr_avro_writer_t *w, int32_t ordinal);
MQR_EXTERN int mqr_avro_write_enum_symbol(mqr_avro_writer_t *w, const char *symbol, size_t len);
/* Takes branch `branch` of the union expected here; its value comes next. */
MQR_EXTERN int mqr_avro_write_union(mqr_avro_writer_t *w, uint32_t branch);
MQR_EXTERN int mqr_avro_write_record_begin(mqr_avro_writer_t *w);
MQR_EXTERN int mqr_avro_write_record_end(mqr_avro_writer_t *w);
/* An array of exactly count items; _end checks they were all written. */
MQR_EXTERN int mqr_avro_write_array_begin(mqr_avro_writer_t *w, size_t count);
MQR_EXTERN int mqr_avro_write_array_end(mqr_avro_writer_t *w);
/* A map of exactly count entries, each a _map_key then its value. */
MQR_EXTERN int mqr_avro_write_map_begin(mqr_avro_writer_t *w, size_t count);
MQR_EXTERN int mqr_avro_write_map_key(mqr_avro_writer_t *w, const char *key, size_t len);
MQR_EXTERN int mqr_avro_write_map_end(mqr_avro_writer_t *w);

/* A streaming reader for datums of s (which must outlive it): 0, or MQR_ENOMEM with *out
 * untouched. _destroy frees it (NULL is accepted). */
MQR_EXTERN int mqr_avro_reader_create(const mqr_avro_schema_t *s, mqr_avro_reader_t **out);
MQR_EXTERN void mqr_avro_reader_destroy(mqr_avro_reader_t *r);

/* Starts reading one datum from in[0..len), which must stay valid while it is read:
 * strings, bytes and fixed come back as views into it. */
MQR_EXTERN void mqr_avro_reader_begin(mqr_avro_reader_t *r, const uint8_t *in, size_t len);
/* 0 when the datum has been read whole; mqr_avro_reader_offset is then its size. */
MQR_EXTERN int mqr_avro_reader_end(mqr_avro_reader_t *r);
MQR_EXTERN const mqr_error_t *mqr_avro_reader_error(const mqr_avro_reader_t *r);
MQR_EXTERN size_t mqr_avro_reader_offset(const mqr_avro_reader_t *r);

/* The type of the value that comes next (MQR_AVRO_UNION: read its branch first), for
 * generic walks; MQR_ENOTFOUND where the open record ends or an array or map needs its
 * _next call. */
MQR_EXTERN int mqr_avro_reader_next(const mqr_avro_reader_t *r, mqr_avro_type_t *type);

/* Scalars; a long may be read where the schema has an int, a double where it has a
 * float. Bad bytes fail as mqr_avro_skip does, with the byte offset. */
MQR_EXTERN int mqr_avro_read_null(mqr_avro_reader_t *r);
MQR_EXTERN int mqr_avro_read_boolean(mqr_avro_reader_t *r, bool *v);
MQR_EXTERN int mqr_avro_read_int(mqr_avro_reader_t *r, int32_t *v);
MQR_EXTERN int mqr_avro_read_long(mqr_avro_reader_t *r, int64_t *v);
MQR_EXTERN int mqr_avro_read_float(mqr_avro_reader_t *r, float *v);
MQR_EXTERN int mqr_avro_read_double(mqr_avro_reader_t *r, double *v);
MQR_EXTERN int mqr_avro_read_string(mqr_avro_reader_t *r, mqr_str_t *v); /* not checked for UTF-8 */
MQR_EXTERN int mqr_avro_read_bytes(mqr_avro_reader_t *r, mqr_str_t *v);
MQR_EXTERN int mqr_avro_read_fixed(mqr_avro_reader_t *r, mqr_str_t *v);
/* The ordinal, and (symbol may be NULL) the symbol, valid as long as the schema. */
MQR_EXTERN int mqr_avro_read_enum(mqr_avro_reader_t *r, int32_t *ordinal, mqr_str_t *symbol);
/* The branch the data holds; its value comes next. */
MQR_EXTERN int mqr_avro_read_union(mqr_avro_reader_t *r, uint32_t *branch);
MQR_EXTERN int mqr_avro_read_record_begin(mqr_avro_reader_t *r);
MQR_EXTERN int mqr_avro_read_record_end(mqr_avro_reader_t *r);
/* Arrays and maps: _begin, then _next before each item: 1 when one follows (a map's key
 * in *key), 0 at the end (the array or map is then closed). */
MQR_EXTERN int mqr_avro_read_array_begin(mqr_avro_reader_t *r);
MQR_EXTERN int mqr_avro_read_array_next(mqr_avro_reader_t *r);
MQR_EXTERN int mqr_avro_read_map_begin(mqr_avro_reader_t *r);
MQR_EXTERN int mqr_avro_read_map_next(mqr_avro_reader_t *r, mqr_str_t *key);
/* Skips the value that comes next, whatever it is. */
MQR_EXTERN int mqr_avro_read_skip(mqr_avro_reader_t *r);

/* ---------------------------------------------------------------------------------- */
/* Schema resolution                                                                    */
/* ---------------------------------------------------------------------------------- */

typedef struct mqr_avro_resolver_s mqr_avro_resolver_t;

/* Compiles the resolution of data written with writer into data read with reader (the
 * Avro 1.11 rules: fields by name or alias, writer fields the reader lacks skipped,
 * reader defaults, promotions int->long/float/double, long->float/double, float->double,
 * string<->bytes, enum symbols by name with the reader's default, unions branch by
 * branch; named types by full name, unqualified name or a reader alias). Both schemas
 * must outlive the resolver. Errors: MQR_EINCOMPATIBLE with the reader-side path and the
 * reason (a writer union fails here only when none of its branches can be read; a branch
 * that cannot, or an enum symbol the reader lacks with no default, fails when a datum
 * takes it), MQR_ENOMEM. */
MQR_EXTERN int mqr_avro_resolver_compile(const mqr_avro_schema_t *writer, const mqr_avro_schema_t *reader,
                                         mqr_avro_resolver_t **out, mqr_error_t *err);

/* Frees a resolver; NULL is accepted. The schemas are the caller's. */
MQR_EXTERN void mqr_avro_resolver_destroy(mqr_avro_resolver_t *res);

/* The reader schema the resolver produces data for. */
MQR_EXTERN const mqr_avro_schema_t *mqr_avro_resolver_reader(const mqr_avro_resolver_t *res);

/* Reads one datum written with the writer schema from in[0..len) and appends it to out in
 * the reader's binary encoding, which the reader's codecs then decode (a struct codec
 * compiled against the reader schema, or mqr_avro_binary_to_json). *used (may be NULL)
 * gets the bytes read. Parts the two schemas encode alike are validated and copied
 * whole. Errors: those of mqr_avro_skip, MQR_EINCOMPATIBLE for a value the reader cannot
 * take, MQR_ENOSPC, MQR_ENOMEM. On error out->len is unchanged. */
MQR_EXTERN int mqr_avro_resolve(const mqr_avro_resolver_t *res, const uint8_t *in, size_t len, size_t *used,
                                mqr_avro_buf_t *out, mqr_error_t *err);

/* ---------------------------------------------------------------------------------- */
/* The schema cache                                                                     */
/* ---------------------------------------------------------------------------------- */

/* Schemas keyed by fingerprint, each parsed once, and resolvers keyed by (writer,
 * reader), each compiled once; what a reader of single-object data or of many writers'
 * data keeps. Everything it returns lives as long as the cache. Adding is not safe
 * against concurrent use; getting, with no adder running, is. */
typedef struct mqr_avro_cache_s mqr_avro_cache_t;

/* An empty cache: 0, or MQR_ENOMEM with *out untouched. _destroy frees it with every
 * schema and resolver it holds (NULL is accepted). */
MQR_EXTERN int mqr_avro_cache_create(mqr_avro_cache_t **out);
MQR_EXTERN void mqr_avro_cache_destroy(mqr_avro_cache_t *c);

/* Adds the schema in json[0..len) and gives the cached schema: the same text again is
 * not parsed again, and a text whose canonical form is already cached gives the schema
 * cached first. Errors: those of mqr_avro_schema_parse. */
MQR_EXTERN int mqr_avro_cache_add(mqr_avro_cache_t *c, const char *json, size_t len, const mqr_avro_schema_t **out,
                                  mqr_error_t *err);

/* The schema with this fingerprint, or NULL. */
MQR_EXTERN const mqr_avro_schema_t *mqr_avro_cache_get(const mqr_avro_cache_t *c, uint64_t fingerprint);

/* How many schemas the cache holds. */
MQR_EXTERN size_t mqr_avro_cache_count(const mqr_avro_cache_t *c);

/* The resolver from writer to reader, compiled on first use. Errors: those of
 * mqr_avro_resolver_compile. */
MQR_EXTERN int mqr_avro_cache_resolver(mqr_avro_cache_t *c, const mqr_avro_schema_t *writer,
                                       const mqr_avro_schema_t *reader, const mqr_avro_resolver_t **out,
                                       mqr_error_t *err);

/* Reads a single-object header at in and finds its writer schema in the cache; the datum
 * starts MQR_AVRO_SINGLE_OBJECT_HEADER bytes in. Errors: those of
 * mqr_avro_single_object_fingerprint, MQR_ENOTFOUND naming the fingerprint. */
MQR_EXTERN int mqr_avro_cache_single_object(const mqr_avro_cache_t *c, const uint8_t *in, size_t len,
                                            const mqr_avro_schema_t **writer, mqr_error_t *err);

/* ---------------------------------------------------------------------------------- */
/* Object container files                                                               */
/* ---------------------------------------------------------------------------------- */

typedef enum { MQR_AVRO_FILE_NULL, MQR_AVRO_FILE_DEFLATE } mqr_avro_file_codec_t;

#define MQR_AVRO_FILE_MAX_BLOCK (256u << 20) /* bytes a deflate block may inflate to */

/* Where a container writer's bytes go: 0 or an error code (MQR_EIO). */
typedef int (*mqr_avro_write_fn)(void *ctx, const void *p, size_t n);

/* A mqr_avro_write_fn over a FILE * (ctx). */
MQR_EXTERN int mqr_avro_write_stdio(void *ctx, const void *p, size_t n);

typedef struct {
  mqr_avro_file_codec_t codec;
  int level;           /* deflate level 1-9; 0 for zlib's default */
  size_t block_size;   /* uncompressed bytes that close a block; 0 for 64 KiB */
  const uint8_t *sync; /* 16 bytes, or NULL for a fresh marker */
} mqr_avro_file_options_t;

typedef struct mqr_avro_file_writer_s mqr_avro_file_writer_t;

/* Starts a container of datums of schema s (which must outlive the writer) and writes its
 * header (the schema's text as given, mqr_avro_schema_json) through write. opt may be NULL (codec null). */
MQR_EXTERN int mqr_avro_file_writer_create(const mqr_avro_schema_t *s, const mqr_avro_file_options_t *opt,
                                           mqr_avro_write_fn write, void *ctx, mqr_avro_file_writer_t **out,
                                           mqr_error_t *err);

/* Appends one binary datum of the writer's schema (checked: exactly one whole datum). A
 * block that reaches the block size is written. */
MQR_EXTERN int mqr_avro_file_append(mqr_avro_file_writer_t *w, const uint8_t *datum, size_t len, mqr_error_t *err);

/* Writes the open block, if it holds any datum. */
MQR_EXTERN int mqr_avro_file_flush(mqr_avro_file_writer_t *w, mqr_error_t *err);

/* Writes the open block and frees the writer (NULL accepted); the flush's result. */
MQR_EXTERN int mqr_avro_file_writer_close(mqr_avro_file_writer_t *w, mqr_error_t *err);

typedef struct mqr_avro_file_reader_s mqr_avro_file_reader_t;

/* Reads a container's header from data[0..len) (the whole file, which must stay valid
 * while the reader is open) and parses its schema. Errors: MQR_EBADDATA (not a container,
 * no schema), MQR_ETRUNCATED, MQR_EINVAL (an unsupported codec), the schema's errors. */
MQR_EXTERN int mqr_avro_file_reader_open(const uint8_t *data, size_t len, mqr_avro_file_reader_t **out,
                                         mqr_error_t *err);

/* The writer's schema, from the header; valid while the reader is open. */
MQR_EXTERN const mqr_avro_schema_t *mqr_avro_file_reader_schema(const mqr_avro_file_reader_t *f);

/* The next datum: 1 with *datum and *len set (valid until the next call), 0 at the end of
 * the file, or an error naming the block's byte offset: a count, size or sync marker
 * that is wrong, bad deflate data, a block inflating past MQR_AVRO_FILE_MAX_BLOCK
 * (MQR_ELIMIT), or a datum that does not decode. */
MQR_EXTERN int mqr_avro_file_next(mqr_avro_file_reader_t *f, const uint8_t **datum, size_t *len, mqr_error_t *err);

/* Frees the reader (NULL is accepted); the file's bytes are the caller's, and the
 * schema and datums it handed out go with it. */
MQR_EXTERN void mqr_avro_file_reader_close(mqr_avro_file_reader_t *f);

#ifdef __cplusplus
}
#endif
#endif /* MQR_CODEC_H */
