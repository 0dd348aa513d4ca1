/*
 * ncclNet v9 shim: size_t sizes for isend/irecv (test and iflush keep int),
 * the v9 property layout (forceFlush, vProps, maxP2pBytes, maxCollBytes) and
 * makeVDevice.
 */
#include "plugin/shim_common.h"

static ncclResult_t v9_init(ncclDebugLogger_t logger) { return shim_init(9, logger); }

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  shim_fill_vprops(&p, &props->vProps.ndevs, props->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  props->maxP2pBytes = shim_max_bytes(p.max_p2p_bytes);
  props->maxCollBytes = shim_max_bytes(p.max_coll_bytes);
  return ncclSuccess;
}

static ncclResult_t v9_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request) {
  return shim_isend_sized(send_comm, data, size, tag, NULL, request);
}

static ncclResult_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                             void **mhandles, void **request) {
  return shim_irecv_sized(recv_comm, n, data, sizes, tags, NULL, request);
}

static ncclResult_t v9_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

static ncclResult_t v9_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props) {
  return shim_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL,
                           NCCL_NET_MAX_DEVS_PER_NIC_V9);
}

COLLX_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "collx",
    .init = v9_init,
    .devices = collx_devices,
    .getProperties = v9_get_properties,
    .listen = collx_listen,
    .connect = shim_connect,
    .accept = shim_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v9_isend,
    .irecv = v9_irecv,
    .iflush = v9_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
    .makeVDevice = v9_make_vdevice,
};
