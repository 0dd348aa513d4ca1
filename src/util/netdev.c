/* Address formatting for log lines, shared by discovery and the transports. */
#include "util/netdev.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

const char *collx_host_str(const struct sockaddr *sa, char *buf, size_t len) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    if (!inet_ntop(AF_INET, &s4->sin_addr, buf, (socklen_t)len)) snprintf(buf, len, "?");
    return buf;
  }
  if (sa->sa_family != AF_INET6) {
    snprintf(buf, len, "(family %d)", sa->sa_family);
    return buf;
  }
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
  char a[INET6_ADDRSTRLEN] = "?", ifn[IF_NAMESIZE];
  inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
  if (s6->sin6_scope_id == 0) {
    snprintf(buf, len, "%s", a);
  } else if (if_indextoname(s6->sin6_scope_id, ifn)) {
    snprintf(buf, len, "%s%%%s", a, ifn);
  } else {
    snprintf(buf, len, "%s%%%u", a, (unsigned)s6->sin6_scope_id);
  }
  return buf;
}

const char *collx_addr_str(const struct sockaddr *sa, char *buf, size_t len) {
  if (!buf || len == 0) return buf;
  if (!sa) {
    snprintf(buf, len, "(none)");
    return buf;
  }
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  collx_host_str(sa, host, sizeof host);
  if (sa->sa_family == AF_INET)
    snprintf(buf, len, "%s:%u", host, ntohs(((const struct sockaddr_in *)sa)->sin_port));
  else if (sa->sa_family == AF_INET6)
    snprintf(buf, len, "[%s]:%u", host, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
  else
    snprintf(buf, len, "%s", host);
  return buf;
}
