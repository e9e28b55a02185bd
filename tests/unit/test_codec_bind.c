/* Compiled codecs over C structs: the bytes equal the JSON path's (itself checked
 * against Python avro and Avro C), decoding gives the values back, bindings are checked
 * once, and encoding and decoding allocate nothing. */
#include "big_record.h"
#include "plan.h" /* the codec's fast kinds */
#include "testutil.h"

static mqr_avro_schema_t *schema(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s, &err) != 0) fail_msg("schema refused: %s", err.message);
  return s;
}

/* The Rust benchmark's Big record. */

static char *read_file(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", getenv("MQR_SOURCE_DIR"), rel);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void expect_same_as_json(const mqr_avro_schema_t *s, const uint8_t *bin, size_t n, const char *json) {
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  mqr_error_t err;
  if (mqr_avro_json_to_binary(s, json, strlen(json), &b, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(b.len, n);
  assert_memory_equal(b.data, bin, n);
  mqr_avro_buf_free(&b);
}

static void test_big_record(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(read_file("tests/data/avro/schemas/big.avsc"));
  mqr_avro_codec_t *c;
  mqr_error_t err;
  if (mqr_avro_codec_compile(s, &user_type, &c, &err) != 0) fail_msg("%s", err.message);
  user_t u = {MQR_STR("username"),
              10,
              MQR_STR("000000000"),
              MQR_STR("0000"),
              {MQR_STR("street"), MQR_STR("city"), MQR_STR("state_prov"), MQR_STR("country"), MQR_STR("zip")}};
  uint8_t storage[256];
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, storage, sizeof storage);
  assert_int_equal(mqr_avro_encode(c, &u, &b, NULL, &err), 0);
  expect_same_as_json(s, b.data, b.len,
                      "{\"username\":\"username\",\"age\":10,\"phone\":\"000000000\",\"housenum\":\"0000\","
                      "\"address\":{\"street\":\"street\",\"city\":\"city\",\"state_prov\":\"state_prov\","
                      "\"country\":\"country\",\"zip\":\"zip\"}}");
  user_t back;
  memset(&back, 0xAB, sizeof back);
  size_t used;
  assert_int_equal(mqr_avro_decode(c, b.data, b.len, &used, &back, NULL, &err), 0);
  assert_int_equal(used, b.len);
  assert_true(mqr_str_eq(back.username, u.username) && back.age == 10 && mqr_str_eq(back.address.zip, u.address.zip));
  assert_ptr_equal(back.username.ptr, (const char *)b.data + 1); /* a view into the input */
  /* A buffer too small: ENOSPC with the size it needed, nothing written. */
  mqr_avro_buf_t small;
  mqr_avro_buf_init(&small, storage, 10);
  size_t needed = 0;
  assert_int_equal(mqr_avro_encode(c, &u, &small, &needed, &err), MQR_ENOSPC);
  assert_int_equal(needed, b.len);
  assert_int_equal(small.len, 0);
  /* Every truncation is refused. */
  for (size_t n = 0; n < b.len; n++)
    assert_int_equal(mqr_avro_decode(c, b.data, n, NULL, &back, NULL, NULL), MQR_ETRUNCATED);
  /* Steady state: no allocation per encode or decode. */
  mqr_avro_buf_t g;
  mqr_avro_buf_init_growable(&g);
  talloc_install();
  for (int i = 0; i < 3; i++) {
    g.len = 0;
    assert_int_equal(mqr_avro_encode(c, &u, &g, NULL, NULL), 0);
    assert_int_equal(mqr_avro_decode(c, g.data, g.len, NULL, &back, NULL, NULL), 0);
    if (i == 0) talloc.calls = 0; /* the first encode grew g */
  }
  assert_int_equal(talloc.calls, 0);
  mqr_avro_buf_free(&g);
  talloc_uninstall();
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
}

/* Every kind of binding at once. */
typedef struct {
  int32_t branch;
  union {
    int64_t l;
    mqr_str_t s;
  } v;
} lu_t;
typedef struct {
  double x;
  uint8_t md5[4];
} pt_t;
typedef struct {
  bool flag;
  float f;
  int32_t color;
  mqr_avro_array_t ints;   /* int */
  mqr_avro_array_t colors; /* enum */
  mqr_avro_array_t doubles;
  mqr_avro_array_t longs;
  mqr_avro_array_t points; /* pt_t */
  mqr_avro_map_t opt;      /* lu_t */
  lu_t u;
  mqr_str_t raw;
} all_t;

static const char *all_schema =
    "{\"type\":\"record\",\"name\":\"All\",\"fields\":["
    "{\"name\":\"flag\",\"type\":\"boolean\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"color\",\"type\":{\"type\":\"enum\",\"name\":\"C\",\"symbols\":[\"R\",\"G\",\"B\"]}},"
    "{\"name\":\"ints\",\"type\":{\"type\":\"array\",\"items\":\"int\"}},"
    "{\"name\":\"colors\",\"type\":{\"type\":\"array\",\"items\":\"C\"}},"
    "{\"name\":\"doubles\",\"type\":{\"type\":\"array\",\"items\":\"double\"}},"
    "{\"name\":\"longs\",\"type\":{\"type\":\"array\",\"items\":\"long\"}},"
    "{\"name\":\"points\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"P\",\"fields\":["
    "{\"name\":\"x\",\"type\":\"double\"},{\"name\":\"md5\",\"type\":{\"type\":\"fixed\",\"name\":\"M\",\"size\":4}},"
    "{\"name\":\"note\",\"type\":\"string\",\"default\":\"n/a\"}]}}},"
    "{\"name\":\"opt\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"long\",\"string\"]}},"
    "{\"name\":\"u\",\"type\":[\"null\",\"long\",\"string\"]},"
    "{\"name\":\"raw\",\"type\":\"bytes\"},"
    "{\"name\":\"extra\",\"type\":{\"type\":\"map\",\"values\":\"int\"},\"default\":{\"a\":1}}]}";

static const mqr_avro_ctype_t fixed4 = {MQR_AVRO_C_FIXED, 4, NULL, 0, NULL, NULL, 0, 0};
static const mqr_avro_cfield_t pt_fields[] = {{"x", offsetof(pt_t, x), &mqr_avro_c_double},
                                              {"md5", offsetof(pt_t, md5), &fixed4}};
static const mqr_avro_ctype_t pt_type = {MQR_AVRO_C_RECORD, sizeof(pt_t), pt_fields, 2, NULL, NULL, 0, 0};
static const mqr_avro_ctype_t *const lu_branches[] = {&mqr_avro_c_null, &mqr_avro_c_int64, &mqr_avro_c_str};
static const mqr_avro_ctype_t lu_type = {MQR_AVRO_C_UNION, sizeof(lu_t), NULL, 0, NULL, lu_branches, 3,
                                         offsetof(lu_t, v)};
static const mqr_avro_ctype_t ints_t = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_int32, NULL, 0, 0};
static const mqr_avro_ctype_t dbl_t = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_double, NULL, 0, 0};
static const mqr_avro_ctype_t lng_t = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_int64, NULL, 0, 0};
static const mqr_avro_ctype_t pts_t = {MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &pt_type, NULL, 0, 0};
static const mqr_avro_ctype_t map_t = {MQR_AVRO_C_MAP, sizeof(mqr_avro_map_t), NULL, 0, &lu_type, NULL, 0, 0};
static const mqr_avro_cfield_t all_fields[] = {{"flag", offsetof(all_t, flag), &mqr_avro_c_bool},
                                               {"f", offsetof(all_t, f), &mqr_avro_c_float},
                                               {"color", offsetof(all_t, color), &mqr_avro_c_int32},
                                               {"ints", offsetof(all_t, ints), &ints_t},
                                               {"colors", offsetof(all_t, colors), &ints_t},
                                               {"doubles", offsetof(all_t, doubles), &dbl_t},
                                               {"longs", offsetof(all_t, longs), &lng_t},
                                               {"points", offsetof(all_t, points), &pts_t},
                                               {"opt", offsetof(all_t, opt), &map_t},
                                               {"u", offsetof(all_t, u), &lu_type},
                                               {"raw", offsetof(all_t, raw), &mqr_avro_c_str}};
