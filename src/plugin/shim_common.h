/*
 * What the ncclNet shims (net_v7.c ... net_v12.c) share: the entry points
 * whose signature did not change across the versions collx exports, and the
 * size and property conversions.  Each shim file then holds only what its
 * version does differently.  Nothing here is exported from the library.
 */
#ifndef COLLX_PLUGIN_SHIM_COMMON_H
#define COLLX_PLUGIN_SHIM_COMMON_H

#include <stddef.h>

#include "collx/net_abi.h"
#include "core/context.h"
#include "core/core.h"

#define COLLX_EXPORT __attribute__((visibility("default")))

/* Record the ABI version NCCL picked (for the "ready" INFO line), then
 * initialise the core. */
ncclResult_t shim_init(int abi_version, ncclDebugLogger_t logger);

/* Properties every version carries under the same names: fills `dst` (a
 * pointer to any ncclNetProperties_vN_t) from the core's `p`. */
#define SHIM_FILL_COMMON_PROPS(dst, p)                 \
  do {                                                 \
    (dst)->name = (char *)(p)->name;                   \
    (dst)->pciPath = (char *)(p)->pci_path;            \
    (dst)->guid = (p)->guid;                           \
    (dst)->ptrSupport = (p)->ptr_support;              \
    (dst)->speed = (p)->speed_mbps;                    \
    (dst)->port = (p)->port;                           \
    (dst)->latency = (p)->latency_us;                  \
    (dst)->maxComms = (p)->max_comms;                  \
    (dst)->maxRecvs = (p)->max_recvs;                  \
    (dst)->netDeviceType = NCCL_NET_DEVICE_HOST;       \
    (dst)->netDeviceVersion = 0;                       \
  } while (0)

/* The largest message the size_t ABIs (v9 and later) may post, as reported in
 * maxP2pBytes / maxCollBytes: the core's limit, capped so that test() can
 * still report the size in its int array, rounded down to a power of two
 * so that NCCL's chunking divides it. */
size_t shim_max_bytes(size_t core_limit);

/* vProps (v9 and later): the physical devices a device stands for (itself
 * for a physical one; collx's own COLLX_MERGE works below the device list). */
void shim_fill_vprops(const struct collx_props *p, int *ndevs, int *devs, int max_devs);

/* makeVDevice for v9 and later, with the version's member limit. */
ncclResult_t shim_make_vdevice(int *d, int ndevs, const int *devs, int max_devs);

/* Same signature in v7 through v9 (the device handle types are one type);
 * accept keeps it through v12. */
ncclResult_t shim_connect(int dev, void *handle, void **send_comm,
                          ncclNetDeviceHandle_v8_t **dev_comm);
ncclResult_t shim_accept(void *listen_comm, void **recv_comm,
                         ncclNetDeviceHandle_v8_t **dev_comm);
ncclResult_t shim_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                uint64_t offset, int fd, void **mhandle);
ncclResult_t shim_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle);
ncclResult_t shim_irecv_consumed(void *recv_comm, int n, void *request);

/* int sizes (v7, v8 isend/irecv; every version's iflush and test). */
ncclResult_t shim_isend_int(void *send_comm, void *data, int size, int tag, void **request);
ncclResult_t shim_irecv_int(void *recv_comm, int n, void **data, int *sizes, int *tags,
                            void **request);
ncclResult_t shim_iflush(void *recv_comm, int n, void **data, int *sizes, void **request);
ncclResult_t shim_test(void *request, int *done, int *sizes);

/* size_t sizes (v9 and later isend/irecv), refused above shim_max_bytes();
 * NCCL's profiler handles from v10 on (NULL before: no events). */
ncclResult_t shim_isend_sized(void *send_comm, void *data, size_t size, int tag, void *phandle,
                              void **request);
ncclResult_t shim_irecv_sized(void *recv_comm, int n, void **data, const size_t *sizes,
                              int *tags, void **phandles, void **request);

/* v11 and later: per-communicator init, finalize, setNetAttr. */
ncclResult_t shim_ctx_init(int abi_version, void **ctx, uint64_t comm_id,
                           const ncclNetCommConfig_v10_t *config, ncclDebugLogger_t logger);
ncclResult_t shim_finalize(void *ctx);
ncclResult_t shim_set_net_attr(void *ctx, const ncclNetAttr_v11_t *attr);
ncclResult_t shim_ctx_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t shim_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
                              ncclNetDeviceHandle_v8_t **dev_comm);

/* maxMultiRequestSize (v11 and later): one request per isend/irecv call;
 * NCCL 2.28-2.30 never asks for more (doc/deploy.md). */
#define SHIM_MAX_MULTI_REQUEST 1

#endif
