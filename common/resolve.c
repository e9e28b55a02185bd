/* Host names to socket addresses (mqr/common.h): an IP literal read as it is, a name
 * looked up with getaddrinfo(3), as a container's service name or a host in /etc/hosts
 * is given to a listener or a client URL. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "mqr/common.h"

/* A host name as RFC 1123 has it: dot-separated labels of letters, digits and hyphens,
 * none starting or ending with a hyphen. */
static bool host_name(mqr_str_t h) {
  if (h.len == 0 || h.len > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i < h.len; i++) {
    char ch = h.ptr[i];
    if (ch == '.') {
      if (label == 0 || h.ptr[i - 1] == '-') return false;
      label = 0;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch == '-' && label > 0)) {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label > 0 && h.ptr[h.len - 1] != '-';
}

bool mqr_host_check(mqr_str_t host) {
  char buf[64];
  unsigned char literal[16];
  if (host.len < sizeof buf) {
    memcpy(buf, host.ptr, host.len);
    buf[host.len] = 0;
    if (inet_pton(AF_INET, buf, literal) == 1 || inet_pton(AF_INET6, buf, literal) == 1) return true;
  }
  return host_name(host);
}

int mqr_resolve(const char *host, uint16_t port, struct sockaddr_storage *out, mqr_error_t *err) {
  if (host == NULL || *host == '\0') return mqr_error_set(err, MQR_EINVAL, "no host");
  if (!mqr_host_check(mqr_str(host))) /* asked of no resolver */
    return mqr_error_set(err, MQR_EINVAL, "host '%s' is not an IP address or a host name", host);
  char service[8];
  snprintf(service, sizeof service, "%u", (unsigned)port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0 || res == NULL)
    return mqr_error_set(err, MQR_ENOTFOUND, "host '%s' does not resolve: %s", host,
                         rc ? gai_strerror(rc) : "no address");
  /* An IPv4 address first when there is one (a name with both most often means the same host). */
  const struct addrinfo *pick = res;
  for (const struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  memset(out, 0, sizeof *out);
  memcpy(out, pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  return 0;
}
