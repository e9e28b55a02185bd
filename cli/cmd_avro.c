/* mqr schema canonical|fingerprint FILE
 * mqr avro encode --schema FILE [--single-object]   JSON datums, one a line -> binary
 * mqr avro decode --schema FILE [--single-object]   back-to-back binary -> JSON lines
 * Bad input: one message on stderr naming what and where, exit 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "mqr/codec.h"

const char mqr_usage_schema[] = "usage: mqr schema canonical FILE | mqr schema fingerprint FILE\n"
                                "  The schema's Parsing Canonical Form, or its CRC-64-AVRO fingerprint (hex).\n";

const char mqr_usage_avro[] =
    "usage: mqr avro encode --schema FILE [--single-object]   (JSON lines on stdin, binary on stdout)\n"
    "       mqr avro decode --schema FILE [--schema FILE]... [--reader-schema FILE] [--single-object]\n"
    "       mqr avro cat [--reader-schema FILE] FILE.avro      (a container's datums as JSON lines)\n"
    "       mqr avro write --schema FILE [--codec null|deflate] FILE.avro   (JSON lines on stdin)\n";

static int read_file(const char *path, uint8_t **out, size_t *len) {
  *out = (uint8_t *)cli_read_file(path, len);
  return *out ? 0 : -1;
}

static mqr_avro_schema_t *load_schema(const char *path) {
  mqr_avro_schema_t *own = NULL;
  return cli_load_schema(path, NULL, &own) ? own : NULL;
}

static int cmd_schema(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "canonical") && strcmp(argv[1], "fingerprint")))
    return cli_usage_error(mqr_usage_schema, NULL);
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
  const char *schemas[16]; /* --schema, in order; the first is the writer */
  int n_schemas;
  const char *reader; /* --reader-schema */
  bool single_object;
} avro_opts_t;

static int parse_opts(int argc, char **argv, avro_opts_t *o) {
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--schema") && i + 1 < argc && o->n_schemas < 16)
      o->schemas[o->n_schemas++] = argv[++i];
    else if (!strcmp(argv[i], "--reader-schema") && i + 1 < argc)
      o->reader = argv[++i];
    else if (!strcmp(argv[i], "--single-object"))
      o->single_object = true;
    else
      return -1;
  }
  return o->n_schemas ? 0 : -1;
}

/* What a stream is converted with. */
typedef struct {
  mqr_avro_cache_t *cache;
  const mqr_avro_schema_t *schema; /* the first --schema: the writer's */
  const mqr_avro_schema_t *reader; /* --reader-schema, or NULL */
  bool single;
  mqr_avro_file_writer_t *file; /* encode: each datum goes here instead of to out */
} avro_ctx_t;

/* JSON datums, one a line, to binary; written only when every line encodes. */
static int encode_stream(const avro_ctx_t *x, const uint8_t *in, size_t len, mqr_avro_buf_t *out) {
  const mqr_avro_schema_t *s = x->schema;
  bool single = x->single;
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
      if (x->file) {
        if (mqr_avro_file_append(x->file, out->data, out->len, &err) != 0) {
          fprintf(stderr, "mqr: %s\n", err.message);
          return 1;
        }
        out->len = 0;
      }
    }
    pos = end + 1;
  }
  return 0;
}

/* Back-to-back binary datums to JSON lines; what decoded before an error is written.
 * Single-object datums find their writer among the --schema files by fingerprint; with a
 * reader schema each datum is resolved to it first. */