static const mqr_avro_ctype_t all_type = {MQR_AVRO_C_RECORD, sizeof(all_t), all_fields, 11, NULL, NULL, 0, 0};

static void test_every_kind(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(all_schema);
  mqr_avro_codec_t *c;
  mqr_error_t err;
  if (mqr_avro_codec_compile(s, &all_type, &c, &err) != 0) fail_msg("%s", err.message);
  int32_t ints[] = {0, -1, 64, INT32_MAX, INT32_MIN}, colors[] = {2, 0, 1};
  double doubles[] = {0.5, -2};
  int64_t longs[] = {INT64_MIN, 1};
  pt_t pts[] = {{1.5, {1, 2, 3, 4}}, {-1, {0, 0, 0, 255}}};
  mqr_str_t keys[] = {MQR_STR("a"), MQR_STR("b"), MQR_STR("c")};
  lu_t vals[] = {{0, {0}}, {1, {.l = -7}}, {2, {.s = MQR_STR("hi")}}};
  all_t v = {true,
             1.5f,
             2,
             {ints, 5},
             {colors, 3},
             {doubles, 2},
             {longs, 2},
             {pts, 2},
             {keys, vals, 3},
             {2, {.s = MQR_STR("u")}},
             MQR_STR("\x00\xff")};
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  if (mqr_avro_encode(c, &v, &b, NULL, &err) != 0) fail_msg("%s", err.message);
  expect_same_as_json(s, b.data, b.len,
                      "{\"flag\":true,\"f\":1.5,\"color\":\"B\",\"ints\":[0,-1,64,2147483647,-2147483648],"
                      "\"colors\":[\"B\",\"R\",\"G\"],\"doubles\":[0.5,-2],\"longs\":[-9223372036854775808,1],"
                      "\"points\":[{\"x\":1.5,\"md5\":\"\\u0001\\u0002\\u0003\\u0004\"},"
                      "{\"x\":-1,\"md5\":\"\\u0000\\u0000\\u0000\\u00ff\"}],"
                      "\"opt\":{\"a\":null,\"b\":{\"long\":-7},\"c\":{\"string\":\"hi\"}},"
                      "\"u\":{\"string\":\"u\"},\"raw\":\"\\u0000\\u00ff\"}");
  /* Into fixed buffers of every size up to the datum's: ENOSPC, nothing written, and the
   * size needed said, until the size is exactly that, which fits. */
  for (size_t cap = 0; cap <= b.len; cap++) {
    uint8_t *st = malloc(cap + 1);
    mqr_avro_buf_t fb;
    mqr_avro_buf_init(&fb, st, cap);
    size_t needed = 0;
    int rc = mqr_avro_encode(c, &v, &fb, &needed, &err);
    if (cap < b.len) {
      assert_int_equal(rc, MQR_ENOSPC);
      assert_int_equal(fb.len, 0);
      assert_int_equal(needed, b.len);
      char want[96];
      snprintf(want, sizeof want, "needs %zu bytes, the buffer has %zu", b.len, cap);
      if (!strstr(err.message, want)) fail_msg("'%s' lacks '%s'", err.message, want);
    } else {
      assert_int_equal(rc, 0);
      assert_memory_equal(st, b.data, b.len);
    }
    free(st);
  }
  uint8_t mem[1024];
  mqr_avro_arena_t arena = {mem, sizeof mem, 0};
  all_t back;
  memset(&back, 0, sizeof back);
  if (mqr_avro_decode(c, b.data, b.len, NULL, &back, &arena, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(back.ints.count, 5);
  assert_memory_equal(back.ints.items, ints, sizeof ints);
  assert_memory_equal(back.colors.items, colors, sizeof colors);
  assert_memory_equal(back.doubles.items, doubles, sizeof doubles);
  assert_memory_equal(back.longs.items, longs, sizeof longs);
  assert_int_equal(back.points.count, 2);
  assert_memory_equal(((pt_t *)back.points.items)[1].md5, pts[1].md5, 4);
  assert_int_equal(back.opt.count, 3);
  assert_true(mqr_str_eq(back.opt.keys[2], MQR_STR("c")));
  assert_int_equal(((lu_t *)back.opt.values)[1].v.l, -7);
  assert_int_equal(back.u.branch, 2);
  assert_true(back.flag && back.f == 1.5f && back.color == 2);
  assert_true(mqr_str_eq(back.raw, v.raw));
  /* The arena too small. */
  mqr_avro_arena_t tiny = {mem, 16, 0};
  assert_int_equal(mqr_avro_decode(c, b.data, b.len, NULL, &back, &tiny, &err), MQR_ENOSPC);
  /* Bad values are refused, not written. */
  size_t len = b.len;
  v.color = 3;
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), MQR_EBADDATA);
  v.color = 0;
  colors[1] = -1;
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), MQR_EBADDATA);
  colors[1] = 0;
  v.u.branch = 3;
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), MQR_EBADDATA);
  assert_int_equal(b.len, len);
  mqr_avro_buf_free(&b);
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
}

