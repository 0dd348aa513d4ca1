/*
 * Conversions and entry points shared by the ncclNet shims.
 */
#include "plugin/shim_common.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>

#include "util/log.h"

/* Largest message isend/irecv accept through the size_t ABIs; 0 until a
 * successful init has asked the core. */
static atomic_size_t msg_limit;

size_t shim_max_bytes(size_t core_limit) {
  size_t cap = core_limit < (size_t)INT_MAX ? core_limit : (size_t)INT_MAX;
  size_t p = 1;
  if (cap == 0) return 0;
  while (p <= cap / 2) p *= 2;
  return p;
}

ncclResult_t shim_init(int abi_version, ncclDebugLogger_t logger) {
  collx_set_abi_version(abi_version);
  ncclResult_t res = collx_init(logger);
  if (res != ncclSuccess) return res;
  struct collx_props p;
  if (collx_get_properties(0, &p) == ncclSuccess) {
    size_t p2p = shim_max_bytes(p.max_p2p_bytes), coll = shim_max_bytes(p.max_coll_bytes);
    atomic_store(&msg_limit, p2p > coll ? p2p : coll);
  }
  return ncclSuccess;
}

void shim_fill_vprops(const struct collx_props *p, int *ndevs, int *devs, int max_devs) {
  int n = p->nphys < max_devs ? p->nphys : max_devs;
  *ndevs = n;
  for (int i = 0; i < max_devs; i++) devs[i] = i < n ? p->phys[i] : 0;
}

/* NCCL fuses NICs that sit close together (NCCL_NET_MERGE_LEVEL,
 * NCCL_NET_FORCE_MERGE, and under v12 NCCL_NET_MERGE_POLICY=RAIL) by asking
 * for a virtual device made of them, then counts devices again and uses
 * what appeared past the physical ones.  collx makes it as it makes a
 * COLLX_MERGE device: one device striping its streams over the members'
 * interfaces (core: collx_make_vdevice). */
ncclResult_t shim_make_vdevice(int *d, int ndevs, const int *devs, int max_devs) {
  return collx_make_vdevice(devs, ndevs, max_devs, d);
}

ncclResult_t shim_connect(int dev, void *handle, void **send_comm,
                          ncclNetDeviceHandle_v8_t **dev_comm) {
  if (dev_comm) *dev_comm = NULL; /* no device offload */
  return collx_connect(dev, handle, send_comm);
}

ncclResult_t shim_accept(void *listen_comm, void **recv_comm,
                         ncclNetDeviceHandle_v8_t **dev_comm) {
  if (dev_comm) *dev_comm = NULL;
  return collx_accept(listen_comm, recv_comm);
}

ncclResult_t shim_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                uint64_t offset, int fd, void **mhandle) {
  return collx_reg_mr(comm, data, size, type, mhandle);
}

ncclResult_t shim_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle) {
  return ncclInternalError; /* no device-side networking */
}

ncclResult_t shim_irecv_consumed(void *recv_comm, int n, void *request) {
  return ncclSuccess;
}

ncclResult_t shim_isend_int(void *send_comm, void *data, int size, int tag, void **request) {
  if (size < 0) return ncclInvalidArgument;
  return collx_isend(send_comm, data, (size_t)size, tag, request);
}

ncclResult_t shim_irecv_int(void *recv_comm, int n, void **data, int *sizes, int *tags,
                            void **request) {
  size_t s[COLLX_MAX_RECVS];
  /* Malformed counts go to the core as they are, for its error message. */
  if (n < 1 || n > COLLX_MAX_RECVS || !sizes)
    return collx_irecv(recv_comm, n, data, NULL, tags, request);
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    s[i] = (size_t)sizes[i];
  }
  return collx_irecv(recv_comm, n, data, s, tags, request);
}

ncclResult_t shim_iflush(void *recv_comm, int n, void **data, int *sizes, void **request) {
  return collx_iflush(recv_comm, n, data, NULL, request);
}

ncclResult_t shim_test(void *request, int *done, int *sizes) {
  /* The core writes one size per message of the request; the sentinel
   * tells how many that was. */
  size_t s[COLLX_MAX_RECVS];
  for (int i = 0; i < COLLX_MAX_RECVS; i++) s[i] = SIZE_MAX;
  ncclResult_t res = collx_test(request, done, s);
  if (res == ncclSuccess && *done && sizes)
    for (int i = 0; i < COLLX_MAX_RECVS && s[i] != SIZE_MAX; i++)
      sizes[i] = s[i] > (size_t)INT_MAX ? INT_MAX : (int)s[i];
  return res;
}

/* Whether `size` fits what a size_t ABI may post; warns when it does not. */
static int size_ok(const char *call, size_t size) {
  size_t lim = atomic_load(&msg_limit);
  if (lim == 0 || size <= lim) return 1;
  COLLX_WARN("%s: %zu bytes is more than the %zu bytes one message may carry (maxP2pBytes)", call,
             size, lim);
  return 0;
}

ncclResult_t shim_isend_sized(void *send_comm, void *data, size_t size, int tag, void *phandle,
                              void **request) {
  if (!size_ok("isend", size)) return ncclInvalidArgument;
  return collx_isend_ph(send_comm, data, size, tag, phandle, request);
}

ncclResult_t shim_irecv_sized(void *recv_comm, int n, void **data, const size_t *sizes,
                              int *tags, void **phandles, void **request) {
  if (n >= 1 && n <= COLLX_MAX_RECVS && sizes)
    for (int i = 0; i < n; i++)
      if (!size_ok("irecv", sizes[i])) return ncclInvalidArgument;
  return collx_irecv_ph(recv_comm, n, data, sizes, tags, phandles, request);
}

ncclResult_t shim_ctx_init(int abi_version, void **ctx, uint64_t comm_id,
                           const ncclNetCommConfig_v10_t *config, ncclDebugLogger_t logger) {
  if (ctx) *ctx = NULL;
  /* Devices, topology and settings: once per process (init_lock); every
   * later call only checks they are there. */
  ncclResult_t res = shim_init(abi_version, logger);
  if (res != ncclSuccess) return res;
  return collx_ctx_create(comm_id, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, ctx);
}

ncclResult_t shim_finalize(void *ctx) { return collx_ctx_finalize(ctx); }

static struct collx_flow_hint flow_hint(const ncclNetCommAttr_v11_t *a) {
  return (struct collx_flow_hint){.max_peers = a->maxConcurrentPeers, .min_peers = a->minConcurrentPeers,
                                  .max_flows = a->maxFlowsPerPeer, .min_flows = a->minFlowsPerPeer};
}

ncclResult_t shim_set_net_attr(void *ctx, const ncclNetAttr_v11_t *attr) {
  if (!attr) return collx_ctx_set_hints(ctx, NULL);
  struct collx_hints h = {.send = flow_hint(&attr->sendCommAttr), .recv = flow_hint(&attr->recvCommAttr),
                          .op = attr->op, .algo = attr->algo, .proto = attr->proto};
  return collx_ctx_set_hints(ctx, &h);
}

ncclResult_t shim_ctx_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  return collx_ctx_listen(ctx, dev, handle, listen_comm);
}

ncclResult_t shim_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
                              ncclNetDeviceHandle_v8_t **dev_comm) {
  if (dev_comm) *dev_comm = NULL; /* no device offload */
  return collx_ctx_connect(ctx, dev, handle, send_comm);
}
