/* libFuzzer: JSON datums. The first byte picks a schema; the rest is Avro JSON. Whatever
 * encodes must decode back to JSON that encodes to the same bytes, and the streaming
 * reader must read those bytes whole. */
#include "fuzz_common.h"

static mqr_avro_buf_t b1, b2, j;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_load_schemas();
  if (!b1.growable) {
    mqr_avro_buf_init_growable(&b1);
    mqr_avro_buf_init_growable(&b2);
    mqr_avro_buf_init_growable(&j);
  }
  if (size == 0) return 0;
  const mqr_avro_schema_t *s = fuzz_schemas[data[0] % fuzz_n_schemas];
  mqr_error_t err;
  b1.len = 0;
  int rc = mqr_avro_json_to_binary(s, (const char *)data + 1, size - 1, &b1, &err);
  if (rc) {
    FUZZ_CHECK(b1.len == 0 && err.message[0] != '\0');
    return 0;
  }
  j.len = 0;
  size_t used = 0;
  FUZZ_CHECK(mqr_avro_binary_to_json(s, b1.data, b1.len, &used, &j, NULL) == 0 && used == b1.len);
  b2.len = 0;
  FUZZ_CHECK(mqr_avro_json_to_binary(s, (const char *)j.data, j.len, &b2, NULL) == 0);
  FUZZ_CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
  return 0;
}
