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

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The table. */
typedef struct {
  void *slots;   /* 32-byte aligned, inside mem */
  uint8_t *tags; /* one byte per slot, then the first 15 again; inside mem */
  void *mem;
  uint32_t mask;
  uint32_t count;
  uint32_t key_off, bytes_off;
} mqr__table_t;

/* A slot: half a cache line, empty when val is NULL. (len, a, b) is the key's digest: for
 * a key of up to 16 bytes, the key itself (routing/table.h, mqr__key_scan). */
typedef struct {
  uint64_t a, b;
  void *val;
  uint32_t hash; /* the low half of the key's hash */
  uint16_t len;  /* the key's length: keys are at most 65535 bytes */
  uint8_t aux[2];
} mqr__slot_t;

#define MQR__TAG_WINDOW 16u
#define MQR__AUX_TYPES 0 /* the address table's owner bytes: the routing-type set's bits */
#define MQR__AUX_FLAGS 1 /* and the MQR_ADDRESS_* flags */

#define MQR__HK0 0x9e3779b97f4a7c15ull /* 2^64 / golden ratio */
#define MQR__HK1 0xc2b2ae3d27d4eb4full
#define MQR__HK2 0x165667b19e3779f9ull

static inline uint64_t mqr__load64(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* 64x64 -> 128-bit multiply, folded: the mixing step of the hash. */
static inline uint64_t mqr__fold(uint64_t a, uint64_t b) {
  __uint128_t r = (__uint128_t)a * b;
  return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* The hash's last step, over the two words of a key's digest: for a key of up to 16
 * bytes, seed is MQR__HK0 ^ its length and this is the whole hash (mqr__key_scan). */
static inline uint64_t mqr__mix(uint64_t a, uint64_t b, uint64_t seed) { return mqr__fold(a ^ MQR__HK1, b ^ seed); }

/* True when slot s has the digest (len, a, b). a and b are tested first and the length
 * apart: fewer instructions on the lookup's dependent chain than one test of the hash and
 * all three. */
__attribute__((always_inline)) static inline bool mqr__slot_digest_eq(const mqr__slot_t *s, uint64_t a, uint64_t b,
                                                                      size_t len) {
  return ((s->a ^ a) | (s->b ^ b)) == 0 && s->len == len;
}

/* A slot's tag: 7 bits of the hash the slot does not keep, and the high bit, so never 0
 * (an empty slot's) with no test. A false candidate in 128 tags instead of 255 is nearly
 * always past the key, so it costs nothing. */
static inline uint8_t mqr__tag(uint64_t hash) { return (uint8_t)(hash >> 57 | 0x80); }

/* Which of the 16 tags from p are mqr__tag(hash): bit j for p[j]. The tag is spread over
 * a 32-bit word by a multiply, its high bits or-ed in after, then over the vector by one
 * shuffle. */
static inline unsigned mqr__tag_match(const uint8_t *p, uint64_t hash) {
  uint32_t tags4 = (uint32_t)(hash >> 57) * 0x01010101u | 0x80808080u; /* mqr__tag(hash) in each byte */
#ifdef __SSE2__
  __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
  return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi32((int)tags4)));
#else
  unsigned m = 0;
  for (unsigned j = 0; j < MQR__TAG_WINDOW; j++) m |= (unsigned)(p[j] == (uint8_t)tags4) << j;
  return m;
#endif
}

/* The first candidate of the tag window whose digest is (len, a, b): the 16 tags from the
 * home slot are compared at once, so a key within 15 slots of its home (all but a few in a
 * thousand, at the table's load) is found with no branch that depends on where it sits,
 * and the candidates are nearly always one. For a key of up to 16 bytes the slot holds
 * it; a longer one is still to be compared in full. NULL says nothing: the full probe
 * decides. No call, so a caller's fast path stays a leaf. The first 15 tags are repeated
 * past the last, so a window near the end sees the run that wraps round. */
__attribute__((always_inline)) static inline mqr__slot_t *mqr__table_window(const mqr__table_t *t, uint64_t hash,
                                                                            uint64_t a, uint64_t b, size_t len) {
  uint32_t i = (uint32_t)hash & t->mask;
  /* The slot's line, while the tags load (in integers: a table without slots has none). */
  __builtin_prefetch((const void *)((uintptr_t)t->slots + (uintptr_t)i * sizeof(mqr__slot_t)));
  unsigned m = mqr__tag_match(t->tags + i, hash);
  if (m == 0) return NULL;
  mqr__slot_t *s = (mqr__slot_t *)t->slots + ((i + (unsigned)__builtin_ctz(m)) & t->mask);
  return mqr__slot_digest_eq(s, a, b, len) ? s : NULL;
}

static_assert(sizeof(mqr__slot_t) == 32 || sizeof(void *) != 8, "a slot is half a cache line");

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
