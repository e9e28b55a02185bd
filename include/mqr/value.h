/* Typed values: a message property's value (the native protocol's property union,
 * docs/protocol.md), and what a filter reads (mqr/filter.h). The type numbers are the
 * branches of the protocol's union, in its order, so a value decodes straight into this
 * struct. */
#ifndef MQR_VALUE_H
#define MQR_VALUE_H

#include "mqr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MQR_VALUE_NULL = 0, /* null, or missing */
  MQR_VALUE_BOOL,
  MQR_VALUE_INT,
  MQR_VALUE_LONG,
  MQR_VALUE_FLOAT,
  MQR_VALUE_DOUBLE,
  MQR_VALUE_STRING, /* UTF-8 */
  MQR_VALUE_BYTES   /* a filter compares it with nothing: any comparison with it is false */
} mqr_value_type_t;

#define MQR_VALUE_TYPE_COUNT 8

typedef struct {
  mqr_value_type_t type;
  union {
    bool b;
    int32_t i;
    int64_t l;
    float f;
    double d;
    mqr_str_t s; /* STRING and BYTES: a view; its owner says how long it lives */
  } u;
} mqr_value_t;

/* Constructors. */
static inline mqr_value_t mqr_value_null(void) {
  mqr_value_t v;
  v.type = MQR_VALUE_NULL;
  v.u.l = 0;
  return v;
}
static inline mqr_value_t mqr_value_bool(bool b) {
  mqr_value_t v = mqr_value_null();
  v.type = MQR_VALUE_BOOL, v.u.b = b;
  return v;
}
static inline mqr_value_t mqr_value_int(int32_t i) {
  mqr_value_t v = mqr_value_null();
  v.type = MQR_VALUE_INT, v.u.i = i;
  return v;
}
static inline mqr_value_t mqr_value_long(int64_t l) {
  mqr_value_t v;
  v.type = MQR_VALUE_LONG, v.u.l = l;
  return v;
}
static inline mqr_value_t mqr_value_float(float f) {
  mqr_value_t v = mqr_value_null();
  v.type = MQR_VALUE_FLOAT, v.u.f = f;
  return v;
}
static inline mqr_value_t mqr_value_double(double d) {
  mqr_value_t v;
  v.type = MQR_VALUE_DOUBLE, v.u.d = d;
  return v;
}
static inline mqr_value_t mqr_value_string(mqr_str_t s) {
  mqr_value_t v;
  v.type = MQR_VALUE_STRING, v.u.s = s;
  return v;
}
static inline mqr_value_t mqr_value_bytes(mqr_str_t s) {
  mqr_value_t v;
  v.type = MQR_VALUE_BYTES, v.u.s = s;
  return v;
}

/* "null", "boolean", "int", "long", "float", "double", "string", "bytes" (the Avro
 * names); NULL for a type out of range. */
MQR_EXTERN const char *mqr_value_type_name(int type);

/* Parses a type name as mqr_value_type_name writes it (case-insensitive; "bool" for
 * boolean too). 0, or MQR_EINVAL. */
MQR_EXTERN int mqr_value_type_parse(mqr_str_t name, mqr_value_type_t *out);

/* Parses text as a value of type t (the CLI's --property NAME:TYPE=VALUE): "true" or
 * "false"; a decimal integer in range; a number; STRING and BYTES take the text as it is
 * (a view of it); NULL takes nothing (text must be empty). 0, or MQR_EINVAL with err
 * saying why. */
MQR_EXTERN int mqr_value_parse(mqr_value_type_t t, mqr_str_t text, mqr_value_t *out, mqr_error_t *err);

/* Writes v as text into buf (NUL terminated): null, true/false, the number (a double
 * with %.17g), the string as it is, bytes as hex. Returns the length v needs (as
 * snprintf: longer than cap-1 means cut). */
MQR_EXTERN size_t mqr_value_format(const mqr_value_t *v, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* MQR_VALUE_H */