static int decode_stream(const avro_ctx_t *x, const uint8_t *in, size_t len, mqr_avro_buf_t *out) {
  mqr_avro_buf_t resolved;
  mqr_avro_buf_init_growable(&resolved);
  int rc = 0;
  for (size_t pos = 0, k = 1; pos < len && rc == 0; k++) {
    size_t start = pos, used = 0;
    const mqr_avro_schema_t *w = x->schema;
    mqr_error_t err;
    mqr_error_clear(&err);
    if (x->single) {
      if (mqr_avro_cache_single_object(x->cache, in + pos, len - pos, &w, &err) != 0) {
        fprintf(stderr, "mqr: stdin: datum %zu at byte %zu: %s\n", k, pos, err.message);
        rc = 1;
        break;
      }
      pos += MQR_AVRO_SINGLE_OBJECT_HEADER;
    }
    const mqr_avro_resolver_t *res = NULL;
    if (x->reader && mqr_avro_cache_resolver(x->cache, w, x->reader, &res, &err) != 0) {
      fprintf(stderr, "mqr: the reader schema cannot read datum %zu's writer schema: %s\n", k, err.message);
      rc = 1;
      break;
    }
    resolved.len = 0;
    int drc = res ? mqr_avro_resolve(res, in + pos, len - pos, &used, &resolved, &err)
                  : mqr_avro_binary_to_json(w, in + pos, len - pos, &used, out, &err);
    if (drc == 0 && res) drc = mqr_avro_binary_to_json(x->reader, resolved.data, resolved.len, NULL, out, &err);
    if (drc != 0) {
      fprintf(stderr, "mqr: stdin: datum %zu starting at byte %zu: %s\n", k, start, err.message);
      rc = 1;
      break;
    }
    pos += used;
    if (mqr_avro_buf_reserve(out, 1) == 0) out->data[out->len++] = '\n';
    if (used == 0 && !x->single && pos < len) {
      fprintf(stderr, "mqr: stdin: the schema's datums take no bytes; %zu bytes left over\n", len - pos);
      rc = 1;
    }
  }
  mqr_avro_buf_free(&resolved);
  return rc;
}

typedef int (*stream_fn)(const avro_ctx_t *x, const uint8_t *in, size_t len, mqr_avro_buf_t *out);

/* Reads stdin whole, converts it with fn, writes the result to stdout. */
static int run_stream(const avro_ctx_t *x, stream_fn fn, bool write_on_error) {
  uint8_t *in;
  size_t len;
  if (cli_read_all(stdin, &in, &len) != 0) {
    return cli_error("cannot read stdin");
  }
  mqr_avro_buf_t out;
  mqr_avro_buf_init_growable(&out);
  int rc = fn(x, in, len, &out);
  if ((rc == 0 || write_on_error) && fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
  mqr_avro_buf_free(&out);
  free(in);
  return rc;
}

static int avro_usage(void) { return cli_usage_error(mqr_usage_avro, NULL); }

/* mqr avro cat [--reader-schema FILE] FILE.avro: the container's datums as JSON lines.
 * What decoded before an error is written. */
static int cmd_avro_cat(int argc, char **argv) {
  const char *path = NULL, *reader_path = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--reader-schema") && i + 1 < argc)
      reader_path = argv[++i];
    else if (path == NULL && argv[i][0] != '-')
      path = argv[i];
    else
      return avro_usage();
  }
  if (path == NULL) return avro_usage();
  uint8_t *data;
  size_t len;
  if (read_file(path, &data, &len) != 0) return 1;
  int rc;
  mqr_avro_schema_t *reader = reader_path ? load_schema(reader_path) : NULL;
  mqr_avro_file_reader_t *fr = NULL;
  mqr_avro_resolver_t *res = NULL;
  mqr_avro_buf_t out, resolved;
  mqr_avro_buf_init_growable(&out);
  mqr_avro_buf_init_growable(&resolved);
  mqr_error_t err;
  mqr_error_clear(&err);
  rc = reader_path && reader == NULL ? 1 : 0;
  if (rc == 0 && mqr_avro_file_reader_open(data, len, &fr, &err) != 0) {
    fprintf(stderr, "mqr: %s: %s\n", path, err.message);
    rc = 1;
  }
  if (rc == 0 && reader && mqr_avro_resolver_compile(mqr_avro_file_reader_schema(fr), reader, &res, &err) != 0) {
    fprintf(stderr, "mqr: %s: the reader schema cannot read this file: %s\n", reader_path, err.message);
    rc = 1;
  }
  const uint8_t *datum;
  size_t n;
  int more = 0;
  while (rc == 0 && (more = mqr_avro_file_next(fr, &datum, &n, &err)) == 1) {
    const mqr_avro_schema_t *s = mqr_avro_file_reader_schema(fr);
    resolved.len = 0;
    if (res && mqr_avro_resolve(res, datum, n, NULL, &resolved, &err) == 0) {
      datum = resolved.data;
      n = resolved.len;
      s = reader;
    } else if (res) {
      more = err.code ? err.code : MQR_EBADDATA;
      break;
    }
    if ((more = mqr_avro_binary_to_json(s, datum, n, NULL, &out, &err)) != 0) break;
    if (mqr_avro_buf_reserve(&out, 1) == 0) out.data[out.len++] = '\n';
  }
  if (rc == 0 && more < 0) {
    fprintf(stderr, "mqr: %s: %s\n", path, err.message);
    rc = 1;
  }
  if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) rc = 1;
  mqr_avro_buf_free(&out);
  mqr_avro_buf_free(&resolved);
  mqr_avro_resolver_destroy(res);
  mqr_avro_file_reader_close(fr);
  mqr_avro_schema_destroy(reader);
  free(data);
  return rc;
}

