/*
 * The threads driver: one thread per data stream, so that a large message
 * moves while NCCL does something else.
 *
 * A send stream's thread writes queued chunks and sleeps on the comm's
 * wake-up condition when the queue is empty (tcp_progress->kick wakes it).
 * A receive stream's thread reads its socket; with COLLX_SPIN_US it keeps
 * polling for that long after data, so the next message of a burst is read
 * without a wake-up (costly in VMs); otherwise, and afterwards, it sleeps
 * in poll until data comes, or, with COLLX_INLINE_RECV while the caller
 * polls test(), parks off the socket until the caller hands it a large
 * chunk.
 */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "progress.h"
#include "recv.h"
#include "topo/topo.h"
#include "util/log.h"

/* How long a stream thread sleeps in poll before re-checking for close. */
#define TCP_POLL_MS 100


const struct tcp_progress_ops *tcp_progress = &tcp_progress_threads;

/* Name the thread (top -H, /proc/PID/task/TID/comm: "cx-rx3.1" is stream 1
 * of connection 3) and pin it where the placement plan says. */
static void thread_setup(struct tcp_stream *s) {
  char name[16];
  snprintf(name, sizeof name, "cx-%s%u.%d", tcp_stream_is_send(s) ? "tx" : "rx", s->comm->serial, s->index);
  pthread_setname_np(pthread_self(), name);
  collx_topo_pin_self(s->comm->dev, s->comm->serial, s->index);
}

static int comm_ending(struct tcp_comm_base *c) { return atomic_load(&c->stop) || tcp_comm_failed(c); }

/* Sleep until work is queued after `seen` was read, or the comm ends. */
static void wait_for_work(struct tcp_comm_base *c, unsigned seen) {
  pthread_mutex_lock(&c->wake_lock);
  while (atomic_load(&c->wake_gen) == seen && !comm_ending(c)) pthread_cond_wait(&c->wake_cond, &c->wake_lock);
  pthread_mutex_unlock(&c->wake_lock);
}

static void wait_writable(struct tcp_stream *s) {
  struct pollfd p = {.fd = s->fd, .events = POLLOUT};
  poll(&p, 1, TCP_POLL_MS);
}

static void *send_thread(void *arg) {
  struct tcp_stream *s = arg;
  thread_setup(s);
  for (;;) {
    /* Read before the pass, so that work queued during it is not missed. */
    unsigned seen = atomic_load(&s->comm->wake_gen);
    enum tcp_want want = tcp_stream_serve(s);
    if (want == TCP_WANT_NOTHING) break;
    if (want == TCP_WANT_WORK)
      wait_for_work(s->comm, seen);
    else
      wait_writable(s);
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

/* While the caller polls, the thread stays off the socket, so that a small
 * message wakes nobody: the caller reads it.  It comes back when the caller
 * hands it a large chunk, when the caller stops polling, or at close. */
static void park(struct tcp_stream *s) {
  struct tcp_comm_base *c = s->comm;
  pthread_mutex_lock(&c->wake_lock);
  atomic_store(&s->parked, 1);
  while (!comm_ending(c) && !atomic_load(&s->bulk_wanted) && tcp_recv_caller_polling(c)) {
    struct timespec until;
    tcp_deadline_in(&until, TCP_PARK_WINDOW_S);
    pthread_cond_timedwait(&c->wake_cond, &c->wake_lock, &until);
  }
  atomic_store(&s->parked, 0);
  atomic_store(&s->bulk_wanted, 0);
  pthread_mutex_unlock(&c->wake_lock);
}

static void *recv_thread(void *arg) {
  struct tcp_stream *s = arg;
  thread_setup(s);
  double spin_until = 0;
  for (;;) {
    struct tcp_pass pass;
    if (tcp_stream_serve_pass(s, &pass) == TCP_WANT_NOTHING) break;
    if (pass.busy) {
      sched_yield();
      continue;
    }
    if (!pass.bulk && tcp_recv_caller_polling(s->comm)) {
      park(s);
      continue;
    }
    if (pass.moved && tcp_spin_seconds() > 0) {
      spin_until = tcp_now() + tcp_spin_seconds();
      continue;
    }
    if (tcp_spin_seconds() > 0 && tcp_now() < spin_until) {
      sched_yield();
      continue;
    }
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    poll(&p, 1, TCP_POLL_MS);
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

static void threads_kick(struct tcp_comm_base *c) {
  pthread_mutex_lock(&c->wake_lock);
  atomic_fetch_add(&c->wake_gen, 1);
  pthread_cond_broadcast(&c->wake_cond);
  pthread_mutex_unlock(&c->wake_lock);
}

/* The comm is closing (c->stop) or failed: every thread ends its loop. */
static void threads_detach(struct tcp_comm_base *c) {
  threads_kick(c);
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    if (s->thread_started) pthread_join(s->thread, NULL);
    s->thread_started = 0;
  }
}

static int threads_attach(struct tcp_comm_base *c) {
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    atomic_fetch_add(&tcp_live_threads, 1);
    int err = pthread_create(&s->thread, NULL, tcp_stream_is_send(s) ? send_thread : recv_thread, s);
    if (err != 0) {
      atomic_fetch_sub(&tcp_live_threads, 1);
      COLLX_WARN("cannot start stream thread %d for %s: %s", i, c->peer, strerror(err));
      /* Nothing may stay attached: end the threads already started. */
      atomic_store(&c->stop, 1);
      threads_detach(c);
      return -1;
    }
    s->thread_started = 1;
  }
  return 0;
}

const struct tcp_progress_ops tcp_progress_threads = {
    .name = "threads",
    .attach = threads_attach,
    .kick = threads_kick,
    .detach = threads_detach,
};
