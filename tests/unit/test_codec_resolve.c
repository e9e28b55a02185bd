/* Schema resolution: a datum written with one schema, read with another. Each case goes
 * writer JSON -> writer binary -> resolver -> reader binary -> reader JSON, and the
 * reader's JSON is compared whole. Incompatible pairs fail at compile time with the
 * reason; values the reader cannot take fail when read; hostile input fails cleanly. */
#include "testutil.h"

static mqr_avro_schema_t *schema(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s, &err) != 0) fail_msg("schema refused: %s (%s)", err.message, json);
  return s;
}

/* Resolves the datum `wjson` of schema w as schema r; the reader's JSON must be `want`,
 * or, when want starts with '!', the read must fail with a message containing the rest. */
static void check(const char *w, const char *r, const char *wjson, const char *want) {
  mqr_avro_schema_t *ws = schema(w), *rs = schema(r);
  mqr_avro_resolver_t *res = NULL;
  mqr_error_t err;
  if (mqr_avro_resolver_compile(ws, rs, &res, &err) != 0) fail_msg("resolver refused: %s", err.message);
  assert_ptr_equal(mqr_avro_resolver_reader(res), rs);
  mqr_avro_buf_t wb, rb, j;
  mqr_avro_buf_init_growable(&wb);
  mqr_avro_buf_init_growable(&rb);
  mqr_avro_buf_init_growable(&j);
  if (mqr_avro_json_to_binary(ws, wjson, strlen(wjson), &wb, &err) != 0) fail_msg("%s: %s", wjson, err.message);
  /* Trailing bytes after the datum are left alone and *used says where it ended. */
  assert_int_equal(mqr_avro_buf_reserve(&wb, 1), 0);
  wb.data[wb.len] = 0x55;
  size_t used = 0;
  int rc = mqr_avro_resolve(res, wb.data, wb.len + 1, &used, &rb, &err);
  if (want[0] == '!') {
    assert_int_not_equal(rc, 0);
    assert_int_equal(rb.len, 0);
    if (strstr(err.message, want + 1) == NULL) fail_msg("error '%s' does not mention '%s'", err.message, want + 1);
  } else {
    if (rc != 0) fail_msg("%s: resolve: %s", wjson, err.message);
    assert_int_equal(used, wb.len);
    size_t rused = 0;
    if (mqr_avro_binary_to_json(rs, rb.data, rb.len, &rused, &j, &err) != 0)
      fail_msg("%s: reader bytes do not decode: %s", wjson, err.message);
    assert_int_equal(rused, rb.len);
    if (j.len != strlen(want) || memcmp(j.data, want, j.len) != 0)
      fail_msg("%s read as %.*s, expected %s", wjson, (int)j.len, (const char *)j.data, want);
  }
  mqr_avro_buf_free(&wb);
  mqr_avro_buf_free(&rb);
  mqr_avro_buf_free(&j);
  mqr_avro_resolver_destroy(res);
  mqr_avro_schema_destroy(ws);
  mqr_avro_schema_destroy(rs);
}

/* The pair must not compile; the message must contain `why`. */
static void incompatible(const char *w, const char *r, const char *why) {
  mqr_avro_schema_t *ws = schema(w), *rs = schema(r);
  mqr_avro_resolver_t *res = NULL;
  mqr_error_t err;
  assert_int_equal(mqr_avro_resolver_compile(ws, rs, &res, &err), MQR_EINCOMPATIBLE);
  assert_null(res);
  if (strstr(err.message, why) == NULL) fail_msg("error '%s' does not mention '%s'", err.message, why);
  mqr_avro_schema_destroy(ws);
  mqr_avro_schema_destroy(rs);
}

