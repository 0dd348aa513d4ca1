/*
 * The part of a comm both roles share: building and tearing down the
 * base, failure and its report, the control socket's record buffer, the
 * entry points that reach a role through its table, and the clocks.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "progress.h"
#include "topo/topo.h"
#include "util/log.h"

atomic_int tcp_live_threads;

int tcp_caller_progress(void) { return tcp_cfg.progress == COLLX_PROGRESS_CALLER; }
double tcp_spin_seconds(void) { return tcp_cfg.spin_us > 0 ? tcp_cfg.spin_us * 1e-6 : 0; }

/* ---- clocks --------------------------------------------------------------- */

void tcp_deadline_in(struct timespec *ts, double seconds) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  long ns = ts->tv_nsec + (long)(seconds * 1e9);
  ts->tv_sec += ns / 1000000000L;
  ts->tv_nsec = ns % 1000000000L;
}

int tcp_cond_init(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return -1;
  int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
  return rc == 0 ? 0 : -1;
}

double tcp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- errors --------------------------------------------------------------- */

/* WARN once about a failed comm, naming peer and device. */
static void comm_report(struct tcp_comm_base *c) {
  if (atomic_exchange(&c->error_reported, 1) == 0)
    COLLX_WARN("%s connection with %s on device %s failed: %s", c->role->name, c->peer, c->devname,
               c->error_what);
}

/* Record the comm's first fatal error.  A peer that closes while nothing is
 * in flight is normal teardown: the WARN waits until a request is affected. */
void tcp_comm_fail(struct tcp_comm_base *c, ncclResult_t res, const char *what) {
  /* Claim first, write the reason, then publish the error: whoever sees
   * the error (and may report it) also sees why. */
  if (atomic_exchange(&c->fail_claimed, 1)) return;
  snprintf(c->error_what, sizeof c->error_what, "%s", what);
  atomic_store_explicit(&c->error, (int)res, memory_order_release);
  if (atomic_load(&c->stop)) return; /* our own close */
  if (atomic_load(&c->active_reqs) > 0)
    comm_report(c);
  else
    COLLX_INFO(COLLX_LOG_NET, "connection with %s on device %s ended: %s", c->peer, c->devname, what);
}

void tcp_comm_failf(struct tcp_comm_base *c, ncclResult_t res, const char *fmt, ...) {
  char why[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  tcp_comm_fail(c, res, why);
}

ncclResult_t tcp_comm_error(struct tcp_comm_base *c) {
  int err = atomic_load(&c->error);
  if (err != ncclSuccess) comm_report(c);
  return (ncclResult_t)err;
}

int tcp_comm_failed(const struct tcp_comm_base *c) { return atomic_load(&c->error) != ncclSuccess; }

const char *tcp_io_reason(int io) {
  if (io == SOCK_IO_EOF) return "connection closed by peer";
  static __thread char buf[96];
  snprintf(buf, sizeof buf, "%s", strerror(errno));
  return buf;
}

void tcp_comm_wake(struct tcp_comm_base *c) {
  if (c->driven) tcp_progress->kick(c);
}

void tcp_comm_heard(struct tcp_comm_base *c) {
  atomic_store_explicit(&c->last_heard, tcp_now(), memory_order_relaxed);
}

/* ---- the control socket's records ----------------------------------------- */

int tcp_ctrl_queue(struct tcp_comm_base *c, const struct wire_ctrl *m) {
  size_t written = tcp_ctrl_records_written(c);
  if (written > 0) {
    memmove(c->ctrl_tx, c->ctrl_tx + written, c->ctrl_tx_len - written);
    c->ctrl_tx_len -= written;
    c->ctrl_tx_done = c->ctrl_tx_done > written ? c->ctrl_tx_done - written : 0;
    c->ctrl2_tx_done = c->ctrl2_tx_done > written ? c->ctrl2_tx_done - written : 0;
  }
  if (c->ctrl_tx_len + sizeof *m > sizeof c->ctrl_tx) return -1;
  memcpy(c->ctrl_tx + c->ctrl_tx_len, m, sizeof *m);
  c->ctrl_tx_len += sizeof *m;
  return 0;
}

size_t tcp_ctrl_held(const struct tcp_comm_base *c) {
  return (c->ctrl_tx_len - tcp_ctrl_records_written(c)) / sizeof(struct wire_ctrl);
}

enum sock_io tcp_ctrl_write_records(struct tcp_comm_base *c) {
  if (tcp_ctrl_records_written(c) == c->ctrl_tx_len) return SOCK_IO_DONE;
  enum sock_io io = tcp_ctrl_send(c, c->ctrl_tx, c->ctrl_tx_len, NULL, 0, &c->ctrl_tx_done, &c->ctrl2_tx_done);
  if (io == SOCK_IO_DONE) c->ctrl_tx_len = c->ctrl_tx_done = c->ctrl2_tx_done = 0;
  return io;
}

void tcp_ctrl_queue_heartbeat(struct tcp_comm_base *c, double now) {
  if (now - c->last_sent < TCP_HEARTBEAT_INTERVAL_S) return;
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_HEARTBEAT};
  if (tcp_ctrl_queue(c, &m) == 0) c->last_sent = now;
}

