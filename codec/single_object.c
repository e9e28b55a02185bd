/* Single-object encoding's header (Avro 1.11 specification): the two marker bytes C3 01
 * and the CRC-64-AVRO fingerprint of the writer schema, little-endian. */
#include "mqr/codec.h"

int mqr_avro_single_object_header(const mqr_avro_schema_t *s, mqr_avro_buf_t *out) {
  int rc = mqr_avro_buf_reserve(out, MQR_AVRO_SINGLE_OBJECT_HEADER);
  if (rc) return rc;
  uint8_t *p = out->data + out->len;
  uint64_t fp = mqr_avro_schema_fingerprint(s);
  p[0] = 0xC3;
  p[1] = 0x01;
  for (int i = 0; i < 8; i++) p[2 + i] = (uint8_t)(fp >> (8 * i));
  out->len += MQR_AVRO_SINGLE_OBJECT_HEADER;
  return 0;
}

int mqr_avro_single_object_fingerprint(const uint8_t *in, size_t len, uint64_t *fingerprint, mqr_error_t *err) {
  if (len < MQR_AVRO_SINGLE_OBJECT_HEADER)
    return mqr_error_set(err, MQR_ETRUNCATED, "%zu bytes are too few for a single-object header", len);
  if (in[0] != 0xC3 || in[1] != 0x01)
    return mqr_error_set(err, MQR_EBADDATA, "no single-object header (C3 01 + fingerprint)");
  uint64_t fp = 0;
  for (int i = 0; i < 8; i++) fp |= (uint64_t)in[2 + i] << (8 * i);
  *fingerprint = fp;
  return 0;
}
