/* MQTT 3.1.1 and 5.0 control packets as a server reads them (OASIS MQTT Version 3.1.1 and
 * Version 5.0): the fixed header's remaining length, and each packet a client sends
 * decoded into views of its bytes. Private to the MQTT head (heads/mqtt/).
 *
 * What the specifications make a Malformed Packet or a Protocol Error is refused here
 * with the reason code a 5.0 server sends (0x81, 0x82; 0x84 for a protocol level it does
 * not speak, 0x95 for a packet past the maximum size): reserved flags, a remaining length
 * of more than four bytes, strings that are not UTF-8 or hold U+0000, wildcards in a
 * PUBLISH topic, a property a packet may not carry or one given twice, packet identifier
 * 0, QoS 3, and the rest each packet's section lists. */
#ifndef MQR_BROKER_MQTT_PACKET_H
#define MQR_BROKER_MQTT_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mqr/common.h"

typedef enum {
  MQR__MQTT_CONNECT = 1,
  MQR__MQTT_CONNACK,
  MQR__MQTT_PUBLISH,
  MQR__MQTT_PUBACK,
  MQR__MQTT_PUBREC,
  MQR__MQTT_PUBREL,
  MQR__MQTT_PUBCOMP,
  MQR__MQTT_SUBSCRIBE,
  MQR__MQTT_SUBACK,
  MQR__MQTT_UNSUBSCRIBE,
  MQR__MQTT_UNSUBACK,
  MQR__MQTT_PINGREQ,
  MQR__MQTT_PINGRESP,
  MQR__MQTT_DISCONNECT,
  MQR__MQTT_AUTH
} mqr__mqtt_type_t;

/* 5.0 reason codes the decoder answers with */
#define MQR__MQTT_MALFORMED 0x81
#define MQR__MQTT_PROTOCOL_ERROR 0x82
#define MQR__MQTT_BAD_VERSION 0x84 /* CONNACK: Unsupported Protocol Version */
#define MQR__MQTT_TOO_LARGE 0x95

/* The fixed header of the packet at buf[0..n): 1 and *total (the whole packet's bytes)
 * when it is all there; 0 when more bytes are needed; MQR_EPROTOCOL for a remaining
 * length of more than four bytes, MQR_ELIMIT (*total set) for a packet of more than max
 * bytes, both with err. */
int mqr__mqtt_peek(const uint8_t *buf, size_t n, uint32_t max, size_t *total, mqr_error_t *err);

/* 5.0 properties, as read: have has bit id set for each one present. */
typedef struct {
  uint64_t have;
  uint8_t payload_format, request_problem, request_response;
  uint16_t receive_max, topic_alias_max, topic_alias;
  uint32_t message_expiry, session_expiry, will_delay, max_packet, subscription_id;
  mqr_str_t content_type, response_topic, correlation_data, auth_method, auth_data, reason, server_reference;
  /* a CONNACK's (the server's: written, never read) */
  uint8_t max_qos, retain_available, wildcard_available, sub_id_available, shared_available;
  uint16_t server_keep_alive;
  mqr_str_t assigned_client_id, response_info;
  /* the user properties: n pairs, read with mqr__mqtt_user_next from users */
  const uint8_t *users;
  size_t users_len;
  uint32_t n_users;
} mqr__mqtt_props_t;

#define MQR__MQTT_HAS(p, id) (((p)->have >> (id)) & 1)

/* The next user property after *at (0 to begin) of p: 1 with *k and *v, or 0. */
int mqr__mqtt_user_next(const mqr__mqtt_props_t *p, size_t *at, mqr_str_t *k, mqr_str_t *v);

typedef struct {
  mqr_str_t filter;
  uint8_t qos, retain_handling;
  bool no_local, retain_as_published;
} mqr__mqtt_sub_t;

typedef struct {
  uint8_t level; /* 4: 3.1.1, 5: 5.0 */
  bool clean, will, will_retain, has_user, has_password;
  uint8_t will_qos;
  uint16_t keep_alive;
  mqr_str_t client_id, will_topic, will_payload, user, password;
  mqr__mqtt_props_t will_props;
} mqr__mqtt_connect_t;

