/*
 * The version-neutral entry points for connections and data.  Everything
 * NCCL hands in is checked here, so that a bad pointer, a NULL, an
 * out-of-range count or a call in the wrong state gives a clear error
 * instead of reaching the transport.
 */
#include "comm.h"

#include <stdatomic.h>

#include "core/context.h"
#include "core/core.h"
#include "core/handle.h"
#include "topo/topo.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_internal.h"
#include "util/log.h"

#define CHECK_ARG(cond, ...)          \
  do {                                \
    if (!(cond)) {                    \
      COLLX_WARN(__VA_ARGS__);        \
      return ncclInvalidArgument;     \
    }                                 \
  } while (0)

ncclResult_t collx_listen_opts(int dev, void *handle, const struct tcp_conn_opts *o,
                               void **listen_comm) {
  const struct collx_device *d = collx_device_get(dev);
  CHECK_ARG(d, "listen: no device %d", dev);
  CHECK_ARG(handle && listen_comm, "listen: NULL handle or comm pointer");
  *listen_comm = NULL;
  return tcp_listen(d, dev, (struct collx_handle *)handle, o, (struct tcp_listen **)listen_comm);
}

ncclResult_t collx_listen(int dev, void *handle, void **listen_comm) {
  return collx_listen_opts(dev, handle, NULL, listen_comm);
}

ncclResult_t collx_connect(int dev, void *handle, void **send_comm) {
  return collx_connect_opts(dev, handle, NULL, send_comm);
}

ncclResult_t collx_connect_opts(int dev, void *handle, const struct tcp_conn_opts *o,
                                void **send_comm) {
  const struct collx_device *d = collx_device_get(dev);
  CHECK_ARG(d, "connect: no device %d", dev);
  CHECK_ARG(handle && send_comm, "connect: NULL handle or comm pointer");
  ncclResult_t res = tcp_connect(d, dev, (struct collx_handle *)handle, o, (struct tcp_comm **)send_comm);
  /* NCCL's proxy thread has the GPU's context current here. */
  if (res == ncclSuccess && *send_comm) collx_topo_log_gpu_locality(dev);
  return res;
}

ncclResult_t collx_accept(void *listen_comm, void **recv_comm) {
  CHECK_ARG(recv_comm, "accept: NULL comm pointer");
  *recv_comm = NULL;
  CHECK_ARG(tcp_is_listen(listen_comm), "accept: %p is not a listening comm", listen_comm);
  ncclResult_t res = tcp_accept(listen_comm, (struct tcp_comm **)recv_comm);
  if (res == ncclSuccess && *recv_comm) {
    collx_ctx_adopt_accepted(listen_comm, *recv_comm);
    collx_topo_log_gpu_locality(((struct tcp_comm *)*recv_comm)->dev);
  }
  return res;
}

/* Host memory needs no registration; the handle only records what kind of
 * memory it was, so that isend/irecv can refuse what we cannot reach. */
static int mr_host;

ncclResult_t collx_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  CHECK_ARG(mhandle, "regMr: NULL mhandle pointer");
  *mhandle = NULL;
  CHECK_ARG(tcp_is_send_comm(comm) || tcp_is_recv_comm(comm), "regMr: %p is not a comm", comm);
  if (type != NCCL_PTR_HOST) {
    COLLX_WARN("regMr: memory type %d is not supported (collx moves host memory only)", type);
    return ncclInternalError;
  }
  *mhandle = &mr_host;
  return ncclSuccess;
}

ncclResult_t collx_dereg_mr(void *comm, void *mhandle) {
  CHECK_ARG(mhandle == NULL || mhandle == &mr_host, "deregMr: %p is not a collx memory handle", mhandle);
  return ncclSuccess;
}

ncclResult_t collx_isend(void *send_comm, void *data, size_t size, int tag, void **request) {
  CHECK_ARG(request, "isend: NULL request pointer");
  *request = NULL;
  CHECK_ARG(tcp_is_send_comm(send_comm), "isend: %p is not a send comm", send_comm);
  CHECK_ARG(data || size == 0, "isend: NULL buffer for %zu bytes", size);
  return tcp_isend(send_comm, data, size, tag, (struct tcp_req **)request);
}

ncclResult_t collx_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                         const int *tags, void **request) {
  CHECK_ARG(request, "irecv: NULL request pointer");
  *request = NULL;
  CHECK_ARG(tcp_is_recv_comm(recv_comm), "irecv: %p is not a receive comm", recv_comm);
  CHECK_ARG(n >= 1 && n <= COLLX_MAX_RECVS, "irecv: %d buffers (1 to %d allowed)", n, COLLX_MAX_RECVS);
  CHECK_ARG(data && sizes, "irecv: NULL buffer or size array");
  for (int i = 0; i < n; i++)
    CHECK_ARG(data[i] || sizes[i] == 0, "irecv: buffer %d is NULL for %zu bytes", i, sizes[i]);
  return tcp_irecv(recv_comm, n, data, sizes, tags, (struct tcp_req **)request);
}

ncclResult_t collx_iflush(void *recv_comm, int n, void **data, const size_t *sizes,
                          void **request) {
  CHECK_ARG(request, "iflush: NULL request pointer");
  /* Data lands in host memory through the kernel: nothing to flush. */
  *request = NULL;
  return ncclSuccess;
}

ncclResult_t collx_test(void *request, int *done, size_t *sizes) {
  CHECK_ARG(done, "test: NULL done pointer");
  *done = 0;
  CHECK_ARG(tcp_is_req(request), "test: %p is not a collx request", request);
  return tcp_test(request, done, sizes);
}

ncclResult_t collx_close_send(void *send_comm) {
  CHECK_ARG(tcp_is_send_comm(send_comm), "closeSend: %p is not a send comm (closed twice?)", send_comm);
  collx_ctx_forget(send_comm);
  tcp_comm_close(send_comm);
  return ncclSuccess;
}

ncclResult_t collx_close_recv(void *recv_comm) {
  CHECK_ARG(tcp_is_recv_comm(recv_comm), "closeRecv: %p is not a receive comm (closed twice?)", recv_comm);
  collx_ctx_forget(recv_comm);
  tcp_comm_close(recv_comm);
  return ncclSuccess;
}

ncclResult_t collx_close_listen(void *listen_comm) {
  CHECK_ARG(tcp_is_listen(listen_comm), "closeListen: %p is not a listening comm (closed twice?)", listen_comm);
  collx_ctx_forget(listen_comm);
  tcp_listen_close(listen_comm);
  return ncclSuccess;
}

void collx_close_comm_raw(void *comm) {
  if (tcp_is_send_comm(comm) || tcp_is_recv_comm(comm)) tcp_comm_close(comm);
}

void collx_close_listen_raw(void *listen_comm) {
  if (tcp_is_listen(listen_comm)) tcp_listen_close(listen_comm);
}

int collx_live_threads(void) { return atomic_load(&tcp_live_threads); }
