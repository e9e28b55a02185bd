/* A name -> object table: open addressing, linear probing, backward-shift deletion (no
 * tombstones), power-of-two capacity, load kept at or under 3/4.
 *
 * Invariant: every entry sits in the probe run that starts at (hash & mask) and no empty
 * slot lies between that home slot and the entry. A slot is 16 bytes, {hash, object};
 * empty when the object is NULL. Each object carries its key's length in an mqr_str_t at
 * the table's key_off and the key's bytes at bytes_off, both offsets into the object, so a
 * probe compares the 64-bit hash in the slot first and, on a match, loads the length and
 * the bytes in parallel: their addresses are known without reading a pointer. */
#ifndef MQR_ROUTING_TABLE_H
#define MQR_ROUTING_TABLE_H

#include "mqr/routing.h"

typedef struct {
  uint64_t hash;
  void *val;
} mqr__slot_t;

static inline uint64_t mqr__load64(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline uint64_t mqr__load32(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* 64x64 -> 128-bit multiply, folded: the mixing step of the hash. */
static inline uint64_t mqr__fold(uint64_t a, uint64_t b) {
  __uint128_t r = (__uint128_t)a * b;
  return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define MQR__HK0 0x9e3779b97f4a7c15ull /* 2^64 / golden ratio */
#define MQR__HK1 0xc2b2ae3d27d4eb4full
#define MQR__HK2 0x165667b19e3779f9ull
#define MQR__COLONS 0x3a3a3a3a3a3a3a3aull

/* True when a byte of w is zero. */
static inline uint64_t mqr__zero_byte(uint64_t w) { return (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull; }

/* The name hash: word at a time, every byte read once, lengths mixed in. Two 8-byte
 * (or overlapping 4-byte) reads cover a name of up to 16 bytes, so a short name costs
 * two multiplies. *colon (may be NULL) says whether the name holds a ':' byte; the
 * reads that hash it find out for free. */
__attribute__((always_inline)) static inline uint64_t mqr__hash_scan(const char *p, size_t n, bool *colon) {
  uint64_t a, b, seed = MQR__HK0 ^ (uint64_t)n, c = 0;
  if (n <= 16) {
    if (n >= 8) {
      a = mqr__load64(p);
      b = mqr__load64(p + n - 8);
    } else if (n >= 4) {
      a = mqr__load32(p) << 32 | mqr__load32(p + n - 4);
      b = 0;
    } else if (n > 0) {
      a = (uint64_t)(uint8_t)p[0] << 16 | (uint64_t)(uint8_t)p[n >> 1] << 8 | (uint8_t)p[n - 1];
      b = 0;
    } else {
      a = b = 0;
    }
    c = mqr__zero_byte(a ^ MQR__COLONS) | (n >= 8 ? mqr__zero_byte(b ^ MQR__COLONS) : 0);
    if (n > 0 && n < 4) c = p[0] == ':' || p[n >> 1] == ':' || p[n - 1] == ':';
  } else {
    size_t i = n;
    for (; i > 16; i -= 16, p += 16) {
      uint64_t w0 = mqr__load64(p), w1 = mqr__load64(p + 8);
      c |= mqr__zero_byte(w0 ^ MQR__COLONS) | mqr__zero_byte(w1 ^ MQR__COLONS);
      seed = mqr__fold(w0 ^ MQR__HK1, w1 ^ seed);
    }
    a = mqr__load64(p + i - 16);
    b = mqr__load64(p + i - 8);
    c |= mqr__zero_byte(a ^ MQR__COLONS) | mqr__zero_byte(b ^ MQR__COLONS);
  }
  if (colon) *colon = c != 0;
  return mqr__fold(MQR__HK2 ^ (uint64_t)n, mqr__fold(a ^ MQR__HK1, b ^ seed));
}

static inline uint64_t mqr__hash(const char *p, size_t n) { return mqr__hash_scan(p, n, NULL); }

/* Equality of two keys of length n, without a call for short ones. */
static inline bool mqr__key_eq(const char *a, const char *b, size_t n) {
  if (n >= 8 && n <= 16) return mqr__load64(a) == mqr__load64(b) && mqr__load64(a + n - 8) == mqr__load64(b + n - 8);
  if (n >= 4 && n < 8) return mqr__load32(a) == mqr__load32(b) && mqr__load32(a + n - 4) == mqr__load32(b + n - 4);
  return memcmp(a, b, n) == 0;
}

/* key_off: where each object keeps its mqr_str_t key (its .len is read); bytes_off:
 * where the key's bytes are, from the start of the object. */
void mqr__table_init(mqr__table_t *t, uint32_t key_off, uint32_t bytes_off);
void mqr__table_free(mqr__table_t *t);
/* Makes room for one more entry, so that the next insert cannot fail. 0 or MQR_ENOMEM
 * (table unchanged). */
int mqr__table_reserve(mqr__table_t *t);
/* Inserts val (whose key must be absent); room must have been reserved. */
void mqr__table_insert(mqr__table_t *t, uint64_t hash, void *val);

static inline bool mqr__table_key_is(const mqr__table_t *t, const void *val, const char *key, size_t len) {
  const mqr_str_t *k = (const mqr_str_t *)((const char *)val + t->key_off);
  return k->len == len && mqr__key_eq((const char *)val + t->bytes_off, key, len);
}

static inline void *mqr__table_find(const mqr__table_t *t, uint64_t hash, const char *key, size_t len) {
  if (t->count == 0) return NULL;
  const mqr__slot_t *s = t->slots;
  for (uint32_t i = (uint32_t)hash & t->mask;; i = (i + 1) & t->mask) {
    if (s[i].val == NULL) return NULL;
    if (s[i].hash == hash && mqr__table_key_is(t, s[i].val, key, len)) return s[i].val;
  }
}

/* Removes the entry for key; returns its value or NULL. */
void *mqr__table_remove(mqr__table_t *t, uint64_t hash, const char *key, size_t len);

#endif
