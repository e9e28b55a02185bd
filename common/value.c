/* Typed values (include/mqr/value.h): names, and text both ways for the CLI. */
#include "mqr/value.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const char *const names[MQR_VALUE_TYPE_COUNT] = {"null",  "boolean", "int",    "long",
                                                        "float", "double",  "string", "bytes"};

const char *mqr_value_type_name(int type) { return type >= 0 && type < MQR_VALUE_TYPE_COUNT ? names[type] : NULL; }

int mqr_value_type_parse(mqr_str_t name, mqr_value_type_t *out) {
  for (int t = 0; t < MQR_VALUE_TYPE_COUNT; t++)
    if (strlen(names[t]) == name.len && strncasecmp(names[t], name.ptr, name.len) == 0) {
      *out = (mqr_value_type_t)t;
      return 0;
    }
  if (name.len == 4 && strncasecmp(name.ptr, "bool", 4) == 0) {
    *out = MQR_VALUE_BOOL;
    return 0;
  }
  return MQR_EINVAL;
}

int mqr_value_parse(mqr_value_type_t t, mqr_str_t text, mqr_value_t *out, mqr_error_t *err) {
  char buf[64];
  const char *tn = mqr_value_type_name(t);
  if (tn == NULL) return mqr_error_set(err, MQR_EINVAL, "value type %d out of range", (int)t);
  if (t == MQR_VALUE_STRING || t == MQR_VALUE_BYTES) {
    *out = t == MQR_VALUE_STRING ? mqr_value_string(text) : mqr_value_bytes(text);
    return 0;
  }
  if (t == MQR_VALUE_NULL) {
    if (text.len) return mqr_error_set(err, MQR_EINVAL, "a null takes no value, not '%.*s'", (int)text.len, text.ptr);
    *out = mqr_value_null();
    return 0;
  }
  if (text.len == 0 || text.len >= sizeof buf)
    return mqr_error_set(err, MQR_EINVAL, "'%.*s' is not a %s", (int)(text.len > 40 ? 40 : text.len), text.ptr, tn);
  memcpy(buf, text.ptr, text.len);
  buf[text.len] = 0;
  char *end = NULL;
  errno = 0;
  if (t == MQR_VALUE_BOOL) {
    if (strcasecmp(buf, "true") == 0 || strcasecmp(buf, "false") == 0) {
      *out = mqr_value_bool(buf[0] == 't' || buf[0] == 'T');
      return 0;
    }
  } else if (t == MQR_VALUE_INT || t == MQR_VALUE_LONG) {
    long long v = strtoll(buf, &end, 10);
    bool in_range = errno == 0 && (t == MQR_VALUE_LONG || (v >= INT32_MIN && v <= INT32_MAX));
    if (*end == 0 && in_range) {
      *out = t == MQR_VALUE_INT ? mqr_value_int((int32_t)v) : mqr_value_long((int64_t)v);
      return 0;
    }
  } else {
    double d = strtod(buf, &end);
    if (*end == 0 && errno == 0) {
      *out = t == MQR_VALUE_FLOAT ? mqr_value_float((float)d) : mqr_value_double(d);
      return 0;
    }
  }
  return mqr_error_set(err, MQR_EINVAL, "'%s' is not a %s", buf, tn);
}

size_t mqr_value_format(const mqr_value_t *v, char *buf, size_t cap) {
  char tmp[1];
  if (cap == 0) buf = tmp, cap = 1;
  int n = 0;
  switch (v->type) {
  case MQR_VALUE_BOOL: n = snprintf(buf, cap, "%s", v->u.b ? "true" : "false"); break;
  case MQR_VALUE_INT: n = snprintf(buf, cap, "%d", (int)v->u.i); break;
  case MQR_VALUE_LONG: n = snprintf(buf, cap, "%lld", (long long)v->u.l); break;
  case MQR_VALUE_FLOAT: n = snprintf(buf, cap, "%.9g", (double)v->u.f); break;
  case MQR_VALUE_DOUBLE: n = snprintf(buf, cap, "%.17g", v->u.d); break;
  case MQR_VALUE_STRING: n = snprintf(buf, cap, "%.*s", (int)v->u.s.len, v->u.s.ptr); break;
  case MQR_VALUE_BYTES: {
    size_t need = 2 * v->u.s.len;
    for (size_t i = 0; i < v->u.s.len && 2 * i + 2 < cap; i++)
      snprintf(buf + 2 * i, 3, "%02x", (unsigned char)v->u.s.ptr[i]);
    buf[need < cap ? need : (cap - 1) & ~(size_t)1] = 0;
    return need;
  }
  default: n = snprintf(buf, cap, "null"); break;
  }
  return n < 0 ? 0 : (size_t)n;
}
