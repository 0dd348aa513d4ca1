/*
 * The control channel of a comm, and the watchdog that keeps it honest.
 *
 * The control socket carries CTS records (receiver to sender), eager
 * messages and CTS_WANTED records (sender to receiver, tcp_eager.c) and
 * heartbeats (both ways).  One watchdog thread per process, alive while any
 * comm is, sends a heartbeat on every comm each second and reads what the
 * peer sent.  Liveness is judged by the peer's plugin answering, never by
 * data moving: a rank that stops calling NCCL for minutes still has its
 * plugin threads answering, while a frozen or lost host answers nothing.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"
#include "tcp_internal.h"
#include "util/log.h"
#include "util/timeline.h"

#define HEARTBEAT_INTERVAL_S 1.0
#define WATCHDOG_TICK_MS 200

static int timeout_s = 30;

void tcp_ctrl_set_timeout(int seconds) { timeout_s = seconds; }

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

/* ---- errors -------------------------------------------------------------- */

/* WARN once about a failed comm, naming peer and device. */
static void comm_report(struct tcp_comm *c) {
  if (atomic_exchange(&c->error_reported, 1) == 0)
    COLLX_WARN("%s connection with %s on device %s failed: %s",
               c->magic == TCP_MAGIC_SEND ? "send" : "receive", c->peer, c->devname, c->error_what);
}

/* Record the comm's first fatal error.  A peer that closes while nothing is
 * in flight is normal teardown: the WARN waits until a request is affected. */
