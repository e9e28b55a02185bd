/* Schemas: the 34 official Parsing Canonical Form and fingerprint cases, named types and
 * namespaces, defaults, logical types, and bad schemas, each refused with its path,
 * line and column. */
#include "testutil.h"

static mqr_avro_schema_t *parse_ok(const char *json) {
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  mqr_error_clear(&err);
  int rc = mqr_avro_schema_parse(json, strlen(json), &s, &err);
  if (rc != 0) fail_msg("schema %s refused: %s", json, err.message);
  return s;
}

/* The error message of a refused schema; asserts the code, line and column. */
static const char *parse_bad(const char *json, int code, uint32_t line, uint32_t column, const char *needle) {
  static mqr_error_t err;
  mqr_avro_schema_t *s = (mqr_avro_schema_t *)0x1;
  mqr_error_clear(&err);
  int rc = mqr_avro_schema_parse(json, strlen(json), &s, &err);
  if (rc != code) fail_msg("schema %s: rc %d (%s), expected %d", json, rc, err.message, code);
  assert_ptr_equal(s, (mqr_avro_schema_t *)0x1); /* written only on success */
  if ((line && err.line != line) || (column && err.column != column))
    fail_msg("schema %s: error at %u:%u, expected %u:%u (%s)", json, err.line, err.column, line, column, err.message);
  if (needle && !strstr(err.message, needle)) fail_msg("message '%s' lacks '%s'", err.message, needle);
  return err.message;
}

/* schema-tests.txt: // NNN, <<INPUT one line or a block ending with INPUT, <<canonical,
 * optional <<fingerprint (absent: the previous case's value). */
static void test_official_vectors(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/avro/schema-tests.txt", getenv("MQR_SOURCE_DIR"));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[4096], input[16384] = "", canonical[4096] = "";
  int64_t fingerprint = 0;
  int cases = 0, in_block = 0;
  bool have = false;
#define FLUSH()                                                                                                        \
  do {                                                                                                                 \
    if (have) {                                                                                                        \
      mqr_avro_schema_t *s = parse_ok(input);                                                                          \
      mqr_str_t c = mqr_avro_schema_canonical(s);                                                                      \
      if (strlen(canonical) != c.len || memcmp(canonical, c.ptr, c.len) != 0)                                          \
        fail_msg("case %d: canonical %.*s, expected %s", cases, (int)c.len, c.ptr, canonical);                         \
      assert_int_equal((int64_t)mqr_avro_schema_fingerprint(s), fingerprint);                                          \
      assert_int_equal(mqr_avro_crc64(c.ptr, c.len), mqr_avro_schema_fingerprint(s));                                  \
      mqr_avro_schema_destroy(s);                                                                                      \
      cases++;                                                                                                         \
      have = false;                                                                                                    \
    }                                                                                                                  \
  } while (0)
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (in_block) {
      if (!strcmp(line, "INPUT"))
        in_block = 0;
      else
        strcat(strcat(input, line), "\n");
    } else if (!strncmp(line, "<<INPUT", 7)) {
      FLUSH();
      input[0] = '\0';
      if (line[7] == '\0')
        in_block = 1;
      else
        strcpy(input, line + 8);
    } else if (!strncmp(line, "<<canonical ", 12)) {
      strcpy(canonical, line + 12);
      have = true;
    } else if (!strncmp(line, "<<fingerprint ", 14)) {
      fingerprint = strtoll(line + 14, NULL, 10);
    }
  }
  FLUSH();
  fclose(f);
  assert_int_equal(cases, 34);
}

static void test_null_fingerprint_bytes(void **state) {
  (void)state;
  mqr_avro_schema_t *s = parse_ok("\"null\"");
  assert_int_equal(mqr_avro_schema_fingerprint(s), 7195948357588979594ull);
  assert_int_equal(mqr_avro_crc64("", 0), 0xc15d213aa4d7a795ull);
  mqr_avro_schema_destroy(s);
}

static void assert_canonical(const char *json, const char *want) {
  mqr_avro_schema_t *s = parse_ok(json);
  mqr_str_t c = mqr_avro_schema_canonical(s);
  if (strlen(want) != c.len || memcmp(want, c.ptr, c.len))
    fail_msg("canonical %.*s, expected %s", (int)c.len, c.ptr, want);
  mqr_avro_schema_destroy(s);
}

