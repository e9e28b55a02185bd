/* The Rust benchmark's Big record (tests/data/avro/schemas/big.avsc) as a C struct with
 * its binding description: shared by the codec's tests and its benchmarks. */
#ifndef MQR_TESTS_BIG_RECORD_H
#define MQR_TESTS_BIG_RECORD_H

#include "mqr/codec.h"

typedef struct {
  mqr_str_t street, city, state_prov, country, zip;
} address_t;
typedef struct {
  mqr_str_t username;
  int32_t age;
  mqr_str_t phone, housenum;
  address_t address;
} user_t;

static const mqr_avro_cfield_t address_fields[] = {{"street", offsetof(address_t, street), &mqr_avro_c_str},
                                                   {"city", offsetof(address_t, city), &mqr_avro_c_str},
                                                   {"state_prov", offsetof(address_t, state_prov), &mqr_avro_c_str},
                                                   {"country", offsetof(address_t, country), &mqr_avro_c_str},
                                                   {"zip", offsetof(address_t, zip), &mqr_avro_c_str}};
static const mqr_avro_ctype_t address_type = {
    MQR_AVRO_C_RECORD, sizeof(address_t), address_fields, 5, NULL, NULL, 0, 0};
static const mqr_avro_cfield_t user_fields[] = {{"username", offsetof(user_t, username), &mqr_avro_c_str},
                                                {"age", offsetof(user_t, age), &mqr_avro_c_int32},
                                                {"phone", offsetof(user_t, phone), &mqr_avro_c_str},
                                                {"housenum", offsetof(user_t, housenum), &mqr_avro_c_str},
                                                {"address", offsetof(user_t, address), &address_type}};
static const mqr_avro_ctype_t user_type = {MQR_AVRO_C_RECORD, sizeof(user_t), user_fields, 5, NULL, NULL, 0, 0};

#endif
