/* avro: the compiled codec against Apache Avro C 1.11.1 (libavro-dev), side by side in
 * one run. impl=mqr is the compiled struct codec; impl=avroc is Avro C's generic value
 * API as its documentation shows it (fill the value, then avro_value_write / read).
 *   big, small      the Rust benchmark's records: fill + encode, decode; small.encode
 *                   also runs impl=floor, a hand-written encoder of just that record (the
 *                   least code that writes the same bytes through the same kind of call),
 *                   which says what any encoder could reach on the run's machine
 *   enum200         an array of 200 enum values (the fast-avro result); mqr_lookup is the
 *                   same encoder fed symbols and looking each up per element by name
 *   array1m         1,000,000 ints, floats or doubles, write and read; memcpy of the
 *                   same bytes beside them
 *   writer_reuse    Big records in runs of N: the codec compiled once per run (reuse) or
 *                   the schema parsed and compiled per message (per_message)
 * Every figure is per operation; array1m's operation is the whole array. */
#include <avro.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "big_record.h"
#include "mqr/codec.h"

static const char big_json[] =
    "{\"namespace\":\"my.example\",\"type\":\"record\",\"name\":\"userInfo\",\"fields\":["
    "{\"default\":\"NONE\",\"type\":\"string\",\"name\":\"username\"},{\"default\":-1,\"type\":\"int\",\"name\":"
    "\"age\"},"
    "{\"default\":\"NONE\",\"type\":\"string\",\"name\":\"phone\"},{\"default\":\"NONE\",\"type\":\"string\",\"name\":"
    "\"housenum\"},{\"default\":{},\"type\":{\"fields\":[{\"default\":\"NONE\",\"type\":\"string\",\"name\":\"street\"}"
    ","
    "{\"default\":\"NONE\",\"type\":\"string\",\"name\":\"city\"},{\"default\":\"NONE\",\"type\":\"string\",\"name\":"
    "\"state_prov\"},{\"default\":\"NONE\",\"type\":\"string\",\"name\":\"country\"},{\"default\":\"NONE\",\"type\":"
    "\"string\",\"name\":\"zip\"}],\"type\":\"record\",\"name\":\"mailing_address\"},\"name\":\"address\"}]}";
static const char small_json[] =
    "{\"namespace\":\"test\",\"type\":\"record\",\"name\":\"Test\",\"fields\":[{\"type\":{\"type\":\"string\"},"
    "\"name\":\"field\"}]}";
static const char enum_json[] = "{\"type\":\"array\",\"items\":{\"type\":\"enum\",\"name\":\"Color\",\"symbols\":["
                                "\"RED\",\"GREEN\",\"BLUE\",\"CYAN\",\"MAGENTA\",\"YELLOW\",\"BLACK\",\"WHITE\"]}}";
static const char *const colors[8] = {"RED", "GREEN", "BLUE", "CYAN", "MAGENTA", "YELLOW", "BLACK", "WHITE"};

typedef struct {
  mqr_str_t field;
} small_t;

static const mqr_avro_cfield_t small_fields[] = {{"field", 0, &mqr_avro_c_str}};
static const mqr_avro_ctype_t small_type = {MQR_AVRO_C_RECORD, sizeof(small_t), small_fields, 1, NULL, NULL, 0, 0};
static const mqr_avro_ctype_t i32_array = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_int32, NULL, 0, 0};
static const mqr_avro_ctype_t f32_array = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_float, NULL, 0, 0};
static const mqr_avro_ctype_t f64_array = {
    MQR_AVRO_C_ARRAY, sizeof(mqr_avro_array_t), NULL, 0, &mqr_avro_c_double, NULL, 0, 0};

static const user_t big_value = {
    MQR_STR("username"),
    10,
    MQR_STR("000000000"),
    MQR_STR("0000"),
    {MQR_STR("street"), MQR_STR("city"), MQR_STR("state_prov"), MQR_STR("country"), MQR_STR("zip")}};
static const small_t small_value = {MQR_STR("foo")};

#define ARRAY_N 1000000
#define ENUM_N 200

typedef struct {
  int impl; /* 0 mqr, 1 avroc, 2 mqr_lookup / memcpy / floor */
  int kind; /* array1m: 0 int, 1 float, 2 double */
  bool big; /* big or small record */
  mqr_avro_schema_t *schema;
  mqr_avro_codec_t *codec;
  mqr_avro_buf_t out;
  uint8_t *encoded;
  size_t encoded_len;
  void *values; /* mqr's C value, or the raw array */
  mqr_str_t *symbols;
  uint8_t *arena_mem;
  mqr_avro_arena_t arena;
  long runs;
  /* Avro C */
  avro_schema_t aschema;
  avro_value_iface_t *iface;
  avro_value_t avalue;
  avro_writer_t writer;
  avro_reader_t reader;
  char *abuf;
  size_t abuf_cap;
} st_t;