static void test_identity_and_promotions(void **state) {
  (void)state;
  check("\"int\"", "\"int\"", "-7", "-7");
  check("\"int\"", "\"long\"", "2147483647", "2147483647");
  check("\"int\"", "\"float\"", "-16777216", "-16777216.0");
  check("\"int\"", "\"double\"", "-2147483648", "-2147483648.0");
  check("\"long\"", "\"double\"", "9007199254740993", "9007199254740992.0");
  check("\"long\"", "\"float\"", "3", "3.0");
  check("\"float\"", "\"double\"", "0.5", "0.5");
  check("\"string\"", "\"bytes\"", "\"abc\"", "\"abc\"");
  check("\"bytes\"", "\"string\"", "\"xyz\"", "\"xyz\"");
  check("{\"type\":\"array\",\"items\":\"int\"}", "{\"type\":\"array\",\"items\":\"double\"}", "[1,2,3]",
        "[1.0,2.0,3.0]");
  check("{\"type\":\"map\",\"values\":\"int\"}", "{\"type\":\"map\",\"values\":\"long\"}", "{\"a\":1,\"b\":-2}",
        "{\"a\":1,\"b\":-2}");
  check("{\"type\":\"map\",\"values\":\"float\"}", "{\"type\":\"map\",\"values\":\"double\"}", "{\"k\":2.5}",
        "{\"k\":2.5}");
  check("{\"type\":\"fixed\",\"name\":\"F\",\"size\":2}", "{\"type\":\"fixed\",\"name\":\"F\",\"size\":2}",
        "\"\\u00ff\\u0001\"", "\"\\u00ff\\u0001\"");
}

#define W_PERSON                                                                                                       \
  "{\"type\":\"record\",\"name\":\"p.Person\",\"fields\":["                                                            \
  "{\"name\":\"id\",\"type\":\"int\"},"                                                                                \
  "{\"name\":\"name\",\"type\":\"string\"},"                                                                           \
  "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"                                            \
  "{\"name\":\"score\",\"type\":\"float\"}]}"
#define W_PERSON_DATUM "{\"id\":7,\"name\":\"Ann\",\"tags\":[\"a\",\"b\"],\"score\":1.5}"

static void test_records(void **state) {
  (void)state;
  /* Same record: copied whole. */
  check(W_PERSON, W_PERSON, W_PERSON_DATUM, "{\"id\":7,\"name\":\"Ann\",\"tags\":[\"a\",\"b\"],\"score\":1.5}");
  /* Fields dropped (including an array), added with defaults, promoted, in order. */
  check(W_PERSON,
        "{\"type\":\"record\",\"name\":\"p.Person\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"},"
        "{\"name\":\"age\",\"type\":\"int\",\"default\":-1},{\"name\":\"score\",\"type\":\"double\"},"
        "{\"name\":\"nick\",\"type\":[\"null\",\"string\"],\"default\":null}]}",
        W_PERSON_DATUM, "{\"id\":7,\"age\":-1,\"score\":1.5,\"nick\":null}");
  /* Reordered: the reader's order wins. */
  check(W_PERSON,
        "{\"type\":\"record\",\"name\":\"Person\",\"fields\":[{\"name\":\"score\",\"type\":\"float\"},"
        "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"bytes\"}},{\"name\":\"id\",\"type\":\"int\"},"
        "{\"name\":\"extra\",\"type\":{\"type\":\"map\",\"values\":\"int\"},\"default\":{\"z\":26}}]}",
        W_PERSON_DATUM, "{\"score\":1.5,\"tags\":[\"a\",\"b\"],\"id\":7,\"extra\":{\"z\":26}}");
  /* Field alias; record found by the reader's alias. */
  check(W_PERSON,
        "{\"type\":\"record\",\"name\":\"q.Human\",\"aliases\":[\"p.Person\"],\"fields\":["
        "{\"name\":\"fullName\",\"aliases\":[\"name\"],\"type\":\"string\"}]}",
        W_PERSON_DATUM, "{\"fullName\":\"Ann\"}");
  /* Nested record with a default of its own type. */
  check("{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}",
        "{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"},"
        "{\"name\":\"in\",\"type\":{\"type\":\"record\",\"name\":\"B\",\"fields\":[{\"name\":\"s\",\"type\":"
        "\"string\"},{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"P\",\"Q\"]}}]},"
        "\"default\":{\"s\":\"d\",\"e\":\"Q\"}}]}",
        "{\"x\":3}", "{\"x\":3,\"in\":{\"s\":\"d\",\"e\":\"Q\"}}");
  /* More than 32 fields, reversed: positions past the kept starts are rescanned. */
  char w[4096] = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[",
       r[4096] = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[";
  char d[2048] = "{", want[2048] = "{";
  for (int i = 0; i < 40; i++) {
    snprintf(w + strlen(w), sizeof w - strlen(w), "%s{\"name\":\"f%d\",\"type\":\"string\"}", i ? "," : "", i);
    snprintf(r + strlen(r), sizeof r - strlen(r), "%s{\"name\":\"f%d\",\"type\":\"string\"}", i ? "," : "", 39 - i);
    snprintf(d + strlen(d), sizeof d - strlen(d), "%s\"f%d\":\"v%d\"", i ? "," : "", i, i);
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s\"f%d\":\"v%d\"", i ? "," : "", 39 - i, 39 - i);
  }
  strcat(w, "]}");
  strcat(r, "]}");
  strcat(d, "}");
  strcat(want, "}");
  check(w, r, d, want);
}

