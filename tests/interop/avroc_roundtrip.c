/* The Apache Avro C peer for the interop test: reads the schema at argv[1], then frames
 * from stdin (4-byte little-endian length, then one binary datum), reads each datum with
 * Avro C's generic value reader, writes it again with its writer, and prints the bytes.
 * Identical output shows Avro C reads and writes exactly what mqr and Python do. */
#include <avro.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static char *slurp(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  *len = n;
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  FILE *sf = fopen(argv[1], "rb");
  if (sf == NULL) return 2;
  size_t slen, ilen;
  char *sjson = slurp(sf, &slen);
  fclose(sf);
  avro_schema_t schema;
  if (avro_schema_from_json_length(sjson, slen, &schema) != 0) {
    fprintf(stderr, "avro-c: schema: %s\n", avro_strerror());
    return 1;
  }
  avro_value_iface_t *iface = avro_generic_class_from_schema(schema);
  avro_value_t value;
  avro_generic_value_new(iface, &value);
  char *in = slurp(stdin, &ilen);
  static char out[1 << 20];
  for (size_t pos = 0; pos + 4 <= ilen;) {
    uint32_t n = (uint8_t)in[pos] | (uint8_t)in[pos + 1] << 8 | (uint8_t)in[pos + 2] << 16 |
                 (uint32_t)(uint8_t)in[pos + 3] << 24;
    pos += 4;
    if (n > ilen - pos) return 1;
    avro_reader_t r = avro_reader_memory(in + pos, n);
    avro_value_reset(&value);
    if (avro_value_read(r, &value) != 0) {
      fprintf(stderr, "avro-c: read: %s\n", avro_strerror());
      return 1;
    }
    avro_writer_t w = avro_writer_memory(out, sizeof out);
    if (avro_value_write(w, &value) != 0) {
      fprintf(stderr, "avro-c: write: %s\n", avro_strerror());
      return 1;
    }
    fwrite(out, 1, (size_t)avro_writer_tell(w), stdout);
    avro_writer_free(w);
    avro_reader_free(r);
    pos += n;
  }
  avro_value_decref(&value);
  avro_value_iface_decref(iface);
  avro_schema_decref(schema);
  free(in);
  free(sjson);
  return 0;
}
