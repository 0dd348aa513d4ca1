/*
 * ncclNet v11 shim (NCCL 2.28, 2.29): v10's data path, with init once per
 * communicator returning a context (its id and traffic class), listen and
 * connect under that context, finalize(context), setNetAttr hints, and
 * maxMultiRequestSize in the properties.
 */
#include "plugin/shim_common.h"

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  collx_prof_set_callback(profiler); /* events per isend/irecv: src/core/profiler.h */
  return shim_ctx_init(11, ctx, comm_id, config, logger);
}

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  shim_fill_vprops(&p, &props->vProps.ndevs, props->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
  props->maxP2pBytes = shim_max_bytes(p.max_p2p_bytes);
  props->maxCollBytes = shim_max_bytes(p.max_coll_bytes);
  props->maxMultiRequestSize = SHIM_MAX_MULTI_REQUEST;
  return ncclSuccess;
}

static ncclResult_t v11_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void *phandle, void **request) {
  return shim_isend_sized(send_comm, data, size, tag, phandle, request);
}

static ncclResult_t v11_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **phandles, void **request) {
  return shim_irecv_sized(recv_comm, n, data, sizes, tags, phandles, request);
}

static ncclResult_t v11_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                               void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props) {
  return shim_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL,
                           NCCL_NET_MAX_DEVS_PER_NIC_V11);
}

static ncclResult_t v11_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr) {
  return shim_set_net_attr(ctx, attr);
}

COLLX_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "collx",
    .init = v11_init,
    .devices = collx_devices,
    .getProperties = v11_get_properties,
    .listen = shim_ctx_listen,
    .connect = shim_ctx_connect,
    .accept = shim_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v11_isend,
    .irecv = v11_irecv,
    .iflush = v11_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
    .makeVDevice = v11_make_vdevice,
    .finalize = shim_finalize,
    .setNetAttr = v11_set_net_attr,
};
