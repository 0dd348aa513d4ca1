/*
 * The transport interface: what core asks of a transport, as a table of
 * operations.  Core (src/core/comm.c, context.c, plugin.c) checks NCCL's
 * arguments and calls through the table of the transport chosen at init
 * (src/core/transports.c); it includes this header and no other under
 * src/transport/.  A transport implements the table in its own directory
 * (TCP: src/transport/tcp/ops.c) and includes nothing from core.
 *
 * Comms, listening comms and requests are opaque to core; `kind` tells
 * them apart for argument checks.  A connection handle is
 * NCCL_NET_HANDLE_MAXSIZE bytes whose layout only the transport knows.
 */
#ifndef COLLX_TRANSPORT_TRANSPORT_H
#define COLLX_TRANSPORT_TRANSPORT_H

#include <stddef.h>

#include "collx/net_abi.h"
#include "util/config.h"
#include "util/netdev.h"

/* Most receives one grouped irecv may carry (reported as maxRecvs). */
#define COLLX_MAX_RECVS 8
/* Requests outstanding per comm. */
#define COLLX_MAX_REQUESTS NCCL_NET_MAX_REQUESTS

/* Streams whose part in a message is reported to NCCL's profiler: the
 * first seven, since NCCL's example profiler keeps eight network events per
 * proxy step, and the message's own event is one. */
#define COLLX_PART_STREAMS 7
/* What an opaque pointer handed in by NCCL is. */
enum collx_obj_kind { COLLX_OBJ_NONE, COLLX_OBJ_SEND, COLLX_OBJ_RECV, COLLX_OBJ_LISTEN, COLLX_OBJ_REQ };

/* Per-connection settings of a listen or connect (NULL: defaults). */
struct collx_conn_opts {
  int nstreams;      /* streams the connector proposes; 0: the device's (collx_device.streams) */
  int tclass;        /* IP_TOS / IPV6_TCLASS of every socket; -1: the kernel's default */
  const void *owner; /* who a half-made connect belongs to (connect_forget) */
};

struct collx_transport {
  const char *name;
  /* Once, before anything else; cfg stays valid for the process. */
  ncclResult_t (*init)(const struct collx_config *cfg);
  /* Fill `handle` for the peer; opts' tclass applies to every socket
   * accepted from the listener too. */
  ncclResult_t (*listen)(const struct collx_device *dev, int dev_index, void *handle,
                         const struct collx_conn_opts *opts, void **listen_comm);
  /* Non-blocking: *recv_comm stays NULL until a connection is complete. */
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
  /* One step of a non-blocking connect: NCCL calls again with the same
   * handle until *send_comm is set.  opts is read on the first call. */
  ncclResult_t (*connect)(const struct collx_device *dev, int dev_index, void *handle,
                          const struct collx_conn_opts *opts, void **send_comm);
  /* Drop the half-made connects of `owner`; returns how many. */
  int (*connect_forget)(const void *owner);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, const size_t *sizes,
                        const int *tags, void **request);
  ncclResult_t (*test)(void *request, int *done, size_t *sizes);
  void (*close_send)(void *send_comm);
  void (*close_recv)(void *recv_comm);
  void (*close_listen)(void *listen_comm);
  enum collx_obj_kind (*kind)(const void *p);
  /* The device index a send or receive comm was made on. */
  int (*comm_dev)(const void *comm);
  /* Transport threads alive now (none may outlive the last close). */
  int (*live_threads)(void);
  /* After init: 1 when the callers of isend/irecv/test do the socket I/O. */
  int (*caller_progress)(void);
  /* Which streams carry a request's messages, for NCCL's profiler
   * (core/profiler.c).  watch_parts: record it for this request and every
   * one posted from now on (a profiler is loaded; until then the transport
   * spends nothing on it).  parts, for message `msg` of the
   * request: bit s of *began, stream s (below COLLX_PART_STREAMS) has taken
   * bytes of it, and fds[s] is that stream's socket; of *through, stream s
   * has none of it in hand and none is left for it to take. */
  void (*watch_parts)(void *request);
  void (*parts)(void *request, int msg, uint32_t *began, uint32_t *through, int fds[COLLX_PART_STREAMS]);
};

/* The transports built into the plugin; core picks one at init. */
extern const struct collx_transport collx_tcp_transport;

#endif
