/* A property's value as the text a text protocol carries it in (a STOMP header, an MQTT
 * user property): numbers in decimal (floats to round-trip), booleans as true and false,
 * strings as they are. Null and bytes have no text: empty. */
#include <inttypes.h>
#include <stdio.h>

#include "broker_int.h"

mqr_str_t mqr__value_text(const mqr_value_t *v, char *buf, size_t cap) {
  int n = 0;
  switch (v->type) {
  case MQR_VALUE_BOOL: return v->u.b ? MQR_STR("true") : MQR_STR("false");
  case MQR_VALUE_INT: n = snprintf(buf, cap, "%" PRId32, v->u.i); break;
  case MQR_VALUE_LONG: n = snprintf(buf, cap, "%" PRId64, v->u.l); break;
  case MQR_VALUE_FLOAT: n = snprintf(buf, cap, "%.9g", (double)v->u.f); break;
  case MQR_VALUE_DOUBLE: n = snprintf(buf, cap, "%.17g", v->u.d); break;
  case MQR_VALUE_STRING: return v->u.s;
  default: return MQR_STR("");
  }
  return mqr_str_n(buf, n > 0 && (size_t)n < cap ? (size_t)n : 0);
}
