/* The Parsing Canonical Form of a parsed schema (Avro 1.11, "Parsing Canonical Form for
 * Schemas": [PRIMITIVES] [FULLNAMES] [STRIP] [ORDER] [STRINGS] [INTEGERS] [WHITESPACE])
 * and the CRC-64-AVRO fingerprint taken of it. */
#include <stdio.h>

#include "schema_int.h"

typedef struct {
  char *buf;
  size_t len, cap;
  bool oom;
  mqr__avro_node_t **done; /* named types already written */
  uint32_t n_done, cap_done;
} pcf_t;

static void put(pcf_t *o, const char *s, size_t n) {
  if (o->oom) return;
  if (o->len + n > o->cap) {
    size_t ncap = o->cap ? o->cap * 2 : 256;
    while (ncap < o->len + n) ncap *= 2;
    char *p = mqr_realloc(o->buf, ncap);
    if (p == NULL) {
      o->oom = true;
      return;
    }
    o->buf = p;
    o->cap = ncap;
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
}

static void puts_(pcf_t *o, const char *s) { put(o, s, strlen(s)); }

static void put_quoted(pcf_t *o, mqr_str_t s) {
  put(o, "\"", 1);
  put(o, s.ptr, s.len);
  put(o, "\"", 1);
}

static void pcf(pcf_t *o, mqr__avro_node_t *n) {
  bool named = n->type == MQR_AVRO_RECORD || n->type == MQR_AVRO_ENUM || n->type == MQR_AVRO_FIXED;
  if (named) {
    for (uint32_t i = 0; i < o->n_done; i++)
      if (o->done[i] == n) {
        put_quoted(o, n->fullname);
        return;
      }
    if (o->n_done == o->cap_done) {
      uint32_t ncap = o->cap_done ? o->cap_done * 2 : 16;
      void *p = mqr_realloc(o->done, ncap * sizeof *o->done);
      if (p == NULL) {
        o->oom = true;
        return;
      }
      o->done = p;
      o->cap_done = ncap;
    }
    o->done[o->n_done++] = n;
  }
  char num[24];
  switch (n->type) {
  case MQR_AVRO_RECORD:
    puts_(o, "{\"name\":");
    put_quoted(o, n->fullname);
    puts_(o, ",\"type\":\"record\",\"fields\":[");
    for (uint32_t i = 0; i < n->n; i++) {
      if (i) puts_(o, ",");
      puts_(o, "{\"name\":");
      put_quoted(o, n->fields[i].name);
      puts_(o, ",\"type\":");
      pcf(o, n->fields[i].type);
      puts_(o, "}");
    }
    puts_(o, "]}");
    break;
  case MQR_AVRO_ENUM:
    puts_(o, "{\"name\":");
    put_quoted(o, n->fullname);
    puts_(o, ",\"type\":\"enum\",\"symbols\":[");
    for (uint32_t i = 0; i < n->n; i++) {
      if (i) puts_(o, ",");
      put_quoted(o, n->symbols[i]);
    }
    puts_(o, "]}");
    break;
  case MQR_AVRO_FIXED:
    puts_(o, "{\"name\":");
    put_quoted(o, n->fullname);
    snprintf(num, sizeof num, "%u", n->n);
    puts_(o, ",\"type\":\"fixed\",\"size\":");
    puts_(o, num);
    puts_(o, "}");
    break;
  case MQR_AVRO_ARRAY:
    puts_(o, "{\"type\":\"array\",\"items\":");
    pcf(o, n->items);
    puts_(o, "}");
    break;
  case MQR_AVRO_MAP:
    puts_(o, "{\"type\":\"map\",\"values\":");
    pcf(o, n->items);
    puts_(o, "}");
    break;
  case MQR_AVRO_UNION:
    puts_(o, "[");
    for (uint32_t i = 0; i < n->n; i++) {
      if (i) puts_(o, ",");
      pcf(o, n->branches[i]);
    }
    puts_(o, "]");
    break;
  default: put_quoted(o, mqr_str(mqr__avro_primitive_names[n->type])); break;
  }
}

/* ---- CRC-64-AVRO ------------------------------------------------------------------- */

#define MQR__CRC64_EMPTY 0xc15d213aa4d7a795ull

static uint64_t crc_table[256];

__attribute__((constructor)) static void crc_init(void) {
  for (uint64_t i = 0; i < 256; i++) {
    uint64_t fp = i;
    for (int k = 0; k < 8; k++) fp = (fp >> 1) ^ (MQR__CRC64_EMPTY & (0 - (fp & 1)));
    crc_table[i] = fp;
  }
}

uint64_t mqr_avro_crc64(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t fp = MQR__CRC64_EMPTY;
  for (size_t i = 0; i < n; i++) fp = (fp >> 8) ^ crc_table[(fp ^ b[i]) & 0xff];
  return fp;
}

/* ---- the form of a schema --------------------------------------------------------- */

int mqr__avro_canonical(mqr__arena_t *arena, mqr__avro_node_t *root, mqr_str_t *out) {
  pcf_t o = {0};
  pcf(&o, root);
  char *text = o.oom ? NULL : mqr__arena_strdup(arena, o.buf, o.len);
  mqr_free(o.buf);
  mqr_free(o.done);
  if (text == NULL) return MQR_ENOMEM;
  *out = mqr_str_n(text, o.len);
  return 0;
}
