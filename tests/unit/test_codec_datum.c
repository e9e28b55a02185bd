/* Binary and JSON encodings of single datums: exact bytes at the edges of every type,
 * JSON round trips, and hostile input, each refused with the right code and no crash. */
#include <math.h>

#include "testutil.h"

static mqr_avro_schema_t *schema(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s, &err) != 0) fail_msg("schema refused: %s", err.message);
  return s;
}

/* json -> binary must give exactly want[0..n), and back to JSON must give back_json. */
static void roundtrip(const char *sch, const char *json, const uint8_t *want, size_t n, const char *back_json) {
  mqr_avro_schema_t *s = schema(sch);
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_error_t err;
  if (mqr_avro_json_to_binary(s, json, strlen(json), &b, &err) != 0) fail_msg("%s: %s", json, err.message);
  if (b.len != n || (n && memcmp(b.data, want, n) != 0)) {
    char hex[256] = "";
    for (size_t i = 0; i < b.len && i < 60; i++)
      snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x ", b.data[i]);
    fail_msg("%s encoded as %s", json, hex);
  }
  /* A fixed buffer of exactly the size fits; one byte less does not, and is left empty. */
  uint8_t *exact = malloc(n + 1);
  mqr_avro_buf_t fb;
  mqr_avro_buf_init(&fb, exact, n);
  if (mqr_avro_json_to_binary(s, json, strlen(json), &fb, &err) != 0)
    fail_msg("%s: exact buffer: %s", json, err.message);
  assert_int_equal(fb.len, n);
  if (n) {
    mqr_avro_buf_init(&fb, exact, n - 1);
    assert_int_equal(mqr_avro_json_to_binary(s, json, strlen(json), &fb, &err), MQR_ENOSPC);
    assert_int_equal(fb.len, 0);
  }
  free(exact);
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  size_t used = 0;
  if (mqr_avro_binary_to_json(s, b.data, b.len, &used, &j, &err) != 0) fail_msg("%s: decode: %s", json, err.message);
  assert_int_equal(used, n);
  const char *expect = back_json ? back_json : json;
  if (j.len != strlen(expect) || memcmp(j.data, expect, j.len) != 0)
    fail_msg("decoded %.*s, expected %s", (int)j.len, (const char *)j.data, expect);
  size_t skipped = 0;
  assert_int_equal(mqr_avro_skip(s, b.data, b.len, &skipped, NULL), 0);
  assert_int_equal(skipped, n);
  mqr_avro_buf_free(&b);
  mqr_avro_buf_free(&j);
  mqr_avro_schema_destroy(s);
}

#define RT(sch, json, back, ...)                                                                                       \
  do {                                                                                                                 \
    static const uint8_t w_[] = {__VA_ARGS__};                                                                         \
    roundtrip(sch, json, w_, sizeof w_, back);                                                                         \
  } while (0)

