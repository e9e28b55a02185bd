/* Vocabularies (include/mqr/filter.h): one numbering of identifiers for many filters,
 * and one message's values by it. Names live in an open-addressing table (linear
 * probing, at most half full) keyed by a 64-bit FNV-1a hash; the values array keeps
 * every slot NULL between messages, and the slots a message set are listed so that
 * clearing costs what setting did. */
#include <stdlib.h>

#include "mqr/filter.h"

static const char *const header_names[MQR_FILTER_HEADERS] = {
    "AMQPriority", "AMQExpiration", "AMQDurable", "AMQTimestamp", "AMQSize", "AMQUserID", "AMQAddress", "AMQGroupID"};

typedef struct {
  char *name; /* NULL: an empty cell */
  uint32_t len;
  int32_t slot;
  uint64_t hash;
} cell_t;

struct mqr_filter_vocab_s {
  cell_t *cells;
  uint32_t mask;       /* cells - 1; 0 before the first name */
  uint32_t n;          /* property names */
  mqr_value_t *values; /* MQR_FILTER_HEADERS + n of them, capacity cap */
  uint32_t cap;
  uint32_t *set; /* the property slots set for this message */
  uint32_t n_set;
  bool headers_set;
  uint32_t headers; /* named by some filter: 1u << header */
};

static uint64_t hash_of(mqr_str_t s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 0x100000001b3ull;
  return h;
}

const char *mqr_filter_header_name(int header) {
  return header >= 0 && header < MQR_FILTER_HEADERS ? header_names[header] : NULL;
}

int mqr_filter_vocab_create(mqr_filter_vocab_t **out) {
  mqr_filter_vocab_t *v = mqr_calloc(1, sizeof *v);
  if (v == NULL) return MQR_ENOMEM;
  v->cap = MQR_FILTER_HEADERS + 8;
  v->values = mqr_calloc(v->cap, sizeof *v->values);
  v->set = mqr_calloc(8, sizeof *v->set);
  if (v->values == NULL || v->set == NULL) {
    mqr_filter_vocab_free(v);
    return MQR_ENOMEM;
  }
  *out = v;
  return 0;
}

void mqr_filter_vocab_free(mqr_filter_vocab_t *v) {
  if (v == NULL) return;
  for (uint32_t i = 0; v->cells && i <= v->mask; i++) mqr_free(v->cells[i].name);
  mqr_free(v->cells);
  mqr_free(v->values);
  mqr_free(v->set);
  mqr_free(v);
}

static const cell_t *find(const mqr_filter_vocab_t *v, mqr_str_t name, uint64_t h) {
  if (v->cells == NULL) return NULL;
  for (uint32_t i = (uint32_t)h & v->mask;; i = (i + 1) & v->mask) {
    const cell_t *c = &v->cells[i];
    if (c->name == NULL) return NULL;
    if (c->hash == h && c->len == name.len && memcmp(c->name, name.ptr, name.len) == 0) return c;
  }
}

/* Room for one more name: the table at most half full, the values and the set list as
 * long as the slots. */
static int reserve(mqr_filter_vocab_t *v) {
  uint32_t want = MQR_FILTER_HEADERS + v->n + 1;
  if (want > v->cap) {
    uint32_t ncap = v->cap * 2;
    mqr_value_t *nv = mqr_realloc(v->values, ncap * sizeof *nv);
    if (nv == NULL) return MQR_ENOMEM;
    memset(nv + v->cap, 0, (ncap - v->cap) * sizeof *nv);
    v->values = nv;
    uint32_t *ns = mqr_realloc(v->set, ncap * sizeof *ns);
    if (ns == NULL) return MQR_ENOMEM;
    v->set = ns;
    v->cap = ncap;
  }
  if (v->cells == NULL || 2 * (v->n + 1) > v->mask + 1) {
    uint32_t ncells = v->cells ? 2 * (v->mask + 1) : 16;
    cell_t *nc = mqr_calloc(ncells, sizeof *nc);
    if (nc == NULL) return MQR_ENOMEM;
    for (uint32_t i = 0; v->cells && i <= v->mask; i++) {
      if (v->cells[i].name == NULL) continue;
      uint32_t j = (uint32_t)v->cells[i].hash & (ncells - 1);
      while (nc[j].name) j = (j + 1) & (ncells - 1);
      nc[j] = v->cells[i];
    }
    mqr_free(v->cells);
    v->cells = nc;
    v->mask = ncells - 1;
  }
  return 0;
}

int32_t mqr_filter_vocab_resolve(void *vocab, mqr_str_t name) {
  mqr_filter_vocab_t *v = vocab;
  for (int h = 0; h < MQR_FILTER_HEADERS; h++)
    if (strlen(header_names[h]) == name.len && memcmp(header_names[h], name.ptr, name.len) == 0) {
      v->headers |= 1u << h;
      return h;
    }
  uint64_t hash = hash_of(name);
  const cell_t *c = find(v, name, hash);
  if (c) return c->slot;
  if (v->n >= MQR_FILTER_VOCAB_MAX) return MQR_ELIMIT;
  if (reserve(v) != 0) return MQR_ENOMEM;
  char *copy = mqr_malloc(name.len + 1);
  if (copy == NULL) return MQR_ENOMEM;
  memcpy(copy, name.ptr, name.len);
  copy[name.len] = 0;
  uint32_t i = (uint32_t)hash & v->mask;
  while (v->cells[i].name) i = (i + 1) & v->mask;
  int32_t slot = (int32_t)(MQR_FILTER_HEADERS + v->n++);
  v->cells[i] = (cell_t){copy, (uint32_t)name.len, slot, hash};
  return slot;
}

uint32_t mqr_filter_vocab_names(const mqr_filter_vocab_t *v) { return v->n; }

uint32_t mqr_filter_vocab_slots(const mqr_filter_vocab_t *v) { return MQR_FILTER_HEADERS + v->n; }

uint32_t mqr_filter_vocab_headers(const mqr_filter_vocab_t *v) { return v->headers; }

void mqr_filter_vocab_set_header(mqr_filter_vocab_t *v, mqr_filter_header_t h, mqr_value_t value) {
  if ((unsigned)h >= MQR_FILTER_HEADERS) return;
  v->values[h] = value;
  v->headers_set = true;
}

void mqr_filter_vocab_set(mqr_filter_vocab_t *v, mqr_str_t name, mqr_value_t value) {
  if (v->n == 0 || value.type == MQR_VALUE_NULL) return;
  const cell_t *c = find(v, name, hash_of(name));
  if (c == NULL || v->values[c->slot].type != MQR_VALUE_NULL) return;
  v->values[c->slot] = value;
  v->set[v->n_set++] = (uint32_t)c->slot; /* each slot once: at most n */
}

const mqr_value_t *mqr_filter_vocab_values(const mqr_filter_vocab_t *v, uint32_t *n) {
  *n = MQR_FILTER_HEADERS + v->n;
  return v->values;
}

void mqr_filter_vocab_clear(mqr_filter_vocab_t *v) {
  for (uint32_t i = 0; i < v->n_set; i++) v->values[v->set[i]] = mqr_value_null();
  v->n_set = 0;
  if (v->headers_set) {
    for (int h = 0; h < MQR_FILTER_HEADERS; h++) v->values[h] = mqr_value_null();
    v->headers_set = false;
  }
}