/* A flat record (scalars, strings, an enum, a fixed, a nested record, a field the C
 * struct leaves to its default) goes through the encoder's and decoder's fast paths when
 * there is room and input enough, and through the general ones otherwise. Both give the
 * same bytes and the same values, for strings around the fast path's 64-byte bound and
 * varints of every length, and both refuse the same bad input. */
typedef struct {
  bool b;
  int32_t i;
  int64_t l;
  float f;
  double d;
  mqr_str_t s, raw;
  int32_t e;
  uint8_t fx[4];
  struct {
    mqr_str_t a, b2;
    int64_t n;
  } in;
} flat_t;

/* The fields' schemas; a test orders them, so that every op stands first, last, alone
 * and beside its own kind. */
static const char *const flat_field_json[] = {
    "{\"name\":\"b\",\"type\":\"boolean\"}",
    "{\"name\":\"i\",\"type\":\"int\"}",
    "{\"name\":\"l\",\"type\":\"long\"}",
    "{\"name\":\"f\",\"type\":\"float\"}",
    "{\"name\":\"d\",\"type\":\"double\"}",
    "{\"name\":\"s\",\"type\":\"string\"}",
    "{\"name\":\"raw\",\"type\":\"bytes\"}",
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\",\"Z\"]}}",
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"Fx\",\"size\":4}}",
    "{\"name\":\"in\",\"type\":{\"type\":\"record\",\"name\":\"In\",\"fields\":["
    "{\"name\":\"a\",\"type\":\"string\"},{\"name\":\"b2\",\"type\":\"string\"},"
    "{\"name\":\"n\",\"type\":\"long\"}]}}",
    "{\"name\":\"dflt\",\"type\":\"string\",\"default\":\"dd\"}",
};

static const mqr_avro_cfield_t flat_in_fields[] = {{"a", 0, &mqr_avro_c_str},
                                                   {"b2", sizeof(mqr_str_t), &mqr_avro_c_str},
                                                   {"n", 2 * sizeof(mqr_str_t), &mqr_avro_c_int64}};
static const mqr_avro_ctype_t flat_in = {
    MQR_AVRO_C_RECORD, 2 * sizeof(mqr_str_t) + 8, flat_in_fields, 3, NULL, NULL, 0, 0};
static const mqr_avro_cfield_t flat_fields[] = {
    {"b", offsetof(flat_t, b), &mqr_avro_c_bool},    {"i", offsetof(flat_t, i), &mqr_avro_c_int32},
    {"l", offsetof(flat_t, l), &mqr_avro_c_int64},   {"f", offsetof(flat_t, f), &mqr_avro_c_float},
    {"d", offsetof(flat_t, d), &mqr_avro_c_double},  {"s", offsetof(flat_t, s), &mqr_avro_c_str},
    {"raw", offsetof(flat_t, raw), &mqr_avro_c_str}, {"e", offsetof(flat_t, e), &mqr_avro_c_int32},
    {"fx", offsetof(flat_t, fx), &fixed4},           {"in", offsetof(flat_t, in), &flat_in}};

static void expect_flat_equal(const flat_t *a, const flat_t *b) {
  assert_int_equal(a->b, b->b);
  assert_int_equal(a->i, b->i);
  assert_true(a->l == b->l && a->in.n == b->in.n);
  assert_memory_equal(&a->f, &b->f, sizeof a->f);
  assert_memory_equal(&a->d, &b->d, sizeof a->d);
  assert_true(mqr_str_eq(a->s, b->s) && mqr_str_eq(a->raw, b->raw));
  assert_true(mqr_str_eq(a->in.a, b->in.a) && mqr_str_eq(a->in.b2, b->in.b2));
  assert_int_equal(a->e, b->e);
  assert_memory_equal(a->fx, b->fx, 4);
}

