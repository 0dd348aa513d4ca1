/*
 * The version-neutral entry points for connections and data.  Everything
 * NCCL hands in is checked here, so that a bad pointer, a NULL, an
 * out-of-range count or a call in the wrong state gives a clear error
 * instead of reaching the transport.
 */
#include "comm.h"

#include "core/context.h"
#include "core/core.h"
#include "core/profiler.h"
#include "core/transports.h"
#include "topo/topo.h"
#include "util/log.h"

#define CHECK_ARG(cond, ...)          \
  do {                                \
    if (!(cond)) {                    \
      COLLX_WARN(__VA_ARGS__);        \
      return ncclInvalidArgument;     \
    }                                 \
  } while (0)

/* The kind of an opaque pointer NCCL handed in, by the transport's rule. */
static int is_kind(const void *p, enum collx_obj_kind k) { return collx_transport()->kind(p) == k; }

ncclResult_t collx_listen_opts(int dev, void *handle, const struct collx_conn_opts *o,
                               void **listen_comm) {
  const struct collx_device *d = collx_device_get(dev);
  CHECK_ARG(d, "listen: no device %d", dev);
  CHECK_ARG(handle && listen_comm, "listen: NULL handle or comm pointer");
  *listen_comm = NULL;
  return collx_transport()->listen(d, dev, handle, o, listen_comm);
}

ncclResult_t collx_listen(int dev, void *handle, void **listen_comm) {
  return collx_listen_opts(dev, handle, NULL, listen_comm);
}

ncclResult_t collx_connect(int dev, void *handle, void **send_comm) {
  return collx_connect_opts(dev, handle, NULL, send_comm);
}

ncclResult_t collx_connect_opts(int dev, void *handle, const struct collx_conn_opts *o,
                                void **send_comm) {
  const struct collx_device *d = collx_device_get(dev);
  CHECK_ARG(d, "connect: no device %d", dev);
  CHECK_ARG(handle && send_comm, "connect: NULL handle or comm pointer");
  ncclResult_t res = collx_transport()->connect(d, dev, handle, o, send_comm);
  /* NCCL's proxy thread has the GPU's context current here. */
  if (res == ncclSuccess && *send_comm) collx_topo_log_gpu_locality(dev);
  return res;
}

ncclResult_t collx_accept(void *listen_comm, void **recv_comm) {
  CHECK_ARG(recv_comm, "accept: NULL comm pointer");
  *recv_comm = NULL;
  CHECK_ARG(is_kind(listen_comm, COLLX_OBJ_LISTEN), "accept: %p is not a listening comm", listen_comm);
  ncclResult_t res = collx_transport()->accept(listen_comm, recv_comm);
  if (res == ncclSuccess && *recv_comm) {
    collx_ctx_adopt_accepted(listen_comm, *recv_comm);
    collx_topo_log_gpu_locality(collx_transport()->comm_dev(*recv_comm));
  }
  return res;
}

/* Host memory needs no registration; the handle only records what kind of
 * memory it was, so that isend/irecv can refuse what we cannot reach. */
static int mr_host;

ncclResult_t collx_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  CHECK_ARG(mhandle, "regMr: NULL mhandle pointer");
  *mhandle = NULL;
  CHECK_ARG(is_kind(comm, COLLX_OBJ_SEND) || is_kind(comm, COLLX_OBJ_RECV), "regMr: %p is not a comm", comm);
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

ncclResult_t collx_isend_ph(void *send_comm, void *data, size_t size, int tag, void *phandle,
                            void **request) {
  CHECK_ARG(request, "isend: NULL request pointer");
  *request = NULL;
  CHECK_ARG(is_kind(send_comm, COLLX_OBJ_SEND), "isend: %p is not a send comm", send_comm);
  CHECK_ARG(data || size == 0, "isend: NULL buffer for %zu bytes", size);
  ncclResult_t res = collx_transport()->isend(send_comm, data, size, tag, request);
  ncclProfilerCallback_t cb = collx_prof_callback();
  if (cb && phandle && res == ncclSuccess && *request)
    collx_prof_posted(cb, send_comm, *request, COLLX_PROFILER_SOCK_SEND, 1, &size, &phandle);
  return res;
}

