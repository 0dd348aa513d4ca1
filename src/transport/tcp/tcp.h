/*
 * The TCP transport: connection setup and the striped data path.  Core
 * reaches it only through the table in ops.c (src/transport/transport.h).
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
struct tcp_comm;
struct tcp_req;

/* The settings, stored once by the transport's init (ops.c): every file
 * of the transport reads them here. */
extern struct collx_config tcp_cfg;
/* The data-path files keep their own copies of a few settings: init
 * hands them these values from tcp_cfg through the setters below. */
/* COLLX_SPIN_US: how long stream threads poll after data before sleeping. */
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

/* opts may be NULL (defaults); its tclass applies to the listening
 * sockets and to every socket accepted from them. */
ncclResult_t tcp_listen(const struct collx_device *dev, int dev_index, struct collx_handle *h,
                        const struct collx_conn_opts *opts, struct tcp_listen **out);
ncclResult_t tcp_accept(struct tcp_listen *l, struct tcp_comm **out);
void tcp_listen_close(struct tcp_listen *l);

/* One step of a non-blocking connect; *out stays NULL until connected.
 * opts (may be NULL) is read on the first call for a handle. */
ncclResult_t tcp_connect(const struct collx_device *dev, int dev_index, struct collx_handle *h,
                         const struct collx_conn_opts *opts, struct tcp_comm **out);
/* Drop the half-made connects of `owner` (their sockets are closed);
 * returns how many there were. */
int tcp_connect_forget(const void *owner);

ncclResult_t tcp_isend(struct tcp_comm *c, void *data, size_t size, int tag,
                       struct tcp_req **out);
ncclResult_t tcp_irecv(struct tcp_comm *c, int n, void **data, const size_t *sizes,
                       const int *tags, struct tcp_req **out);
ncclResult_t tcp_test(struct tcp_req *r, int *done, size_t *sizes);
void tcp_comm_close(struct tcp_comm *c);

/* Which kind of object an opaque pointer is (for argument checks). */
int tcp_is_send_comm(const void *p);
int tcp_is_recv_comm(const void *p);
int tcp_is_listen(const void *p);
int tcp_is_req(const void *p);

#endif