/* mqr avro write --schema FILE [--codec null|deflate] FILE.avro: JSON datums, one a line
 * on stdin, into a container file. Nothing is left behind when a line fails. */
static int cmd_avro_write(int argc, char **argv) {
  const char *schema_path = NULL, *path = NULL;
  mqr_avro_file_options_t opt = {0};
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--schema") && i + 1 < argc) {
      schema_path = argv[++i];
    } else if (!strcmp(argv[i], "--codec") && i + 1 < argc) {
      const char *c = argv[++i];
      if (!strcmp(c, "deflate"))
        opt.codec = MQR_AVRO_FILE_DEFLATE;
      else if (strcmp(c, "null"))
        return avro_usage();
    } else if (path == NULL && argv[i][0] != '-') {
      path = argv[i];
    } else {
      return avro_usage();
    }
  }
  if (schema_path == NULL || path == NULL) return avro_usage();
  mqr_avro_schema_t *s = load_schema(schema_path);
  if (s == NULL) return 1;
  avro_ctx_t x = {.schema = s};
  uint8_t *in = NULL;
  size_t len = 0;
  mqr_avro_buf_t bin;
  mqr_avro_buf_init_growable(&bin);
  mqr_error_t err;
  mqr_error_clear(&err);
  int rc = cli_read_all(stdin, &in, &len) == 0 ? 0 : 1;
  if (rc) cli_error("cannot read stdin");
  FILE *f = rc == 0 ? fopen(path, "wb") : NULL;
  if (rc == 0 && f == NULL) {
    fprintf(stderr, "mqr: %s: %s\n", path, strerror(errno));
    rc = 1;
  }
  if (rc == 0 && mqr_avro_file_writer_create(s, &opt, mqr_avro_write_stdio, f, &x.file, &err) != 0) {
    fprintf(stderr, "mqr: %s: %s\n", path, err.message);
    rc = 1;
  }
  if (rc == 0) rc = encode_stream(&x, in, len, &bin);
  if (x.file && mqr_avro_file_writer_close(x.file, &err) != 0 && rc == 0) {
    fprintf(stderr, "mqr: %s: %s\n", path, err.message);
    rc = 1;
  }
  if (f && fclose(f) != 0) rc = 1;
  if (rc && f) remove(path);
  mqr_avro_buf_free(&bin);
  free(in);
  mqr_avro_schema_destroy(s);
  return rc;
}

int mqr_cmd_avro(int argc, char **argv) {
  avro_opts_t o = {0};
  if (argc < 2) return avro_usage();
  if (!strcmp(argv[1], "cat")) return cmd_avro_cat(argc, argv);
  if (!strcmp(argv[1], "write")) return cmd_avro_write(argc, argv);
  bool encode = !strcmp(argv[1], "encode");
  if (parse_opts(argc, argv, &o) != 0 || (!encode && strcmp(argv[1], "decode")) ||
      (encode && (o.n_schemas != 1 || o.reader)) || (!o.single_object && o.n_schemas != 1))
    return avro_usage();
  avro_ctx_t x = {.single = o.single_object};
  if (mqr_avro_cache_create(&x.cache) != 0) {
    return cli_error("out of memory");
  }
  int rc = 0;
  for (int i = 0; i < o.n_schemas && rc == 0; i++) {
    const mqr_avro_schema_t *s = cli_load_schema(o.schemas[i], x.cache, NULL);
    if (s == NULL) rc = 1;
    if (i == 0) x.schema = s;
  }
  if (rc == 0 && o.reader && (x.reader = cli_load_schema(o.reader, x.cache, NULL)) == NULL) rc = 1;
  if (rc == 0) rc = encode ? run_stream(&x, encode_stream, false) : run_stream(&x, decode_stream, true);
  mqr_avro_cache_destroy(x.cache);
  return rc;
}
