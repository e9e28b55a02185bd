/* Routes one send through an installed mqr: prints "OK q". */
#include <mqr/mqr.h>
#include <stdio.h>

int main(void) {
  mqr_router_t r;
  mqr_queue_t *q, *t[4];
  mqr_queue_config_t cfg;
  if (mqr_router_init(&r, NULL) != 0) return 1;
  mqr_queue_config_init(&cfg, MQR_STR("q"), MQR_STR("a"), MQR_ANYCAST);
  cfg.auto_create_address = true;
  if (mqr_router_add_queue(&r, &cfg, &q, NULL) != 0) return 1;
  mqr_route_request_t req = {MQR_STR("a"), MQR_ANYCAST, {0}, NULL, NULL};
  mqr_route_result_t res = {t, 4, 0, 0, 0, 0, NULL};
  if (mqr_router_route(&r, &req, &res, NULL) != 0 || res.count != 1) return 1;
  mqr_str_t n = mqr_queue_name(res.queues[0]);
  printf("%s %.*s\n", mqr_route_status_name(res.status), (int)n.len, n.ptr);
  mqr_router_close(&r);
  return 0;
}
