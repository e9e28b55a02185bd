/* Routes one send, looks two addresses up and encodes one Avro datum through an installed
 * mqr: prints "OK q". */
#include <mqr/codec.h>
#include <mqr/mqr.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  mqr_router_t r;
  mqr_queue_t *q, *t[4];
  mqr_queue_config_t cfg;
  if (mqr_router_init(&r, NULL) != 0) return 1;
  mqr_queue_config_init(&cfg, MQR_STR("q"), MQR_STR("a"), MQR_ANYCAST);
  cfg.auto_create_address = true;
  if (mqr_router_add_queue(&r, &cfg, &q, NULL) != 0) return 1;
  mqr_route_request_t req = {MQR_STR("a"), MQR_ANYCAST, {0}, NULL, NULL, NULL};
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  if (mqr_router_route(&r, &req, &res, NULL) != 0 || res.count != 1) return 1;
  /* the lookup inlined from the installed header, and its exported half */
  mqr_routing_set_t ty;
  if (mqr_router_add_address(&r, MQR_STR("orders.eu"), mqr_routing_set_of(MQR_MULTICAST), 0, NULL, NULL) != 0 ||
      mqr_router_find_address_types(&r, MQR_STR("orders.eu"), &ty) == NULL || ty.bits != 1u << MQR_MULTICAST ||
      mqr_router_find_address_types(&r, MQR_STR("a"), &ty) == NULL || ty.bits != 1u << MQR_ANYCAST)
    return 1;
  mqr_str_t n = mqr_queue_name(res.queues[0]);
  printf("%s %.*s\n", mqr_route_status_name(res.status), (int)n.len, n.ptr);
  mqr_router_close(&r);
  const char *schema = "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}";
  mqr_avro_schema_t *s;
  uint8_t out[8];
  mqr_avro_buf_t b;
  mqr_avro_buf_init(&b, out, sizeof out);
  if (mqr_avro_schema_parse(schema, strlen(schema), &s, NULL) != 0) return 1;
  if (mqr_avro_json_to_binary(s, "{\"a\":-2}", 8, &b, NULL) != 0 || b.len != 1 || out[0] != 3) return 1;
  mqr_avro_schema_destroy(s);
  return 0;
}