#define W_ENUM "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\",\"C\",\"D\"]}"

/* Avro 1.11 specification, "Complex Types / Records", on a field's default: "Default
 * values for union fields correspond to the first schema in the union. Default values
 * for bytes and fixed fields are JSON strings, where Unicode code points 0-255 are mapped
 * to unsigned 8-bit byte values 0-255." The table beside it gives a union's default as the
 * first schema's own JSON (its "json type" column: "any"), not Avro-JSON's
 * {"type": value} wrapping; Apache Avro Java reads ["int","null"] with default 3 so. The
 * rule holds inside record and array defaults, and for a nested record's own defaults. */
static void test_union_defaults(void **state) {
  (void)state;
  const char *w = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}";
  check(w,
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
        "{\"name\":\"b\",\"type\":[\"int\",\"null\"],\"default\":3},"
        "{\"name\":\"c\",\"type\":[\"string\",\"int\"],\"default\":\"x\"},"
        "{\"name\":\"d\",\"type\":{\"type\":\"array\",\"items\":[\"long\",\"null\"]},\"default\":[1,2]},"
        "{\"name\":\"e\",\"type\":{\"type\":\"record\",\"name\":\"In\",\"fields\":["
        "{\"name\":\"u\",\"type\":[\"double\",\"string\"]},"
        "{\"name\":\"v\",\"type\":[\"boolean\",\"null\"],\"default\":true}]},\"default\":{\"u\":2.5}},"
        "{\"name\":\"f\",\"type\":[\"null\",\"int\"],\"default\":null}]}",
        "{\"a\":1}",
        "{\"a\":1,\"b\":{\"int\":3},\"c\":{\"string\":\"x\"},\"d\":[{\"long\":1},{\"long\":2}],"
        "\"e\":{\"u\":{\"double\":2.5},\"v\":{\"boolean\":true}},\"f\":null}");
  /* A union default that is not of the first branch is not a default (schema refused). */
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  const char *bad = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"b\",\"type\":[\"int\",\"null\"],"
                    "\"default\":null}]}";
  assert_int_equal(mqr_avro_schema_parse(bad, strlen(bad), &s, &err), MQR_ESCHEMA);
  /* The JSON-to-binary encoder fills a missing field from the same default: the datum
   * itself is Avro-JSON (wrapped), the default inside it is not. */
  const char *r = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":[\"int\",\"null\"]},"
                  "{\"name\":\"b\",\"type\":[\"int\",\"null\"],\"default\":3}]}";
  mqr_avro_schema_t *rs = schema(r);
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  const char *datum = "{\"a\":{\"int\":1}}";
  assert_int_equal(mqr_avro_json_to_binary(rs, datum, strlen(datum), &b, &err), 0);
  const uint8_t want[] = {0, 2, 0, 6}; /* branch 0, 1; branch 0, 3 */
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.data, want, sizeof want);
  b.len = 0;
  const char *unwrapped = "{\"a\":1}"; /* still refused where a datum is expected */
  assert_int_equal(mqr_avro_json_to_binary(rs, unwrapped, strlen(unwrapped), &b, &err), MQR_EBADDATA);
  mqr_avro_buf_free(&b);
  mqr_avro_schema_destroy(rs);
}

