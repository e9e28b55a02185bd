/* Whether a short run of bytes is all ASCII, tested a word at a time: what the UTF-8
 * check (utf8.c) and the broker's send path (which checks most property keys and values,
 * short and ASCII, without a call) share. Private to mqr's sources. */
#ifndef MQR_COMMON_ASCII_H
#define MQR_COMMON_ASCII_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MQR__HIGH_BITS 0x8080808080808080ull /* the top bit of each byte of a word */

/* p[0..n), n at most 16: all below 0x80. Two overlapping loads from each end. */
static inline bool mqr__ascii16(const void *text, size_t n) {
  const uint8_t *p = text;
  uint64_t a = 0, b = 0;
  if (n >= 8) {
    memcpy(&a, p, 8);
    memcpy(&b, p + n - 8, 8);
  } else if (n >= 4) {
    uint32_t x, y;
    memcpy(&x, p, 4);
    memcpy(&y, p + n - 4, 4);
    a = x, b = y;
  } else if (n) {
    a = (uint64_t)(p[0] | p[n / 2] | p[n - 1]);
  }
  return !((a | b) & MQR__HIGH_BITS);
}

#endif
