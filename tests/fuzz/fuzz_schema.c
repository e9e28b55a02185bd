/* libFuzzer: schema parsing. Any input either fails with an error code and a message, or
 * parses; a schema that parses must parse again from its own canonical form to the same
 * canonical form and fingerprint, resolve against itself, and skip its own defaults. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  int rc = mqr_avro_schema_parse((const char *)data, size, &s, &err);
  if (rc) {
    FUZZ_CHECK(rc < 0 && err.message[0] != '\0'); /* an error always says why */
    return 0;
  }
  mqr_str_t c = mqr_avro_schema_canonical(s);
  mqr_avro_schema_t *again = NULL;
  FUZZ_CHECK(mqr_avro_schema_parse(c.ptr, c.len, &again, &err) == 0);
  mqr_str_t c2 = mqr_avro_schema_canonical(again);
  FUZZ_CHECK(c.len == c2.len && memcmp(c.ptr, c2.ptr, c.len) == 0);
  FUZZ_CHECK(mqr_avro_schema_fingerprint(s) == mqr_avro_schema_fingerprint(again));
  mqr_avro_resolver_t *res = NULL;
  FUZZ_CHECK(mqr_avro_resolver_compile(s, again, &res, &err) == 0);
  mqr_avro_resolver_destroy(res);
  mqr_avro_schema_destroy(again);
  mqr_avro_schema_destroy(s);
  return 0;
}
