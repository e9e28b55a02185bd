/* The protocol heads on the connection layer (net/net.h), in the order their sniff ops
 * are asked about a connection's first bytes when its listener takes several. */
#include "../net/net.h"

extern const mqr__head_t mqr__native_head, mqr__mqtt_head, mqr__stomp_head, mqr__http_head, mqr__amqp_head;

const mqr__head_t *const mqr__heads[] = {&mqr__native_head, &mqr__mqtt_head, &mqr__stomp_head,
                                         &mqr__http_head,   &mqr__amqp_head, NULL};

int mqr_broker_register_protocols(void) {
  int rc = 0;
  for (const mqr__head_t *const *h = mqr__heads; *h && rc == 0; h++) rc = mqr_config_register_protocol((*h)->def);
  return rc;
}