static void test_enums(void **state) {
  (void)state;
  const char *r_def = "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"D\",\"B\",\"Z\"],\"default\":\"Z\"}";
  check(W_ENUM, r_def, "\"B\"", "\"B\"");
  check(W_ENUM, r_def, "\"D\"", "\"D\"");
  check(W_ENUM, r_def, "\"A\"", "\"Z\""); /* missing: the reader's default */
  const char *r_nodef = "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"C\",\"A\"]}";
  check(W_ENUM, r_nodef, "\"C\"", "\"C\"");
  check(W_ENUM, r_nodef, "\"B\"", "!enum symbol 'B' is not in the reader's enum");
  /* A reader with more symbols in the same order copies the ordinal. */
  check(W_ENUM, "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\",\"C\",\"D\",\"E\"]}", "\"D\"", "\"D\"");
  check("{\"type\":\"array\",\"items\":" W_ENUM "}",
        "{\"type\":\"array\",\"items\":{\"type\":\"enum\",\"name\":\"E\","
        "\"symbols\":[\"D\",\"C\",\"B\",\"A\"]}}",
        "[\"A\",\"B\",\"C\",\"D\",\"A\"]", "[\"A\",\"B\",\"C\",\"D\",\"A\"]");
}

static void test_unions(void **state) {
  (void)state;
  /* Writer union, reader union reordered and widened. */
  const char *w = "[\"null\",\"int\",\"string\"]";
  const char *r = "[\"string\",\"long\",\"null\",\"boolean\"]";
  check(w, r, "null", "null");
  check(w, r, "{\"int\":5}", "{\"long\":5}");
  check(w, r, "{\"string\":\"s\"}", "{\"string\":\"s\"}");
  /* Writer not a union, reader union: exact match first, then promotion. */
  check("\"int\"", "[\"null\",\"double\",\"int\"]", "4", "{\"int\":4}");
  check("\"int\"", "[\"null\",\"double\",\"long\"]", "4", "{\"double\":4.0}");
  check(
      "{\"type\":\"record\",\"name\":\"x.R\",\"fields\":[]}",
      "[\"null\",{\"type\":\"record\",\"name\":\"y.R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\",\"default\":1}]}]",
      "{}", "{\"y.R\":{\"a\":1}}");
  /* Writer union, reader not a union: a branch the reader lacks fails when read. */
  check("[\"null\",\"int\"]", "\"long\"", "{\"int\":-3}", "-3");
  check("[\"null\",\"int\"]", "\"long\"", "null", "!the writer's null cannot be read as long");
  /* The same union: copied. */
  check("[\"null\",{\"type\":\"array\",\"items\":\"int\"}]", "[\"null\",{\"type\":\"array\",\"items\":\"int\"}]",
        "{\"array\":[1,2]}", "{\"array\":[1,2]}");
}

#define W_LIST                                                                                                         \
  "{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"                                 \
  "{\"name\":\"next\",\"type\":[\"null\",\"L\"]}]}"

static void test_recursion(void **state) {
  (void)state;
  const char *r = "{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"next\",\"type\":[\"null\",\"L\"]},"
                  "{\"name\":\"v\",\"type\":\"double\"},{\"name\":\"w\",\"type\":\"int\",\"default\":0}]}";
  check(W_LIST, r, "{\"v\":1,\"next\":{\"L\":{\"v\":2,\"next\":null}}}",
        "{\"next\":{\"L\":{\"next\":null,\"v\":2.0,\"w\":0}},\"v\":1.0,\"w\":0}");
  check(W_LIST, W_LIST, "{\"v\":1,\"next\":{\"L\":{\"v\":2,\"next\":null}}}",
        "{\"v\":1,\"next\":{\"L\":{\"v\":2,\"next\":null}}}");
}

