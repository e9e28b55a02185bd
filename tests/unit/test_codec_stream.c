/* The streaming writer and reader: a datum of every type written call by call gives the
 * same bytes as its JSON; read back call by call gives the same values; every mistake is
 * refused with where it happened, and leaves the output as it was; no allocation. */
#include "testutil.h"

#define SCHEMA                                                                                                         \
  "{\"type\":\"record\",\"name\":\"All\",\"fields\":["                                                                 \
  "{\"name\":\"b\",\"type\":\"boolean\"},"                                                                             \
  "{\"name\":\"i\",\"type\":\"int\"},"                                                                                 \
  "{\"name\":\"l\",\"type\":\"long\"},"                                                                                \
  "{\"name\":\"f\",\"type\":\"float\"},"                                                                               \
  "{\"name\":\"d\",\"type\":\"double\"},"                                                                              \
  "{\"name\":\"s\",\"type\":\"string\"},"                                                                              \
  "{\"name\":\"y\",\"type\":\"bytes\"},"                                                                               \
  "{\"name\":\"x\",\"type\":{\"type\":\"fixed\",\"name\":\"F4\",\"size\":4}},"                                         \
  "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"Suit\",\"symbols\":[\"S\",\"H\",\"D\",\"C\"]}},"             \
  "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"int\"}},"                                                  \
  "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"string\"]}},"                                     \
  "{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"P\",\"fields\":["                                \
  "{\"name\":\"px\",\"type\":\"long\"}]},{\"type\":\"record\",\"name\":\"Q\",\"fields\":[]}]},"                        \
  "{\"name\":\"n\",\"type\":\"P\"},"                                                                                   \
  "{\"name\":\"empty\",\"type\":{\"type\":\"array\",\"items\":\"string\"}}]}"

#define DATUM                                                                                                          \
  "{\"b\":true,\"i\":-5,\"l\":1099511627776,\"f\":1.5,\"d\":-0.25,\"s\":\"h\\u00e9\",\"y\":\"\\u0000\\u00ff\","        \
  "\"x\":\"abcd\",\"e\":\"D\",\"a\":[1,2,3],\"m\":{\"k\":null,\"v\":{\"string\":\"w\"}},"                              \
  "\"u\":{\"P\":{\"px\":7}},\"n\":{\"px\":-1},\"empty\":[]}"

static mqr_avro_schema_t *schema(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s, &err) != 0) fail_msg("schema refused: %s", err.message);
  return s;
}

