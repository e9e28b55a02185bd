/* libFuzzer: binary decoding of hostile bytes. The first byte picks a schema; the rest is
 * read as one datum by every reader mqr has (skip, JSON, the resolver to the same schema,
 * the streaming reader's skip) and as a container file. They must agree on whether the
 * datum is valid and on its size, and a datum that decodes must come back from its JSON
 * to the same JSON.
 *
 * A first byte with the high bit set picks instead one of two flat records bound to a C
 * struct, whose decoder and encoder have fast paths in front of the general ones: the
 * struct decoder must agree with skip, and a decoded value must encode to bytes (the
 * same into a roomy buffer as into an exact one) that decode to the same value. */
#include <stdbool.h>

#include "fuzz_common.h"

typedef struct {
  bool b;
  int32_t i;
  int64_t l;
  float f;
  double d;
  mqr_str_t s, raw;
  int32_t e;
  uint8_t fx[4];
  mqr_str_t a, b2;
  int64_t n;
} flat_t;

static const char *const flat_json[2] = {
    /* every kind, strings side by side */
    "{\"type\":\"record\",\"name\":\"F\",\"fields\":[{\"name\":\"b\",\"type\":\"boolean\"},"
    "{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"l\",\"type\":\"long\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"d\",\"type\":\"double\"},{\"name\":\"s\",\"type\":\"string\"},{\"name\":\"raw\",\"type\":\"bytes\"},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\",\"Z\"]}},"
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"Fx\",\"size\":4}},"
    "{\"name\":\"a\",\"type\":\"string\"},{\"name\":\"b2\",\"type\":\"string\"},{\"name\":\"n\",\"type\":\"long\"}]}",
    /* strings alone, ending in a double, and a field left to its default */
    "{\"type\":\"record\",\"name\":\"F\",\"fields\":[{\"name\":\"s\",\"type\":\"string\"},"
    "{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"raw\",\"type\":\"bytes\"},{\"name\":\"n\",\"type\":\"long\"},"
    "{\"name\":\"dflt\",\"type\":\"int\",\"default\":-3},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\",\"Z\"]}},"
    "{\"name\":\"b\",\"type\":\"boolean\"},{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"Fx\",\"size\":4}},"
    "{\"name\":\"a\",\"type\":\"string\"},{\"name\":\"l\",\"type\":\"long\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"b2\",\"type\":\"string\"},{\"name\":\"d\",\"type\":\"double\"}]}"};

static const mqr_avro_ctype_t fixed4 = {MQR_AVRO_C_FIXED, 4, NULL, 0, NULL, NULL, 0, 0};
#define FF(name, type)                                                                                                 \
  { #name, offsetof(flat_t, name), &type }
static const mqr_avro_cfield_t flat_fields[] = {
    FF(b, mqr_avro_c_bool),   FF(i, mqr_avro_c_int32), FF(l, mqr_avro_c_int64), FF(f, mqr_avro_c_float),
    FF(d, mqr_avro_c_double), FF(s, mqr_avro_c_str),   FF(raw, mqr_avro_c_str), FF(e, mqr_avro_c_int32),
    FF(fx, fixed4),           FF(a, mqr_avro_c_str),   FF(b2, mqr_avro_c_str),  FF(n, mqr_avro_c_int64)};
static const mqr_avro_ctype_t flat_type = {MQR_AVRO_C_RECORD, sizeof(flat_t), flat_fields, 12, NULL, NULL, 0, 0};
static mqr_avro_schema_t *flat_schema[2];
static mqr_avro_codec_t *flat_codec[2];

static bool flat_equal(const flat_t *x, const flat_t *y) {
  return x->b == y->b && x->i == y->i && x->l == y->l && memcmp(&x->f, &y->f, 4) == 0 && memcmp(&x->d, &y->d, 8) == 0 &&
         mqr_str_eq(x->s, y->s) && mqr_str_eq(x->raw, y->raw) && x->e == y->e && memcmp(x->fx, y->fx, 4) == 0 &&
         mqr_str_eq(x->a, y->a) && mqr_str_eq(x->b2, y->b2) && x->n == y->n;
}

static void fuzz_flat(int which, const uint8_t *data, size_t size) {
  static uint8_t roomy[8192 + 256], exact[8192 + 256];
  const mqr_avro_schema_t *s = flat_schema[which];
  const mqr_avro_codec_t *c = flat_codec[which];
  flat_t v, w;
  memset(&v, 0, sizeof v);
  size_t used = 0, used_skip = 0;
  int rc = mqr_avro_decode(c, data, size, &used, &v, NULL, NULL);
  int rc_skip = mqr_avro_skip(s, data, size, &used_skip, NULL);
  FUZZ_CHECK((rc == 0) == (rc_skip == 0));
  if (rc) return;
  FUZZ_CHECK(used == used_skip);
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, roomy, sizeof roomy);
  FUZZ_CHECK(mqr_avro_encode(c, &v, &b, NULL, NULL) == 0);
  size_t n = b.len;
  mqr_avro_buf_init(&b, exact, n);
  FUZZ_CHECK(mqr_avro_encode(c, &v, &b, NULL, NULL) == 0 && b.len == n && memcmp(exact, roomy, n) == 0);
  memset(&w, 0, sizeof w);
  FUZZ_CHECK(mqr_avro_decode(c, exact, n, &used, &w, NULL, NULL) == 0 && used == n);
  FUZZ_CHECK(flat_equal(&v, &w));
}

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
  if (data[0] & 0x80) {
    int k = data[0] & 1;
    if (flat_codec[k] == NULL) {
      FUZZ_CHECK(mqr_avro_schema_parse(flat_json[k], strlen(flat_json[k]), &flat_schema[k], NULL) == 0);
      FUZZ_CHECK(mqr_avro_codec_compile(flat_schema[k], &flat_type, &flat_codec[k], NULL) == 0);
    }
    fuzz_flat(k, data + 1, size - 1);
    return 0;
  }
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
