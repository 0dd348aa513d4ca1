/*
 * ncclNet v8 shim: int sizes and the v8 property layout over the core.
 */
#include "plugin/shim_common.h"

static ncclResult_t v8_init(ncclDebugLogger_t logger) { return shim_init(8, logger); }

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  props->regIsGlobal = 0;
  return ncclSuccess;
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                             void **request) {
  return shim_isend_int(send_comm, data, size, tag, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                             void **mhandles, void **request) {
  return shim_irecv_int(recv_comm, n, data, sizes, tags, request);
}

static ncclResult_t v8_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

COLLX_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "collx",
    .init = v8_init,
    .devices = collx_devices,
    .getProperties = v8_get_properties,
    .listen = collx_listen,
    .connect = shim_connect,
    .accept = shim_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = v8_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
};
