/* UTF-8 as the Avro specification's strings and mqr's names require it: shortest forms,
 * no surrogates, nothing past U+10FFFF (RFC 3629). */
#include <string.h>

#include "ascii.h"
#include "mqr/common.h"

size_t mqr_utf8_check(const void *text, size_t n) {
  const uint8_t *p = text;
  size_t i = 0;
  /* ASCII, as most names and values are: eight bytes to a test, the last eight
   * overlapping those before when n is not a multiple */
  if (n >= 8) {
    uint64_t w;
    for (; i + 8 <= n; i += 8) {
      memcpy(&w, p + i, 8);
      if (w & MQR__HIGH_BITS) break;
    }
    if (i + 8 > n) {
      memcpy(&w, p + n - 8, 8);
      if (!(w & MQR__HIGH_BITS)) return n;
    }
  } else if (mqr__ascii16(p, n)) {
    return n;
  }
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF)
      k = 1, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
      k = 2, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
      k = 3, cp = c & 0x07, min = 0x10000;
    else
      return i;
    if (n - i <= k) return i;
    for (size_t j = 1; j <= k; j++) {
      if ((p[i + j] & 0xC0) != 0x80) return i;
      cp = cp << 6 | (p[i + j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
    i += k + 1;
  }
  return n;
}