static void test_names_and_namespaces(void **state) {
  (void)state;
  /* A nested name without a dot inherits the enclosing namespace; a dotted one sets it. */
  assert_canonical("{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a.b\",\"fields\":["
                   "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\"]}},"
                   "{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"c.F\",\"size\":2}},"
                   "{\"name\":\"g\",\"type\":{\"type\":\"record\",\"name\":\"G\",\"fields\":["
                   "{\"name\":\"h\",\"type\":\"c.F\"}]}},"
                   "{\"name\":\"i\",\"type\":\"E\"},{\"name\":\"j\",\"type\":\"a.b.E\"}]}",
                   "{\"name\":\"a.b.R\",\"type\":\"record\",\"fields\":["
                   "{\"name\":\"e\",\"type\":{\"name\":\"a.b.E\",\"type\":\"enum\",\"symbols\":[\"X\"]}},"
                   "{\"name\":\"f\",\"type\":{\"name\":\"c.F\",\"type\":\"fixed\",\"size\":2}},"
                   "{\"name\":\"g\",\"type\":{\"name\":\"a.b.G\",\"type\":\"record\",\"fields\":["
                   "{\"name\":\"h\",\"type\":\"c.F\"}]}},"
                   "{\"name\":\"i\",\"type\":\"a.b.E\"},{\"name\":\"j\",\"type\":\"a.b.E\"}]}");
  /* Recursion through an array and through a union. */
  assert_canonical("{\"type\":\"record\",\"name\":\"L\",\"fields\":[{\"name\":\"next\",\"type\":[\"null\",\"L\"]},"
                   "{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"L\"}}]}",
                   "{\"name\":\"L\",\"type\":\"record\",\"fields\":[{\"name\":\"next\",\"type\":[\"null\",\"L\"]},"
                   "{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"L\"}}]}");
  /* Escapes in names are unescaped; annotations dropped. */
  assert_canonical("{\"type\":\"enum\",\"name\":\"\\u0045\",\"symbols\":[\"A\"],\"doc\":\"x\",\"default\":\"A\"}",
                   "{\"name\":\"E\",\"type\":\"enum\",\"symbols\":[\"A\"]}");
  assert_canonical("{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", "\"long\"");
  assert_canonical("{\"type\":{\"type\":\"int\"}}", "\"int\"");
}

static void test_defaults(void **state) {
  (void)state;
  mqr_avro_schema_destroy(parse_ok(
      "{\"type\":\"record\",\"name\":\"D\",\"fields\":["
      "{\"name\":\"a\",\"type\":\"int\",\"default\":-2147483648},"
      "{\"name\":\"b\",\"type\":[\"null\",\"string\"],\"default\":null},"
      "{\"name\":\"c\",\"type\":\"bytes\",\"default\":\"\\u00ff\\u0000\"},"
      "{\"name\":\"d\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":2},\"default\":\"ab\"},"
      "{\"name\":\"e\",\"type\":{\"type\":\"map\",\"values\":\"double\"},\"default\":{\"x\":1,\"y\":2.5}},"
      "{\"name\":\"f\",\"type\":{\"type\":\"record\",\"name\":\"S\",\"fields\":[{\"name\":\"s\",\"type\":\"string\","
      "\"default\":\"NONE\"}]},\"default\":{}}]}"));
  parse_bad("{\"type\":\"record\",\"name\":\"D\",\"fields\":[\n"
            "  {\"name\":\"a\",\"type\":\"int\",\"default\":2147483648}]}",
            MQR_ESCHEMA, 2, 38, "D.a: invalid default: expected a whole number in the int range");
  parse_bad(
      "{\"type\":\"record\",\"name\":\"D\",\"fields\":[{\"name\":\"a\",\"type\":[\"null\",\"int\"],\"default\":1}]}",
      MQR_ESCHEMA, 1, 0, "expected null");
  parse_bad(
      "{\"type\":\"record\",\"name\":\"D\",\"fields\":[{\"name\":\"a\",\"type\":\"bytes\",\"default\":\"\\u0100\"}]}",
      MQR_ESCHEMA, 1, 0, "code points 0-255");
  parse_bad(
      "{\"type\":\"record\",\"name\":\"D\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"enum\",\"name\":\"E\","
      "\"symbols\":[\"A\"]},\"default\":\"B\"}]}",
      MQR_ESCHEMA, 1, 0, "symbols");
  parse_bad(
      "{\"type\":\"record\",\"name\":\"D\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"record\",\"name\":\"S\","
      "\"fields\":[{\"name\":\"s\",\"type\":\"string\"}]},\"default\":{}}]}",
      MQR_ESCHEMA, 1, 0, "every field");
  parse_bad("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"],\"default\":\"Z\"}", MQR_ESCHEMA, 1, 0,
            "not one of its symbols");
}

