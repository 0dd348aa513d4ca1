/*
 * The TCP transport: connection setup and the striped data path.  Core
 * reaches it only through the table in ops.c (src/transport/transport.h);
 * this header names what that table calls.
 */
#ifndef COLLX_TCP_TCP_H
#define COLLX_TCP_TCP_H

#include <stddef.h>

#include "collx/net_abi.h"
#include "handle.h"
#include "transport/transport.h"
#include "util/config.h"
#include "util/netdev.h"

struct tcp_listen;
struct tcp_comm_base;   /* what a send and a receive comm share (base.h) */
struct tcp_send_comm;   /* send.h */
struct tcp_recv_comm;   /* recv.h */
struct tcp_req;         /* what every request starts with (base.h) */

/* The settings (base.c), stored once by the transport's init (ops.c):
 * every file of the transport reads them here. */
extern struct collx_config tcp_cfg;
/* COLLX_EAGER_SIZE's bound in params.def: what a receiver accepts on the
 * control socket must cover it (send.c). */
#define TCP_EAGER_SIZE_MAX (256 * 1024)
/* COLLX_PROGRESS=caller: no progress threads, the caller's isend/test move
 * every request of the comm. */
int tcp_caller_progress(void);
/* COLLX_SPIN_US in seconds: how long progress threads poll after data. */
double tcp_spin_seconds(void);

/* opts may be NULL (defaults); its tclass applies to the listening
 * sockets and to every socket accepted from them. */
ncclResult_t tcp_listen(const struct collx_device *dev, int dev_index, void *h,
                        const struct collx_conn_opts *opts, struct tcp_listen **out);
/* A new comm comes back as its base: core holds comms as opaque handles. */
ncclResult_t tcp_accept(struct tcp_listen *l, struct tcp_comm_base **out);
void tcp_listen_close(struct tcp_listen *l);

/* One step of a non-blocking connect; *out stays NULL until connected.
 * opts (may be NULL) is read on the first call for a handle. */
ncclResult_t tcp_connect(const struct collx_device *dev, int dev_index, void *h,
                         const struct collx_conn_opts *opts, struct tcp_comm_base **out);
/* Drop the half-made connects of `owner` (their sockets are closed);
 * returns how many there were. */
int tcp_connect_forget(const void *owner);
/* Release connects NCCL has stopped calling; cheap, called from connect,
 * listen close and comm close. */
void tcp_connect_reap(void);

ncclResult_t tcp_isend(struct tcp_send_comm *c, void *data, size_t size, int tag,
                       struct tcp_req **out);
ncclResult_t tcp_irecv(struct tcp_recv_comm *c, int n, void **data, const size_t *sizes,
                       const int *tags, struct tcp_req **out);

/* Which kind of object an opaque pointer is (for argument checks). */
int tcp_is_send_comm(const void *p);
int tcp_is_recv_comm(const void *p);
int tcp_is_listen(const void *p);
int tcp_is_req(const void *p);

#endif