static void test_primitive_edges(void **state) {
  (void)state;
  RT("\"int\"", "0", NULL, 0x00);
  RT("\"int\"", "-1", NULL, 0x01);
  RT("\"int\"", "1", NULL, 0x02);
  RT("\"int\"", "-64", NULL, 0x7f);
  RT("\"int\"", "64", NULL, 0x80, 0x01);
  RT("\"int\"", "2147483647", NULL, 0xfe, 0xff, 0xff, 0xff, 0x0f);
  RT("\"int\"", "-2147483648", NULL, 0xff, 0xff, 0xff, 0xff, 0x0f);
  RT("\"long\"", "9223372036854775807", NULL, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  RT("\"long\"", "-9223372036854775808", NULL, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  RT("\"boolean\"", "true", NULL, 0x01);
  RT("\"null\"", "null", NULL);
  RT("\"float\"", "1.5", NULL, 0x00, 0x00, 0xc0, 0x3f);
  RT("\"float\"", "0.1", NULL, 0xcd, 0xcc, 0xcc, 0x3d);
  RT("\"float\"", "3", "3.0", 0x00, 0x00, 0x40, 0x40);
  RT("\"double\"", "0.1", NULL, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f);
  RT("\"double\"", "-0.0", NULL, 0, 0, 0, 0, 0, 0, 0, 0x80);
  RT("\"double\"", "NaN", NULL, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f);
  RT("\"double\"", "\"Infinity\"", "Infinity", 0, 0, 0, 0, 0, 0, 0xf0, 0x7f);
  RT("\"double\"", "-Infinity", NULL, 0, 0, 0, 0, 0, 0, 0xf0, 0xff);
  RT("\"double\"", "1e308", "1e+308", 0xa0, 0xc8, 0xeb, 0x85, 0xf3, 0xcc, 0xe1, 0x7f);
  RT("\"string\"", "\"\"", NULL, 0x00);
  RT("\"string\"", "\"h\\u00e9\\ud83d\\ude00\"", "\"h\xc3\xa9\xf0\x9f\x98\x80\"", 0x0e, 'h', 0xc3, 0xa9, 0xf0, 0x9f,
     0x98, 0x80);
  RT("\"string\"", "\"a\\\"\\\\\\n\"", "\"a\\\"\\\\\\u000a\"", 0x08, 'a', '"', '\\', '\n');
  RT("\"bytes\"", "\"\\u0000\\u00ff\\u007f\"", "\"\\u0000\\u00ff\\u007f\"", 0x06, 0x00, 0xff, 0x7f);
  RT("{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}", "\"ab\\u00ff\"", NULL, 'a', 'b', 0xff);
}

static void test_complex(void **state) {
  (void)state;
  RT("{\"type\":\"array\",\"items\":\"int\"}", "[1,2,3]", NULL, 0x06, 0x02, 0x04, 0x06, 0x00);
  RT("{\"type\":\"array\",\"items\":\"int\"}", "[]", NULL, 0x00);
  RT("{\"type\":\"map\",\"values\":\"long\"}", "{\"a\":1}", NULL, 0x02, 0x02, 'a', 0x02, 0x00);
  RT("[\"null\",\"string\"]", "null", NULL, 0x00);
  RT("[\"null\",\"string\"]", "{\"string\":\"x\"}", NULL, 0x02, 0x02, 'x');
  RT("[\"null\",{\"type\":\"enum\",\"name\":\"n.E\",\"symbols\":[\"A\",\"B\"]}]", "{\"n.E\":\"B\"}", NULL, 0x02, 0x02);
  /* A named branch answers to its short name too; it decodes to the full name. */
  RT("[\"null\",{\"type\":\"enum\",\"name\":\"n.E\",\"symbols\":[\"A\",\"B\"]}]", "{\"E\":\"A\"}", "{\"n.E\":\"A\"}",
     0x02, 0x00);
  RT("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},{\"name\":\"b\",\"type\":"
     "\"string\",\"default\":\"zz\"}]}",
     "{\"a\":1}", "{\"a\":1,\"b\":\"zz\"}", 0x02, 0x04, 'z', 'z');
  /* Recursion. */
  RT("{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},{\"name\":\"next\",\"type\":"
     "[\"null\",\"L\"]}]}",
     "{\"v\":1,\"next\":{\"L\":{\"v\":2,\"next\":null}}}", NULL, 0x02, 0x02, 0x04, 0x00);
}

/* A decode of in must fail with code. */
static void bad_binary(const char *sch, const uint8_t *in, size_t n, int code, const char *needle, bool skip_too) {
  mqr_avro_schema_t *s = schema(sch);
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  mqr_error_t err;
  mqr_error_clear(&err);
  int rc = mqr_avro_binary_to_json(s, in, n, NULL, &j, &err);
  if (rc != code) fail_msg("%s: rc %d (%s), expected %d", sch, rc, err.message, code);
  assert_int_equal(j.len, 0);
  if (needle && !strstr(err.message, needle)) fail_msg("message '%s' lacks '%s'", err.message, needle);
  if (skip_too) assert_int_equal(mqr_avro_skip(s, in, n, NULL, NULL), code);
  mqr_avro_buf_free(&j);
  mqr_avro_schema_destroy(s);
}

/* mqr_avro_skip does not check UTF-8; those cases are for the decoder alone. */
static bool mentions_utf8(const char *needle) { return needle != NULL && strstr(needle, "UTF-8") != NULL; }

#define BAD(sch, code, needle, ...)                                                                                    \
  do {                                                                                                                 \
    static const uint8_t in_[] = {__VA_ARGS__};                                                                        \
    bad_binary(sch, in_, sizeof in_, code, needle, !mentions_utf8(needle));                                            \
  } while (0)

static void test_hostile_binary(void **state) {
  (void)state;
  BAD("\"string\"", MQR_EBADDATA, "negative length", 0x01);
  BAD("\"bytes\"", MQR_ETRUNCATED, "past the end", 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  BAD("\"bytes\"", MQR_ETRUNCATED, "past the end", 0x0a, 'a');
  BAD("\"long\"", MQR_EBADDATA, "10 bytes", 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  BAD("\"long\"", MQR_EBADDATA, "64 bits", 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02);
  BAD("\"int\"", MQR_EBADDATA, "int out of range", 0x80, 0x80, 0x80, 0x80, 0x10);
  BAD("\"int\"", MQR_EBADDATA, "longer than 5", 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
  BAD("\"int\"", MQR_ETRUNCATED, "inside a varint", 0x80);
  BAD("\"double\"", MQR_ETRUNCATED, "inside a value", 0x00, 0x00);
  BAD("\"boolean\"", MQR_EBADDATA, "neither 0 nor 1", 0x02);
  BAD("[\"null\",\"int\"]", MQR_EBADDATA, "union branch 2", 0x04);
  BAD("[\"null\",\"int\"]", MQR_EBADDATA, "union branch -1", 0x01);
  BAD("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", MQR_EBADDATA, "enum ordinal 1", 0x02);
  BAD("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", MQR_EBADDATA, "enum ordinal -1", 0x01);
  BAD("\"string\"", MQR_EBADDATA, "UTF-8", 0x02, 0xff);
  BAD("\"string\"", MQR_EBADDATA, "UTF-8", 0x06, 0xed, 0xa0, 0x80); /* a surrogate */
  /* Counts that the input cannot hold, without allocating for them. */
  BAD("{\"type\":\"array\",\"items\":\"long\"}", MQR_ETRUNCATED, "more than the input", 0xfe, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0x01);
  BAD("{\"type\":\"array\",\"items\":\"null\"}", MQR_ELIMIT, "more than the input", 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0x01);
  BAD("{\"type\":\"array\",\"items\":\"int\"}", MQR_EBADDATA, "block count out of range", 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0x01);
  BAD("{\"type\":\"array\",\"items\":\"int\"}", MQR_EBADDATA, "block byte size", 0x03, 0x7f, 0x02);
  BAD("{\"type\":\"map\",\"values\":\"int\"}", MQR_ETRUNCATED, NULL, 0x02, 0x02, 'k');
}

static void test_negative_block_counts(void **state) {
  (void)state;
  /* -2 items, 2 bytes, then 1 item, then the end: what Java's blocking encoder writes. */
  mqr_avro_schema_t *s = schema("{\"type\":\"array\",\"items\":\"int\"}");
  static const uint8_t in[] = {0x03, 0x04, 0x02, 0x04, 0x02, 0x06, 0x00};
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  assert_int_equal(mqr_avro_binary_to_json(s, in, sizeof in, NULL, &j, NULL), 0);
  assert_int_equal(j.len, 7);
  assert_memory_equal(j.data, "[1,2,3]", 7);
  mqr_avro_buf_free(&j);
  mqr_avro_schema_destroy(s);
}

static void test_nesting_limit(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema("{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"next\",\"type\":"
                                "[\"null\",\"L\"]}]}");
  uint8_t in[1000];
  memset(in, 0x02, sizeof in); /* branch L, again and again */
  mqr_error_t err;
  assert_int_equal(mqr_avro_skip(s, in, sizeof in, NULL, &err), MQR_ELIMIT);
  assert_non_null(strstr(err.message, "nested deeper"));
  mqr_avro_schema_destroy(s);
}

static void test_truncation_everywhere(void **state) {
  (void)state;
  const char *sch = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"i\",\"type\":\"int\"},"
                    "{\"name\":\"s\",\"type\":\"string\"},{\"name\":\"d\",\"type\":\"double\"},"
                    "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":[\"null\",\"long\"]}},"
                    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"bytes\"}},"
                    "{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":4}}]}";
  const char *json = "{\"i\":-123456,\"s\":\"hello\",\"d\":2.5,\"a\":[null,{\"long\":1234567890123}],"
                     "\"m\":{\"k\":\"v\\u00ff\"},\"f\":\"abcd\"}";
  mqr_avro_schema_t *s = schema(sch);
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  assert_int_equal(mqr_avro_json_to_binary(s, json, strlen(json), &b, NULL), 0);
  for (size_t n = 0; n < b.len; n++) {
    uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past them */
    memcpy(copy, b.data, n);
    mqr_avro_buf_t j;
    mqr_avro_buf_init_growable(&j);
    int rc = mqr_avro_binary_to_json(s, copy, n, NULL, &j, NULL);
    if (rc != MQR_ETRUNCATED) fail_msg("prefix of %zu bytes: rc %d", n, rc);
    assert_int_equal(mqr_avro_skip(s, copy, n, NULL, NULL), MQR_ETRUNCATED);
    mqr_avro_buf_free(&j);
    free(copy);
  }
  mqr_avro_buf_free(&b);
  mqr_avro_schema_destroy(s);
}

/* A map may repeat a key in binary (readers keep the last); its JSON repeats it too, and
 * encodes back to the same bytes. */
static void test_map_repeated_keys(void **state) {
  (void)state;
  RT("{\"type\":\"map\",\"values\":\"int\"}", "{\"k\":1,\"k\":2}", NULL, 0x04, 0x02, 'k', 0x02, 0x02, 'k', 0x04, 0x00);
}

static void bad_json(const char *sch, const char *json, int code, uint32_t col, const char *needle) {
  mqr_avro_schema_t *s = schema(sch);
  uint8_t storage[64];
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, storage, sizeof storage);
  mqr_error_t err;
  mqr_error_clear(&err);
  int rc = mqr_avro_json_to_binary(s, json, strlen(json), &b, &err);
  if (rc != code) fail_msg("%s: rc %d (%s), expected %d", json, rc, err.message, code);
  assert_int_equal(b.len, 0);
  if (col && err.column != col) fail_msg("%s: column %u, expected %u (%s)", json, err.column, col, err.message);
  if (needle && !strstr(err.message, needle)) fail_msg("message '%s' lacks '%s'", err.message, needle);
  mqr_avro_schema_destroy(s);
}

static void test_bad_json_datums(void **state) {
  (void)state;
  const char *rec = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"array\","
                    "\"items\":\"int\"}},{\"name\":\"u\",\"type\":[\"null\",\"string\"]}]}";
  bad_json(rec, "{\"a\":[1,2,3000000000],\"u\":null}", MQR_EBADDATA, 11, "a[2]: 3000000000 is not an int");
  bad_json(rec, "{\"a\":[],\"u\":\"x\"}", MQR_EBADDATA, 13, "u: a union value must be null or an object");
  bad_json(rec, "{\"a\":[],\"u\":{\"int\":1}}", MQR_EBADDATA, 13, "'int' is not a branch");
  bad_json(rec, "{\"u\":null}", MQR_EBADDATA, 1, "field 'a' is missing");
  bad_json(rec, "{\"a\":[],\"u\":null,\"z\":1}", MQR_EBADDATA, 22, "'z' is not a field of R");
  bad_json(rec, "{\"a\":[1.5],\"u\":null}", MQR_EBADDATA, 7, "is not an int");
  bad_json(rec, "{\"a\":[],\"u\":null,\"a\":[1]}", MQR_EBADDATA, 22, "field 'a' is given twice");
  bad_json(rec, "{\"a\":[", MQR_ESYNTAX, 7, "JSON");
  bad_json("\"bytes\"", "\"\\u0100\"", MQR_EBADDATA, 1, "code points 0-255");
  bad_json("\"string\"", "\"ab\xcbx\"", MQR_ESYNTAX, 1, "invalid UTF-8 in a string");
  bad_json("{\"type\":\"fixed\",\"name\":\"F\",\"size\":2}", "\"abc\"", MQR_EBADDATA, 1, "size 2 given 3");
  bad_json("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", "\"B\"", MQR_EBADDATA, 1, "'B' is not a symbol");
  /* A fixed buffer that is too small: ENOSPC, and nothing written. */
  bad_json("\"string\"", "\"0123456789012345678901234567890123456789012345678901234567890123456789\"", MQR_ENOSPC, 0,
           NULL);
}

static void test_single_object(void **state) {
  (void)state;
  /* The official single-object vector: its first 10 bytes are the header of its schema. */
  char path[1024];
  uint8_t msg[64], schema_text[1024];
  snprintf(path, sizeof path, "%s/tests/data/avro/test_message.bin", getenv("MQR_SOURCE_DIR"));
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t n = fread(msg, 1, sizeof msg, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/tests/data/avro/test_schema.avsc", getenv("MQR_SOURCE_DIR"));
  assert_non_null(f = fopen(path, "rb"));
  size_t sn = fread(schema_text, 1, sizeof schema_text - 1, f);
  fclose(f);
  schema_text[sn] = '\0';
  mqr_avro_schema_t *s = schema((const char *)schema_text);
  uint8_t hdr[MQR_AVRO_SINGLE_OBJECT_HEADER];
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, hdr, sizeof hdr);
  assert_int_equal(mqr_avro_single_object_header(s, &b), 0);
  assert_memory_equal(hdr, msg, sizeof hdr);
  assert_int_equal(mqr_avro_single_object_header(s, &b), MQR_ENOSPC);
  uint64_t fp = 0;
  assert_int_equal(mqr_avro_single_object_fingerprint(msg, n, &fp, NULL), 0);
  assert_int_equal(fp, mqr_avro_schema_fingerprint(s));
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  const char *want = "{\"id\":42,\"name\":\"Bill\",\"tags\":[\"dog_lover\",\"cat_hater\"]}";
  assert_int_equal(mqr_avro_binary_to_json(s, msg + 10, n - 10, NULL, &j, NULL), 0);
  assert_int_equal(j.len, strlen(want));
  assert_memory_equal(j.data, want, j.len);
  assert_int_equal(mqr_avro_single_object_fingerprint(msg, 9, &fp, NULL), MQR_ETRUNCATED);
  msg[1] = 0x02;
  assert_int_equal(mqr_avro_single_object_fingerprint(msg, n, &fp, NULL), MQR_EBADDATA);
  mqr_avro_buf_free(&j);
  mqr_avro_schema_destroy(s);
}

/* Avro 1.11 specification, "Binary Encoding": "A record is encoded by encoding the values
 * of its fields in the order that they are declared", so a record with no fields takes no
 * bytes; "A union is encoded by first writing an int value indicating the zero-based
 * position within the union of the schema of its value. The value is then encoded per the
 * indicated schema within the union", so a union with such a branch can take one byte.
 * An array block's count is checked against the bytes left using the least size of an
 * item; that least size must see the empty branch even when the union was first found
 * finite through a larger one (here A, which the schema defines before the union). */
#define EMPTY_BRANCH                                                                                                   \
  "{\"type\":\"record\",\"name\":\"Root\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"record\",\"name\":\"A\","   \
  "\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}},{\"name\":\"l\",\"type\":{\"type\":\"array\",\"items\":[\"A\","    \
  "{\"type\":\"record\",\"name\":\"E\",\"fields\":[]}]}}]}"
static void test_empty_record_branch(void **state) {
  (void)state;
  RT(EMPTY_BRANCH, "{\"a\":{\"x\":0},\"l\":[{\"E\":{}},{\"E\":{}},{\"E\":{}}]}", NULL, 0x00, 0x06, 0x02, 0x02, 0x02,
     0x00);
  RT(EMPTY_BRANCH, "{\"a\":{\"x\":1},\"l\":[{\"E\":{}},{\"A\":{\"x\":2}},{\"E\":{}}]}", NULL, 0x02, 0x06, 0x02, 0x00,
     0x04, 0x02, 0x00);
  /* A count the bytes left cannot hold is still refused: 4 one-byte items in 3 bytes. */
  mqr_avro_schema_t *s = schema(EMPTY_BRANCH);
  const uint8_t bad[] = {0x00, 0x08, 0x02, 0x02, 0x02};
  mqr_avro_buf_t j;
  mqr_avro_buf_init_growable(&j);
  mqr_error_t err;
  assert_int_equal(mqr_avro_binary_to_json(s, bad, sizeof bad, NULL, &j, &err), MQR_ETRUNCATED);
  assert_int_equal(mqr_avro_skip(s, bad, sizeof bad, NULL, NULL), MQR_ETRUNCATED);
  mqr_avro_buf_free(&j);
  mqr_avro_schema_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_primitive_edges), cmocka_unit_test(test_complex),
      cmocka_unit_test(test_hostile_binary),  cmocka_unit_test(test_negative_block_counts),
      cmocka_unit_test(test_nesting_limit),   cmocka_unit_test(test_truncation_everywhere),
      cmocka_unit_test(test_bad_json_datums), cmocka_unit_test(test_map_repeated_keys),
      cmocka_unit_test(test_single_object),   cmocka_unit_test(test_empty_record_branch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