static void test_logical_types(void **state) {
  (void)state;
  /* Valid or not, logical types never make a schema invalid: they are annotations. */
  const char *ok[] = {
      "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":2}",
      "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":-1}",
      "{\"type\":\"fixed\",\"name\":\"F\",\"size\":2,\"logicalType\":\"decimal\",\"precision\":40}",
      "{\"type\":\"string\",\"logicalType\":\"uuid\"}",
      "{\"type\":\"int\",\"logicalType\":\"date\"}",
      "{\"type\":\"string\",\"logicalType\":\"date\"}",
      "{\"type\":\"fixed\",\"name\":\"D\",\"size\":12,\"logicalType\":\"duration\"}",
      "{\"type\":\"long\",\"logicalType\":\"no-such-thing\"}",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) mqr_avro_schema_destroy(parse_ok(ok[i]));
}

static void test_bad_schemas(void **state) {
  (void)state;
  parse_bad("{\"type\":\"record\",\"name\":\"R\",\"fields\":[\n"
            "  {\"name\":\"a\",\"type\":\"int\"},\n"
            "  {\"name\":\"b\",\"type\":\"int\"},\n"
            "  {\"name\":\"c\",\"type\":\"int\"},\n"
            "  {\"name\":\"d\",\"type\":{\"type\":\"array\",\"items\":\"Nope\"}}]}",
            MQR_ESCHEMA, 5, 46, "fields[3].type.items: unknown type 'Nope'");
  parse_bad("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
            "{\"name\":\"a\",\"type\":\"long\"}]}",
            MQR_ESCHEMA, 1, 0, "fields[1]: field 'a' is defined twice");
  parse_bad("[\"int\", \"long\", \"int\"]", MQR_ESCHEMA, 1, 17, "[2]: the union holds 'int' twice");
  parse_bad("[\"null\", [\"int\"]]", MQR_ESCHEMA, 1, 10, "[1]: a union may not hold a union directly");
  parse_bad("[{\"type\":\"fixed\",\"name\":\"F\",\"size\":1},{\"type\":\"fixed\",\"name\":\"F\",\"size\":1}]",
            MQR_ESCHEMA, 1, 0, "already defined");
  parse_bad("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\",\"A\"]}", MQR_ESCHEMA, 1, 46,
            "symbols[2]: symbol 'A' is listed twice");
  parse_bad("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"1A\"]}", MQR_ESCHEMA, 1, 0, "not a valid enum symbol");
  parse_bad("{\"type\":\"record\",\"name\":\"9R\",\"fields\":[]}", MQR_ESCHEMA, 1, 0, "not a valid name");
  parse_bad("{\"type\":\"record\",\"name\":\"int\",\"fields\":[]}", MQR_ESCHEMA, 1, 0, "primitive");
  parse_bad("{\"type\":\"record\",\"name\":\"R\"}", MQR_ESCHEMA, 1, 1, "needs \"fields\"");
  parse_bad("{\"type\":\"fixed\",\"name\":\"F\",\"size\":-1}", MQR_ESCHEMA, 1, 0, "\"size\"");
  parse_bad("{\"type\":\"fixed\",\"name\":\"F\",\"size\":1.5}", MQR_ESCHEMA, 1, 0, "\"size\"");
  parse_bad("{\"type\":\"array\"}", MQR_ESCHEMA, 1, 1, "needs \"items\"");
  parse_bad("{\"type\":\"strin\"}", MQR_ESCHEMA, 1, 9, "unknown type 'strin'");
  parse_bad("\"R\"", MQR_ESCHEMA, 1, 1, "unknown type");
  parse_bad("42", MQR_ESCHEMA, 1, 1, "must be a string, an object or an array");
  parse_bad("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\",\"order\":\"up\"}]}",
            MQR_ESCHEMA, 1, 0, "order");
  /* A record that can only hold itself has no finite datum. */
  parse_bad("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"me\",\"type\":\"R\"}]}", MQR_ESCHEMA, 0, 0,
            "recurses without end");
  parse_bad("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"me\",\"type\":[\"R\"]}]}", MQR_ESCHEMA, 0, 0,
            "recurses without end");
  /* JSON syntax errors point at the character. */
  parse_bad("{\"type\": \"int\",\n \"x\": }", MQR_ESYNTAX, 2, 7, "JSON");
  parse_bad("{\"type\": \"int\", \"type\": \"long\"}", MQR_ESYNTAX, 1, 17, "repeated key");
  /* In a big object the repeat is found by sorting, and reported at its value. */
  {
    char big[2048] = "{\"type\":\"int\"";
    for (int i = 0; i < 40; i++) snprintf(big + strlen(big), sizeof big - strlen(big), ",\"k%d\":%d", i, i);
    strcat(big, ",\"k7\":\"again\"}");
    parse_bad(big, MQR_ESYNTAX, 1, (uint32_t)(strlen(big) - 7), "repeated key \"k7\"");
  }
  parse_bad("", MQR_ESYNTAX, 1, 1, "expected a value");
  parse_bad("\"int\" x", MQR_ESYNTAX, 1, 7, "text after");
  parse_bad("\"\\ud800\"", MQR_ESYNTAX, 1, 2, "surrogate");
}

