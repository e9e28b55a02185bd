/* The floor of avro.small.encode: the Small record's encoding (a length byte, then the
 * string's bytes) written by hand, the least code that writes the same bytes behind the
 * same kind of call as mqr_avro_encode, with the same room check. Strings under 64 bytes
 * only (one length byte). In a translation unit of its own, as a library's encoder is,
 * so that the compiler cannot fit its calling convention to the loop that calls it. */
#include <string.h>

#include "mqr/codec.h"

int mqr_bench_floor_encode(const mqr_str_t *field, mqr_avro_buf_t *out);

int mqr_bench_floor_encode(const mqr_str_t *field, mqr_avro_buf_t *out) {
  size_t n = field->len;
  if (n >= 64 || out->data == NULL || out->cap - out->len < n + 1) return -1;
  uint8_t *p = out->data + out->len;
  const char *src = field->ptr;
  *p++ = (uint8_t)(n << 1);
  if (n >= 8) {
    for (size_t k = 0; k + 8 < n; k += 8) memcpy(p + k, src + k, 8);
    memcpy(p + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    memcpy(p, src, 4);
    memcpy(p + n - 4, src + n - 4, 4);
  } else if (n) {
    p[0] = (uint8_t)src[0];
    p[n / 2] = (uint8_t)src[n / 2];
    p[n - 1] = (uint8_t)src[n - 1];
  }
  out->len += n + 1;
  return 0;
}
