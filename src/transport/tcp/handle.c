#include "handle.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void tcp_addr_pack(const struct sockaddr_storage *ss, uint16_t *family, uint16_t *port,
                   uint32_t *scope_id, uint8_t addr[16]) {
  memset(addr, 0, 16);
  *family = ss->ss_family;
  *scope_id = 0;
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    memcpy(addr, &a->sin6_addr, 16);
    *scope_id = a->sin6_scope_id;
    *port = ntohs(a->sin6_port);
  } else {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    memcpy(addr, &a->sin_addr, 4);
    *port = ntohs(a->sin_port);
  }
}

int tcp_addr_unpack(uint16_t family, uint16_t port, uint32_t scope_id, const uint8_t addr[16],
                    struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    memcpy(&a->sin_addr, addr, 4);
    a->sin_port = htons(port);
    return 0;
  }
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_addr, addr, 16);
    a->sin6_scope_id = scope_id;
    a->sin6_port = htons(port);
    return 0;
  }
  return -1;
}

void collx_handle_encode(void *handle, const struct sockaddr_storage *addr, uint64_t secret) {
  struct collx_handle h;
  memset(&h, 0, sizeof h);
  h.magic = COLLX_HANDLE_MAGIC;
  h.version = COLLX_HANDLE_VERSION;
  h.secret = secret;
  tcp_addr_pack(addr, &h.family, &h.port, &h.scope_id, h.addr);
  memcpy(handle, &h, sizeof h);
}

uint64_t collx_handle_connect_state(const void *handle) {
  uint64_t v;
  memcpy(&v, (const char *)handle + offsetof(struct collx_handle, connect_state), sizeof v);
  return v;
}

void collx_handle_set_connect_state(void *handle, uint64_t state) {
  memcpy((char *)handle + offsetof(struct collx_handle, connect_state), &state, sizeof state);
}

int collx_handle_decode(const void *handle, struct sockaddr_storage *addr, uint64_t *secret, const char **why) {
  struct collx_handle copy;
  memcpy(&copy, handle, sizeof copy);
  const struct collx_handle *h = &copy;
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
  if (tcp_addr_unpack(h->family, h->port, h->scope_id, h->addr, addr) != 0) {
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
