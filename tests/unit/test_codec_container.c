/* Object container files and the schema cache: the official weather files (codecs null
 * and deflate) read as weather.json says; files mqr writes read back the same over many
 * blocks; broken files (every truncation, a bad magic, marker, count, codec or deflate
 * stream) fail with an error and no crash. The cache parses each schema once and finds
 * single-object writers by fingerprint. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint8_t *slurp(const char *name, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/avro/%s", getenv("MQR_SOURCE_DIR"), name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot open %s", path);
  uint8_t *buf = malloc(1 << 20);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

/* Every datum of the container as JSON lines. */
static int cat(const uint8_t *file, size_t len, mqr_avro_buf_t *out, mqr_error_t *err) {
  mqr_avro_file_reader_t *r = NULL;
  int rc = mqr_avro_file_reader_open(file, len, &r, err);
  const uint8_t *d;
  size_t n;
  while (rc == 0 && (rc = mqr_avro_file_next(r, &d, &n, err)) == 1) {
    rc = mqr_avro_binary_to_json(mqr_avro_file_reader_schema(r), d, n, NULL, out, err);
    if (rc == 0 && (rc = mqr_avro_buf_reserve(out, 1)) == 0) out->data[out->len++] = '\n';
  }
  mqr_avro_file_reader_close(r);
  return rc;
}

static void test_weather(void **state) {
  (void)state;
  size_t jlen, len;
  uint8_t *json = slurp("weather.json", &jlen);
  const char *files[] = {"weather.avro", "weather-deflate.avro"};
  for (int i = 0; i < 2; i++) {
    uint8_t *file = slurp(files[i], &len);
    mqr_avro_buf_t out;
    mqr_avro_buf_init_growable(&out);
    mqr_error_t err;
    if (cat(file, len, &out, &err) != 0) fail_msg("%s: %s", files[i], err.message);
    assert_int_equal(out.len, jlen);
    assert_memory_equal(out.data, json, jlen);
    /* Cut anywhere: an error, or (cut just after a sync marker) a shorter file whose
     * datums are the first ones; never a crash, never a hang. */
    int whole = 0;
    for (size_t cut = 0; cut < len; cut++) {
      out.len = 0;
      int rc = cat(file, cut, &out, &err);
      if (rc == 0) {
        assert_memory_equal(file + cut - 16, file + len - 16, 16);
        assert_true(out.len < jlen);
        if (out.len) assert_memory_equal(out.data, json, out.len);
        whole++;
      } else {
        assert_true(rc < 0);
      }
    }
    assert_true(whole >= 1); /* at least the header alone */
    mqr_avro_buf_free(&out);
    free(file);
  }
  free(json);
}

typedef struct {
  mqr_avro_buf_t buf;
  int fail_after; /* writes that succeed before one fails; -1 never */
} sink_t;

static int to_buf(void *ctx, const void *p, size_t n) {
  sink_t *s = ctx;
  if (s->fail_after == 0) return MQR_EIO;
  if (s->fail_after > 0) s->fail_after--;
  int rc = mqr_avro_buf_reserve(&s->buf, n);
  if (rc) return rc;
  memcpy(s->buf.data + s->buf.len, p, n);
  s->buf.len += n;
  return 0;
}

static mqr_avro_schema_t *schema(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s, &err) != 0) fail_msg("schema refused: %s", err.message);
  return s;
}

#define REC                                                                                                            \
  "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"i\",\"type\":\"long\"},{\"name\":\"s\",\"type\":"       \
  "\"string\"}]}"

/* Writes n datums with codec into sink->buf, blocks of about block bytes. */
static void write_file(const mqr_avro_schema_t *s, mqr_avro_file_codec_t codec, size_t block, int n, sink_t *sink) {
  static const uint8_t sync[16] = "0123456789abcdef";
  mqr_avro_file_options_t opt = {.codec = codec, .block_size = block, .sync = sync};
  mqr_avro_file_writer_t *w;
  mqr_error_t err;
  assert_int_equal(mqr_avro_file_writer_create(s, &opt, to_buf, sink, &w, &err), 0);
  mqr_avro_buf_t d;
  mqr_avro_buf_init_growable(&d);
  for (int i = 0; i < n; i++) {
    char json[128];
    snprintf(json, sizeof json, "{\"i\":%d,\"s\":\"datum number %d\"}", i * 1000003, i);
    d.len = 0;
    assert_int_equal(mqr_avro_json_to_binary(s, json, strlen(json), &d, &err), 0);
    assert_int_equal(mqr_avro_file_append(w, d.data, d.len, &err), 0);
  }
  /* Not one whole datum: refused, the file unharmed. */
  assert_int_equal(mqr_avro_file_append(w, d.data, d.len - 1, &err), MQR_ETRUNCATED);
  assert_int_equal(mqr_avro_buf_reserve(&d, 1), 0);
  d.data[d.len] = 0;
  assert_int_equal(mqr_avro_file_append(w, d.data, d.len + 1, &err), MQR_EBADDATA);
  assert_int_equal(mqr_avro_file_writer_close(w, &err), 0);
  mqr_avro_buf_free(&d);
}

