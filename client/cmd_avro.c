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

static int encode_stream(const mqr_avro_schema_t *s, bool single) {
  uint8_t *in;
  size_t len;
  if (read_all(stdin, &in, &len) != 0) {
    fputs("mqr: cannot read stdin\n", stderr);
    return 1;
  }
  mqr_avro_buf_t out;
  mqr_avro_buf_init_growable(&out);
  uint64_t fp = mqr_avro_schema_fingerprint(s);
  int rc = 0;
  uint32_t line = 0;
  for (size_t pos = 0; pos < len && rc == 0;) {
    const uint8_t *nl = memchr(in + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - in) : len;
    line++;
    bool blank = true;
    for (size_t i = pos; i < end && blank; i++) blank = in[i] == ' ' || in[i] == '\t' || in[i] == '\r';
    if (!blank) {
      if (single) {
        uint8_t hdr[10] = {0xC3, 0x01};
        for (int i = 0; i < 8; i++) hdr[2 + i] = (uint8_t)(fp >> (8 * i));
        if (mqr_avro_buf_reserve(&out, 10) == 0) {
          memcpy(out.data + out.len, hdr, 10);
          out.len += 10;
        }
      }
      mqr_error_t err;
      mqr_error_clear(&err);
      if (mqr_avro_json_to_binary(s, (const char *)in + pos, end - pos, &out, &err) != 0) {
        char msg[1024];
        err.line = line;
        snprintf(err.file, sizeof err.file, "stdin");
        fprintf(stderr, "mqr: %s\n", mqr_error_format(&err, msg, sizeof msg));
        rc = 1;
      }
    }
    pos = end + 1;
  }
  if (rc == 0 && fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
  mqr_avro_buf_free(&out);
  free(in);
  return rc;
}

static int decode_stream(const mqr_avro_schema_t *s, bool single) {
  uint8_t *in;
  size_t len;
  if (read_all(stdin, &in, &len) != 0) {
    fputs("mqr: cannot read stdin\n", stderr);
    return 1;
  }
  mqr_avro_buf_t out;
  mqr_avro_buf_init_growable(&out);
  uint64_t fp = mqr_avro_schema_fingerprint(s);
  int rc = 0;
  for (size_t pos = 0, k = 1; pos < len && rc == 0; k++) {
    size_t start = pos;
    if (single) {
      if (len - pos < 10 || in[pos] != 0xC3 || in[pos + 1] != 0x01) {
        fprintf(stderr, "mqr: stdin: datum %zu at byte %zu: no single-object header (C3 01 + fingerprint)\n", k, pos);
        rc = 1;
        break;
      }
      uint64_t got = 0;
      for (int i = 0; i < 8; i++) got |= (uint64_t)in[pos + 2 + i] << (8 * i);
      if (got != fp) {
        fprintf(stderr, "mqr: stdin: datum %zu at byte %zu: fingerprint %016llx is not the schema's %016llx\n", k, pos,
                (unsigned long long)got, (unsigned long long)fp);
        rc = 1;
        break;
      }
      pos += 10;
    }
    size_t used;
    mqr_error_t err;
    mqr_error_clear(&err);
    if (mqr_avro_binary_to_json(s, in + pos, len - pos, &used, &out, &err) != 0) {
      fprintf(stderr, "mqr: stdin: datum %zu starting at byte %zu: %s\n", k, start, err.message);
      rc = 1;
      break;
    }
    pos += used;
    if (mqr_avro_buf_reserve(&out, 1) == 0) out.data[out.len++] = '\n';
    if (used == 0 && !single && pos < len) {
      fprintf(stderr, "mqr: stdin: the schema's datums take no bytes; %zu bytes left over\n", len - pos);
      rc = 1;
    }
  }
  if (fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
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
  int rc = argv[1][0] == 'e' ? encode_stream(s, o.single_object) : decode_stream(s, o.single_object);
  mqr_avro_schema_destroy(s);
  return rc;
}
