/*
 * The TCP transport's table of operations (src/transport/transport.h):
 * thin adapters from core's opaque pointers to tcp.h's functions.  Core has
 * already checked every argument, the kind of every object included.
 */
#include <stdatomic.h>

#include "comm_life.h"
#include "util/log.h"

static ncclResult_t ops_init(const struct collx_config *cfg) {
  tcp_cfg = *cfg;
  return ncclSuccess;
}

static ncclResult_t ops_listen(const struct collx_device *dev, int dev_index, void *handle,
                               const struct collx_conn_opts *opts, void **listen_comm) {
  return tcp_listen(dev, dev_index, handle, opts, (struct tcp_listen **)listen_comm);
}

static ncclResult_t ops_accept(void *listen_comm, void **recv_comm) {
  return tcp_accept(listen_comm, (struct tcp_comm_base **)recv_comm);
}

static ncclResult_t ops_connect(const struct collx_device *dev, int dev_index, void *handle,
                                const struct collx_conn_opts *opts, void **send_comm) {
  return tcp_connect(dev, dev_index, handle, opts, (struct tcp_comm_base **)send_comm);
}

static ncclResult_t ops_isend(void *send_comm, void *data, size_t size, int tag, void **request) {
  return tcp_isend(send_comm, data, size, tag, (struct tcp_req **)request);
}

static ncclResult_t ops_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                              const int *tags, void **request) {
  return tcp_irecv(recv_comm, n, data, sizes, tags, (struct tcp_req **)request);
}

static ncclResult_t ops_test(void *request, int *done, size_t *sizes) {
  struct tcp_req *r = request;
  *done = 0;
  if (r->state != REQ_ACTIVE) {
    COLLX_WARN("test called on a request that is not in flight (already completed?)");
    return ncclInvalidArgument;
  }
  return r->comm->role->test(r, done, sizes);
}

static void ops_close_comm(void *comm) {
  tcp_connect_reap();
  tcp_comm_close(comm);
}
static void ops_close_listen(void *listen_comm) { tcp_listen_close(listen_comm); }

static enum collx_obj_kind ops_kind(const void *p) {
  if (tcp_is_send_comm(p)) return COLLX_OBJ_SEND;
  if (tcp_is_recv_comm(p)) return COLLX_OBJ_RECV;
  if (tcp_is_listen(p)) return COLLX_OBJ_LISTEN;
  if (tcp_is_req(p)) return COLLX_OBJ_REQ;
  return COLLX_OBJ_NONE;
}

static void ops_watch_parts(void *request) {
  atomic_store_explicit(&tcp_parts_watched, 1, memory_order_relaxed);
  atomic_store_explicit(&((struct tcp_req *)request)->watched, 1, memory_order_relaxed);
}

static void ops_parts(void *request, int msg, uint32_t *began, uint32_t *through, int fds[COLLX_PART_STREAMS]) {
  struct tcp_req *r = request;
  int rest = 1;
  struct tcp_parts none = {0};
  struct tcp_parts *p = r->comm->role->parts(r, msg, &rest);
  tcp_parts_report(r->comm, p ? p : &none, rest, began, through, fds);
}

static int ops_comm_dev(const void *comm) { return ((const struct tcp_comm_base *)comm)->dev; }
static int ops_live_threads(void) { return atomic_load(&tcp_live_threads); }

const struct collx_transport collx_tcp_transport = {
    .name = "tcp",
    .init = ops_init,
    .listen = ops_listen,
    .accept = ops_accept,
    .connect = ops_connect,
    .connect_forget = tcp_connect_forget,
    .isend = ops_isend,
    .irecv = ops_irecv,
    .test = ops_test,
    .close_send = ops_close_comm,
    .close_recv = ops_close_comm,
    .close_listen = ops_close_listen,
    .kind = ops_kind,
    .comm_dev = ops_comm_dev,
    .live_threads = ops_live_threads,
    .caller_progress = tcp_caller_progress,
    .watch_parts = ops_watch_parts,
    .parts = ops_parts,
};