#define OK(call)                                                                                                       \
  do {                                                                                                                 \
    int rc_ = (call);                                                                                                  \
    if (rc_ != 0) fail_msg("%s: %d", #call, rc_);                                                                      \
  } while (0)

static void write_all(mqr_avro_writer_t *w) {
  OK(mqr_avro_write_record_begin(w));
  OK(mqr_avro_write_boolean(w, true));
  OK(mqr_avro_write_int(w, -5));
  OK(mqr_avro_write_long(w, 1099511627776LL));
  OK(mqr_avro_write_float(w, 1.5f));
  OK(mqr_avro_write_double(w, -0.25));
  OK(mqr_avro_write_string(w, "h\xc3\xa9", 3));
  OK(mqr_avro_write_bytes(w, "\x00\xff", 2));
  OK(mqr_avro_write_fixed(w, "abcd", 4));
  OK(mqr_avro_write_enum_symbol(w, "D", 1));
  OK(mqr_avro_write_array_begin(w, 3));
  for (int i = 1; i <= 3; i++) OK(mqr_avro_write_int(w, i));
  OK(mqr_avro_write_array_end(w));
  OK(mqr_avro_write_map_begin(w, 2));
  OK(mqr_avro_write_map_key(w, "k", 1));
  OK(mqr_avro_write_null(w)); /* the union's null branch, picked by type */
  OK(mqr_avro_write_map_key(w, "v", 1));
  OK(mqr_avro_write_string(w, "w", 1)); /* its string branch */
  OK(mqr_avro_write_map_end(w));
  OK(mqr_avro_write_union(w, 1)); /* two records: by index */
  OK(mqr_avro_write_record_begin(w));
  OK(mqr_avro_write_int(w, 7)); /* an int where a long is */
  OK(mqr_avro_write_record_end(w));
  OK(mqr_avro_write_record_begin(w));
  OK(mqr_avro_write_long(w, -1));
  OK(mqr_avro_write_record_end(w));
  OK(mqr_avro_write_array_begin(w, 0));
  OK(mqr_avro_write_array_end(w));
  OK(mqr_avro_write_record_end(w));
}

static void test_write_matches_json(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(SCHEMA);
  mqr_avro_buf_t want, got;
  mqr_avro_buf_init_growable(&want);
  mqr_avro_buf_init_growable(&got);
  mqr_error_t err;
  if (mqr_avro_json_to_binary(s, DATUM, strlen(DATUM), &want, &err) != 0) fail_msg("%s", err.message);
  mqr_avro_writer_t *w;
  assert_int_equal(mqr_avro_writer_create(s, &w), 0);
  for (int round = 0; round < 3; round++) { /* the writer is reused */
    got.len = 0;
    mqr_avro_writer_begin(w, &got);
    write_all(w);
    assert_int_equal(mqr_avro_writer_end(w), 0);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
  }
  /* Steady state: no allocation per datum, into a fixed buffer or one that has grown. */
  uint8_t fixed[256];
  mqr_avro_buf_t fb;
  talloc_install();
  for (int round = 0; round < 100; round++) {
    mqr_avro_buf_init(&fb, fixed, sizeof fixed);
    mqr_avro_writer_begin(w, &fb);
    write_all(w);
    assert_int_equal(mqr_avro_writer_end(w), 0);
    got.len = 0;
    mqr_avro_writer_begin(w, &got);
    write_all(w);
    assert_int_equal(mqr_avro_writer_end(w), 0);
  }
  assert_int_equal(talloc.calls, 0);
  talloc_uninstall();
  assert_memory_equal(fixed, want.data, want.len);
  /* Too small a buffer: ENOSPC, nothing left. */
  mqr_avro_buf_init(&fb, fixed, 10);
  mqr_avro_writer_begin(w, &fb);
  OK(mqr_avro_write_record_begin(w));
  OK(mqr_avro_write_boolean(w, false));
  OK(mqr_avro_write_int(w, 1));
  OK(mqr_avro_write_long(w, 2));
  OK(mqr_avro_write_float(w, 0));
  assert_int_equal(mqr_avro_write_double(w, 0), MQR_ENOSPC);
  assert_int_equal(fb.len, 0);
  assert_int_equal(mqr_avro_write_string(w, "x", 1), MQR_ENOSPC); /* stays failed */
  assert_int_equal(mqr_avro_writer_end(w), MQR_ENOSPC);
  mqr_avro_writer_destroy(w);
  mqr_avro_buf_free(&want);
  mqr_avro_buf_free(&got);
  mqr_avro_schema_destroy(s);
}

/* Runs the calls of `body` on a fresh datum after "prefix" bytes already in the buffer:
 * the failing call must give code and a message containing why, and leave the prefix. */
#define MISTAKE(why, code, body)                                                                                       \
  do {                                                                                                                 \
    mqr_avro_buf_t b_;                                                                                                 \
    mqr_avro_buf_init_growable(&b_);                                                                                   \
    assert_int_equal(mqr_avro_buf_reserve(&b_, 3), 0);                                                                 \
    memcpy(b_.data, "pre", 3);                                                                                         \
    b_.len = 3;                                                                                                        \
    mqr_avro_writer_begin(w, &b_);                                                                                     \
    int rc_ = 0;                                                                                                       \
    body;                                                                                                              \
    assert_int_equal(rc_, code);                                                                                       \
    assert_int_equal(b_.len, 3);                                                                                       \
    const char *m_ = mqr_avro_writer_error(w)->message;                                                                \
    if (strstr(m_, why) == NULL) fail_msg("'%s' does not mention '%s'", m_, why);                                      \
    assert_int_equal(mqr_avro_write_null(w), code); /* every later call fails too */                                   \
    mqr_avro_buf_free(&b_);                                                                                            \
  } while (0)
#define TRY(call)                                                                                                      \
  if (rc_ == 0) rc_ = (call)

static void test_writer_mistakes(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(SCHEMA);
  mqr_avro_writer_t *w;
  assert_int_equal(mqr_avro_writer_create(s, &w), 0);
  MISTAKE("(datum): expected record, got int", MQR_EINVAL, TRY(mqr_avro_write_int(w, 1)));
  MISTAKE("i: expected int, got string", MQR_EINVAL, {
    TRY(mqr_avro_write_record_begin(w));
    TRY(mqr_avro_write_boolean(w, true));
    TRY(mqr_avro_write_string(w, "x", 1));
  });
  MISTAKE("i: the record ends before this field", MQR_EINVAL, {
    TRY(mqr_avro_write_record_begin(w));
    TRY(mqr_avro_write_boolean(w, true));
    TRY(mqr_avro_write_record_end(w));
  });
  /* The fields up to x, and up to e: a prefix for deeper mistakes. */
#define UP_TO_X                                                                                                        \
  TRY(mqr_avro_write_record_begin(w));                                                                                 \
  TRY(mqr_avro_write_boolean(w, true));                                                                                \
  TRY(mqr_avro_write_int(w, 1));                                                                                       \
  TRY(mqr_avro_write_long(w, 1));                                                                                      \
  TRY(mqr_avro_write_float(w, 1));                                                                                     \
  TRY(mqr_avro_write_double(w, 1));                                                                                    \
  TRY(mqr_avro_write_string(w, "", 0));                                                                                \
  TRY(mqr_avro_write_bytes(w, "", 0))
#define UP_TO_E                                                                                                        \
  UP_TO_X;                                                                                                             \
  TRY(mqr_avro_write_fixed(w, "abcd", 4))
#define UP_TO_M /* through the enum and an empty array: the map is next */                                             \
  UP_TO_E;                                                                                                             \
  TRY(mqr_avro_write_enum(w, 0));                                                                                      \
  TRY(mqr_avro_write_array_begin(w, 0));                                                                               \
  TRY(mqr_avro_write_array_end(w))
  MISTAKE("e: 'Z' is not a symbol of Suit", MQR_EINVAL, {
    UP_TO_E;
    TRY(mqr_avro_write_enum_symbol(w, "Z", 1));
  });
  MISTAKE("e: ordinal 4 is not one of Suit's 4 symbols", MQR_EINVAL, {
    UP_TO_E;
    TRY(mqr_avro_write_enum(w, 4));
  });
  MISTAKE("x: fixed F4 takes 4 bytes, got 3", MQR_EINVAL, {
    UP_TO_X;
    TRY(mqr_avro_write_fixed(w, "abc", 3));
  });
  MISTAKE("a[2]: 1 of the array's items are missing", MQR_EINVAL, {
    UP_TO_E;
    TRY(mqr_avro_write_enum(w, 0));
    TRY(mqr_avro_write_array_begin(w, 3));
    TRY(mqr_avro_write_int(w, 1));
    TRY(mqr_avro_write_int(w, 2));
    TRY(mqr_avro_write_array_end(w));
  });
  MISTAKE("a[1]: expected the end of the array, got int", MQR_EINVAL, {
    UP_TO_E;
    TRY(mqr_avro_write_enum(w, 0));
    TRY(mqr_avro_write_array_begin(w, 1));
    TRY(mqr_avro_write_int(w, 1));
    TRY(mqr_avro_write_int(w, 2));
  });
  MISTAKE("m[0]: expected the end of the map or a key, got null", MQR_EINVAL, {
    UP_TO_M;
    TRY(mqr_avro_write_map_begin(w, 1));
    TRY(mqr_avro_write_null(w));
  });
  MISTAKE("m[0]: expected union, got a map key", MQR_EINVAL, {
    UP_TO_M;
    TRY(mqr_avro_write_map_begin(w, 1));
    TRY(mqr_avro_write_map_key(w, "k", 1));
    TRY(mqr_avro_write_map_key(w, "k", 1));
  });
  MISTAKE("m[0]<null>: expected null, got long", MQR_EINVAL, {
    UP_TO_M;
    TRY(mqr_avro_write_map_begin(w, 1));
    TRY(mqr_avro_write_map_key(w, "k", 1));
    TRY(mqr_avro_write_union(w, 0));
    TRY(mqr_avro_write_long(w, 1));
  });
  MISTAKE("u: expected union, got long", MQR_EINVAL, {
    UP_TO_M;
    TRY(mqr_avro_write_map_begin(w, 0));
    TRY(mqr_avro_write_map_end(w));
    TRY(mqr_avro_write_long(w, 1)); /* no long branch to pick */
  });
  MISTAKE("u: branch 3 of a union of 3", MQR_EINVAL, {
    UP_TO_M;
    TRY(mqr_avro_write_map_begin(w, 0));
    TRY(mqr_avro_write_map_end(w));
    TRY(mqr_avro_write_union(w, 3));
  });
  MISTAKE("the datum is not complete: boolean expected", MQR_EINVAL, {
    TRY(mqr_avro_write_record_begin(w));
    TRY(mqr_avro_writer_end(w));
  });
  MISTAKE("no array is open", MQR_EINVAL, {
    TRY(mqr_avro_write_record_begin(w));
    TRY(mqr_avro_write_array_end(w));
  });
  /* After all that, the writer writes a good datum. */
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_avro_writer_begin(w, &b);
  write_all(w);
  assert_int_equal(mqr_avro_writer_end(w), 0);
  assert_int_equal(mqr_avro_write_null(w), MQR_EINVAL); /* nothing begun */
  mqr_avro_buf_free(&b);
  mqr_avro_writer_destroy(w);
  mqr_avro_schema_destroy(s);
}

/* Reads the datum call by call, checking each value. */
static int read_all(mqr_avro_reader_t *r) {
  bool b = false;
  int32_t i = 0, o = 0;
  int64_t l = 0;
  float f = 0;
  double d = 0;
  mqr_str_t s, sym, key;
  uint32_t br = 9;
  int rc;
#define R(call)                                                                                                        \
  if ((rc = (call)) != 0) return rc
  R(mqr_avro_read_record_begin(r));
  R(mqr_avro_read_boolean(r, &b));
  assert_true(b);
  R(mqr_avro_read_int(r, &i));
  assert_int_equal(i, -5);
  R(mqr_avro_read_long(r, &l));
  assert_int_equal(l, 1099511627776LL);
  R(mqr_avro_read_float(r, &f));
  assert_true(f == 1.5f);
  R(mqr_avro_read_double(r, &d));
  assert_true(d == -0.25);
  R(mqr_avro_read_string(r, &s));
  assert_true(mqr_str_eq(s, mqr_str("h\xc3\xa9")));
  R(mqr_avro_read_bytes(r, &s));
  assert_int_equal(s.len, 2);
  assert_memory_equal(s.ptr, "\x00\xff", 2);
  R(mqr_avro_read_fixed(r, &s));
  assert_true(mqr_str_eq(s, mqr_str("abcd")));
  R(mqr_avro_read_enum(r, &o, &sym));
  assert_int_equal(o, 2);
  assert_true(mqr_str_eq(sym, mqr_str("D")));
  R(mqr_avro_read_array_begin(r));
  int64_t sum = 0, n = 0;
  while ((rc = mqr_avro_read_array_next(r)) == 1) {
    R(mqr_avro_read_long(r, &l)); /* an int read as a long */
    sum += l;
    n++;
  }
  if (rc) return rc;
  assert_int_equal(n, 3);
  assert_int_equal(sum, 6);
  R(mqr_avro_read_map_begin(r));
  n = 0;
  while ((rc = mqr_avro_read_map_next(r, &key)) == 1) {
    R(mqr_avro_read_union(r, &br));
    if (n == 0) {
      assert_true(mqr_str_eq(key, mqr_str("k")));
      assert_int_equal(br, 0);
      R(mqr_avro_read_null(r));
    } else {
      assert_true(mqr_str_eq(key, mqr_str("v")));
      assert_int_equal(br, 1);
      R(mqr_avro_read_string(r, &s));
      assert_true(mqr_str_eq(s, mqr_str("w")));
    }
    n++;
  }
  if (rc) return rc;
  assert_int_equal(n, 2);
  mqr_avro_type_t t;
  assert_int_equal(mqr_avro_reader_next(r, &t), 0);
  assert_int_equal(t, MQR_AVRO_UNION);
  R(mqr_avro_read_union(r, &br));
  assert_int_equal(br, 1);
  R(mqr_avro_read_skip(r)); /* the P record, whole */
  R(mqr_avro_read_record_begin(r));
  R(mqr_avro_read_long(r, &l));
  assert_int_equal(l, -1);
  assert_int_equal(mqr_avro_reader_next(r, &t), MQR_ENOTFOUND);
  R(mqr_avro_read_record_end(r));
  R(mqr_avro_read_array_begin(r));
  if ((rc = mqr_avro_read_array_next(r)) != 0) return rc < 0 ? rc : -100;
  R(mqr_avro_read_record_end(r));
  return mqr_avro_reader_end(r);
#undef R
}

static void test_read(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(SCHEMA);
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_error_t err;
  assert_int_equal(mqr_avro_json_to_binary(s, DATUM, strlen(DATUM), &b, &err), 0);
  mqr_avro_reader_t *r;
  assert_int_equal(mqr_avro_reader_create(s, &r), 0);
  talloc_install();
  for (int round = 0; round < 10; round++) {
    mqr_avro_reader_begin(r, b.data, b.len);
    if (read_all(r) != 0) fail_msg("%s", mqr_avro_reader_error(r)->message);
    assert_int_equal(mqr_avro_reader_offset(r), b.len);
  }
  assert_int_equal(talloc.calls, 0);
  talloc_uninstall();
  /* Every truncation fails with an error, never a crash. */
  for (size_t n = 0; n < b.len; n++) {
    uint8_t *cut = malloc(n + 1); /* exactly n bytes readable */
    memcpy(cut, b.data, n);
    mqr_avro_reader_begin(r, cut, n);
    assert_int_equal(read_all(r), MQR_ETRUNCATED);
    free(cut);
  }
  /* Misuse. */
  mqr_avro_reader_begin(r, b.data, b.len);
  int32_t i;
  assert_int_equal(mqr_avro_read_int(r, &i), MQR_EINVAL);
  assert_non_null(strstr(mqr_avro_reader_error(r)->message, "expected record, got int"));
  mqr_avro_reader_begin(r, b.data, b.len);
  assert_int_equal(mqr_avro_read_record_begin(r), 0);
  assert_int_equal(mqr_avro_read_record_end(r), MQR_EINVAL);
  assert_non_null(strstr(mqr_avro_reader_error(r)->message, "b: the record ends before this field"));
  mqr_avro_reader_begin(r, b.data, b.len);
  assert_int_equal(mqr_avro_read_record_begin(r), 0);
  for (int k = 0; k < 9; k++) assert_int_equal(mqr_avro_read_skip(r), 0);
  assert_int_equal(mqr_avro_read_array_begin(r), 0);
  assert_int_equal(mqr_avro_read_int(r, &i), MQR_EINVAL);
  assert_non_null(strstr(mqr_avro_reader_error(r)->message, "a[0]: ask for the array's next item first"));
  mqr_avro_reader_begin(r, b.data, b.len);
  assert_int_equal(mqr_avro_read_skip(r), 0);
  assert_int_equal(mqr_avro_reader_end(r), 0);
  /* Bad bytes inside: an enum ordinal out of range. */
  mqr_avro_schema_t *e = schema("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}");
  mqr_avro_reader_t *er;
  assert_int_equal(mqr_avro_reader_create(e, &er), 0);
  const uint8_t bad[] = {0x02};
  mqr_avro_reader_begin(er, bad, 1);
  int32_t o;
  assert_int_equal(mqr_avro_read_enum(er, &o, NULL), MQR_EBADDATA);
  assert_non_null(strstr(mqr_avro_reader_error(er)->message, "at byte 1: enum ordinal 1 out of range"));
  mqr_avro_reader_destroy(er);
  mqr_avro_schema_destroy(e);
  mqr_avro_reader_destroy(r);
  mqr_avro_buf_free(&b);
  mqr_avro_schema_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_matches_json),
      cmocka_unit_test(test_writer_mistakes),
      cmocka_unit_test(test_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
