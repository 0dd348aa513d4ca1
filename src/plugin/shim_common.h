/*
 * What the ncclNet shims (net_v7.c ... net_v10.c) share: the entry points
 * whose signature did not change across the versions collx exports, and the
 * size and property conversions.  Each shim file then holds only what its
 * version does differently.  Nothing here is exported from the library.
 */
#ifndef COLLX_PLUGIN_SHIM_COMMON_H
#define COLLX_PLUGIN_SHIM_COMMON_H

#include <stddef.h>

#include "collx/net_abi.h"
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

/* The largest message the size_t ABIs (v9, v10) may post, as reported in
 * maxP2pBytes / maxCollBytes: the core's limit, capped so that test() can
 * still report the size in its int array, rounded down to a power of two
 * so that NCCL's chunking divides it. */
size_t shim_max_bytes(size_t core_limit);

/* v9/v10 properties: a physical device is a virtual NIC of one member
 * (itself); collx's own NIC merging happens below the device list. */
void shim_fill_vprops(int dev, int *ndevs, int *devs, int max_devs);

/* makeVDevice for v9/v10 (their vProps share one layout). */
ncclResult_t shim_make_vdevice(int *d, int ndevs, const int *devs, int max_devs);

/* Same signature in v7 through v9 (the device handle types are one type). */
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

/* size_t sizes (v9, v10 isend/irecv), refused above shim_max_bytes(). */
ncclResult_t shim_isend_sized(void *send_comm, void *data, size_t size, int tag,
                              void **request);
ncclResult_t shim_irecv_sized(void *recv_comm, int n, void **data, const size_t *sizes,
                              int *tags, void **request);

#endif
