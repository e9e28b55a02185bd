/* cluster/crc.c: libraft's CRC-32 (libiberty's: polynomial 0x04C11DB7, most significant bit
 * first, the caller's initial value, no final xor), eight bytes a step, gives what libraft's
 * own byte-at-a-time byteCrc32 gives, bit for bit: at every length, alignment and initial
 * value; the CRC-32/MPEG-2 check value; and libraft's table (src/byte.c) at its ends. The
 * program's byteCrc32, the one libraft's log code calls, is crc.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crc.h"

unsigned byteCrc32(const void *buf, size_t size, unsigned init); /* libraft's name: crc.c's */

static uint32_t ref_table[256];

/* libraft 0.15's definition, table and loop as src/byte.c has them. */
static uint32_t ref_crc(const void *buf, size_t size, uint32_t crc) {
  const uint8_t *p = buf;
  while (size--) crc = (crc << 8) ^ ref_table[((crc >> 24) ^ *p++) & 255];
  return crc;
}

static int make_ref(void **state) {
  (void)state;
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i << 24;
    for (int k = 0; k < 8; k++) c = (c & 0x80000000u) ? (c << 1) ^ 0x04C11DB7u : c << 1;
    ref_table[i] = c;
  }
  return 0;
}

static void libraft_table(void **state) {
  (void)state;
  /* src/byte.c's byteCrcTable: its first entries and its last */
  assert_int_equal(ref_table[0], 0);
  assert_int_equal(ref_table[1], 0x04c11db7);
  assert_int_equal(ref_table[2], 0x09823b6e);
  assert_int_equal(ref_table[255], 0xb1f740b4);
}

static void check_value(void **state) {
  (void)state;
  assert_int_equal(mqr__crc32_msb("123456789", 9, 0xFFFFFFFFu), 0x0376E6E7); /* CRC-32/MPEG-2 */
  assert_int_equal(ref_crc("123456789", 9, 0xFFFFFFFFu), 0x0376E6E7);
  assert_int_equal(mqr__crc32_msb("", 0, 0x12345678u), 0x12345678u);
}

static void same_as_libraft(void **state) {
  (void)state;
  enum { N = 70000 };
  uint8_t *buf = malloc(N);
  assert_non_null(buf);
  srand(7);
  for (size_t i = 0; i < N; i++) buf[i] = (uint8_t)rand();
  for (size_t len = 0; len <= 64; len++) /* every tail length, at every alignment */
    for (size_t off = 0; off < 8; off++)
      assert_int_equal(mqr__crc32_msb(buf + off, len, (uint32_t)(len * 31 + off)),
                       ref_crc(buf + off, len, (uint32_t)(len * 31 + off)));
  for (int t = 0; t < 200; t++) {
    size_t off = (size_t)rand() % 64, len = (size_t)rand() % (N - 64);
    uint32_t init = (uint32_t)rand() * 2654435761u;
    uint32_t want = ref_crc(buf + off, len, init);
    assert_int_equal(mqr__crc32_msb(buf + off, len, init), want);
    assert_int_equal(byteCrc32(buf + off, len, init), want);
    /* continued in two pieces, as libraft checksums a batch's entries one after another */
    size_t cut = len ? (size_t)rand() % len : 0;
    assert_int_equal(mqr__crc32_msb(buf + off + cut, len - cut, mqr__crc32_msb(buf + off, cut, init)), want);
  }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(libraft_table),
      cmocka_unit_test(check_value),
      cmocka_unit_test(same_as_libraft),
  };
  return cmocka_run_group_tests(tests, make_ref, NULL);
}
