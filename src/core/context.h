/*
 * Per-communicator contexts (ncclNet v11 and later), version-neutral: the
 * shims translate NCCL's structures to these.  See context.c.
 */
#ifndef COLLX_CORE_CONTEXT_H
#define COLLX_CORE_CONTEXT_H

#include <stdint.h>

#include "collx/net_abi.h"

/* NCCL's hints for one side (send or receive) of a communicator's
 * connections; NCCL_NET_ATTR_UNDEF (-1) where NCCL said nothing. */
struct collx_flow_hint {
  int32_t max_peers, min_peers;
  int32_t max_flows, min_flows; /* per peer */
};

struct collx_hints {
  struct collx_flow_hint send, recv;
  uint32_t op, algo, proto;     /* bit masks; all ones when unset */
};

/* Make the context of communicator comm_id; traffic_class is the comm
 * config's (NCCL_NET_TRAFFIC_CLASS_UNDEF: none). */
ncclResult_t collx_ctx_create(uint64_t comm_id, int traffic_class, void **ctx);
/* Close what the context still owns and release it. */
ncclResult_t collx_ctx_finalize(void *ctx);
/* Record NCCL's hints (checked first: a count below -1 or a min above its
 * max is refused with ncclInvalidArgument, naming the field). */
ncclResult_t collx_ctx_set_hints(void *ctx, const struct collx_hints *h);
int collx_hints_valid(const struct collx_hints *h);

/* listen / connect under a context (NULL: none, as v7-v10): the traffic
 * class goes on every socket, the stream count follows the hints, and the
 * comm is the context's until closed. */
ncclResult_t collx_ctx_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t collx_ctx_connect(void *ctx, int dev, void *handle, void **send_comm);

/* Contexts alive now (tests). */
int collx_ctx_live(void);

/* For comm.c: a comm is closed (no longer any context's); a receive comm
 * accepted on a context's listening comm is that context's too. */
void collx_ctx_forget(const void *obj);
void collx_ctx_adopt_accepted(const void *listen_comm, void *recv_comm);

#endif
