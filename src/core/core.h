/*
 * The version-neutral core of collx.  The per-version shims in src/plugin/
 * translate NCCL's tables (int or size_t sizes, property layouts) to these
 * calls; the tools call them directly.  Sizes are size_t throughout.
 */
#ifndef COLLX_CORE_CORE_H
#define COLLX_CORE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "collx/net_abi.h"

/* COLLX_MAX_RECVS (reported as maxRecvs) and COLLX_MAX_REQUESTS are the
 * transport interface's limits. */
#include "transport/transport.h"

/* Comms one device can carry at once (reported as maxComms). */
#define COLLX_MAX_COMMS 65536

/* Device properties in version-neutral form. */
struct collx_props {
  const char *name;
  const char *pci_path;  /* NULL when the interface has no PCI device */
  uint64_t guid;
  int ptr_support;       /* NCCL_PTR_* bits */
  int speed_mbps;
  int port;
  float latency_us;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  /* The physical devices it stands for: itself, or those makeVDevice
   * fused (what vProps reports). */
  int nphys;
  int phys[8];
  int rail_id, plane_id; /* -1 when unknown */
};

/* makeVDevice: the virtual device fusing physical devices devs[0..n-1]
 * (at most max_devs, the ABI's limit).  A single device stands for itself
 * (*d = devs[0]); the same set asked again gives the same device. */
ncclResult_t collx_make_vdevice(const int *devs, int n, int max_devs, int *d);

ncclResult_t collx_init(ncclDebugLogger_t logger);
ncclResult_t collx_devices(int *ndev);
ncclResult_t collx_get_properties(int dev, struct collx_props *props);

ncclResult_t collx_listen(int dev, void *handle, void **listen_comm);
ncclResult_t collx_connect(int dev, void *handle, void **send_comm);
ncclResult_t collx_accept(void *listen_comm, void **recv_comm);

ncclResult_t collx_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t collx_dereg_mr(void *comm, void *mhandle);

ncclResult_t collx_isend(void *send_comm, void *data, size_t size, int tag, void **request);
ncclResult_t collx_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                         const int *tags, void **request);
/* The same with NCCL's profiler handles (v10 on): one per message, NULL
 * for none; events go to the callback collx_prof_set_callback installed
 * (src/core/profiler.h). */
ncclResult_t collx_isend_ph(void *send_comm, void *data, size_t size, int tag, void *phandle,
                            void **request);
ncclResult_t collx_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
                            const int *tags, void *const *phandles, void **request);
/* NCCL's profiler callback, from init (v10 on). */
void collx_prof_set_callback(ncclProfilerCallback_t cb);
ncclResult_t collx_iflush(void *recv_comm, int n, void **data, const size_t *sizes,
                          void **request);
/* sizes, when not NULL, receives one entry per message of the request. */
ncclResult_t collx_test(void *request, int *done, size_t *sizes);

ncclResult_t collx_close_send(void *send_comm);
ncclResult_t collx_close_recv(void *recv_comm);
ncclResult_t collx_close_listen(void *listen_comm);

/* Version string and the ABI version the loader picked (0 before init). */
const char *collx_version(void);
void collx_set_abi_version(int version);
int collx_abi_version(void);
/* After init: 1 when the callers of isend/irecv/test do the socket I/O
 * (COLLX_PROGRESS), 0 when a pool of progress threads does. */
int collx_caller_progress(void);

/* The settings init resolved from the parameter table (NULL before a
 * successful init); collx-info prints from it. */
const struct collx_config *collx_settings(void);

/* Plugin threads alive right now (tests check it drops to 0 after close). */
int collx_live_threads(void);

#endif
