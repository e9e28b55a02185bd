/* The transports a listener may use; the first is the default. */
#include "net.h"

extern const mqr__transport_t mqr__tcp_transport, mqr__tls_transport;

const mqr__transport_t *const mqr__transports[] = {&mqr__tcp_transport, &mqr__tls_transport, NULL};

const mqr__transport_t *mqr__transport_named(const char *name) {
  for (const mqr__transport_t *const *t = mqr__transports; *t; t++)
    if (strcmp((*t)->name, name) == 0) return *t;
  return NULL;
}
