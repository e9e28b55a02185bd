/* mqr schema canonical|fingerprint FILE
 * mqr avro encode --schema FILE [--single-object]   JSON datums, one a line -> binary
 * mqr avro decode --schema FILE [--single-object]   back-to-back binary -> JSON lines
 * Bad input: one message on stderr naming what and where, exit 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "mqr/codec.h"

static int read_all(FILE *f, uint8_t **out, size_t *len) {
  size_t cap = 65536, n = 0;
  uint8_t *buf = malloc(cap);
  if (buf == NULL) return -1;
  for (;;) {
    if (n == cap) {
      uint8_t *p = realloc(buf, cap *= 2);
      if (p == NULL) {
        free(buf);
        return -1;
      }
      buf = p;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

static mqr_avro_schema_t *load_schema(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "mqr: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  uint8_t *text;
  size_t len;
  int rc = read_all(f, &text, &len);
  fclose(f);
  if (rc) {
    fprintf(stderr, "mqr: %s: cannot read\n", path);
    return NULL;
  }
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  mqr_error_clear(&err);
  if (mqr_avro_schema_parse((const char *)text, len, &s, &err) != 0) {
    char line[1024];
    snprintf(err.file, sizeof err.file, "%s", path);
    fprintf(stderr, "mqr: %s\n", mqr_error_format(&err, line, sizeof line));
  }
  free(text);
  return s;
}

static int cmd_schema(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "canonical") && strcmp(argv[1], "fingerprint"))) {
    fputs("usage: mqr schema canonical FILE | mqr schema fingerprint FILE\n", stderr);
    return 2;
  }
  mqr_avro_schema_t *s = load_schema(argv[2]);
  if (s == NULL) return 1;
  if (argv[1][0] == 'c') {
    mqr_str_t c = mqr_avro_schema_canonical(s);
    printf("%.*s\n", (int)c.len, c.ptr);
  } else {
    printf("%016llx\n", (unsigned long long)mqr_avro_schema_fingerprint(s));
  }
  mqr_avro_schema_destroy(s);
  return 0;
}

int mqr_cmd_schema(int argc, char **argv) { return cmd_schema(argc, argv); }

typedef struct {
  const char *schema;
  bool single_object;
} avro_opts_t;

static int parse_opts(int argc, char **argv, avro_opts_t *o) {
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--schema") && i + 1 < argc)
      o->schema = argv[++i];
    else if (!strcmp(argv[i], "--single-object"))
      o->single_object = true;
    else
      return -1;
  }
  return o->schema ? 0 : -1;
}

/* JSON datums, one a line, to binary; written only when every line encodes. */
static int encode_stream(const mqr_avro_schema_t *s, bool single, const uint8_t *in, size_t len, mqr_avro_buf_t *out) {
  uint32_t line = 0;
  for (size_t pos = 0; pos < len;) {
    const uint8_t *nl = memchr(in + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - in) : len;
    line++;
    bool blank = true;
    for (size_t i = pos; i < end && blank; i++) blank = in[i] == ' ' || in[i] == '\t' || in[i] == '\r';
    if (!blank) {
      mqr_error_t err;
      mqr_error_clear(&err);
      int rc = single ? mqr_avro_single_object_header(s, out) : 0;
      if (rc) mqr_error_set(&err, rc, "%s", mqr_strerror(rc));
      if (rc || mqr_avro_json_to_binary(s, (const char *)in + pos, end - pos, out, &err) != 0) {
        char msg[1024];
        err.line = line;
        snprintf(err.file, sizeof err.file, "stdin");
        fprintf(stderr, "mqr: %s\n", mqr_error_format(&err, msg, sizeof msg));
        return 1;
      }
    }
    pos = end + 1;
  }
  return 0;
}

/* Back-to-back binary datums to JSON lines; what decoded before an error is written. */
static int decode_stream(const mqr_avro_schema_t *s, bool single, const uint8_t *in, size_t len, mqr_avro_buf_t *out) {
  uint64_t fp = mqr_avro_schema_fingerprint(s);
  for (size_t pos = 0, k = 1; pos < len; k++) {
    size_t start = pos, used;
    mqr_error_t err;
    mqr_error_clear(&err);
    if (single) {
      uint64_t got;
      if (mqr_avro_single_object_fingerprint(in + pos, len - pos, &got, &err) != 0) {
        fprintf(stderr, "mqr: stdin: datum %zu at byte %zu: %s\n", k, pos, err.message);
        return 1;
      }
      if (got != fp) {
        fprintf(stderr, "mqr: stdin: datum %zu at byte %zu: fingerprint %016llx is not the schema's %016llx\n", k, pos,
                (unsigned long long)got, (unsigned long long)fp);
        return 1;
      }
      pos += MQR_AVRO_SINGLE_OBJECT_HEADER;
    }
    if (mqr_avro_binary_to_json(s, in + pos, len - pos, &used, out, &err) != 0) {
      fprintf(stderr, "mqr: stdin: datum %zu starting at byte %zu: %s\n", k, start, err.message);
      return 1;
    }
    pos += used;
    if (mqr_avro_buf_reserve(out, 1) == 0) out->data[out->len++] = '\n';
    if (used == 0 && !single && pos < len) {
      fprintf(stderr, "mqr: stdin: the schema's datums take no bytes; %zu bytes left over\n", len - pos);
      return 1;
    }
  }
  return 0;
}

typedef int (*stream_fn)(const mqr_avro_schema_t *s, bool single, const uint8_t *in, size_t len, mqr_avro_buf_t *out);

/* Reads stdin whole, converts it with fn, writes the result to stdout. */
static int run_stream(const mqr_avro_schema_t *s, bool single, stream_fn fn, bool write_on_error) {
  uint8_t *in;
  size_t len;
  if (read_all(stdin, &in, &len) != 0) {
    fputs("mqr: cannot read stdin\n", stderr);
    return 1;
  }
  mqr_avro_buf_t out;
  mqr_avro_buf_init_growable(&out);
  int rc = fn(s, single, in, len, &out);
  if ((rc == 0 || write_on_error) && fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
  mqr_avro_buf_free(&out);
  free(in);
  return rc;
}

int mqr_cmd_avro(int argc, char **argv) {
  avro_opts_t o = {0};
  if (argc < 2 || parse_opts(argc, argv, &o) != 0 || (strcmp(argv[1], "encode") && strcmp(argv[1], "decode"))) {
    fputs("usage: mqr avro encode --schema FILE [--single-object]\n"
          "       mqr avro decode --schema FILE [--single-object]\n",
          stderr);
    return 2;
  }
  mqr_avro_schema_t *s = load_schema(o.schema);
  if (s == NULL) return 1;
  int rc = argv[1][0] == 'e' ? run_stream(s, o.single_object, encode_stream, false)
                             : run_stream(s, o.single_object, decode_stream, true);
  mqr_avro_schema_destroy(s);
  return rc;
}
