/* The protocol heads on the connection layer (net/net.h), in the order their sniff ops
 * are asked about a connection's first bytes when its listener takes several. */
#include "../net/net.h"

extern const mqr__head_t mqr__native_head, mqr__mqtt_head, mqr__stomp_head;

const mqr__head_t *const mqr__heads[] = {&mqr__native_head, &mqr__mqtt_head, &mqr__stomp_head, NULL};