void tcp_comm_fail(struct tcp_comm *c, ncclResult_t res, const char *what) {
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

void tcp_comm_failf(struct tcp_comm *c, ncclResult_t res, const char *fmt, ...) {
  char why[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  tcp_comm_fail(c, res, why);
}

/* The comm's error for a caller, reported now if it was not yet. */
ncclResult_t tcp_comm_error(struct tcp_comm *c) {
  int err = atomic_load(&c->error);
  if (err != ncclSuccess) comm_report(c);
  return (ncclResult_t)err;
}

const char *tcp_io_reason(int io) {
  if (io == SOCK_IO_EOF) return "connection closed by peer";
  static __thread char buf[96];
  snprintf(buf, sizeof buf, "%s", strerror(errno));
  return buf;
}

/* ---- writing ------------------------------------------------------------- */

/* Write as much of the eager message in progress as the socket takes;
 * the send request is done once it is all out. */
static enum sock_io lane_write(struct tcp_comm *c) {
  struct tcp_req *r = c->lane_req;
  enum sock_io io = sock_send_two(c->ctrl_fd, &r->eager_hdr, sizeof r->eager_hdr, r->data, r->size,
                                  &c->lane_done);
  if (io == SOCK_IO_DONE) {
    COLLX_TL(COLLX_TL_WRITTEN, c->tl_key, ++c->tl_lane_tx);
    atomic_store_explicit(&r->pieces_done, 1, memory_order_release);
    c->lane_req = NULL;
  }
  return io;
}

static int ctrl_queue(struct tcp_comm *c, const struct wire_ctrl *m);

/* A CTS_WANTED that found the lane in the middle of a message goes right
 * behind that message, before the next one, whoever writes it. */
static void want_pending_queue(struct tcp_comm *c) {
  if (!c->want_pending) return;
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS_WANTED, .seq = c->want_pending_seq};
  if (ctrl_queue(c, &m) == 0) c->want_pending = 0;
}

/* Start the oldest queued eager message. */
static int lane_next(struct tcp_comm *c) {
  if (collx_list_empty(&c->lane_queue)) return 0;
  struct tcp_req *r = COLLX_CONTAINER_OF(c->lane_queue.next, struct tcp_req, qnode);
  collx_list_del(&r->qnode);
  c->lane_req = r;
  c->lane_done = 0;
  return 1;
}

/* Push out what is in progress, and on a send comm the queued eager
 * messages after it, without blocking.  Caller holds ctrl_tx_lock.
 * Returns 0 when nothing is left pending. */
static int ctrl_flush(struct tcp_comm *c) {
  if (c->ctrl_tx_dead) return 0;
  for (;;) {
    enum sock_io io = SOCK_IO_DONE;
    if (c->ctrl_tx_done < c->ctrl_tx_len) {
      io = sock_send_some(c->ctrl_fd, c->ctrl_tx, c->ctrl_tx_len, &c->ctrl_tx_done);
      if (io == SOCK_IO_DONE) c->ctrl_tx_len = c->ctrl_tx_done = 0;
    } else if (c->lane_req) {
      io = lane_write(c);
      if (io == SOCK_IO_DONE) want_pending_queue(c);
    } else if (!lane_next(c)) {
      return 0;
    }
    if (io == SOCK_IO_AGAIN) return -1;
    if (io != SOCK_IO_DONE && c->magic == TCP_MAGIC_RECV) {
      /* The peer is gone.  A receiver's fate is decided by what it can
       * still read (tcp_peer_finished), not by a CTS nobody will read. */
      c->ctrl_tx_dead = 1;
      c->ctrl_tx_len = c->ctrl_tx_done = 0;
      return 0;
    }
    if (io != SOCK_IO_DONE) {
      tcp_comm_fail(c, ncclRemoteError, tcp_io_reason(io));
      return -1;
    }
  }
}

int tcp_peer_finished(struct tcp_comm *c) {
  if (atomic_load(&c->streams_eof) != c->nstreams) return 0;
  if (atomic_load(&c->ctrl_eof)) return 1;
  /* The lane waits for a receive that is still not posted.  If one was
   * posted since, the reader (perhaps the watchdog, right now) has not
   * looked again yet: that is no verdict. */
  return atomic_load(&c->lane_blocked) && atomic_load(&c->lane_wait_seq) == atomic_load(&c->recv_seq);
}

void tcp_ctrl_pump(struct tcp_comm *c) {
  if (pthread_mutex_trylock(&c->ctrl_tx_lock) != 0) return; /* its holder writes ours too */
  ctrl_flush(c);
  pthread_mutex_unlock(&c->ctrl_tx_lock);
}

/* Append a record to those not yet written.  Returns -1 when they fill the
 * buffer (the peer has stopped reading). */
static int ctrl_queue(struct tcp_comm *c, const struct wire_ctrl *m) {
  if (c->ctrl_tx_done > 0) {
    memmove(c->ctrl_tx, c->ctrl_tx + c->ctrl_tx_done, c->ctrl_tx_len - c->ctrl_tx_done);
    c->ctrl_tx_len -= c->ctrl_tx_done;
    c->ctrl_tx_done = 0;
  }
  if (c->ctrl_tx_len + sizeof *m > sizeof c->ctrl_tx) return -1;
  memcpy(c->ctrl_tx + c->ctrl_tx_len, m, sizeof *m);
  c->ctrl_tx_len += sizeof *m;
  return 0;
}

/* Records queued and not yet written. */
static size_t ctrl_tx_held(const struct tcp_comm *c) {
  return (c->ctrl_tx_len - c->ctrl_tx_done) / sizeof(struct wire_ctrl);
}

/* Whether a receive comm writes its CTS records now or holds them back.
 * Caller holds ctrl_tx_lock. */
static int cts_due(struct tcp_comm *c) {
  return match_hold_due(&c->hold, ctrl_tx_held(c));
}

/* Queue the receive's CTS, and write it now unless the receiver is holding
 * its CTS records back (TCP_CTS_BATCH).  Written at once, it reaches a
 * sender of a large message even if the receiver then stops testing (or is
 * stopped).  What the socket does not take goes out with a later test() or
 * the watchdog's next tick. */
ncclResult_t tcp_ctrl_send_cts(struct tcp_comm *c, const struct tcp_req *r) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS, .n = (uint8_t)r->n, .seq = r->seq};
  for (int i = 0; i < r->n; i++)
    m.e[i] = (struct wire_cts_entry){.tag = r->match.tag[i], .size = r->e[i].cap};
  pthread_mutex_lock(&c->ctrl_tx_lock);
  while (!c->ctrl_tx_dead && ctrl_queue(c, &m) != 0) {
    if (ctrl_flush(c) == 0) continue;
    if (atomic_load(&c->error) || atomic_load(&c->stop)) break;
    /* Far more CTS records than receives can be outstanding sit unread:
     * the peer is not reading.  Wait for room (the watchdog judges it). */
    struct pollfd p = {.fd = c->ctrl_fd, .events = POLLOUT};
    poll(&p, 1, WATCHDOG_TICK_MS);
  }
  /* A CTS_WANTED whose reader could not take this lock is served here. */
  int due = cts_due(c) || match_hold_take_wanted(&c->hold);
  match_hold_spend(&c->hold);
  if (due) ctrl_flush(c);
  pthread_mutex_unlock(&c->ctrl_tx_lock);
  return atomic_load(&c->error) ? tcp_comm_error(c) : ncclSuccess;
}

void tcp_ctrl_pump_due(struct tcp_comm *c) {
  int wanted = match_hold_take_wanted(&c->hold);
  if (pthread_mutex_trylock(&c->ctrl_tx_lock) != 0) {
    /* The holder may be queueing a CTS it holds back: ask again later. */
    if (wanted) match_hold_rewant(&c->hold);
    return;
  }
  if (wanted || cts_due(c)) ctrl_flush(c);
  pthread_mutex_unlock(&c->ctrl_tx_lock);
}

/* The receiver reads this in its eager lane, behind the messages sent
 * before it, and writes every CTS it holds.  Sent once per cursor position,
 * and again after TCP_CTS_WANT_RETRY_S in case the receiver went back to
 * holding before the receive this send needs was posted. */
