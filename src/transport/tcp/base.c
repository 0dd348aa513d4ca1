/*
 * The base floor (base.h): failure and its report, requests, quarantine,
 * the clocks and the settings.  Every other file of the transport may call
 * it; it calls nothing of theirs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "util/log.h"

struct collx_config tcp_cfg;
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

void tcp_comm_heard(struct tcp_comm_base *c) {
  atomic_store_explicit(&c->last_heard, tcp_now(), memory_order_relaxed);
}

/* ---- requests --------------------------------------------------------------- */

atomic_int tcp_parts_watched;

void tcp_req_activate(struct tcp_req *r) {
  r->state = REQ_ACTIVE;
  atomic_store(&r->error, ncclSuccess);
  atomic_store(&r->watched, atomic_load_explicit(&tcp_parts_watched, memory_order_relaxed));
  atomic_fetch_add(&r->comm->active_reqs, 1);
}

void tcp_req_retire(struct tcp_req *r) {
  r->state = REQ_FREE;
  atomic_fetch_sub(&r->comm->active_reqs, 1);
}

void tcp_parts_report(struct tcp_comm_base *c, const struct tcp_parts *p, int rest, uint32_t *began,
                      uint32_t *through, int *fds) {
  uint32_t bits = atomic_load_explicit(&((struct tcp_parts *)p)->bits, memory_order_acquire);
  *began = bits & ((1u << TCP_PARTS_HOLDING) - 1);
  *through = rest ? 0 : *began & ~(bits >> TCP_PARTS_HOLDING);
  for (int s = 0; s < COLLX_PART_STREAMS; s++)
    fds[s] = s < c->nstreams && *began >> s & 1 ? atomic_load_explicit(&c->streams[s].fd_seen, memory_order_relaxed)
                                                : -1;
}

/* ---- quarantine ------------------------------------------------------------ */

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

int tcp_is_send_comm(const void *p) { return p && ((const struct tcp_comm_base *)p)->magic == TCP_MAGIC_SEND; }
int tcp_is_recv_comm(const void *p) { return p && ((const struct tcp_comm_base *)p)->magic == TCP_MAGIC_RECV; }
int tcp_is_req(const void *p) { return p && ((const struct tcp_req *)p)->magic == TCP_MAGIC_REQ; }