/* ---- streams --------------------------------------------------------------- */

enum tcp_want tcp_stream_serve_pass(struct tcp_stream *s, struct tcp_pass *pass) {
  struct tcp_pass unused;
  if (!pass) pass = &unused;
  *pass = (struct tcp_pass){0};
  return (enum tcp_want)s->comm->role->serve(s, pass);
}

enum tcp_want tcp_stream_serve(struct tcp_stream *s) { return tcp_stream_serve_pass(s, NULL); }
int tcp_stream_fd(const struct tcp_stream *s) { return s->fd; }
int tcp_stream_is_send(const struct tcp_stream *s) { return s->comm->role->sends; }

/* ---- requests --------------------------------------------------------------- */

void tcp_req_activate(struct tcp_req *r) {
  r->state = REQ_ACTIVE;
  atomic_store(&r->error, ncclSuccess);
  atomic_fetch_add(&r->comm->active_reqs, 1);
}

void tcp_req_retire(struct tcp_req *r) {
  r->state = REQ_FREE;
  atomic_fetch_sub(&r->comm->active_reqs, 1);
}

/* ---- lifetime --------------------------------------------------------------- */

void tcp_close_fds(int ctrl_fd, int n, const int *fds) {
  if (ctrl_fd >= 0) close(ctrl_fd);
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

void tcp_close_sockets(const struct tcp_comm_sockets *sk) {
  tcp_close_fds(sk->ctrl_fd, sk->nstreams, sk->stream_fds);
  if (sk->spare_ctrl && sk->spare_ctrl_fd >= 0) close(sk->spare_ctrl_fd);
}

/* The connecting (sending) side's port of the control socket: both ends
 * know it, so a timeline pairs a send with its receive. */
static uint32_t timeline_key(int fd, int is_send) {
#ifdef COLLX_TIMELINE
  struct sockaddr_storage a;
  socklen_t len = sizeof a;
  if ((is_send ? getsockname(fd, (struct sockaddr *)&a, &len) : getpeername(fd, (struct sockaddr *)&a, &len)) != 0)
    return 0;
  return (uint32_t)sock_port(&a);
#else
  (void)fd;
  (void)is_send;
  return 0;
#endif
}

int tcp_comm_base_init(struct tcp_comm_base *c, uint32_t magic, const struct tcp_comm_role *role,
                       const struct tcp_comm_sockets *sk) {
  c->magic = magic;
  c->role = role;
  c->dev = sk->dev;
  /* Connections of one device count up together, send and receive alike
   * and across the node's processes, so that the placement plan spreads
   * their threads over its cores. */
  c->serial = collx_topo_next_serial(sk->dev);
  snprintf(c->devname, sizeof c->devname, "%s", sk->devname);
  snprintf(c->peer, sizeof c->peer, "%s", sk->peer);
  c->ctrl_fd = sk->ctrl_fd;
  c->tl_key = timeline_key(sk->ctrl_fd, role->sends);
  c->nstreams = sk->nstreams;
  pthread_mutex_init(&c->ctrl_rx_lock, NULL);
  pthread_mutex_init(&c->ctrl_tx_lock, NULL);
  for (int i = 0; i < sk->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    s->fd = sk->stream_fds[i];
    s->index = i;
    s->comm = c;
    pthread_mutex_init(&s->lock, NULL);
  }
  collx_list_init(&c->wd_node);
  tcp_ctrl_io_init(c, sk);
  if (tcp_failover_init(c, sk) != 0) {
    COLLX_WARN("out of memory for the paths of a comm with %s", sk->peer);
    tcp_close_sockets(sk);
    for (int i = 0; i < sk->nstreams; i++) pthread_mutex_destroy(&c->streams[i].lock);
    pthread_mutex_destroy(&c->ctrl_rx_lock);
    pthread_mutex_destroy(&c->ctrl_tx_lock);
    return -1;
  }
  return 0;
}

/* Comms open per device, for the stream count of new connections
 * (collx_streams_for_comms); devices past the table share its last slot. */
#define COUNTED_DEVICES 64
static atomic_int comms_open[COUNTED_DEVICES];

static atomic_int *comms_open_of(int dev) {
  return &comms_open[dev >= 0 && dev < COUNTED_DEVICES ? dev : COUNTED_DEVICES - 1];
}

int tcp_comms_open(int dev) { return atomic_load(comms_open_of(dev)); }

int tcp_comm_base_start(struct tcp_comm_base *c) {
  tcp_stats_open(c); /* before any other thread can see the comm */
  atomic_fetch_add(comms_open_of(c->dev), 1);
  c->counted = 1;
  if (!tcp_caller_progress()) {
    if (tcp_progress->attach(c) != 0) return -1;
    c->driven = 1;
  }
  if (tcp_watchdog_add(c) != 0) return -1;
  c->watched = 1;
  return 0;
}

void tcp_comm_base_stop(struct tcp_comm_base *c) {
  if (c->counted) atomic_fetch_sub(comms_open_of(c->dev), 1);
  c->counted = 0;
  if (c->watched) tcp_watchdog_remove(c);
  atomic_store(&c->stop, 1);
  /* Nothing waits on the peer: detach waits out a pass in progress only. */
  if (c->driven) tcp_progress->detach(c);
  c->driven = 0;
  tcp_stats_close(c);
  for (int i = 0; i < c->nstreams; i++) {
    close(c->streams[i].fd);
    pthread_mutex_destroy(&c->streams[i].lock);
  }
  tcp_ctrl_close(c);
  tcp_failover_free(c);
  pthread_mutex_destroy(&c->ctrl_rx_lock);
  pthread_mutex_destroy(&c->ctrl_tx_lock);
}

void tcp_comm_base_bury(struct tcp_comm_base *c) {
  c->magic = TCP_MAGIC_DEAD;
  tcp_quarantine(c, collx_topo_free_local);
}

/* A small ring of recently closed objects; the oldest is released when a
 * new one comes in. */
#define TCP_QUARANTINE 64
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *obj;
  void (*release)(void *);
} quarantine[TCP_QUARANTINE];
static unsigned quarantine_next;

