/* What the blocking wrapper needs of the async client's insides (not installed). */
#ifndef MQR_CLIENT_INT_H
#define MQR_CLIENT_INT_H

#include "mqr/client.h"

int64_t mqr__client_sub_id(const mqr_client_sub_t *s);
mqr_client_sub_t *mqr__client_find_sub(mqr_client_t *c, int64_t id);
/* Whether every queued frame has been handed to the kernel (or the client is closed). */
bool mqr__client_written(const mqr_client_t *c);

#endif
