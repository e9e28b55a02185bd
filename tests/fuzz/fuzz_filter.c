/* libFuzzer: filter selectors (mqr/filter.h). Any text compiles or is refused with a
 * column inside it; what compiles evaluates, on values of every type, to the same
 * result by its program and by a walk of its tree. */
#include <string.h>

#include "../../filter/filter_int.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mqr_filter_t *f = NULL;
  mqr_error_t err;
  memset(&err, 0, sizeof err);
  int rc = mqr_filter_compile(mqr_str_n((const char *)data, size), NULL, NULL, &f, &err);
  if (rc) {
    FUZZ_CHECK(rc == MQR_ESYNTAX || rc == MQR_ELIMIT);
    FUZZ_CHECK(err.message[0] != 0);
    FUZZ_CHECK(rc == MQR_ELIMIT || (err.column >= 1 && err.column <= size + 1));
    return 0;
  }
  static const mqr_value_t kinds[] = {{MQR_VALUE_NULL, {0}},
                                      {MQR_VALUE_BOOL, {.b = true}},
                                      {MQR_VALUE_INT, {.i = -3}},
                                      {MQR_VALUE_LONG, {.l = 1LL << 40}},
                                      {MQR_VALUE_FLOAT, {.f = 0.5f}},
                                      {MQR_VALUE_DOUBLE, {.d = 1e300}},
                                      {MQR_VALUE_STRING, {.s = {"James", 5}}},
                                      {MQR_VALUE_BYTES, {.s = {"\0x", 2}}}};
  uint32_t n = mqr_filter_slot_count(f), m = n < 64 ? n : 64;
  mqr_value_t v[64];
  for (uint32_t round = 0; round < 8; round++) {
    for (uint32_t i = 0; i < m; i++) v[i] = kinds[(i + round) % 8];
    int r = mqr_filter_eval(f, v, m);
    mqr_value_t t = mqr__filter_eval_tree(f, f->root, v, m);
    int rt = t.type == MQR_VALUE_BOOL ? t.u.b : MQR_FILTER_UNKNOWN;
    FUZZ_CHECK(r == rt);
  }
  mqr_filter_free(f);
  return 0;
}
