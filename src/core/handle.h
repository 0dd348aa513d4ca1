/*
 * The connection handle: 128 bytes that NCCL carries from the listening
 * rank to the connecting one.  It holds the listener's address and a random
 * per-listen secret that every incoming socket must present.
 *
 * NCCL hands the same handle memory back on every call to connect until it
 * completes; the connector keeps a reference to its in-progress state in
 * `connect_state` (zero in a fresh handle), so connect needs no other table
 * lookup by address.
 */
#ifndef COLLX_CORE_HANDLE_H
#define COLLX_CORE_HANDLE_H

#include <stdint.h>
#include <sys/socket.h>

#include "collx/net_abi.h"

#define COLLX_HANDLE_MAGIC 0x58434c43u /* "CLCX" */
#define COLLX_HANDLE_VERSION 1

struct collx_handle {
  uint32_t magic;
  uint16_t version;
  uint16_t family;        /* AF_INET or AF_INET6 */
  uint8_t addr[16];       /* network byte order; IPv4 uses the first 4 */
  uint32_t scope_id;      /* IPv6 link-local scope */
  uint16_t port;          /* host byte order */
  uint16_t reserved;
  uint64_t secret;
  uint64_t connect_state; /* connector's scratch, see above */
  uint8_t unused[80];
};

_Static_assert(sizeof(struct collx_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");
_Static_assert(sizeof(struct collx_handle) == 128, "handle layout");

/* Fill a handle for a listener bound at `addr`. */
void collx_handle_encode(struct collx_handle *h, const struct sockaddr_storage *addr,
                         uint64_t secret);

/* Validate a handle and extract the listener's address and secret.  Returns
 * 0, or -1 with *why naming what is wrong. */
int collx_handle_decode(const struct collx_handle *h, struct sockaddr_storage *addr,
                        uint64_t *secret, const char **why);

/* A random 64-bit value from the kernel (secrets, connection ids): 0, or
 * -1 with errno set when the kernel gives none. */
int collx_random64(uint64_t *out);

#endif
