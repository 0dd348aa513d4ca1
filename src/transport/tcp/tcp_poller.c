/*
 * The poller: one thread per process that watches the control sockets of
 * the receive comms and reads small messages into their buffers as they
 * arrive, not when NCCL's proxy thread next calls test() on them.
 *
 * Why.  NCCL's proxy thread drives every connection of a rank in one loop.
 * With the LL protocols the GPU polls the receive buffer itself, so a
 * message counts as delivered once its bytes are in the buffer; with the
 * poller that happens as soon as they arrive, whatever the proxy is doing.
 * And a test() that would find nothing costs no recv() call while the
 * poller watches, so the proxy's loop, which also notices the GPU's sends,
 * goes round faster.
 *
 * Cost.  While it watches, the poller spins on a core (one epoll_wait with
 * no timeout per round, for all sockets at once), as NCCL's proxy thread
 * does.  It watches only while small messages flow: an irecv on a comm
 * that holds its CTS records back (small traffic, see TCP_CTS_BATCH) or a
 * message read wakes it, and POLLER_IDLE_S without either parks it.  While
 * it is parked, or for a comm whose next record waits for its receive
 * (lane_blocked: the bytes are read already, the socket stays quiet),
 * test() reads for itself as before.  The watchdog reads every socket at
 * each tick regardless.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "tcp_internal.h"
#include "util/log.h"

/* Without a message or a small-message receive for this long, the poller
 * parks: a training step's compute phase should not cost a core. */
#define POLLER_IDLE_S 1e-3
#define POLLER_EVENTS 64

static int enabled;
static pthread_mutex_t pl_life = PTHREAD_MUTEX_INITIALIZER;  /* start, stop, pl_count */
static pthread_mutex_t pl_sweep = PTHREAD_MUTEX_INITIALIZER; /* a round against a removal */
static pthread_mutex_t pl_park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pl_park_cond = PTHREAD_COND_INITIALIZER;
static int pl_ep = -1;
static int pl_count, pl_started;
static pthread_t pl_thread;
static atomic_int pl_stop, pl_parked, pl_kicked, pl_spinning, pl_removing;
static atomic_uint pl_activity; /* small-message receives posted */

_Thread_local int tcp_on_poller;

void tcp_set_poller(int on) { enabled = on; }
int tcp_poller_enabled(void) { return enabled; }

/* A comm whose socket is ready only because its next record waits for a
 * receive (or because it is closed or failed) is not traffic. */
static int comm_moving(struct tcp_comm *c) {
  return !atomic_load(&c->lane_blocked) && !atomic_load(&c->ctrl_eof) && !atomic_load(&c->error);
}

/* One look at every watched socket.  Returns the comms that had traffic. */
static int poll_round(void) {
  struct epoll_event ev[POLLER_EVENTS];
  int moving = 0;
  pthread_mutex_lock(&pl_sweep);
  int n = epoll_wait(pl_ep, ev, POLLER_EVENTS, 0);
  for (int i = 0; i < n; i++) {
    struct tcp_comm *c = ev[i].data.ptr;
    tcp_ctrl_drain(c);
    moving += comm_moving(c);
  }
  pthread_mutex_unlock(&pl_sweep);
  return moving;
}

static void park(void) {
  pthread_mutex_lock(&pl_park_lock);
  atomic_store(&pl_parked, 1);
  while (!atomic_load(&pl_kicked) && !atomic_load(&pl_stop))
    pthread_cond_wait(&pl_park_cond, &pl_park_lock);
  atomic_store(&pl_kicked, 0);
  atomic_store(&pl_parked, 0);
  pthread_mutex_unlock(&pl_park_lock);
}

static void *poller(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "cx-poller");
  tcp_on_poller = 1;
  unsigned seen = atomic_load(&pl_activity);
  double last = tcp_now();
  while (!atomic_load(&pl_stop)) {
    atomic_store(&pl_spinning, 1);
    int moving = poll_round();
    double now = tcp_now();
    unsigned a = atomic_load(&pl_activity);
    if (moving || a != seen) {
      seen = a;
      last = now;
    }
    if (atomic_load(&pl_removing)) sched_yield(); /* let a close take pl_sweep */
    if (now - last < POLLER_IDLE_S) continue;
    /* Idle: callers read for themselves again; one more look for what
     * came in before they knew, then sleep until kicked. */
    atomic_store(&pl_spinning, 0);
    poll_round();
    park();
    seen = atomic_load(&pl_activity);
    last = tcp_now();
  }
  atomic_store(&pl_spinning, 0);
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

static int poller_start(void) {
  pl_ep = epoll_create1(EPOLL_CLOEXEC);
  if (pl_ep < 0) return -1;
  atomic_store(&pl_stop, 0);
  atomic_fetch_add(&tcp_live_threads, 1);
  if (pthread_create(&pl_thread, NULL, poller, NULL) != 0) {
    atomic_fetch_sub(&tcp_live_threads, 1);
    close(pl_ep);
    pl_ep = -1;
    return -1;
  }
  pl_started = 1;
  return 0;
}

static void poller_stop(void) {
  pthread_mutex_lock(&pl_park_lock);
  atomic_store(&pl_stop, 1);
  pthread_cond_signal(&pl_park_cond);
  pthread_mutex_unlock(&pl_park_lock);
  pthread_join(pl_thread, NULL);
  close(pl_ep);
  pl_ep = -1;
  pl_started = 0;
}

int tcp_poller_add(struct tcp_comm *c) {
  int rc = 0;
  pthread_mutex_lock(&pl_life);
  if (!pl_started && poller_start() != 0) {
    COLLX_WARN("cannot start the poller thread (%s); tests read their control sockets themselves",
               strerror(errno));
    rc = -1;
  } else {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    rc = epoll_ctl(pl_ep, EPOLL_CTL_ADD, c->ctrl_fd, &ev);
    if (rc != 0) COLLX_WARN("cannot watch the control socket from %s: %s", c->peer, strerror(errno));
    else pl_count++;
    if (pl_count == 0) poller_stop();
  }
  pthread_mutex_unlock(&pl_life);
  if (rc == 0) c->polled = 1;
  return rc;
}

/* After this returns the poller holds no pointer to c; the last comm out
 * stops the thread, so that none outlives the plugin's last comm. */
void tcp_poller_remove(struct tcp_comm *c) {
  if (!c->polled) return;
  pthread_mutex_lock(&pl_life);
  atomic_fetch_add(&pl_removing, 1);
  pthread_mutex_lock(&pl_sweep);
  epoll_ctl(pl_ep, EPOLL_CTL_DEL, c->ctrl_fd, NULL);
  pthread_mutex_unlock(&pl_sweep);
  atomic_fetch_sub(&pl_removing, 1);
  c->polled = 0;
  if (--pl_count == 0) poller_stop();
  pthread_mutex_unlock(&pl_life);
}

int tcp_poller_covers(struct tcp_comm *c) {
  return c->polled && atomic_load_explicit(&pl_spinning, memory_order_acquire) &&
         !atomic_load(&c->lane_blocked);
}

void tcp_poller_kick(struct tcp_comm *c) {
  if (!c->polled || atomic_load(&c->cts_prompt) > 0) return; /* not small traffic */
  atomic_fetch_add_explicit(&pl_activity, 1, memory_order_relaxed);
  if (!atomic_load(&pl_parked)) return;
  pthread_mutex_lock(&pl_park_lock);
  atomic_store(&pl_kicked, 1);
  pthread_cond_signal(&pl_park_cond);
  pthread_mutex_unlock(&pl_park_lock);
}
