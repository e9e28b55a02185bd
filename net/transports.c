/* The transports a listener may use; the first is the default. */
#include "net.h"

extern const mqr__transport_t mqr__tcp_transport;

const mqr__transport_t *const mqr__transports[] = {&mqr__tcp_transport, NULL};
