#include "handle.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void collx_handle_encode(struct collx_handle *h, const struct sockaddr_storage *addr,
                         uint64_t secret) {
  memset(h, 0, sizeof *h);
  h->magic = COLLX_HANDLE_MAGIC;
  h->version = COLLX_HANDLE_VERSION;
  h->family = addr->ss_family;
  h->secret = secret;
  if (addr->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
    memcpy(h->addr, &a->sin6_addr, 16);
    h->scope_id = a->sin6_scope_id;
    h->port = ntohs(a->sin6_port);
  } else {
    const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
    memcpy(h->addr, &a->sin_addr, 4);
    h->port = ntohs(a->sin_port);
  }
}

int collx_handle_decode(const struct collx_handle *h, struct sockaddr_storage *addr,
                        uint64_t *secret, const char **why) {
  if (h->magic != COLLX_HANDLE_MAGIC) {
    *why = "not a collx handle (bad magic)";
    return -1;
  }
  if (h->version != COLLX_HANDLE_VERSION) {
    *why = "handle from an incompatible collx version";
    return -1;
  }
  if (h->port == 0) {
    *why = "handle carries port 0";
    return -1;
  }
  memset(addr, 0, sizeof *addr);
  if (h->family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)addr;
    a->sin_family = AF_INET;
    memcpy(&a->sin_addr, h->addr, 4);
    a->sin_port = htons(h->port);
  } else if (h->family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)addr;
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_addr, h->addr, 16);
    a->sin6_scope_id = h->scope_id;
    a->sin6_port = htons(h->port);
  } else {
    *why = "handle carries an unknown address family";
    return -1;
  }
  *secret = h->secret;
  return 0;
}

int collx_random64(uint64_t *out) {
  /* The secret is what tells the peer from anyone else who reaches the
   * port: without the kernel's randomness there is no secret worth the
   * name, so there is no fallback. */
  for (;;) {
    ssize_t n = getrandom(out, sizeof *out, 0);
    if (n == (ssize_t)sizeof *out) return 0;
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) errno = EIO;
    return -1;
  }
}
