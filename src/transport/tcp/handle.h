/*
 * The connection handle: 128 bytes that NCCL carries from the listening
 * rank to the connecting one.  It holds the listener's address and a random
 * per-listen secret that every incoming socket must present.
 *
 * NCCL hands the same handle memory back on every call to connect until it
 * completes; the connector keeps a reference to its in-progress state in
 * `connect_state` (zero in a fresh handle), so connect needs no other table
 * lookup by address.
 *
 * The handle is TCP's: core passes it as NCCL_NET_HANDLE_MAXSIZE opaque
 * bytes.  The address codec below is shared with the WELCOME record
 * (wire_addr), so a socket address has one packed form in the transport.
 */
#ifndef COLLX_TCP_HANDLE_H
#define COLLX_TCP_HANDLE_H

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

/* A socket address as the handle and the WELCOME carry it: family, port
 * (host order), IPv6 scope, and 16 address bytes (IPv4 uses the first 4). */
void tcp_addr_pack(const struct sockaddr_storage *ss, uint16_t *family, uint16_t *port,
                   uint32_t *scope_id, uint8_t addr[16]);
/* The reverse; -1 for a family other than AF_INET / AF_INET6. */
int tcp_addr_unpack(uint16_t family, uint16_t port, uint32_t scope_id, const uint8_t addr[16],
                    struct sockaddr_storage *ss);

/* The functions below take the handle memory NCCL hands over, which need
 * not be aligned for the struct: they copy through it. */

/* Fill a handle for a listener bound at `addr`. */
void collx_handle_encode(void *handle, const struct sockaddr_storage *addr, uint64_t secret);

/* Validate a handle and extract the listener's address and secret.  Returns
 * 0, or -1 with *why naming what is wrong. */
int collx_handle_decode(const void *handle, struct sockaddr_storage *addr, uint64_t *secret, const char **why);

/* The connector's scratch word (see above). */
uint64_t collx_handle_connect_state(const void *handle);
void collx_handle_set_connect_state(void *handle, uint64_t state);

/* A random 64-bit value from the kernel (secrets, connection ids): 0, or
 * -1 with errno set when the kernel gives none. */
int collx_random64(uint64_t *out);

#endif
