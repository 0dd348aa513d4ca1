/*
 * ncclNet v12 shim (NCCL 2.30): v11 with virtual devices of up to 8
 * members, and each device's rail and plane id in the properties
 * (COLLX_RAIL_ID, COLLX_PLANE_ID; NCCL_NET_ID_UNDEF when unknown).
 */
#include "plugin/shim_common.h"

static ncclResult_t v12_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  collx_prof_set_callback(profiler); /* events per isend/irecv: src/core/profiler.h */
  return shim_ctx_init(12, ctx, comm_id, config, logger);
}

static ncclResult_t v12_get_properties(int dev, ncclNetProperties_v12_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  shim_fill_vprops(&p, &props->vProps.ndevs, props->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  props->maxP2pBytes = shim_max_bytes(p.max_p2p_bytes);
  props->maxCollBytes = shim_max_bytes(p.max_coll_bytes);
  props->maxMultiRequestSize = SHIM_MAX_MULTI_REQUEST;
  props->railId = (int16_t)(p.rail_id < 0 ? NCCL_NET_ID_UNDEF : p.rail_id);
  props->planeId = (int16_t)(p.plane_id < 0 ? NCCL_NET_ID_UNDEF : p.plane_id);
  return ncclSuccess;
}

static ncclResult_t v12_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void *phandle, void **request) {
  return shim_isend_sized(send_comm, data, size, tag, phandle, request);
}

static ncclResult_t v12_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **phandles, void **request) {
  return shim_irecv_sized(recv_comm, n, data, sizes, tags, phandles, request);
}

static ncclResult_t v12_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                               void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

static ncclResult_t v12_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props) {
  return shim_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL,
                           NCCL_NET_MAX_DEVS_PER_NIC_V12);
}

static ncclResult_t v12_set_net_attr(void *ctx, ncclNetAttr_v12_t *attr) {
  return shim_set_net_attr(ctx, attr);
}

COLLX_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "collx",
    .init = v12_init,
    .devices = collx_devices,
    .getProperties = v12_get_properties,
    .listen = shim_ctx_listen,
    .connect = shim_ctx_connect,
    .accept = shim_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v12_isend,
    .irecv = v12_irecv,
    .iflush = v12_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
    .makeVDevice = v12_make_vdevice,
    .finalize = shim_finalize,
    .setNetAttr = v12_set_net_attr,
};
