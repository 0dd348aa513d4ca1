/*
 * ncclNet v8 shim: int sizes and the v8 property layout over the core.
 */
#include <stdint.h>

#include "collx/net_abi.h"
#include "core/core.h"

#define COLLX_EXPORT __attribute__((visibility("default")))

static ncclResult_t v8_init(ncclDebugLogger_t logger) {
  collx_set_abi_version(8);
  return collx_init(logger);
}

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props) {
  struct collx_props p;
  ncclResult_t res = collx_get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  props->name = (char *)p.name;
  props->pciPath = (char *)p.pci_path;
  props->guid = p.guid;
  props->ptrSupport = p.ptr_support;
  props->regIsGlobal = 0;
  props->speed = p.speed_mbps;
  props->port = p.port;
  props->latency = p.latency_us;
  props->maxComms = p.max_comms;
  props->maxRecvs = p.max_recvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0;
  return ncclSuccess;
}

static ncclResult_t v8_connect(int dev, void *handle, void **send_comm,
                               ncclNetDeviceHandle_v8_t **dev_comm) {
  if (dev_comm) *dev_comm = NULL;
  return collx_connect(dev, handle, send_comm);
}

static ncclResult_t v8_accept(void *listen_comm, void **recv_comm,
                              ncclNetDeviceHandle_v8_t **dev_comm) {
  if (dev_comm) *dev_comm = NULL;
  return collx_accept(listen_comm, recv_comm);
}

static ncclResult_t v8_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                     uint64_t offset, int fd, void **mhandle) {
  return collx_reg_mr(comm, data, size, type, mhandle);
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                             void **request) {
  if (size < 0) return ncclInvalidArgument;
  return collx_isend(send_comm, data, (size_t)size, tag, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                             void **mhandles, void **request) {
  size_t s[COLLX_MAX_RECVS];
  if (n < 1 || n > COLLX_MAX_RECVS || !sizes) return collx_irecv(recv_comm, n, data, NULL, tags, request);
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    s[i] = (size_t)sizes[i];
  }
  return collx_irecv(recv_comm, n, data, s, tags, request);
}

static ncclResult_t v8_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  return collx_iflush(recv_comm, n, data, NULL, request);
}

static ncclResult_t v8_test(void *request, int *done, int *sizes) {
  /* The core writes one size per message of the request; the sentinel
   * tells how many that was. */
  size_t s[COLLX_MAX_RECVS];
  for (int i = 0; i < COLLX_MAX_RECVS; i++) s[i] = SIZE_MAX;
  ncclResult_t res = collx_test(request, done, s);
  if (res == ncclSuccess && *done && sizes)
    for (int i = 0; i < COLLX_MAX_RECVS && s[i] != SIZE_MAX; i++) sizes[i] = (int)s[i];
  return res;
}

static ncclResult_t v8_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle) {
  return ncclInternalError; /* no device-side networking */
}

static ncclResult_t v8_irecv_consumed(void *recv_comm, int n, void *request) {
  return ncclSuccess;
}

COLLX_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "collx",
    .init = v8_init,
    .devices = collx_devices,
    .getProperties = v8_get_properties,
    .listen = collx_listen,
    .connect = v8_connect,
    .accept = v8_accept,
    .regMr = collx_reg_mr,
    .regMrDmaBuf = v8_reg_mr_dmabuf,
    .deregMr = collx_dereg_mr,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = v8_iflush,
    .test = v8_test,
    .closeSend = collx_close_send,
    .closeRecv = collx_close_recv,
    .closeListen = collx_close_listen,
    .getDeviceMr = v8_get_device_mr,
    .irecvConsumed = v8_irecv_consumed,
};