void tcp_ctrl_want_cts(struct tcp_comm *c) {
  double now = tcp_now();
  if (c->want_seq == c->match_tx.seq && now - c->want_at < TCP_CTS_WANT_RETRY_S) return;
  if (pthread_mutex_trylock(&c->ctrl_tx_lock) != 0) return; /* asked again at the next isend */
  /* Only between whole records: the lane may be in the middle of a
   * message; then the record goes right behind it (want_pending_queue). */
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS_WANTED, .seq = c->match_tx.seq};
  int queued = 0;
  if (ctrl_flush(c) == 0) {
    queued = ctrl_queue(c, &m) == 0;
  } else if (c->lane_req && !c->want_pending) {
    c->want_pending = 1;
    c->want_pending_seq = c->match_tx.seq;
    queued = 1;
  }
  if (queued) {
    c->want_seq = c->match_tx.seq;
    c->want_at = now;
    c->stats.cts_wanted++;
    ctrl_flush(c);
  }
  pthread_mutex_unlock(&c->ctrl_tx_lock);
}

/* Heartbeat, from the watchdog: never blocks; a record that does not fit
 * stays pending and goes out on a later tick (or before the next CTS). */
static void ctrl_heartbeat(struct tcp_comm *c, double now) {
  if (pthread_mutex_trylock(&c->ctrl_tx_lock) != 0) return;
  if (ctrl_flush(c) == 0 && now - c->last_sent >= HEARTBEAT_INTERVAL_S) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_HEARTBEAT};
    if (ctrl_queue(c, &m) == 0) c->last_sent = now;
    ctrl_flush(c);
  }
  pthread_mutex_unlock(&c->ctrl_tx_lock);
}

/* ---- reading ------------------------------------------------------------- */

static int ctrl_accept_record(struct tcp_comm *c, const struct wire_ctrl *m, const char **why) {
  int type = wire_ctrl_check(m, c->magic == TCP_MAGIC_SEND, why);
  if (type != WIRE_CTS) return type < 0 ? -1 : 0;
  return match_cts_accept(&c->match_tx, m, why);
}

/* Read every control record that has arrived, in as few recv calls as
 * the socket allows. */
void tcp_ctrl_drain(struct tcp_comm *c) {
  if (pthread_mutex_trylock(&c->ctrl_rx_lock) != 0) return;
  if (c->magic == TCP_MAGIC_RECV) {
    tcp_eager_read(c); /* eager messages, CTS_WANTED and heartbeats */
    pthread_mutex_unlock(&c->ctrl_rx_lock);
    /* The writing lock is never taken inside the reading one. */
    tcp_ctrl_pump_due(c);
    return;
  }
  const size_t rec = sizeof(struct wire_ctrl);
  while (!atomic_load(&c->error)) {
    enum sock_io io = sock_recv_once(c->ctrl_fd, c->ctrl_rx, sizeof c->ctrl_rx, &c->ctrl_rx_done);
    if (io == SOCK_IO_AGAIN) break;
    if (io != SOCK_IO_DONE) {
      tcp_comm_fail(c, ncclRemoteError, tcp_io_reason(io));
      break;
    }
    atomic_store(&c->last_heard, tcp_now());
    size_t whole = c->ctrl_rx_done / rec * rec;
    const char *why = NULL;
    for (size_t off = 0; off < whole && !why; off += rec) {
      struct wire_ctrl m;
      memcpy(&m, c->ctrl_rx + off, rec);
      if (ctrl_accept_record(c, &m, &why) != 0) tcp_comm_fail(c, ncclRemoteError, why);
    }
    memmove(c->ctrl_rx, c->ctrl_rx + whole, c->ctrl_rx_done - whole);
    c->ctrl_rx_done -= whole;
    if (why || c->ctrl_rx_done + whole < sizeof c->ctrl_rx) break; /* short read: dry */
  }
  pthread_mutex_unlock(&c->ctrl_rx_lock);
}

/* ---- the watchdog -------------------------------------------------------- */

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

static void watch_one(struct tcp_comm *c, double now) {
  if (atomic_load(&c->error) || atomic_load(&c->stop)) return;
  ctrl_heartbeat(c, now);
  tcp_streams_watch(c, now);
  tcp_ctrl_drain(c);
  double silent = now - atomic_load(&c->last_heard);
  /* A peer that closed its control socket has said goodbye: what is left
   * is judged by tcp_peer_finished. */
  if (timeout_s > 0 && silent > timeout_s && !atomic_load(&c->ctrl_eof)) {
    tcp_comm_failf(c, ncclRemoteError, "no answer from the peer's plugin for %.0f s (COLLX_TIMEOUT=%d)",
                   silent, timeout_s);
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
      watch_one(COLLX_CONTAINER_OF(pos, struct tcp_comm, wd_node), now);
    }
    pthread_mutex_unlock(&wd_lock);
    watchdog_sleep();
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

int tcp_watchdog_add(struct tcp_comm *c) {
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
    int err = pthread_create(&wd_thread, NULL, watchdog, NULL);
    if (err == 0) {
      wd_started = 1;
    } else {
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
 * thread outlives the last comm (NCCL may dlclose the plugin then). */
void tcp_watchdog_remove(struct tcp_comm *c) {
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
}