static void test_incompatible(void **state) {
  (void)state;
  incompatible("\"string\"", "\"int\"", "(root): the writer's string cannot be read as int");
  incompatible("\"long\"", "\"int\"", "the writer's long cannot be read as int");
  incompatible("\"double\"", "\"float\"", "cannot be read as float");
  incompatible(W_PERSON,
               "{\"type\":\"record\",\"name\":\"Person\",\"fields\":[{\"name\":\"id\",\"type\":\"int\"},"
               "{\"name\":\"email\",\"type\":\"string\"}]}",
               "email: the writer's p.Person has no such field, and the reader's field has no default");
  incompatible(W_PERSON,
               "{\"type\":\"record\",\"name\":\"Person\",\"fields\":[{\"name\":\"tags\",\"type\":{\"type\":\"array\","
               "\"items\":\"int\"}}]}",
               "tags.items: the writer's string cannot be read as int");
  incompatible(W_PERSON, "{\"type\":\"record\",\"name\":\"Other\",\"fields\":[]}",
               "the writer's record p.Person does not match the reader's Other");
  incompatible("{\"type\":\"fixed\",\"name\":\"F\",\"size\":2}", "{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}",
               "the writer's fixed has 2 bytes, the reader's 3");
  incompatible("\"int\"", "[\"null\",\"string\"]", "the reader's union has no branch for the writer's int");
  incompatible("[\"null\",\"string\"]", "\"int\"", "cannot be read as int");
  incompatible(W_ENUM, "{\"type\":\"enum\",\"name\":\"G\",\"symbols\":[\"A\"]}", "does not match the reader's G");
  incompatible("{\"type\":\"map\",\"values\":\"int\"}", "{\"type\":\"array\",\"items\":\"int\"}",
               "the writer's map cannot be read as array");
}

/* Every prefix of a datum fails cleanly; a bad union index or enum ordinal fails. */
static void test_hostile(void **state) {
  (void)state;
  mqr_avro_schema_t *ws = schema(W_PERSON);
  mqr_avro_schema_t *rs = schema("{\"type\":\"record\",\"name\":\"Person\",\"fields\":[{\"name\":\"score\",\"type\":"
                                 "\"double\"},{\"name\":\"id\",\"type\":\"long\"}]}");
  mqr_avro_resolver_t *res;
  mqr_error_t err;
  assert_int_equal(mqr_avro_resolver_compile(ws, rs, &res, &err), 0);
  mqr_avro_buf_t wb, rb;
  mqr_avro_buf_init_growable(&wb);
  mqr_avro_buf_init_growable(&rb);
  assert_int_equal(mqr_avro_json_to_binary(ws, W_PERSON_DATUM, strlen(W_PERSON_DATUM), &wb, &err), 0);
  for (size_t n = 0; n < wb.len; n++) {
    assert_int_equal(mqr_avro_resolve(res, wb.data, n, NULL, &rb, &err), MQR_ETRUNCATED);
    assert_int_equal(rb.len, 0);
  }
  /* A negative array count that claims more items than bytes. */
  const uint8_t huge[] = {0x02, 0x02, 'A', 0x7f};
  assert_int_not_equal(mqr_avro_resolve(res, huge, sizeof huge, NULL, &rb, &err), 0);
  /* A fixed buffer too small: ENOSPC, nothing written. */
  uint8_t small[4];
  mqr_avro_buf_t fb;
  mqr_avro_buf_init(&fb, small, sizeof small);
  assert_int_equal(mqr_avro_resolve(res, wb.data, wb.len, NULL, &fb, &err), MQR_ENOSPC);
  assert_int_equal(fb.len, 0);
  mqr_avro_resolver_destroy(res);
  mqr_avro_schema_destroy(rs);

  rs = schema("[\"string\",\"null\"]");
  mqr_avro_schema_t *w2 = schema("[\"null\",\"string\"]");
  assert_int_equal(mqr_avro_resolver_compile(w2, rs, &res, &err), 0);
  const uint8_t bad_branch[] = {0x04};
  assert_int_equal(mqr_avro_resolve(res, bad_branch, 1, NULL, &rb, &err), MQR_EBADDATA);
  mqr_avro_resolver_destroy(res);
  mqr_avro_schema_destroy(rs);
  mqr_avro_schema_destroy(w2);

  w2 = schema(W_ENUM);
  rs = schema("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"D\",\"C\",\"B\",\"A\"]}");
  assert_int_equal(mqr_avro_resolver_compile(w2, rs, &res, &err), 0);
  const uint8_t bad_ordinal[] = {0x08};
  assert_int_equal(mqr_avro_resolve(res, bad_ordinal, 1, NULL, &rb, &err), MQR_EBADDATA);
  mqr_avro_resolver_destroy(res);
  mqr_avro_schema_destroy(rs);
  mqr_avro_schema_destroy(w2);
  mqr_avro_buf_free(&wb);
  mqr_avro_buf_free(&rb);
  mqr_avro_schema_destroy(ws);
}

