/*
 * ncclNet v10 shim: v9 plus a profiler callback at init, a comm config
 * (traffic class) at connect and profiler handles on isend/irecv.  The
 * callback and handles go to core, which reports one network event per
 * message (src/core/profiler.h); the traffic class is accepted and left
 * unused under v10.
 */
#include <stdatomic.h>

#include "plugin/shim_common.h"
#include "util/log.h"

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  collx_prof_set_callback(profiler); /* events per isend/irecv: src/core/profiler.h */
  return shim_init(10, logger);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v10_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  shim_fill_vprops(&p, &props->vProps.ndevs, props->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V10);
  props->maxP2pBytes = shim_max_bytes(p.max_p2p_bytes);
  props->maxCollBytes = shim_max_bytes(p.max_coll_bytes);
  return ncclSuccess;
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                void **send_comm, ncclNetDeviceHandle_v10_t **dev_comm) {
  static atomic_int told;
  if (config && config->trafficClass != NCCL_NET_TRAFFIC_CLASS_UNDEF &&
      !atomic_exchange(&told, 1))
    COLLX_INFO(COLLX_LOG_NET, "traffic class %d requested; collx sets none, ignoring it",
               config->trafficClass);
  return shim_connect(dev, handle, send_comm, dev_comm);
}

static ncclResult_t v10_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void *phandle, void **request) {
  return shim_isend_sized(send_comm, data, size, tag, phandle, request);
}

static ncclResult_t v10_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **phandles, void **request) {
  return shim_irecv_sized(recv_comm, n, data, sizes, tags, phandles, request);
}

static ncclResult_t v10_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                               void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

static ncclResult_t v10_make_vdevice(int *d, ncclNetVDeviceProps_v10_t *props) {
  return shim_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL,
                           NCCL_NET_MAX_DEVS_PER_NIC_V10);
}

COLLX_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "collx",
    .init = v10_init,
    .devices = collx_devices,
    .getProperties = v10_get_properties,
    .listen = collx_listen,
    .connect = v10_connect,
    .accept = shim_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v10_isend,
    .irecv = v10_irecv,
    .iflush = v10_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
    .makeVDevice = v10_make_vdevice,
};
