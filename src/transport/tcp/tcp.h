/*
 * The TCP transport: connection setup and the striped data path.  The core
 * (src/core/comm.c) validates arguments and dispatches here.
 */
#ifndef COLLX_TCP_TCP_H
#define COLLX_TCP_TCP_H

#include <stddef.h>

#include "collx/net_abi.h"
#include "core/device.h"
#include "core/handle.h"

struct tcp_listen;
struct tcp_comm_base;   /* what a send and a receive comm share (comm.h) */
struct tcp_send_comm;   /* send.h */
struct tcp_recv_comm;   /* recv.h */
struct tcp_req;         /* what every request starts with (comm.h) */

/* Settings the transport reads once at init. */
struct tcp_config {
  size_t max_piece;   /* COLLX_CHUNK_SIZE: the largest chunk */
  int connect_timeout_s;
  int timeout_s;      /* COLLX_TIMEOUT: silent peer declared dead (0: never) */
};
void tcp_configure(const struct tcp_config *cfg);
/* COLLX_SPIN_US: how long receive stream threads poll after data before sleeping. */
void tcp_set_spin_us(int us);
/* COLLX_INLINE_RECV: test() reads arrived data itself. */
void tcp_set_inline_recv(int on);
/* COLLX_EAGER_SIZE: messages up to this size go without waiting for a CTS. */
#define TCP_EAGER_SIZE_MAX (256 * 1024)
void tcp_set_eager_size(size_t bytes);
/* COLLX_PROGRESS=caller: no stream threads, the caller's isend/test move
 * every request of the comm. */
void tcp_set_caller_progress(int on);
int tcp_caller_progress(void);

/* Per-connection settings of a listen or connect. */
struct tcp_conn_opts {
  int nstreams;      /* streams the connector proposes; 0: the device's (collx_device.streams) */
  int tclass;        /* IP_TOS / IPV6_TCLASS of every socket; -1: the kernel's default */
  const void *owner; /* who a half-made connect belongs to (tcp_connect_forget) */
};

/* opts may be NULL (defaults); its tclass applies to the listening
 * sockets and to every socket accepted from them. */
ncclResult_t tcp_listen(const struct collx_device *dev, int dev_index, struct collx_handle *h,
                        const struct tcp_conn_opts *opts, struct tcp_listen **out);
/* A new comm comes back as its base: core holds comms as opaque handles. */
ncclResult_t tcp_accept(struct tcp_listen *l, struct tcp_comm_base **out);
void tcp_listen_close(struct tcp_listen *l);

/* One step of a non-blocking connect; *out stays NULL until connected.
 * opts (may be NULL) is read on the first call for a handle. */
ncclResult_t tcp_connect(const struct collx_device *dev, int dev_index, struct collx_handle *h,
                         const struct tcp_conn_opts *opts, struct tcp_comm_base **out);
/* Drop the half-made connects of `owner` (their sockets are closed);
 * returns how many there were. */
int tcp_connect_forget(const void *owner);

ncclResult_t tcp_isend(struct tcp_send_comm *c, void *data, size_t size, int tag,
                       struct tcp_req **out);
ncclResult_t tcp_irecv(struct tcp_recv_comm *c, int n, void **data, const size_t *sizes,
                       const int *tags, struct tcp_req **out);
ncclResult_t tcp_test(struct tcp_req *r, int *done, size_t *sizes);
void tcp_comm_close(struct tcp_comm_base *c);

/* Which kind of object an opaque pointer is (for argument checks). */
int tcp_is_send_comm(const void *p);
int tcp_is_recv_comm(const void *p);
int tcp_is_listen(const void *p);
int tcp_is_req(const void *p);

#endif