typedef struct {
  uint8_t qos;
  bool dup, retain;
  mqr_str_t topic, payload;
} mqr__mqtt_publish_t;

typedef struct {
  mqr__mqtt_type_t type;
  uint8_t flags; /* the fixed header's low four bits */
  uint16_t packet_id;
  uint8_t reason; /* PUBACK..PUBCOMP, DISCONNECT, AUTH (5.0): the reason code sent, else 0 */
  mqr__mqtt_props_t props;
  union {
    mqr__mqtt_connect_t connect;
    mqr__mqtt_publish_t publish;
    struct {
      const uint8_t *list; /* SUBSCRIBE: n entries, read with mqr__mqtt_sub_next; UNSUBSCRIBE: n filters */
      size_t list_len;
      uint32_t n;
    } subs;
  } u;
} mqr__mqtt_packet_t;

/* Decodes the whole packet buf[0..len) (as mqr__mqtt_peek measured it) of a connection
 * speaking level (4 or 5; for CONNECT, which says its own, anything) into *p, views into
 * buf. 0; or MQR_EPROTOCOL with *reason (the 5.0 reason code) and err naming the rule.
 * Only the packets a client sends are taken (a CONNACK, SUBACK, ... is a protocol error). */
int mqr__mqtt_decode(const uint8_t *buf, size_t len, uint8_t level, mqr__mqtt_packet_t *p, uint8_t *reason,
                     mqr_error_t *err);

/* The next entry of a SUBSCRIBE (options) or UNSUBSCRIBE (filter only) after *at (0 to
 * begin): 1 with *s, or 0. The decoder checked them all. */
int mqr__mqtt_sub_next(const mqr__mqtt_packet_t *p, size_t *at, mqr__mqtt_sub_t *s);

/* ---- what the server sends ------------------------------------------------------------------ */

/* Properties to write (5.0): those of props whose bit is set in props->have (user
 * properties and subscription identifiers excepted: they come from the arrays), then
 * n_users user properties, then n_sub_ids subscription identifiers (a PUBLISH to a
 * subscriber). NULL props: none but the arrays'. */
typedef struct {
  const mqr__mqtt_props_t *props;
  const mqr_str_t *user_keys, *user_values;
  uint32_t n_users;
  const uint32_t *sub_ids;
  uint32_t n_sub_ids;
} mqr__mqtt_out_props_t;

/* Each writes the packet (for PUBLISH, all but its payload of payload_len bytes, which
 * the caller writes after it) into out[0..cap) and returns its length; when cap is too
 * small it writes nothing and returns the length it needs. Level 4 writes no reason codes
 * beyond 3.1.1's and no properties. */
size_t mqr__mqtt_put_connack(uint8_t *out, size_t cap, uint8_t level, bool session_present, uint8_t code,
                             const mqr__mqtt_out_props_t *o);
size_t mqr__mqtt_put_publish(uint8_t *out, size_t cap, uint8_t level, const mqr__mqtt_publish_t *m, uint16_t packet_id,
                             size_t payload_len, const mqr__mqtt_out_props_t *o);
/* PUBACK, PUBREC, PUBREL or PUBCOMP: 5.0 omits reason 0 when there are no properties. */
size_t mqr__mqtt_put_ack(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                         uint8_t reason, const mqr__mqtt_out_props_t *o);
/* SUBACK (a code per filter) or UNSUBACK (3.1.1: no codes). */
size_t mqr__mqtt_put_suback(uint8_t *out, size_t cap, uint8_t level, mqr__mqtt_type_t type, uint16_t packet_id,
                            const uint8_t *codes, uint32_t n, const mqr__mqtt_out_props_t *o);
size_t mqr__mqtt_put_pingresp(uint8_t *out, size_t cap);
/* DISCONNECT from the server: 5.0 only. */
size_t mqr__mqtt_put_disconnect(uint8_t *out, size_t cap, uint8_t reason, const mqr__mqtt_out_props_t *o);
size_t mqr__mqtt_put_auth(uint8_t *out, size_t cap, uint8_t reason, const mqr__mqtt_out_props_t *o); /* 5.0 */

#endif
