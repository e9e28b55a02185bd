/* A name -> object table: open addressing, linear probing, backward-shift deletion (no
 * tombstones), power-of-two capacity, load kept at or under 3/4.
 *
 * Invariant: every entry sits in the probe run that starts at (hash & mask) and no empty
 * slot lies between that home slot and the entry. A slot is 32 bytes, half a cache line,
 * empty when its object is NULL. It holds the key's digest (its 32-bit hash, its length,
 * and the two words the hash read: for a key of up to 16 bytes those words are the key
 * itself) and two bytes the owner keeps there (the address table: the routing-type set
 * and the flags). So finding a name of up to 16 bytes, and testing what the owner keeps
 * in the slot, reads the slot's line and nothing else; a longer key is compared in full
 * at the object, whose key length is at the table's key_off and bytes at bytes_off. */
#ifndef MQR_ROUTING_TABLE_H
#define MQR_ROUTING_TABLE_H

#include <assert.h>
#include <string.h>

#include "mqr/routing.h"

/* The slot (mqr__slot_t), the hash's last step, the tags and the tag window are in
 * mqr/routing.h: the router's lookup inlines them into its callers. */
static_assert(sizeof(mqr__slot_t) == 32, "a slot is half a cache line");

extern const uint8_t mqr__no_tags[MQR__TAG_WINDOW];

/* A key's digest, computed once and used for every probe. For a key of up to 16 bytes,
 * (len, a, b) is the key: 8 to 16 bytes are its first and last 8, 4 to 7 its first and
 * last 4 (in a), 1 to 3 its first, middle and last byte (in a). Longer keys: the last 16
 * bytes, and the hash covers all of them. */
typedef struct {
  uint64_t hash, a, b;
  const char *ptr;
  size_t len;
} mqr__key_t;

static inline uint64_t mqr__load32(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

#define MQR__COLONS 0x3a3a3a3a3a3a3a3aull

/* True when a byte of w is zero. */
static inline uint64_t mqr__zero_byte(uint64_t w) { return (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull; }

/* The name hash and digest: word at a time, every byte read once, lengths mixed in. Two 8-byte
 * (or overlapping 4-byte) reads cover a name of up to 16 bytes, so a short name costs
 * one multiply. *colon (may be NULL) says whether the name holds a ':' byte; the
 * reads that hash it find out for free. */
__attribute__((always_inline)) static inline mqr__key_t mqr__key_scan(const char *p, size_t n, bool *colon) {
  const char *p0 = p;
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
  /* Up to 16 bytes, one multiply: the length is in seed already, and the fold of the full
   * product mixes every bit of a and b into the low bits (the home slot) and the high
   * byte (the tag). */
  uint64_t h = mqr__mix(a, b, seed);
  if (n > 16) h = mqr__fold(MQR__HK2 ^ (uint64_t)n, h);
  mqr__key_t k = {h, a, b, p0, n};
  return k;
}

static inline mqr__key_t mqr__key(const char *p, size_t n) { return mqr__key_scan(p, n, NULL); }
/* The same, for n <= 16 only: no code for longer keys. */
__attribute__((always_inline)) static inline mqr__key_t mqr__key_short(const char *p, size_t n) {
  if (n > 16) __builtin_unreachable();
  return mqr__key_scan(p, n, NULL);
}
static inline uint64_t mqr__hash(const char *p, size_t n) { return mqr__key_scan(p, n, NULL).hash; }

/* key_off: where each object keeps its mqr_str_t key (its .len is read); bytes_off:
 * where the key's bytes are, from the start of the object. */
void mqr__table_init(mqr__table_t *t, uint32_t key_off, uint32_t bytes_off);
void mqr__table_free(mqr__table_t *t);
/* Makes room for one more entry, so that the next insert cannot fail. 0 or MQR_ENOMEM
 * (table unchanged). */
int mqr__table_reserve(mqr__table_t *t);
/* Inserts val (whose key must be absent) with the owner's two bytes; room must have been
 * reserved. */
void mqr__table_insert(mqr__table_t *t, const mqr__key_t *k, void *val, uint8_t aux0, uint8_t aux1);

/* The object's key is ptr[0, len): the full comparison, for a key over 16 bytes. */
bool mqr__slot_key_is(const mqr__table_t *t, const mqr__slot_t *s, const char *ptr, size_t len);

/* True when slot s holds key k. The digest decides for a key of up to 16 bytes; a longer
 * one, its hash matching too, is compared at the object. */
__attribute__((always_inline)) static inline bool mqr__slot_is(const mqr__table_t *t, const mqr__slot_t *s,
                                                               const mqr__key_t *k) {
  return mqr__slot_digest_eq(s, k->a, k->b, k->len) &&
         (k->len <= 16 || (s->hash == (uint32_t)k->hash && mqr__slot_key_is(t, s, k->ptr, k->len)));
}

/* The whole probe, from the home slot to an empty one. Out of line: the tag window finds
 * nearly every key. */
mqr__slot_t *mqr__table_probe(const mqr__table_t *t, const mqr__key_t *k);

/* The slot holding key k, or NULL. What the window misses (a later candidate, a key past
 * the window, a key that is absent) the full probe settles, with the same digest. */
__attribute__((always_inline)) static inline mqr__slot_t *mqr__table_slot(const mqr__table_t *t, const mqr__key_t *k) {
  mqr__slot_t *s = mqr__table_window(t, k->hash, k->a, k->b, k->len);
  if (s != NULL && (k->len <= 16 || mqr__slot_key_is(t, s, k->ptr, k->len))) return s;
  return mqr__table_probe(t, k);
}

static inline void *mqr__table_find(const mqr__table_t *t, const mqr__key_t *k) {
  const mqr__slot_t *s = mqr__table_slot(t, k);
  return s ? s->val : NULL;
}

/* Removes the entry for key k; returns its value or NULL. */
void *mqr__table_remove(mqr__table_t *t, const mqr__key_t *k);

/* The invariants, for tests: every entry reachable from its home, a tag exactly where
 * an entry is, the first tags repeated past the end, the count right. */
bool mqr__table_check(const mqr__table_t *t);

#endif
