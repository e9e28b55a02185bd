/* CRC-32C (Castagnoli, polynomial 0x1EDC6F41 reflected as 0x82F63B78): with SSE4.2's crc32
 * instruction where the processor has it (chosen once, at load), else slicing by 8 over
 * eight tables (about a byte per cycle). Both give the same values; the tests check them
 * against the published vectors. */
#include <string.h>

#include "mqr/journal.h"

#define POLY 0x82F63B78u

static uint32_t table[8][256];

static void make_tables(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff], n--;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= crc; /* little-endian: the CRC meets the first four bytes */
    crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
          table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = crc;
  while (n && ((uintptr_t)p & 7)) c = __builtin_ia32_crc32qi((uint32_t)c, *p++), n--;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
  }
  while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
  return (uint32_t)c;
}
#endif

static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t) = crc_soft;

__attribute__((constructor)) static void crc_init(void) {
  make_tables();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) crc_impl = crc_hw;
#endif
}

uint32_t mqr_crc32c(uint32_t crc, const void *p, size_t n) { return ~crc_impl(~crc, p, n); }

/* For the tests: the table-driven path alone, whatever the processor has. */
uint32_t mqr__crc32c_soft(uint32_t crc, const void *p, size_t n);
uint32_t mqr__crc32c_soft(uint32_t crc, const void *p, size_t n) { return ~crc_soft(~crc, p, n); }
