/*
 * The watchdog: one thread per process, alive while any comm is, that
 * every WATCHDOG_TICK_MS sends heartbeats, reads what the control sockets
 * hold, writes held CTS records, and declares a silent peer dead after
 * COLLX_TIMEOUT.  Liveness is judged by the peer's plugin answering, never
 * by data moving: a rank that stops calling NCCL for minutes still has its
 * plugin threads answering, while a frozen or lost host answers nothing.
 *
 * It reaches each comm's role through the comm's table (base.h), so that
 * the roles' files, which register and remove comms here, are not called
 * back by name.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "linger.h"
#include "progress.h"
#include "watchdog.h"
#include "util/log.h"

#define WATCHDOG_TICK_MS 200



static pthread_mutex_t wd_life = PTHREAD_MUTEX_INITIALIZER; /* start/stop */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER; /* the list */
static struct collx_list wd_comms = {&wd_comms, &wd_comms};
static int wd_count;
static int wd_started;
static atomic_int wd_stop;
static pthread_t wd_thread;
/* The watchdog sleeps between ticks on a condition variable, so that the
 * last close, which stops it, does not wait out a tick. */
static pthread_mutex_t wd_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_wake;
static pthread_once_t wd_wake_once = PTHREAD_ONCE_INIT;

static void wd_wake_init(void) {
  if (tcp_cond_init(&wd_wake) != 0) pthread_cond_init(&wd_wake, NULL); /* cannot fail on Linux */
}

static void watchdog_sleep(void) {
  struct timespec until;
  tcp_deadline_in(&until, WATCHDOG_TICK_MS * 1e-3);
  pthread_mutex_lock(&wd_sleep_lock);
  while (!atomic_load(&wd_stop) && pthread_cond_timedwait(&wd_wake, &wd_sleep_lock, &until) != ETIMEDOUT) {
  }
  pthread_mutex_unlock(&wd_sleep_lock);
}

static void watch_one(struct tcp_comm_base *c, double now) {
  if (tcp_comm_failed(c) || atomic_load(&c->stop)) return;
  c->role->watch(c, now);
  c->role->drain(c);
  if (c->failover) tcp_ctrl_watch(&c->ctrl, now);
  tcp_stats_sample(c, now);
  double silent = now - atomic_load(&c->last_heard);
  /* A peer that closed its control socket has said goodbye: what is left
   * is judged by what it can still deliver (recv.c). */
  if (tcp_cfg.timeout_s > 0 && silent > tcp_cfg.timeout_s && !atomic_load(&c->ctrl.eof)) {
    tcp_comm_failf(c, ncclRemoteError, "no answer from the peer's plugin for %.0f s (COLLX_TIMEOUT=%d)",
                   silent, tcp_cfg.timeout_s);
    tcp_comm_wake(c);
  }
}

static void *watchdog(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "cx-watchdog");
  while (!atomic_load(&wd_stop)) {
    double now = tcp_now();
    struct collx_list *pos, *tmp;
    pthread_mutex_lock(&wd_lock);
    collx_list_for_each_safe(pos, tmp, &wd_comms) {
      watch_one(COLLX_CONTAINER_OF(pos, struct tcp_comm_base, wd_node), now);
    }
    pthread_mutex_unlock(&wd_lock);
    tcp_linger_reap(now);
    watchdog_sleep();
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

int tcp_watchdog_add(struct tcp_comm_base *c) {
  int rc = 0;
  atomic_store(&c->last_heard, tcp_now());
  pthread_once(&wd_wake_once, wd_wake_init);
  pthread_mutex_lock(&wd_life);
  pthread_mutex_lock(&wd_lock);
  collx_list_add_tail(&wd_comms, &c->wd_node);
  wd_count++;
  pthread_mutex_unlock(&wd_lock);
  if (!wd_started) {
    atomic_store(&wd_stop, 0);
    atomic_fetch_add(&tcp_live_threads, 1);
    tcp_linger_start();
    int err = pthread_create(&wd_thread, NULL, watchdog, NULL);
    if (err == 0) {
      wd_started = 1;
    } else {
      tcp_linger_stop();
      /* Nothing of this comm stays registered: the caller frees it. */
      atomic_fetch_sub(&tcp_live_threads, 1);
      pthread_mutex_lock(&wd_lock);
      collx_list_del(&c->wd_node);
      wd_count--;
      pthread_mutex_unlock(&wd_lock);
      COLLX_WARN("cannot start the watchdog thread for the connection with %s: %s", c->peer, strerror(err));
      rc = -1;
    }
  }
  pthread_mutex_unlock(&wd_life);
  return rc;
}

/* Remove a comm; the last one out stops the watchdog, so that no plugin
 * thread outlives the last comm (NCCL may dlclose the plugin then), and
 * is told so: it closes what lingers (tcp_linger_stop) once its own
 * control sockets are shut. */
int tcp_watchdog_remove(struct tcp_comm_base *c) {
  pthread_mutex_lock(&wd_life);
  pthread_mutex_lock(&wd_lock);
  collx_list_del(&c->wd_node);
  int last = --wd_count == 0 && wd_started;
  pthread_mutex_unlock(&wd_lock);
  if (last) {
    pthread_mutex_lock(&wd_sleep_lock);
    atomic_store(&wd_stop, 1);
    pthread_cond_broadcast(&wd_wake);
    pthread_mutex_unlock(&wd_sleep_lock);
    pthread_join(wd_thread, NULL);
    wd_started = 0;
  }
  pthread_mutex_unlock(&wd_life);
  return last;
}