static int impl_of(mqr_bench_ctx_t *c) {
  const char *v = mqr_bench_param(c, "impl");
  if (v == NULL || !strcmp(v, "mqr")) return 0;
  if (!strcmp(v, "avroc")) return 1;
  return 2;
}

static int avroc_setup(mqr_bench_ctx_t *c, st_t *s, const char *json, size_t cap) {
  if (avro_schema_from_json_length(json, strlen(json), &s->aschema) != 0)
    return mqr_bench_fail(c, "avro-c: %s", avro_strerror());
  s->iface = avro_generic_class_from_schema(s->aschema);
  avro_generic_value_new(s->iface, &s->avalue);
  s->abuf_cap = cap;
  s->abuf = malloc(cap);
  s->writer = avro_writer_memory(s->abuf, (int64_t)cap);
  s->reader = avro_reader_memory(s->abuf, (int64_t)cap);
  return 0;
}

static int setup(mqr_bench_ctx_t *c, const char *json, const mqr_avro_ctype_t *t, size_t cap, st_t **out) {
  st_t *s = calloc(1, sizeof *s);
  s->impl = impl_of(c);
  mqr_error_t err;
  if (mqr_avro_schema_parse(json, strlen(json), &s->schema, &err) != 0) return mqr_bench_fail(c, "%s", err.message);
  if (t && mqr_avro_codec_compile(s->schema, t, &s->codec, &err) != 0) return mqr_bench_fail(c, "%s", err.message);
  s->encoded = malloc(cap);
  mqr_avro_buf_init(&s->out, s->encoded, cap);
  *out = s;
  mqr_bench_set_state(c, s);
  return avroc_setup(c, s, json, cap);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s == NULL) return;
  if (s->iface) {
    avro_value_decref(&s->avalue);
    avro_value_iface_decref(s->iface);
    avro_schema_decref(s->aschema);
    avro_writer_free(s->writer);
    avro_reader_free(s->reader);
  }
  free(s->abuf);
  mqr_avro_codec_destroy(s->codec);
  mqr_avro_schema_destroy(s->schema);
  free(s->encoded);
  free(s->values);
  free(s->symbols);
  free(s->arena_mem);
  free(s);
}

/* Avro C: fill a record's string fields by index, as its API has it (lengths with NUL). */
static void avroc_set_str(avro_value_t *rec, size_t i, mqr_str_t v) {
  avro_value_t f;
  avro_value_get_by_index(rec, i, &f, NULL);
  avro_value_set_string_len(&f, v.ptr, v.len + 1);
}

static void avroc_fill_big(st_t *s, const user_t *u) {
  avro_value_t addr, f;
  avroc_set_str(&s->avalue, 0, u->username);
  avro_value_get_by_index(&s->avalue, 1, &f, NULL);
  avro_value_set_int(&f, u->age);
  avroc_set_str(&s->avalue, 2, u->phone);
  avroc_set_str(&s->avalue, 3, u->housenum);
  avro_value_get_by_index(&s->avalue, 4, &addr, NULL);
  avroc_set_str(&addr, 0, u->address.street);
  avroc_set_str(&addr, 1, u->address.city);
  avroc_set_str(&addr, 2, u->address.state_prov);
  avroc_set_str(&addr, 3, u->address.country);
  avroc_set_str(&addr, 4, u->address.zip);
}

static int avroc_write(mqr_bench_ctx_t *c, st_t *s) {
  avro_writer_memory_set_dest(s->writer, s->abuf, (int64_t)s->abuf_cap);
  if (avro_value_write(s->writer, &s->avalue) != 0) return mqr_bench_fail(c, "avro-c: %s", avro_strerror());
  return 0;
}

static int avroc_read(mqr_bench_ctx_t *c, st_t *s, const uint8_t *in, size_t n) {
  avro_reader_memory_set_source(s->reader, (const char *)in, (int64_t)n);
  if (avro_value_read(s->reader, &s->avalue) != 0) return mqr_bench_fail(c, "avro-c: %s", avro_strerror());
  return 0;
}

/* ---- big and small ------------------------------------------------------------------ */

