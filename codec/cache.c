/* The schema cache: schemas by CRC-64-AVRO fingerprint in an open-addressed table, each
 * parsed once; resolvers by (writer, reader) pair, each compiled once. A schema text
 * seen before is found by its own hash before anything is parsed. */
#include "schema_int.h"

typedef struct {
  uint64_t fingerprint;
  uint64_t text_hash; /* CRC-64 of the text it was added from */
  mqr_avro_schema_t *schema;
} slot_t;

typedef struct pair_s {
  const mqr_avro_schema_t *writer, *reader;
  mqr_avro_resolver_t *res;
  struct pair_s *next;
} pair_t;

struct mqr_avro_cache_s {
  slot_t *slots; /* mask + 1 of them; schema NULL when empty */
  size_t mask, count;
  pair_t *pairs;
};

int mqr_avro_cache_create(mqr_avro_cache_t **out) {
  mqr_avro_cache_t *c = mqr_calloc(1, sizeof *c);
  slot_t *slots = mqr_calloc(16, sizeof *slots);
  if (c == NULL || slots == NULL) {
    mqr_free(c);
    mqr_free(slots);
    return MQR_ENOMEM;
  }
  c->slots = slots;
  c->mask = 15;
  *out = c;
  return 0;
}

void mqr_avro_cache_destroy(mqr_avro_cache_t *c) {
  if (c == NULL) return;
  for (pair_t *p = c->pairs, *next; p; p = next) {
    next = p->next;
    mqr_avro_resolver_destroy(p->res);
    mqr_free(p);
  }
  for (size_t i = 0; i <= c->mask; i++) mqr_avro_schema_destroy(c->slots[i].schema);
  mqr_free(c->slots);
  mqr_free(c);
}

static slot_t *find(const mqr_avro_cache_t *c, uint64_t fp) {
  for (size_t i = (size_t)fp & c->mask;; i = (i + 1) & c->mask) {
    slot_t *s = &c->slots[i];
    if (s->schema == NULL || s->fingerprint == fp) return s;
  }
}

static int grow(mqr_avro_cache_t *c) {
  size_t n = (c->mask + 1) * 2;
  slot_t *slots = mqr_calloc(n, sizeof *slots), *old = c->slots;
  if (slots == NULL) return MQR_ENOMEM;
  size_t old_n = c->mask + 1;
  c->slots = slots;
  c->mask = n - 1;
  for (size_t i = 0; i < old_n; i++)
    if (old[i].schema) *find(c, old[i].fingerprint) = old[i];
  mqr_free(old);
  return 0;
}

const mqr_avro_schema_t *mqr_avro_cache_get(const mqr_avro_cache_t *c, uint64_t fingerprint) {
  return find(c, fingerprint)->schema;
}

size_t mqr_avro_cache_count(const mqr_avro_cache_t *c) { return c->count; }

int mqr_avro_cache_add(mqr_avro_cache_t *c, const char *json, size_t len, const mqr_avro_schema_t **out,
                       mqr_error_t *err) {
  /* The same text again: found without parsing. A different text of a schema already
   * here (other spacing, attributes outside the canonical form) is parsed, and the copy
   * already cached is what the caller gets. */
  uint64_t th = mqr_avro_crc64(json, len);
  for (size_t i = 0; i <= c->mask; i++)
    if (c->slots[i].schema && c->slots[i].text_hash == th && len) {
      *out = c->slots[i].schema;
      return 0;
    }
  mqr_avro_schema_t *s = NULL;
  int rc = mqr_avro_schema_parse(json, len, &s, err);
  if (rc) return rc;
  slot_t *slot = find(c, s->fingerprint);
  if (slot->schema) {
    mqr_avro_schema_destroy(s);
    *out = slot->schema;
    return 0;
  }
  if ((c->count + 1) * 4 > (c->mask + 1) * 3) {
    if (grow(c) != 0) {
      mqr_avro_schema_destroy(s);
      return mqr_error_set(err, MQR_ENOMEM, "out of memory adding a schema to the cache");
    }
    slot = find(c, s->fingerprint);
  }
  *slot = (slot_t){s->fingerprint, th, s};
  c->count++;
  *out = s;
  return 0;
}

int mqr_avro_cache_resolver(mqr_avro_cache_t *c, const mqr_avro_schema_t *writer, const mqr_avro_schema_t *reader,
                            const mqr_avro_resolver_t **out, mqr_error_t *err) {
  for (pair_t *p = c->pairs; p; p = p->next)
    if (p->writer == writer && p->reader == reader) {
      *out = p->res;
      return 0;
    }
  pair_t *p = mqr_calloc(1, sizeof *p);
  if (p == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory adding a resolver to the cache");
  int rc = mqr_avro_resolver_compile(writer, reader, &p->res, err);
  if (rc) {
    mqr_free(p);
    return rc;
  }
  p->writer = writer;
  p->reader = reader;
  p->next = c->pairs;
  c->pairs = p;
  *out = p->res;
  return 0;
}

int mqr_avro_cache_single_object(const mqr_avro_cache_t *c, const uint8_t *in, size_t len,
                                 const mqr_avro_schema_t **writer, mqr_error_t *err) {
  uint64_t fp = 0;
  int rc = mqr_avro_single_object_fingerprint(in, len, &fp, err);
  if (rc) return rc;
  const mqr_avro_schema_t *s = mqr_avro_cache_get(c, fp);
  if (s == NULL) return mqr_error_set(err, MQR_ENOTFOUND, "no schema with fingerprint %016llx", (unsigned long long)fp);
  *writer = s;
  return 0;
}