/* The record with its fields in the order given (-1 ends it). */
static void flat_paths_agree(const int *order, bool bad_cases, int fast_kind, bool strings_leaf) {
  char json[2048] = "{\"type\":\"record\",\"name\":\"F\",\"fields\":[";
  for (int k = 0; order[k] >= 0; k++) {
    if (k) strcat(json, ",");
    strcat(json, flat_field_json[order[k]]);
  }
  strcat(json, "]}");
  mqr_avro_schema_t *sc = schema(json);
  /* The struct's fields the schema has; the others stay zero on both sides. */
  mqr_avro_cfield_t bound[10];
  size_t n_bound = 0;
  for (int k = 0; order[k] >= 0; k++)
    if (order[k] < 10) bound[n_bound++] = flat_fields[order[k]];
  const mqr_avro_ctype_t type = {MQR_AVRO_C_RECORD, sizeof(flat_t), bound, n_bound, NULL, NULL, 0, 0};
  mqr_avro_codec_t *c;
  mqr_error_t err;
  if (mqr_avro_codec_compile(sc, &type, &c, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(c->fast, fast_kind); /* which fast leaves encode and decode it (plan.h) */
  assert_int_equal(c->str_offs != NULL, strings_leaf);
  static char text[200];
  memset(text, 'q', sizeof text);
  const int64_t longs[] = {0, -1, 63, -64, 64, 8191, -8192, 1ll << 40, INT64_MAX, INT64_MIN};
  const int32_t ints[] = {0, -1, 63, -64, 64, 1 << 20, INT32_MAX, INT32_MIN};
  const size_t lens[] = {0, 1, 3, 7, 15, 16, 31, 63, 64, 65, 127, 199};
  static uint8_t big[1200], exact[1200], in[1300];
  for (int k = 0; k < 400; k++) {
    flat_t v;
    memset(&v, 0, sizeof v);
    v.b = k & 1;
    v.i = ints[k % 8];
    v.l = longs[k % 10];
    v.in.n = longs[(k / 10) % 10];
    v.f = (float)k / 3;
    v.d = -k * 1e100;
    v.s = mqr_str_n(text, lens[k % 12]);
    v.raw = mqr_str_n(text, lens[(k / 12) % 12]);
    v.in.a = mqr_str_n(text, lens[(k / 3) % 12]);
    v.in.b2 = mqr_str_n(text, lens[(k / 7) % 12]);
    v.e = k % 3;
    memcpy(v.fx, &k, 4);
    flat_t only;
    memset(&only, 0, sizeof only);
    for (size_t f = 0; f < n_bound; f++)
      memcpy((char *)&only + bound[f].offset, (char *)&v + bound[f].offset, bound[f].type->size);
    v = only;
    /* Roomy (the fast path) after a few bytes already in the buffer, then exactly the
     * room needed (too little for the fast path's bound: the general path). */
    mqr_avro_buf_t b;
    mqr_avro_buf_init(&b, big, sizeof big);
    b.len = 5;
    if (mqr_avro_encode(c, &v, &b, NULL, &err) != 0) fail_msg("%s", err.message);
    size_t n = b.len - 5;
    mqr_avro_buf_init(&b, exact, n);
    if (mqr_avro_encode(c, &v, &b, NULL, &err) != 0) fail_msg("%s", err.message);
    assert_int_equal(b.len, n);
    assert_memory_equal(exact, big + 5, n);
    /* A byte short: refused, with the size needed, and nothing written past the buffer. */
    if (n) {
      memset(exact, 0xa5, sizeof exact);
      mqr_avro_buf_init(&b, exact, n - 1);
      size_t needed = 0;
      assert_int_equal(mqr_avro_encode(c, &v, &b, &needed, &err), MQR_ENOSPC);
      assert_int_equal(b.len, 0);
      assert_int_equal(needed, n);
      for (size_t g = n - 1; g < sizeof exact; g++) assert_int_equal(exact[g], 0xa5);
      mqr_avro_buf_init(&b, exact, n);
      assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
    }
    /* Decoding: exactly the datum (varints near the end leave the fast path), and the
     * datum followed by more bytes (the fast path), give the same values and length. */
    memcpy(in, exact, n);
    memset(in + n, 0x55, 16);
    flat_t back1, back2;
    memset(&back1, 0, sizeof back1);
    memset(&back2, 0, sizeof back2);
    size_t used1 = 0, used2 = 0;
    if (mqr_avro_decode(c, in, n, &used1, &back1, NULL, &err) != 0) fail_msg("%s", err.message);
    if (mqr_avro_decode(c, in, n + 16, &used2, &back2, NULL, &err) != 0) fail_msg("%s", err.message);
    assert_int_equal(used1, n);
    assert_int_equal(used2, n);
    expect_flat_equal(&back1, &v);
    expect_flat_equal(&back2, &v);
    /* Every truncation is refused. */
    for (size_t t = 0; t < n; t++)
      assert_int_equal(mqr_avro_decode(c, in, t, NULL, &back1, NULL, &err), MQR_ETRUNCATED);
  }
  flat_t v;
  mqr_avro_buf_t b;
  if (order[0] == 5) { /* a lone string first: a negative length */
    memset(in, 0, 80);
    in[0] = 0x01;
    assert_int_equal(mqr_avro_decode(c, in, 80, NULL, &v, NULL, &err), MQR_EBADDATA);
    assert_non_null(strstr(err.message, "negative length"));
  }
  /* A bad ordinal to encode: refused whichever leaf, nothing written, with the message
   * of the general path. */
  for (int k = 0; order[k] >= 0; k++) {
    if (order[k] != 7) continue;
    memset(&v, 0, sizeof v);
    v.e = 3;
    mqr_avro_buf_init(&b, big, sizeof big);
    b.len = 2;
    assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), MQR_EBADDATA);
    assert_int_equal(b.len, 2);
    assert_non_null(strstr(err.message, "enum ordinal 3 out of range"));
  }
  if (!bad_cases) goto done;
  /* Bad input, with room behind it (the fast path sees it first): each refused with the
   * general path's error. The datum: b, i, l, f, d, s, raw, e, then the rest. */
  memset(&v, 0, sizeof v);
  mqr_avro_buf_init(&b, exact, sizeof exact);
  if (mqr_avro_encode(c, &v, &b, NULL, &err) != 0) fail_msg("%s", err.message);
  size_t n = b.len;
  struct {
    const uint8_t patch[12];
    size_t at, len;
    int rc;
    const char *needle;
  } bad[] = {
      {{2}, 0, 1, MQR_EBADDATA, "boolean"},
      {{0xff, 0xff, 0xff, 0xff, 0x1f}, 1, 5, MQR_EBADDATA, "int"},
      {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 2, 10, MQR_EBADDATA, "64 bits"},
      {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 2, 11, MQR_EBADDATA, "10 bytes"},
      {{0x01}, 3 + 4 + 8, 1, MQR_EBADDATA, "negative length"},
      {{0x7e}, 3 + 4 + 8, 1, MQR_ETRUNCATED, "past the end"},
      {{0x06}, 3 + 4 + 8 + 2, 1, MQR_EBADDATA, "enum ordinal 3"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    memcpy(in, exact, n);
    memcpy(in + bad[k].at + bad[k].len, exact + bad[k].at + 1, n - bad[k].at - 1);
    memcpy(in + bad[k].at, bad[k].patch, bad[k].len);
    size_t len = n - 1 + bad[k].len;
    memset(in + len, 0, 64);
    flat_t back;
    int rc = mqr_avro_decode(c, in, bad[k].rc == MQR_ETRUNCATED ? len : len + 64, NULL, &back, NULL, &err);
    assert_int_equal(rc, bad[k].rc);
    if (!strstr(err.message, bad[k].needle)) fail_msg("case %zu: '%s' lacks '%s'", k, err.message, bad[k].needle);
  }
done:
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(sc);
}

static void test_flat_fast_and_general_paths_agree(void **state) {
  (void)state;
  const int in_order[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1}, with_default[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 9, -1};
  const int alone_first[] = {5, 1, 6, 4, 9, 7, 0, 8, 3, 2, -1}, double_last[] = {9, 2, 6, 3, 5, 8, 7, 1, 0, 4, -1};
  const int bool_last[] = {4, 5, 2, 8, 6, 1, 3, 9, 7, 0, -1}, one_string[] = {5, -1}, one_long[] = {2, -1};
  const int strings_apart[] = {5, 0, 6, 1, 7, 2, 8, 3, 4, -1}; /* no two strings in a row: no STRS */
  const int strings_and_long[] = {6, 9, 5, -1};                /* raw, in (a, b2, n), s */
  const int two_strings[] = {6, 5, -1}, string_default[] = {5, 10, 6, -1};
  flat_paths_agree(in_order, true, MQR__FAST_CHECKED, false);
  flat_paths_agree(with_default, true, MQR__FAST_CHECKED, false);
  flat_paths_agree(alone_first, false, MQR__FAST_CHECKED, false);
  flat_paths_agree(double_last, false, MQR__FAST_CHECKED, false);
  flat_paths_agree(bool_last, false, MQR__FAST_CHECKED, false);
  flat_paths_agree(strings_apart, false, MQR__FAST_BOUNDED, false);
  flat_paths_agree(strings_and_long, false, MQR__FAST_CHECKED, false);
  flat_paths_agree(two_strings, false, MQR__FAST_CHECKED, true);
  flat_paths_agree(string_default, false, MQR__FAST_BOUNDED, false);
  flat_paths_agree(one_string, false, MQR__FAST_BOUNDED, true);
  flat_paths_agree(one_long, false, MQR__FAST_BOUNDED, false);
}

/* A flat record with no two strings in a row but more than MQR__FAST_BOUND bytes at
 * most (20 strings between 20 ints): the fast leaves that check room per op take it, and
 * encode as the JSON path does, into a roomy buffer and one of exactly the datum's size,
 * and decode it back. */
static void test_long_flat_record(void **state) {
  (void)state;
  enum { N = 20 };
  char json[4096] = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[", datum[2048] = "{";
  typedef struct {
    mqr_str_t s[N];
    int32_t i[N];
  } long_t;
  mqr_avro_cfield_t fields[2 * N];
  static char names[2 * N][8];
  long_t v;
  for (int k = 0; k < N; k++) {
    snprintf(names[2 * k], 8, "s%d", k);
    snprintf(names[2 * k + 1], 8, "i%d", k);
    snprintf(json + strlen(json), sizeof json - strlen(json),
             "%s{\"name\":\"s%d\",\"type\":\"string\"},{\"name\":\"i%d\",\"type\":\"int\"}", k ? "," : "", k, k);
    fields[2 * k] = (mqr_avro_cfield_t){names[2 * k], offsetof(long_t, s) + k * sizeof(mqr_str_t), &mqr_avro_c_str};
    fields[2 * k + 1] =
        (mqr_avro_cfield_t){names[2 * k + 1], offsetof(long_t, i) + k * sizeof(int32_t), &mqr_avro_c_int32};
    v.s[k] = mqr_str_n("abcdefghijklmnopqrstuvwxyz", (size_t)k);
    v.i[k] = k * 1000 - 7000;
    snprintf(datum + strlen(datum), sizeof datum - strlen(datum), "%s\"s%d\":\"%.*s\",\"i%d\":%d", k ? "," : "", k, k,
             "abcdefghijklmnopqrstuvwxyz", k, v.i[k]);
  }
  strcat(json, "]}");
  strcat(datum, "}");
  const mqr_avro_ctype_t t = {MQR_AVRO_C_RECORD, sizeof(long_t), fields, 2 * N, NULL, NULL, 0, 0};
  mqr_avro_schema_t *sc = schema(json);
  mqr_avro_codec_t *c;
  mqr_error_t err;
  if (mqr_avro_codec_compile(sc, &t, &c, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(c->fast, MQR__FAST_CHECKED);
  assert_true(c->fast_max > MQR__FAST_BOUND);
  static uint8_t roomy[4096], exact[2048];
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, roomy, sizeof roomy);
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
  expect_same_as_json(sc, roomy, b.len, datum);
  size_t n = b.len;
  mqr_avro_buf_init(&b, exact, n);
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
  assert_memory_equal(exact, roomy, n);
  long_t back;
  memset(&back, 0, sizeof back);
  size_t used = 0;
  assert_int_equal(mqr_avro_decode(c, roomy, n, &used, &back, NULL, &err), 0);
  assert_int_equal(used, n);
  for (int k = 0; k < N; k++) {
    assert_int_equal(back.i[k], v.i[k]);
    assert_int_equal(back.s[k].len, v.s[k].len);
    if (k) assert_memory_equal(back.s[k].ptr, v.s[k].ptr, (size_t)k);
  }
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(sc);
}

/* Records of strings only: 16 fit the bound (64 bytes each at most), so the encoder's
 * strings leaf takes them; 17 do not. Both encode as the JSON path does, strings of every
 * length up to 70 (past 63 the leaf gives up), and a buffer a byte short is refused. */
static void test_strings_only_records(void **state) {
  (void)state;
  static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (int n = 16; n <= 17; n++) {
    char json[2048] = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[";
    static char names[17][8];
    mqr_avro_cfield_t fields[17];
    for (int k = 0; k < n; k++) {
      snprintf(names[k], sizeof names[k], "s%d", k);
      snprintf(json + strlen(json), sizeof json - strlen(json), "%s{\"name\":\"s%d\",\"type\":\"%s\"}", k ? "," : "", k,
               k % 3 ? "string" : "bytes");
      fields[k] = (mqr_avro_cfield_t){names[k], (size_t)k * sizeof(mqr_str_t), &mqr_avro_c_str};
    }
    strcat(json, "]}");
    const mqr_avro_ctype_t t = {MQR_AVRO_C_RECORD, 17 * sizeof(mqr_str_t), fields, (size_t)n, NULL, NULL, 0, 0};
    mqr_avro_schema_t *sc = schema(json);
    mqr_avro_codec_t *c;
    mqr_error_t err;
    if (mqr_avro_codec_compile(sc, &t, &c, &err) != 0) fail_msg("%s", err.message);
    assert_int_equal(c->str_offs != NULL, n == 16);
    for (size_t len = 0; len <= 70; len += 7) {
      mqr_str_t v[17];
      char datum[4096] = "{";
      for (int k = 0; k < n; k++) {
        size_t l = (len + (size_t)k) % 71;
        v[k] = mqr_str_n(text, l);
        snprintf(datum + strlen(datum), sizeof datum - strlen(datum), "%s\"s%d\":\"%.*s\"", k ? "," : "", k, (int)l,
                 text);
      }
      strcat(datum, "}");
      static uint8_t roomy[4096], exact[4096];
      mqr_avro_buf_t b;
      mqr_avro_buf_init(&b, roomy, sizeof roomy);
      assert_int_equal(mqr_avro_encode(c, v, &b, NULL, &err), 0);
      expect_same_as_json(sc, roomy, b.len, datum);
      size_t size = b.len, needed = 0;
      memset(exact, 0xa5, sizeof exact);
      mqr_avro_buf_init(&b, exact, size - 1);
      assert_int_equal(mqr_avro_encode(c, v, &b, &needed, &err), MQR_ENOSPC);
      assert_int_equal(needed, size);
      for (size_t g = size - 1; g < sizeof exact; g++) assert_int_equal(exact[g], 0xa5);
      mqr_str_t back[17];
      assert_int_equal(mqr_avro_decode(c, roomy, size, NULL, back, NULL, &err), 0);
      for (int k = 0; k < n; k++) assert_int_equal(back[k].len, v[k].len);
    }
    mqr_avro_codec_destroy(c);
    mqr_avro_schema_destroy(sc);
  }
}

/* Fixeds of every size around the fast paths' 64-byte bound, before and after a string:
 * the bytes are the fields' in order, each path (roomy and exact buffers, input with and
 * without bytes after it) gives them and reads them back, and every truncation is
 * refused. */
static void test_fixed_sizes(void **state) {
  (void)state;
  static const unsigned sizes[] = {1, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 100};
  typedef struct {
    uint8_t f[100];
    mqr_str_t s;
  } fs_t;
  for (size_t k = 0; k < 2 * sizeof sizes / sizeof sizes[0]; k++) {
    unsigned n = sizes[k / 2];
    bool last = k & 1; /* the fixed after the string: nothing behind it checks the end */
    char json[256], fixed[96];
    snprintf(fixed, sizeof fixed, "{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":%u}}", n);
    snprintf(json, sizeof json, "{\"type\":\"record\",\"name\":\"R\",\"fields\":[%s,%s]}",
             last ? "{\"name\":\"s\",\"type\":\"string\"}" : fixed,
             last ? fixed : "{\"name\":\"s\",\"type\":\"string\"}");
    const mqr_avro_ctype_t ft = {MQR_AVRO_C_FIXED, n, NULL, 0, NULL, NULL, 0, 0};
    const mqr_avro_cfield_t fields[] = {{"f", offsetof(fs_t, f), &ft}, {"s", offsetof(fs_t, s), &mqr_avro_c_str}};
    const mqr_avro_ctype_t rt = {MQR_AVRO_C_RECORD, sizeof(fs_t), fields, 2, NULL, NULL, 0, 0};
    mqr_avro_schema_t *sc = schema(json);
    mqr_avro_codec_t *c;
    mqr_error_t err;
    if (mqr_avro_codec_compile(sc, &rt, &c, &err) != 0) fail_msg("%s", err.message);
    fs_t v;
    memset(&v, 0, sizeof v);
    for (unsigned i = 0; i < n; i++) v.f[i] = (uint8_t)(i * 7 + 1);
    v.s = mqr_str("xyz");
    uint8_t want[128], roomy[512], exact[128], in[256];
    memcpy(want + (last ? 4 : 0), v.f, n);
    memcpy(want + (last ? 0 : n), "\x06xyz", 4);
    size_t wn = n + 4;
    mqr_avro_buf_t b;
    mqr_avro_buf_init(&b, roomy, sizeof roomy);
    assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
    assert_int_equal(b.len, wn);
    assert_memory_equal(roomy, want, wn);
    mqr_avro_buf_init(&b, exact, wn);
    assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
    assert_memory_equal(exact, want, wn);
    memcpy(in, want, wn);
    memset(in + wn, 0x55, 32);
    for (size_t extra = 0; extra <= 32; extra += 32) {
      fs_t back;
      memset(&back, 0, sizeof back);
      size_t used = 0;
      assert_int_equal(mqr_avro_decode(c, in, wn + extra, &used, &back, NULL, &err), 0);
      assert_int_equal(used, wn);
      assert_memory_equal(back.f, v.f, n);
      assert_int_equal(back.s.len, 3);
      assert_memory_equal(back.s.ptr, "xyz", 3);
    }
    for (size_t t = 0; t < wn; t++) {
      fs_t back;
      assert_int_equal(mqr_avro_decode(c, in, t, NULL, &back, NULL, &err), MQR_ETRUNCATED);
    }
    mqr_avro_codec_destroy(c);
    mqr_avro_schema_destroy(sc);
  }
}

/* The test's own varint writer, a byte at a time: what Avro's spec says. */
static size_t ref_varints(uint8_t *out, const int32_t *v, size_t n) {
  size_t at = 0;
  if (n) {
    uint64_t z = ((uint64_t)n << 1); /* the block count, positive */
    for (; z >= 0x80; z >>= 7) out[at++] = (uint8_t)(z | 0x80);
    out[at++] = (uint8_t)z;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t z = ((uint32_t)v[i] << 1) ^ (uint32_t)(v[i] >> 31);
    for (; z >= 0x80; z >>= 7) out[at++] = (uint8_t)(z | 0x80);
    out[at++] = (uint8_t)z;
  }
  out[at++] = 0;
  return at;
}

/* Int arrays go four at a time when the four take the same number of bytes: runs of each
 * length 1 to 5 (and at each length's bounds), lengths going up or down every 1 to 5 items
 * or changing at random, every tail length, into a growable buffer and into fixed buffers of exactly the size
 * and up to 17 bytes more (the wide stores must stay inside): the bytes are the
 * reference's, and they decode back. */
static void test_int_arrays_four_at_a_time(void **state) {
  (void)state;
  const char *sch = "{\"type\":\"array\",\"items\":\"int\"}";
  mqr_avro_schema_t *s;
  mqr_avro_codec_t *c;
  assert_int_equal(mqr_avro_schema_parse(sch, strlen(sch), &s, NULL), 0);
  assert_int_equal(mqr_avro_codec_compile(s, &ints_t, &c, NULL), 0);
  /* zigzag bounds of each length: 1 byte up to 63 / -64, 2 to 8191 / -8192, ... */
  static const int32_t lo[5] = {0, 64, 8192, 1048576, 134217728}, hi[5] = {63, 8191, 1048575, 134217727, INT32_MAX};
  enum { N = 70 };
  static int32_t v[N];
  static uint8_t ref[N * 5 + 16], fixed[N * 5 + 40], mem[N * 4 + 64];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int pattern = 0; pattern < 5 * 12; pattern++) {
    /* every: how many items before the length changes (0: at random, each item); the
     * length goes up or (second half) down, so a run's first item can be the longest */
    int len = pattern % 5, every = (int[]){N, 1, 3, 4, 5, 2}[pattern / 5 % 6], step = pattern < 30 ? 1 : 4;
    for (size_t n = 0; n <= N; n++) {
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int l = every == N ? (step == 1 ? len : (int)(x >> 61) % 5) : (len + step * (int)(i / (size_t)every)) % 5;
        int32_t m = i % 7 == 0 ? lo[l] : i % 7 == 1 ? hi[l] : lo[l] + (int32_t)(x % (uint64_t)(hi[l] - lo[l] + 1));
        /* negative numbers of the same length: -m - 1 zigzags next to m */
        v[i] = (x >> 40) & 1 ? -m - 1 : m;
      }
      size_t want = ref_varints(ref, v, n);
      mqr_avro_array_t a = {v, n};
      mqr_avro_buf_t b;
      mqr_avro_buf_init_growable(&b);
      assert_int_equal(mqr_avro_encode(c, &a, &b, NULL, NULL), 0);
      assert_int_equal(b.len, want);
      assert_memory_equal(b.data, ref, want);
      mqr_avro_buf_free(&b);
      for (size_t extra = 0; extra <= 17; extra++) {
        memset(fixed, 0xa5, sizeof fixed);
        mqr_avro_buf_init(&b, fixed, want + extra);
        assert_int_equal(mqr_avro_encode(c, &a, &b, NULL, NULL), 0);
        assert_int_equal(b.len, want);
        assert_memory_equal(fixed, ref, want);
        for (size_t k = want + extra; k < sizeof fixed; k++) assert_int_equal(fixed[k], 0xa5);
      }
      mqr_avro_arena_t arena = {mem, sizeof mem, 0};
      mqr_avro_array_t back;
      assert_int_equal(mqr_avro_decode(c, ref, want, NULL, &back, &arena, NULL), 0);
      assert_int_equal(back.count, n);
      if (n) assert_memory_equal(back.items, v, n * sizeof *v);
    }
  }
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
}

static void bad_binding(const char *sch, const mqr_avro_ctype_t *t, const char *needle) {
  mqr_avro_schema_t *s = schema(sch);
  mqr_avro_codec_t *c = (mqr_avro_codec_t *)0x1;
  mqr_error_t err;
  assert_int_equal(mqr_avro_codec_compile(s, t, &c, &err), MQR_EINVAL);
  assert_ptr_equal(c, (mqr_avro_codec_t *)0x1);
  if (!strstr(err.message, needle)) fail_msg("message '%s' lacks '%s'", err.message, needle);
  mqr_avro_schema_destroy(s);
}

/* Long arrays of enum ordinals and ints: the encoders' bulk paths (16 ordinals at a time,
 * unchecked varints) give the bytes the JSON path gives, and refuse a bad ordinal wherever
 * it stands. */
static void test_long_scalar_arrays(void **state) {
  (void)state;
  const char *sch = "{\"type\":\"array\",\"items\":{\"type\":\"enum\",\"name\":\"C\",\"symbols\":"
                    "[\"R\",\"G\",\"B\"]}}";
  mqr_avro_schema_t *s;
  mqr_avro_codec_t *c;
  assert_int_equal(mqr_avro_schema_parse(sch, strlen(sch), &s, NULL), 0);
  assert_int_equal(mqr_avro_codec_compile(s, &ints_t, &c, NULL), 0);
  static const char *const names[3] = {"R", "G", "B"};
  for (size_t n = 0; n <= 70; n++) {
    int32_t v[70];
    char json[512] = "[";
    for (size_t i = 0; i < n; i++) {
      v[i] = (int32_t)((i * 7 + n) % 3);
      snprintf(json + strlen(json), sizeof json - strlen(json), "%s\"%s\"", i ? "," : "", names[v[i]]);
    }
    strcat(json, "]");
    mqr_avro_array_t a = {v, n};
    mqr_avro_buf_t b;
    mqr_avro_buf_init_growable(&b);
    assert_int_equal(mqr_avro_encode(c, &a, &b, NULL, NULL), 0);
    expect_same_as_json(s, b.data, b.len, json);
    uint8_t mem[512];
    mqr_avro_arena_t arena = {mem, sizeof mem, 0};
    mqr_avro_array_t back;
    assert_int_equal(mqr_avro_decode(c, b.data, b.len, NULL, &back, &arena, NULL), 0);
    assert_int_equal(back.count, n);
    if (n) assert_memory_equal(back.items, v, n * sizeof *v);
    /* An ordinal out of range, or negative, anywhere: refused, nothing written. */
    for (size_t at = 0; at < n; at += 5) {
      int32_t keep = v[at];
      v[at] = at % 2 ? 3 : -1;
      size_t len = b.len;
      assert_int_equal(mqr_avro_encode(c, &a, &b, NULL, NULL), MQR_EBADDATA);
      assert_int_equal(b.len, len);
      v[at] = keep;
    }
    mqr_avro_buf_free(&b);
  }
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
  /* Ints of every varint length, both signs, the extremes. */
  const char *ints = "{\"type\":\"array\",\"items\":\"int\"}";
  assert_int_equal(mqr_avro_schema_parse(ints, strlen(ints), &s, NULL), 0);
  assert_int_equal(mqr_avro_codec_compile(s, &ints_t, &c, NULL), 0);
  static const int32_t edges[] = {0,         1,          -1,        63,        -64,      64,
                                  8191,      -8192,      8192,      1048575,   -1048576, 1048576,
                                  134217727, -134217728, 134217728, INT32_MAX, INT32_MIN};
  int32_t v[60];
  char json[1024] = "[";
  for (size_t i = 0; i < 60; i++) {
    v[i] = edges[i % (sizeof edges / sizeof edges[0])];
    snprintf(json + strlen(json), sizeof json - strlen(json), "%s%d", i ? "," : "", v[i]);
  }
  strcat(json, "]");
  mqr_avro_array_t a = {v, 60};
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  assert_int_equal(mqr_avro_encode(c, &a, &b, NULL, NULL), 0);
  expect_same_as_json(s, b.data, b.len, json);
  /* Into a fixed buffer of exactly its size: the wide stores stay inside it. */
  uint8_t *exact = malloc(b.len);
  mqr_avro_buf_t fb;
  mqr_avro_buf_init(&fb, exact, b.len);
  assert_int_equal(mqr_avro_encode(c, &a, &fb, NULL, NULL), 0);
  assert_memory_equal(exact, b.data, b.len);
  free(exact);
  mqr_avro_buf_free(&b);
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
}

/* A field the C struct lacks is written from its default, which for a union is a value of
 * the first branch, unwrapped (Avro 1.11: "Default values for union fields correspond to
 * the first schema in the union"), inside records and arrays too; decoding skips it. */
static void test_union_default_filled(void **state) {
  (void)state;
  mqr_avro_schema_t *s =
      schema("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
             "{\"name\":\"b\",\"type\":[\"int\",\"null\"],\"default\":3},"
             "{\"name\":\"c\",\"type\":{\"type\":\"array\",\"items\":[\"long\",\"null\"]},\"default\":[5]},"
             "{\"name\":\"d\",\"type\":{\"type\":\"record\",\"name\":\"In\",\"fields\":[{\"name\":\"u\","
             "\"type\":[\"string\",\"null\"]}]},\"default\":{\"u\":\"z\"}}]}");
  typedef struct {
    int32_t a;
  } only_a;
  static const mqr_avro_cfield_t f[] = {{"a", offsetof(only_a, a), &mqr_avro_c_int32}};
  static const mqr_avro_ctype_t t = {MQR_AVRO_C_RECORD, sizeof(only_a), f, 1, NULL, NULL, 0, 0};
  mqr_avro_codec_t *c = NULL;
  mqr_error_t err;
  if (mqr_avro_codec_compile(s, &t, &c, &err) != 0) fail_msg("%s", err.message);
  mqr_avro_buf_t b;
  mqr_avro_buf_init_growable(&b);
  only_a v = {7}, back = {0};
  assert_int_equal(mqr_avro_encode(c, &v, &b, NULL, &err), 0);
  expect_same_as_json(s, b.data, b.len,
                      "{\"a\":7,\"b\":{\"int\":3},\"c\":[{\"long\":5}],\"d\":{\"u\":{\"string\":\"z\"}}}");
  size_t used = 0;
  assert_int_equal(mqr_avro_decode(c, b.data, b.len, &used, &back, NULL, &err), 0);
  assert_int_equal(used, b.len);
  assert_int_equal(back.a, 7);
  mqr_avro_buf_free(&b);
  mqr_avro_codec_destroy(c);
  mqr_avro_schema_destroy(s);
}

static void test_bad_bindings(void **state) {
  (void)state;
  bad_binding("\"long\"", &mqr_avro_c_int32, "C type INT32 cannot hold Avro long");
  static const mqr_avro_cfield_t f1[] = {{"age", 0, &mqr_avro_c_int64}};
  static const mqr_avro_ctype_t t1 = {MQR_AVRO_C_RECORD, 8, f1, 1, NULL, NULL, 0, 0};
  bad_binding("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"age\",\"type\":\"int\"}]}", &t1,
              "binding age: C type INT64 cannot hold Avro int");
  static const mqr_avro_cfield_t f2[] = {{"nope", 0, &mqr_avro_c_int32}};
  static const mqr_avro_ctype_t t2 = {MQR_AVRO_C_RECORD, 8, f2, 1, NULL, NULL, 0, 0};
  bad_binding("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"age\",\"type\":\"int\",\"default\":1}]}",
              &t2, "C field 'nope' is not a field of R");
  static const mqr_avro_ctype_t t3 = {MQR_AVRO_C_RECORD, 8, NULL, 0, NULL, NULL, 0, 0};
  bad_binding("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"age\",\"type\":\"int\"}]}", &t3,
              "binding age: the C struct has no field for it, and it has no default");
  bad_binding("[\"null\",\"int\"]", &lu_type, "union of 2 branches");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_big_record),
      cmocka_unit_test(test_every_kind),
      cmocka_unit_test(test_flat_fast_and_general_paths_agree),
      cmocka_unit_test(test_bad_bindings),
      cmocka_unit_test(test_union_default_filled),
      cmocka_unit_test(test_long_scalar_arrays),
      cmocka_unit_test(test_int_arrays_four_at_a_time),
      cmocka_unit_test(test_fixed_sizes),
      cmocka_unit_test(test_long_flat_record),
      cmocka_unit_test(test_strings_only_records),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