static void test_write_read(void **state) {
  (void)state;
  mqr_avro_schema_t *s = schema(REC);
  for (int codec = MQR_AVRO_FILE_NULL; codec <= MQR_AVRO_FILE_DEFLATE; codec++) {
    sink_t sink = {.fail_after = -1};
    mqr_avro_buf_init_growable(&sink.buf);
    write_file(s, (mqr_avro_file_codec_t)codec, 200, 1000, &sink);
    mqr_avro_file_reader_t *r;
    mqr_error_t err;
    assert_int_equal(mqr_avro_file_reader_open(sink.buf.data, sink.buf.len, &r, &err), 0);
    assert_int_equal(mqr_avro_schema_fingerprint(mqr_avro_file_reader_schema(r)), mqr_avro_schema_fingerprint(s));
    const uint8_t *d;
    size_t n;
    int count = 0, rc;
    mqr_avro_buf_t j;
    mqr_avro_buf_init_growable(&j);
    while ((rc = mqr_avro_file_next(r, &d, &n, &err)) == 1) {
      char want[128];
      snprintf(want, sizeof want, "{\"i\":%d,\"s\":\"datum number %d\"}", count * 1000003, count);
      j.len = 0;
      assert_int_equal(mqr_avro_binary_to_json(s, d, n, NULL, &j, &err), 0);
      assert_int_equal(j.len, strlen(want));
      assert_memory_equal(j.data, want, j.len);
      count++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(count, 1000);
    assert_int_equal(mqr_avro_file_next(r, &d, &n, &err), 0); /* stays at the end */
    mqr_avro_file_reader_close(r);
    if (codec == MQR_AVRO_FILE_DEFLATE) {
      /* Corrupt the deflate stream of the first block: an error, not garbage. */
      size_t hdr = 4;
      while (memcmp(sink.buf.data + hdr, "0123456789abcdef", 16) != 0) hdr++;
      sink.buf.data[hdr + 16 + 4] ^= 0xff;
      sink.buf.data[hdr + 16 + 5] ^= 0x5a;
      assert_int_equal(mqr_avro_file_reader_open(sink.buf.data, sink.buf.len, &r, &err), 0);
      while ((rc = mqr_avro_file_next(r, &d, &n, &err)) == 1) {
      }
      assert_true(rc < 0);
      mqr_avro_file_reader_close(r);
    }
    mqr_avro_buf_free(&j);
    mqr_avro_buf_free(&sink.buf);
  }
  /* A write that fails is reported. */
  sink_t sink = {.fail_after = 0};
  mqr_avro_buf_init_growable(&sink.buf);
  mqr_avro_file_writer_t *w = NULL;
  mqr_error_t err;
  assert_int_equal(mqr_avro_file_writer_create(s, NULL, to_buf, &sink, &w, &err), MQR_EIO);
  assert_null(w);
  sink.fail_after = 1;
  assert_int_equal(mqr_avro_file_writer_create(s, NULL, to_buf, &sink, &w, &err), 0);
  const uint8_t datum[] = {0x02, 0x00};
  assert_int_equal(mqr_avro_file_append(w, datum, 2, &err), 0);
  assert_int_equal(mqr_avro_file_writer_close(w, &err), MQR_EIO);
  mqr_avro_buf_free(&sink.buf);
  mqr_avro_schema_destroy(s);
}

/* Avro 1.11 specification, "Object Container Files": the metadata holds "avro.schema
 * contains the schema of objects stored in the file, as JSON data (required)". Parsing
 * Canonical Form is not that schema: its [STRIP] rule keeps "only attributes that are
 * relevant to parsing data", dropping defaults, aliases and logical types, and its
 * [FULLNAMES] rule leaves a name written without a namespace inside a namespaced record,
 * where it reads back as a different name ("namespace": "" below: T, not n.T). A file
 * keeps the schema as given, and reads back as the same schema. */
static void test_schema_as_given(void **state) {
  (void)state;
  const char *text =
      "{\"type\": \"record\", \"name\": \"R\", \"namespace\": \"n\", \"aliases\": [\"Old\"], \"fields\": ["
      "{\"name\": \"t\", \"type\": {\"type\": \"record\", \"name\": \"T\", \"namespace\": \"\", \"fields\": ["
      "{\"name\": \"when\", \"type\": {\"type\": \"long\", \"logicalType\": \"timestamp-millis\"}}]}},"
      "{\"name\": \"again\", \"type\": \"T\"},"
      "{\"name\": \"u\", \"type\": [\"T\", {\"type\": \"record\", \"name\": \"E\", \"fields\": []}]},"
      "{\"name\": \"d\", \"type\": [\"int\", \"null\"], \"default\": 3}]}";
  mqr_avro_schema_t *s = schema(text);
  mqr_str_t given = mqr_avro_schema_json(s);
  assert_int_equal(given.len, strlen(text));
  assert_memory_equal(given.ptr, text, given.len);
  sink_t sink = {.fail_after = -1};
  mqr_avro_buf_init_growable(&sink.buf);
  mqr_avro_file_writer_t *w;
  mqr_error_t err;
  assert_int_equal(mqr_avro_file_writer_create(s, NULL, to_buf, &sink, &w, &err), 0);
  /* 300 datums of 5 bytes each in one block: the count check must know that E takes no
   * bytes (a least datum size of 5, not 6). */
  const char *datum = "{\"t\":{\"when\":1},\"again\":{\"when\":2},\"u\":{\"E\":{}},\"d\":{\"int\":3}}";
  mqr_avro_buf_t d;
  mqr_avro_buf_init_growable(&d);
  assert_int_equal(mqr_avro_json_to_binary(s, datum, strlen(datum), &d, &err), 0);
  assert_int_equal(d.len, 5);
  for (int i = 0; i < 300; i++) assert_int_equal(mqr_avro_file_append(w, d.data, d.len, &err), 0);
  assert_int_equal(mqr_avro_file_writer_close(w, &err), 0);
  mqr_avro_file_reader_t *r;
  assert_int_equal(mqr_avro_file_reader_open(sink.buf.data, sink.buf.len, &r, &err), 0);
  const mqr_avro_schema_t *back = mqr_avro_file_reader_schema(r);
  mqr_str_t again = mqr_avro_schema_json(back);
  assert_int_equal(again.len, strlen(text));
  assert_memory_equal(again.ptr, text, again.len);
  assert_int_equal(mqr_avro_schema_fingerprint(back), mqr_avro_schema_fingerprint(s));
  const uint8_t *p;
  size_t n;
  int count = 0, rc;
  while ((rc = mqr_avro_file_next(r, &p, &n, &err)) == 1) {
    assert_int_equal(n, d.len);
    assert_memory_equal(p, d.data, n);
    count++;
  }
  if (rc != 0) fail_msg("reading back: %s", err.message);
  assert_int_equal(count, 300);
  mqr_avro_file_reader_close(r);
  mqr_avro_buf_free(&d);
  mqr_avro_buf_free(&sink.buf);
  mqr_avro_schema_destroy(s);
}

static void test_broken(void **state) {
  (void)state;
  size_t len;
  uint8_t *file = slurp("weather.avro", &len);
  mqr_avro_file_reader_t *r = NULL;
  mqr_error_t err;
  file[0] = 'X';
  assert_int_equal(mqr_avro_file_reader_open(file, len, &r, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "not an Avro container"));
  file[0] = 'O';
  /* The codec name: "null" -> "nulz" is unknown. */
  uint8_t *c = memmem(file, len, "null", 4);
  c[3] = 'z';
  assert_int_equal(mqr_avro_file_reader_open(file, len, &r, &err), MQR_EINVAL);
  assert_non_null(strstr(err.message, "'nulz' is not supported"));
  c[3] = 'l';
  /* The last block's marker. */
  file[len - 1] ^= 1;
  assert_int_equal(mqr_avro_file_reader_open(file, len, &r, &err), 0);
  const uint8_t *d;
  size_t n;
  int rc;
  while ((rc = mqr_avro_file_next(r, &d, &n, &err)) == 1) {
  }
  assert_int_equal(rc, MQR_EBADDATA);
  assert_non_null(strstr(err.message, "sync marker"));
  mqr_avro_file_reader_close(r);
  file[len - 1] ^= 1;
  /* The header's schema is not a schema. */
  uint8_t *sch = memmem(file, len, "\"record\"", 8);
  sch[1] = 'X';
  assert_int_equal(mqr_avro_file_reader_open(file, len, &r, &err), MQR_ESCHEMA);
  free(file);

  /* A block that claims more datums than it holds, and one with bytes after its datums. */
  mqr_avro_schema_t *s = schema(REC);
  for (int k = 0; k < 2; k++) {
    sink_t sink = {.fail_after = -1};
    mqr_avro_buf_init_growable(&sink.buf);
    write_file(s, MQR_AVRO_FILE_NULL, 1 << 20, 3, &sink);
    size_t hdr = 4;
    while (memcmp(sink.buf.data + hdr, "0123456789abcdef", 16) != 0) hdr++;
    uint8_t *count = sink.buf.data + hdr + 16;
    assert_int_equal(*count, 6); /* 3, zigzag */
    *count = k == 0 ? 8 : 4;
    assert_int_equal(mqr_avro_file_reader_open(sink.buf.data, sink.buf.len, &r, &err), 0);
    while ((rc = mqr_avro_file_next(r, &d, &n, &err)) == 1) {
    }
    assert_true(rc < 0);
    mqr_avro_file_reader_close(r);
    mqr_avro_buf_free(&sink.buf);
  }
  mqr_avro_schema_destroy(s);
}

static void test_cache(void **state) {
  (void)state;
  mqr_avro_cache_t *c;
  assert_int_equal(mqr_avro_cache_create(&c), 0);
  const mqr_avro_schema_t *a, *b, *x;
  mqr_error_t err;
  assert_int_equal(mqr_avro_cache_add(c, REC, strlen(REC), &a, &err), 0);
  assert_int_equal(mqr_avro_cache_add(c, REC, strlen(REC), &b, &err), 0);
  assert_ptr_equal(a, b);
  /* Another text of the same canonical form: the first schema. */
  const char *spaced = "{ \"name\" : \"R\", \"doc\": \"d\", \"type\":\"record\",\"fields\":[{\"name\":\"i\",\"type\":"
                       "\"long\"},{\"name\":\"s\",\"type\":{\"type\":\"string\"}}]}";
  assert_int_equal(mqr_avro_cache_add(c, spaced, strlen(spaced), &b, &err), 0);
  assert_ptr_equal(a, b);
  assert_int_equal(mqr_avro_cache_count(c), 1);
  assert_int_equal(mqr_avro_cache_add(c, "{\"type\":", 8, &b, &err), MQR_ESYNTAX);
  /* Many schemas: the table grows, each is found by its fingerprint. */
  const mqr_avro_schema_t *many[100];
  for (int i = 0; i < 100; i++) {
    char json[128];
    snprintf(json, sizeof json, "{\"type\":\"fixed\",\"name\":\"F%d\",\"size\":%d}", i, i + 1);
    assert_int_equal(mqr_avro_cache_add(c, json, strlen(json), &many[i], &err), 0);
  }
  assert_int_equal(mqr_avro_cache_count(c), 101);
  for (int i = 0; i < 100; i++) assert_ptr_equal(mqr_avro_cache_get(c, mqr_avro_schema_fingerprint(many[i])), many[i]);
  assert_ptr_equal(mqr_avro_cache_get(c, mqr_avro_schema_fingerprint(a)), a);
  assert_null(mqr_avro_cache_get(c, 12345));
  /* Single-object data finds its writer. */
  mqr_avro_buf_t so;
  mqr_avro_buf_init_growable(&so);
  assert_int_equal(mqr_avro_single_object_header(many[42], &so), 0);
  assert_int_equal(mqr_avro_cache_single_object(c, so.data, so.len, &x, &err), 0);
  assert_ptr_equal(x, many[42]);
  so.data[5] ^= 0xff;
  assert_int_equal(mqr_avro_cache_single_object(c, so.data, so.len, &x, &err), MQR_ENOTFOUND);
  assert_non_null(strstr(err.message, "no schema with fingerprint"));
  mqr_avro_buf_free(&so);
  /* Resolvers compiled once per pair; an incompatible pair is an error each time. */
  const char *wider = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"i\",\"type\":\"double\"}]}";
  assert_int_equal(mqr_avro_cache_add(c, wider, strlen(wider), &b, &err), 0);
  const mqr_avro_resolver_t *r1, *r2;
  assert_int_equal(mqr_avro_cache_resolver(c, a, b, &r1, &err), 0);
  assert_int_equal(mqr_avro_cache_resolver(c, a, b, &r2, &err), 0);
  assert_ptr_equal(r1, r2);
  assert_int_equal(mqr_avro_cache_resolver(c, b, a, &r2, &err), MQR_EINCOMPATIBLE);
  mqr_avro_cache_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_weather), cmocka_unit_test(test_write_read), cmocka_unit_test(test_schema_as_given),
      cmocka_unit_test(test_broken),  cmocka_unit_test(test_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
