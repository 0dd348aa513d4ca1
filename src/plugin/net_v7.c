/*
 * ncclNet v7 shim (NCCL 2.18): v8 without regIsGlobal, and regMr takes an
 * int size.
 */
#include "plugin/shim_common.h"

static ncclResult_t v7_init(ncclDebugLogger_t logger) { return shim_init(7, logger); }

static ncclResult_t v7_get_properties(int dev, ncclNetProperties_v7_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  SHIM_FILL_COMMON_PROPS(props, &p);
  return ncclSuccess;
}

static ncclResult_t v7_reg_mr(void *comm, void *data, int size, int type, void **mhandle) {
  if (size < 0) return ncclInvalidArgument;
  return collx_reg_mr(comm, data, (size_t)size, type, mhandle);
}

static ncclResult_t v7_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                             void **request) {
  return shim_isend_int(send_comm, data, size, tag, request);
}

static ncclResult_t v7_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                             void **mhandles, void **request) {
  return shim_irecv_int(recv_comm, n, data, sizes, tags, request);
}

static ncclResult_t v7_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  return shim_iflush(recv_comm, n, data, sizes, request);
}

COLLX_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = "collx",
    .init = v7_init,
    .devices = collx_devices,
    .getProperties = v7_get_properties,
    .listen = collx_listen,
    .connect = shim_connect,
    .accept = shim_accept,
    .regMr = v7_reg_mr,
    .regMrDmaBuf = shim_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v7_isend,
    .irecv = v7_irecv,
    .iflush = v7_iflush,
    .test = shim_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = shim_get_device_mr,
    .irecvConsumed = shim_irecv_consumed,
};