ncclResult_t collx_isend(void *send_comm, void *data, size_t size, int tag, void **request) {
  return collx_isend_ph(send_comm, data, size, tag, NULL, request);
}

ncclResult_t collx_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
                            const int *tags, void *const *phandles, void **request) {
  CHECK_ARG(request, "irecv: NULL request pointer");
  *request = NULL;
  CHECK_ARG(is_kind(recv_comm, COLLX_OBJ_RECV), "irecv: %p is not a receive comm", recv_comm);
  CHECK_ARG(n >= 1 && n <= COLLX_MAX_RECVS, "irecv: %d buffers (1 to %d allowed)", n, COLLX_MAX_RECVS);
  CHECK_ARG(data && sizes, "irecv: NULL buffer or size array");
  for (int i = 0; i < n; i++)
    CHECK_ARG(data[i] || sizes[i] == 0, "irecv: buffer %d is NULL for %zu bytes", i, sizes[i]);
  ncclResult_t res = collx_transport()->irecv(recv_comm, n, data, sizes, tags, request);
  ncclProfilerCallback_t cb = collx_prof_callback();
  if (cb && phandles && res == ncclSuccess && *request)
    collx_prof_posted(cb, recv_comm, *request, COLLX_PROFILER_SOCK_RECV, n, sizes, phandles);
  return res;
}

ncclResult_t collx_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                         const int *tags, void **request) {
  return collx_irecv_ph(recv_comm, n, data, sizes, tags, NULL, request);
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
  CHECK_ARG(is_kind(request, COLLX_OBJ_REQ), "test: %p is not a collx request", request);
  ncclResult_t res = collx_transport()->test(request, done, sizes);
  /* Done or failed, the request is over: its events stop before NCCL can
   * post a new one into the same slot. */
  if (collx_prof_any_live()) {
    if (*done || res != ncclSuccess)
      collx_prof_ended(request);
    else
      collx_prof_progress(request);
  }
  return res;
}

ncclResult_t collx_close_send(void *send_comm) {
  CHECK_ARG(is_kind(send_comm, COLLX_OBJ_SEND), "closeSend: %p is not a send comm (closed twice?)", send_comm);
  collx_ctx_forget(send_comm);
  if (collx_prof_any_live()) collx_prof_comm_closed(send_comm);
  collx_transport()->close_send(send_comm);
  return ncclSuccess;
}

ncclResult_t collx_close_recv(void *recv_comm) {
  CHECK_ARG(is_kind(recv_comm, COLLX_OBJ_RECV), "closeRecv: %p is not a receive comm (closed twice?)", recv_comm);
  collx_ctx_forget(recv_comm);
  if (collx_prof_any_live()) collx_prof_comm_closed(recv_comm);
  collx_transport()->close_recv(recv_comm);
  return ncclSuccess;
}

ncclResult_t collx_close_listen(void *listen_comm) {
  CHECK_ARG(is_kind(listen_comm, COLLX_OBJ_LISTEN), "closeListen: %p is not a listening comm (closed twice?)", listen_comm);
  collx_ctx_forget(listen_comm);
  collx_transport()->close_listen(listen_comm);
  return ncclSuccess;
}

void collx_close_comm_raw(void *comm) {
  enum collx_obj_kind k = collx_transport()->kind(comm);
  if (collx_prof_any_live() && (k == COLLX_OBJ_SEND || k == COLLX_OBJ_RECV)) collx_prof_comm_closed(comm);
  if (k == COLLX_OBJ_SEND) collx_transport()->close_send(comm);
  else if (k == COLLX_OBJ_RECV) collx_transport()->close_recv(comm);
}

void collx_close_listen_raw(void *listen_comm) {
  if (is_kind(listen_comm, COLLX_OBJ_LISTEN)) collx_transport()->close_listen(listen_comm);
}

int collx_live_threads(void) { return collx_transport()->live_threads(); }
