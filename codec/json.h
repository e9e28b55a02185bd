/* A JSON document model that keeps where each value stood (line and column), for
 * schema errors that point into the file, and for JSON-encoded Avro datums. Strings are
 * unescaped to UTF-8 (a \u0000 escape is kept: lengths are explicit); numbers keep their
 * text and, when they are integers that fit, their int64 value. Object members stay in
 * document order. A repeated key is an error in a schema; in a datum it is kept, since
 * an Avro map may repeat a key in binary and its JSON must say so.
 *
 * Limits: nesting at most MQR__JSON_DEPTH deep. NaN, Infinity and -Infinity are
 * accepted as numbers (Python's and Jackson's JSON write them for Avro floats). */
#ifndef MQR_CODEC_JSON_H
#define MQR_CODEC_JSON_H

#include "arena.h"

#define MQR__JSON_DEPTH 256

typedef enum {
  MQR__JSON_NULL,
  MQR__JSON_BOOL,
  MQR__JSON_NUMBER,
  MQR__JSON_STRING,
  MQR__JSON_ARRAY,
  MQR__JSON_OBJECT,
} mqr__json_kind_t;

typedef struct mqr__json_s mqr__json_t;

typedef struct {
  mqr_str_t key;
  mqr__json_t *value;
} mqr__json_member_t;

struct mqr__json_s {
  uint8_t kind;
  bool boolean;
  bool is_int; /* a number written without fraction or exponent that fits in int64 */
  uint32_t line, column;
  int64_t i;
  double d;
  mqr_str_t str;               /* string value, or a number's text */
  uint32_t n;                  /* items or members */
  mqr__json_t **items;         /* array */
  mqr__json_member_t *members; /* object */
};

/* Parses text[0..len) as one JSON value (whitespace around it allowed). The document
 * lives in arena. Errors: MQR_ESYNTAX with line and column (a repeated object key, when
 * unique_keys), MQR_ELIMIT, MQR_ENOMEM. */
int mqr__json_parse(mqr__arena_t *arena, const char *text, size_t len, bool unique_keys, mqr__json_t **out,
                    mqr_error_t *err);

/* The member named key, or NULL. */
const mqr__json_t *mqr__json_get_str(const mqr__json_t *obj, mqr_str_t key);

static inline const mqr__json_t *mqr__json_get(const mqr__json_t *obj, const char *key) {
  return mqr__json_get_str(obj, mqr_str(key));
}

static inline bool mqr__json_is_str(const mqr__json_t *v, const char *s) {
  return v && v->kind == MQR__JSON_STRING && strlen(s) == v->str.len && memcmp(v->str.ptr, s, v->str.len) == 0;
}

const char *mqr__json_kind_name(int kind);

#endif
