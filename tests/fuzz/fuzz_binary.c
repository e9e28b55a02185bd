/* libFuzzer: binary decoding of hostile bytes. The first byte picks a schema; the rest is
 * read as one datum by every reader mqr has (skip, JSON, the resolver to the same schema,
 * the streaming reader's skip) and as a container file. They must agree on whether the
 * datum is valid and on its size, and a datum that decodes must come back from its JSON
 * to the same JSON. */
#include "fuzz_common.h"

static mqr_avro_buf_t j1, j2, bin, res_out;
static mqr_avro_resolver_t *self_res[FUZZ_MAX_SCHEMAS];
static mqr_avro_reader_t *readers[FUZZ_MAX_SCHEMAS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_load_schemas();
  if (j1.growable == false) {
    mqr_avro_buf_init_growable(&j1);
    mqr_avro_buf_init_growable(&j2);
    mqr_avro_buf_init_growable(&bin);
    mqr_avro_buf_init_growable(&res_out);
    for (int i = 0; i < fuzz_n_schemas; i++) {
      FUZZ_CHECK(mqr_avro_resolver_compile(fuzz_schemas[i], fuzz_schemas[i], &self_res[i], NULL) == 0);
      FUZZ_CHECK(mqr_avro_reader_create(fuzz_schemas[i], &readers[i]) == 0);
    }
  }
  /* The container reader takes the whole input. */
  mqr_avro_file_reader_t *fr = NULL;
  if (mqr_avro_file_reader_open(data, size, &fr, NULL) == 0) {
    const uint8_t *d;
    size_t n;
    for (int k = 0; k < 10000 && mqr_avro_file_next(fr, &d, &n, NULL) == 1; k++) {
    }
    mqr_avro_file_reader_close(fr);
  }
  if (size == 0) return 0;
  int which = data[0] % fuzz_n_schemas;
  const mqr_avro_schema_t *s = fuzz_schemas[which];
  data++, size--;
  size_t used_skip = 0, used_json = 0, used_res = 0;
  int rc_skip = mqr_avro_skip(s, data, size, &used_skip, NULL);
  j1.len = 0;
  int rc_json = mqr_avro_binary_to_json(s, data, size, &used_json, &j1, NULL);
  res_out.len = 0;
  int rc_res = mqr_avro_resolve(self_res[which], data, size, &used_res, &res_out, NULL);
  mqr_avro_reader_t *r = readers[which];
  mqr_avro_reader_begin(r, data, size);
  int rc_stream = mqr_avro_read_skip(r);
  if (rc_stream == 0) rc_stream = mqr_avro_reader_end(r);
  /* JSON also checks UTF-8, which skipping does not. */
  FUZZ_CHECK(rc_json != 0 || rc_skip == 0);
  FUZZ_CHECK((rc_skip == 0) == (rc_res == 0));
  FUZZ_CHECK((rc_skip == 0) == (rc_stream == 0));
  FUZZ_CHECK(rc_skip != 0 || (used_res == used_skip && mqr_avro_reader_offset(r) == used_skip));
  if (rc_json == 0) {
    FUZZ_CHECK(used_json == used_skip);
    bin.len = 0;
    FUZZ_CHECK(mqr_avro_json_to_binary(s, (const char *)j1.data, j1.len, &bin, NULL) == 0);
    j2.len = 0;
    size_t used = 0;
    FUZZ_CHECK(mqr_avro_binary_to_json(s, bin.data, bin.len, &used, &j2, NULL) == 0 && used == bin.len);
    FUZZ_CHECK(j1.len == j2.len && memcmp(j1.data, j2.data, j1.len) == 0);
  }
  return 0;
}