static void test_hostile_schema(void **state) {
  (void)state;
  /* Deep nesting is refused, not a stack overflow. */
  size_t depth = 100000;
  char *deep = malloc(depth * 2 + 8);
  size_t n = 0;
  for (size_t i = 0; i < depth; i++) deep[n++] = '[';
  for (size_t i = 0; i < depth; i++) deep[n++] = ']';
  deep[n] = '\0';
  parse_bad(deep, MQR_ELIMIT, 1, 258, "nesting deeper than");
  free(deep);
  /* Every prefix of a valid schema is refused cleanly. */
  const char *full = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"map\","
                     "\"values\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}]}}]}";
  mqr_avro_schema_destroy(parse_ok(full));
  for (size_t len = 0; len < strlen(full); len++) {
    mqr_avro_schema_t *s = NULL;
    int rc = mqr_avro_schema_parse(full, len, &s, NULL);
    assert_true(rc == MQR_ESYNTAX || rc == MQR_ESCHEMA);
    assert_null(s);
  }
}

static void test_allocation_failures(void **state) {
  (void)state;
  const char *json = "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"fields\":[{\"name\":\"a\",\"type\":"
                     "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}},{\"name\":\"b\",\"type\":[\"null\","
                     "{\"type\":\"array\",\"items\":\"R\"}],\"default\":null}]}";
  talloc_install();
  for (long n = 1;; n++) {
    talloc.calls = talloc.failed = 0;
    talloc.fail_at = n;
    mqr_avro_schema_t *s = NULL;
    int rc = mqr_avro_schema_parse(json, strlen(json), &s, NULL);
    if (rc == 0) {
      assert_int_equal(talloc.failed, 0);
      mqr_avro_schema_destroy(s);
      assert_int_equal(talloc.live, 0);
      break;
    }
    assert_int_equal(rc, MQR_ENOMEM);
    assert_null(s);
    assert_int_equal(talloc.live, 0);
  }
  talloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_official_vectors),     cmocka_unit_test(test_null_fingerprint_bytes),
      cmocka_unit_test(test_names_and_namespaces), cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_logical_types),        cmocka_unit_test(test_bad_schemas),
      cmocka_unit_test(test_hostile_schema),       cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