static int setup_big(mqr_bench_ctx_t *c) {
  st_t *s;
  int rc = setup(c, big_json, &user_type, 4096, &s);
  if (rc) return rc;
  s->big = true;
  if (mqr_avro_encode(s->codec, &big_value, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
  s->encoded_len = s->out.len;
  return 0;
}

/* The floor (avro_floor.c): the Small record written by hand. */
int mqr_bench_floor_encode(const mqr_str_t *field, mqr_avro_buf_t *out);

static int setup_small(mqr_bench_ctx_t *c) {
  st_t *s;
  int rc = setup(c, small_json, &small_type, 4096, &s);
  if (rc) return rc;
  if (mqr_avro_encode(s->codec, &small_value, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
  s->encoded_len = s->out.len;
  /* The floor must write what the codec writes, or it measures nothing. */
  uint8_t fl[64];
  mqr_avro_buf_t fo;
  mqr_avro_buf_init(&fo, fl, sizeof fl);
  if (mqr_bench_floor_encode(&small_value.field, &fo) != 0 || fo.len != s->encoded_len ||
      memcmp(fl, s->encoded, fo.len) != 0)
    return mqr_bench_fail(c, "the floor encoder's bytes differ from the codec's");
  return 0;
}

/* The loops: one per implementation and record, so that no operation pays for a test
 * of which one it is (the same for both implementations). */
__attribute__((noinline)) static int run_record_encode(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  if (s->impl == 1) {
    for (uint64_t i = 0; i < ops; i++) {
      if (s->big)
        avroc_fill_big(s, &big_value);
      else
        avroc_set_str(&s->avalue, 0, small_value.field);
      if (avroc_write(c, s)) return -1;
      mqr_bench_sink_ptr(s->abuf);
    }
    return 0;
  }
  /* Fill (the struct's fields are set as a caller would) then encode. */
  mqr_avro_buf_t *out = &s->out;
  const mqr_avro_codec_t *codec = s->codec;
  if (s->impl == 2) { /* floor */
    if (s->big) return mqr_bench_fail(c, "no floor for the Big record");
    for (uint64_t i = 0; i < ops; i++) {
      out->len = 0;
      small_t sm = small_value;
      mqr_bench_sink_ptr(&sm);
      if (mqr_bench_floor_encode(&sm.field, out) != 0) return mqr_bench_fail(c, "encode");
      mqr_bench_sink_ptr(out->data);
    }
  } else if (s->big) {
    for (uint64_t i = 0; i < ops; i++) {
      out->len = 0;
      user_t u = big_value;
      mqr_bench_sink_ptr(&u);
      if (mqr_avro_encode(codec, &u, out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
      mqr_bench_sink_ptr(out->data);
    }
  } else {
    for (uint64_t i = 0; i < ops; i++) {
      out->len = 0;
      small_t sm = small_value;
      mqr_bench_sink_ptr(&sm);
      if (mqr_avro_encode(codec, &sm, out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
      mqr_bench_sink_ptr(out->data);
    }
  }
  return 0;
}

__attribute__((noinline)) static int run_record_decode(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  if (s->impl == 1) {
    for (uint64_t i = 0; i < ops; i++)
      if (avroc_read(c, s, s->encoded, s->encoded_len)) return -1;
    return 0;
  }
  const mqr_avro_codec_t *codec = s->codec;
  const uint8_t *in = s->encoded;
  size_t n = s->encoded_len;
  user_t u;
  for (uint64_t i = 0; i < ops; i++) {
    if (mqr_avro_decode(codec, in, n, NULL, &u, NULL, NULL) != 0) return mqr_bench_fail(c, "decode");
    mqr_bench_sink_ptr(&u);
  }
  return 0;
}

/* ---- enum200 ------------------------------------------------------------------------ */

static int setup_enum(mqr_bench_ctx_t *c) {
  st_t *s;
  int rc = setup(c, enum_json, &i32_array, 4096, &s);
  if (rc) return rc;
  int32_t *ords = malloc(ENUM_N * sizeof *ords);
  s->symbols = malloc(ENUM_N * sizeof *s->symbols);
  for (int i = 0; i < ENUM_N; i++) {
    ords[i] = (i * 5 + 3) % 8;
    s->symbols[i] = mqr_str(colors[ords[i]]);
    avro_value_t e;
    avro_value_append(&s->avalue, &e, NULL);
    avro_value_set_enum(&e, ords[i]);
  }
  s->values = ords;
  mqr_avro_array_t a = {ords, ENUM_N};
  if (mqr_avro_encode(s->codec, &a, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
  s->encoded_len = s->out.len;
  s->arena_mem = malloc(ENUM_N * 8 + 64);
  s->arena = (mqr_avro_arena_t){s->arena_mem, ENUM_N * 8 + 64, 0};
  return 0;
}

/* What an encoder that does not compile the schema does per element: find the symbol. */
static int32_t lookup_symbol(mqr_str_t sym) {
  for (int32_t k = 0; k < 8; k++)
    if (strlen(colors[k]) == sym.len && memcmp(colors[k], sym.ptr, sym.len) == 0) return k;
  return -1;
}

__attribute__((noinline)) static int run_enum_encode(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  int32_t tmp[ENUM_N];
  for (uint64_t i = 0; i < ops; i++) {
    if (s->impl == 1) {
      if (avroc_write(c, s)) return -1;
      mqr_bench_sink_ptr(s->abuf);
      continue;
    }
    mqr_avro_array_t a = {s->values, ENUM_N};
    if (s->impl == 2) {
      for (int k = 0; k < ENUM_N; k++) tmp[k] = lookup_symbol(s->symbols[k]);
      a.items = tmp;
    }
    s->out.len = 0;
    if (mqr_avro_encode(s->codec, &a, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
    mqr_bench_sink_ptr(s->out.data);
  }
  return 0;
}

__attribute__((noinline)) static int run_enum_decode(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (s->impl == 1) {
      avro_value_reset(&s->avalue);
      if (avroc_read(c, s, s->encoded, s->encoded_len)) return -1;
      continue;
    }
    mqr_avro_array_t a;
    s->arena.used = 0;
    if (mqr_avro_decode(s->codec, s->encoded, s->encoded_len, NULL, &a, &s->arena, NULL) != 0)
      return mqr_bench_fail(c, "decode");
    mqr_bench_sink_ptr(a.items);
  }
  return 0;
}

/* ---- array1m ------------------------------------------------------------------------ */

static int setup_array(mqr_bench_ctx_t *c) {
  const char *type = mqr_bench_param(c, "type");
  int kind = !strcmp(type, "int") ? 0 : !strcmp(type, "float") ? 1 : 2;
  static const char *const json[] = {"{\"type\":\"array\",\"items\":\"int\"}",
                                     "{\"type\":\"array\",\"items\":\"float\"}",
                                     "{\"type\":\"array\",\"items\":\"double\"}"};
  const mqr_avro_ctype_t *t[] = {&i32_array, &f32_array, &f64_array};
  size_t cap = (size_t)ARRAY_N * 10 + 64;
  st_t *s;
  int rc = setup(c, json[kind], t[kind], cap, &s);
  if (rc) return rc;
  s->kind = kind;
  size_t esize = kind == 2 ? 8 : 4;
  s->values = malloc(ARRAY_N * esize);
  for (int i = 0; i < ARRAY_N; i++) {
    avro_value_t e;
    avro_value_append(&s->avalue, &e, NULL);
    if (kind == 0) {
      ((int32_t *)s->values)[i] = i; /* 1 to 3 varint bytes, as an id or a counter */
      avro_value_set_int(&e, i);
    } else if (kind == 1) {
      ((float *)s->values)[i] = (float)i * 0.5f;
      avro_value_set_float(&e, (float)i * 0.5f);
    } else {
      ((double *)s->values)[i] = i * 0.25;
      avro_value_set_double(&e, i * 0.25);
    }
  }
  mqr_avro_array_t a = {s->values, ARRAY_N};
  if (mqr_avro_encode(s->codec, &a, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
  s->encoded_len = s->out.len;
  s->arena_mem = malloc(ARRAY_N * esize + 64);
  s->arena = (mqr_avro_arena_t){s->arena_mem, ARRAY_N * esize + 64, 0};
  mqr_bench_aux(c, "bytes", (double)s->encoded_len, "B");
  return 0;
}

__attribute__((noinline)) static int run_array_write(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (s->impl == 1) {
      if (avroc_write(c, s)) return -1;
    } else if (s->impl == 2) {
      memcpy(s->encoded, s->values, s->encoded_len);
    } else {
      mqr_avro_array_t a = {s->values, ARRAY_N};
      s->out.len = 0;
      if (mqr_avro_encode(s->codec, &a, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
    }
    mqr_bench_sink_ptr(s->encoded);
  }
  return 0;
}

__attribute__((noinline)) static int run_array_read(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (s->impl == 1) {
      avro_value_reset(&s->avalue);
      if (avroc_read(c, s, s->encoded, s->encoded_len)) return -1;
    } else if (s->impl == 2) {
      memcpy(s->arena_mem, s->encoded, s->encoded_len);
    } else {
      mqr_avro_array_t a;
      s->arena.used = 0;
      if (mqr_avro_decode(s->codec, s->encoded, s->encoded_len, NULL, &a, &s->arena, NULL) != 0)
        return mqr_bench_fail(c, "decode");
    }
    mqr_bench_sink_ptr(s->arena_mem);
  }
  return 0;
}

/* ---- writer_reuse ------------------------------------------------------------------- */

static int setup_reuse(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  s->impl = !strcmp(mqr_bench_param(c, "mode"), "reuse") ? 0 : 2;
  s->runs = mqr_bench_param_long(c, "runs");
  if (s->runs < 1) return mqr_bench_fail(c, "runs must be at least 1");
  s->encoded = malloc(4096);
  mqr_avro_buf_init(&s->out, s->encoded, 4096);
  mqr_bench_set_state(c, s);
  return 0;
}

static int compile_big(mqr_bench_ctx_t *c, mqr_avro_schema_t **sch, mqr_avro_codec_t **codec) {
  if (mqr_avro_schema_parse(big_json, sizeof big_json - 1, sch, NULL) != 0 ||
      mqr_avro_codec_compile(*sch, &user_type, codec, NULL) != 0)
    return mqr_bench_fail(c, "compile");
  return 0;
}

/* One operation is a run of `runs` messages. */
__attribute__((noinline)) static int run_reuse(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    mqr_avro_schema_t *sch = NULL;
    mqr_avro_codec_t *codec = NULL;
    for (long m = 0; m < s->runs; m++) {
      if (codec == NULL && compile_big(c, &sch, &codec)) return -1;
      s->out.len = 0;
      if (mqr_avro_encode(codec, &big_value, &s->out, NULL, NULL) != 0) return mqr_bench_fail(c, "encode");
      mqr_bench_sink_ptr(s->out.data);
      if (s->impl == 2) {
        mqr_avro_codec_destroy(codec);
        mqr_avro_schema_destroy(sch);
        codec = NULL;
        sch = NULL;
      }
    }
    mqr_avro_codec_destroy(codec);
    mqr_avro_schema_destroy(sch);
  }
  return 0;
}

static const mqr_bench_def_t big_encode = {
    "avro.big.encode", "impl=mqr,avroc", "avgt", setup_big, teardown, NULL, NULL, run_record_encode, NULL};
static const mqr_bench_def_t big_decode = {
    "avro.big.decode", "impl=mqr,avroc", "avgt", setup_big, teardown, NULL, NULL, run_record_decode, NULL};
static const mqr_bench_def_t small_encode = {
    "avro.small.encode", "impl=mqr,avroc,floor", "avgt", setup_small, teardown, NULL, NULL, run_record_encode, NULL};
static const mqr_bench_def_t small_decode = {
    "avro.small.decode", "impl=mqr,avroc", "avgt", setup_small, teardown, NULL, NULL, run_record_decode, NULL};
static const mqr_bench_def_t enum_encode = {"avro.enum200.encode",
                                            "impl=mqr,mqr_lookup,avroc",
                                            "avgt",
                                            setup_enum,
                                            teardown,
                                            NULL,
                                            NULL,
                                            run_enum_encode,
                                            NULL};
static const mqr_bench_def_t enum_decode = {
    "avro.enum200.decode", "impl=mqr,avroc", "avgt", setup_enum, teardown, NULL, NULL, run_enum_decode, NULL};
static const mqr_bench_def_t array_write = {"avro.array1m.write",
                                            "type=int,float,double;impl=mqr,avroc,memcpy",
                                            "avgt",
                                            setup_array,
                                            teardown,
                                            NULL,
                                            NULL,
                                            run_array_write,
                                            NULL};
static const mqr_bench_def_t array_read = {"avro.array1m.read",
                                           "type=int,float,double;impl=mqr,avroc,memcpy",
                                           "avgt",
                                           setup_array,
                                           teardown,
                                           NULL,
                                           NULL,
                                           run_array_read,
                                           NULL};
static const mqr_bench_def_t writer_reuse = {"avro.writer_reuse",
                                             "mode=reuse,per_message;runs=1,100,10000",
                                             "avgt",
                                             setup_reuse,
                                             teardown,
                                             NULL,
                                             NULL,
                                             run_reuse,
                                             NULL};

MQR_BENCH_REGISTER(big_encode)
MQR_BENCH_REGISTER(big_decode)
MQR_BENCH_REGISTER(small_encode)
MQR_BENCH_REGISTER(small_decode)
MQR_BENCH_REGISTER(enum_encode)
MQR_BENCH_REGISTER(enum_decode)
MQR_BENCH_REGISTER(array_write)
MQR_BENCH_REGISTER(array_read)
MQR_BENCH_REGISTER(writer_reuse)