void tcp_quarantine(void *obj, void (*release)(void *)) {
  pthread_mutex_lock(&quarantine_lock);
  unsigned k = quarantine_next++ % TCP_QUARANTINE;
  void *old = quarantine[k].obj;
  void (*old_release)(void *) = quarantine[k].release;
  quarantine[k].obj = obj;
  quarantine[k].release = release;
  pthread_mutex_unlock(&quarantine_lock);
  if (old) old_release(old);
}

/* NCCL dlcloses the plugin after the last close: release what is kept. */
__attribute__((destructor(200))) static void quarantine_drain(void) {
  for (unsigned k = 0; k < TCP_QUARANTINE; k++)
    if (quarantine[k].obj) {
      quarantine[k].release(quarantine[k].obj);
      quarantine[k].obj = NULL;
    }
}

/* ---- entry points reaching the role ---------------------------------------- */

ncclResult_t tcp_test(struct tcp_req *r, int *done, size_t *sizes) {
  *done = 0;
  if (r->state != REQ_ACTIVE) {
    COLLX_WARN("test called on a request that is not in flight (already completed?)");
    return ncclInvalidArgument;
  }
  return r->comm->role->test(r, done, sizes);
}

void tcp_comm_close(struct tcp_comm_base *c) {
  tcp_connect_reap();
  c->role->close(c);
}

int tcp_is_send_comm(const void *p) { return p && ((const struct tcp_comm_base *)p)->magic == TCP_MAGIC_SEND; }
int tcp_is_recv_comm(const void *p) { return p && ((const struct tcp_comm_base *)p)->magic == TCP_MAGIC_RECV; }
int tcp_is_req(const void *p) { return p && ((const struct tcp_req *)p)->magic == TCP_MAGIC_REQ; }