/* Deep data: the resolver (to the same schema, and to another), the skipper and the
 * streaming reader count nesting alike, so they accept and refuse the same depths. */
static void test_depth_agrees(void **state) {
  (void)state;
  mqr_avro_schema_t *ws = schema(W_LIST);
  mqr_avro_schema_t *rs = schema("{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"next\",\"type\":"
                                 "[\"null\",\"L\"]},{\"name\":\"v\",\"type\":\"long\"}]}");
  mqr_avro_resolver_t *same, *other;
  mqr_avro_reader_t *rd;
  assert_int_equal(mqr_avro_resolver_compile(ws, ws, &same, NULL), 0);
  assert_int_equal(mqr_avro_resolver_compile(ws, rs, &other, NULL), 0);
  assert_int_equal(mqr_avro_reader_create(ws, &rd), 0);
  mqr_avro_buf_t rb;
  mqr_avro_buf_init_growable(&rb);
  uint8_t data[512];
  int accepted = 0, refused = 0;
  for (int levels = 50; levels < 80; levels++) {
    size_t n = 0;
    for (int i = 0; i < levels; i++) data[n++] = 0x00, data[n++] = 0x02; /* v = 0, next: branch L */
    data[n++] = 0x00, data[n++] = 0x00;                                  /* v = 0, next: null */
    int rc_skip = mqr_avro_skip(ws, data, n, NULL, NULL);
    rb.len = 0;
    int rc_same = mqr_avro_resolve(same, data, n, NULL, &rb, NULL);
    rb.len = 0;
    int rc_other = mqr_avro_resolve(other, data, n, NULL, &rb, NULL);
    mqr_avro_reader_begin(rd, data, n);
    int rc_stream = mqr_avro_read_skip(rd);
    assert_int_equal(rc_same, rc_skip);
    assert_int_equal(rc_other, rc_skip);
    assert_int_equal(rc_stream, rc_skip);
    if (rc_skip == 0)
      accepted++;
    else {
      assert_int_equal(rc_skip, MQR_ELIMIT);
      refused++;
    }
  }
  assert_true(accepted > 0 && refused > 0);
  mqr_avro_buf_free(&rb);
  mqr_avro_reader_destroy(rd);
  mqr_avro_resolver_destroy(same);
  mqr_avro_resolver_destroy(other);
  mqr_avro_schema_destroy(ws);
  mqr_avro_schema_destroy(rs);
}

/* Compiling under allocation failure at every call: an error, no leak. */
static void test_alloc_failure(void **state) {
  (void)state;
  mqr_avro_schema_t *ws = schema(W_LIST);
  mqr_avro_schema_t *rs = schema("{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"next\",\"type\":"
                                 "[\"null\",\"L\"]},{\"name\":\"w\",\"type\":\"int\",\"default\":0}]}");
  for (int at = 1;; at++) {
    talloc_install();
    talloc.fail_at = at;
    mqr_avro_resolver_t *res = NULL;
    mqr_error_t err;
    int rc = mqr_avro_resolver_compile(ws, rs, &res, &err);
    mqr_avro_resolver_destroy(res);
    talloc_uninstall();
    assert_int_equal(talloc.live, 0);
    if (rc == 0) break;
    assert_int_equal(rc, MQR_ENOMEM);
  }
  mqr_avro_schema_destroy(ws);
  mqr_avro_schema_destroy(rs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_and_promotions),
      cmocka_unit_test(test_records),
      cmocka_unit_test(test_union_defaults),
      cmocka_unit_test(test_enums),
      cmocka_unit_test(test_unions),
      cmocka_unit_test(test_recursion),
      cmocka_unit_test(test_incompatible),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_alloc_failure),
      cmocka_unit_test(test_depth_agrees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
