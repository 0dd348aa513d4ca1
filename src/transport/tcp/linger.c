/*
 * Lingering control sockets.  Closing a socket with unread bytes (a
 * heartbeat or CTS that came after the last read), or one whose peer sends
 * after the close, makes the kernel answer with a reset, which drops what
 * the peer's kernel still holds for the peer (eager messages) and fails its
 * reads.  So a control socket ends our direction, reads and drops what
 * comes in, and is closed once the peer has acknowledged all we sent, has
 * closed too, or LINGER_S has passed.
 *
 * The peer's kernel often acknowledges only on its delayed-ACK timer (40 ms
 * on Linux), and both ends of a pair close their send comm first, so
 * waiting in close cost NCCL's proxy thread tens of milliseconds a comm.
 * While the watchdog runs it closes lingering sockets on its ticks instead;
 * the last close, which stops the watchdog, waits for what is left, so no
 * descriptor outlives the last comm.
 *
 * lg_lock is a leaf: nothing else is taken under it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "linger.h"
#include "sock.h"

/* How long a socket waits for the peer's kernel to take what is queued. */
#define LINGER_S 0.2

struct lingerer {
  int fd;
  double until;
};

static pthread_mutex_t lg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lingerer *lg_list;
static int lg_n, lg_cap;
static int lg_reaper; /* the watchdog runs and reaps */

/* Read and drop what has come in; 1 when the socket may be closed: the
 * peer has closed, the socket failed, or the peer has acknowledged all our
 * data (or the count cannot be had).  The count of unacknowledged bytes
 * includes our FIN, which the peer acknowledges late: all our data is in
 * once only the FIN is left. */
static int linger_done(int fd) {
  static __thread char sink[4096];
  ssize_t n;
  while ((n = recv(fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 1;
  return sock_outq(fd) <= 1;
}

static void linger_wait(int fd, double until) {
  while (!linger_done(fd) && tcp_now() < until) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, 5);
  }
  close(fd);
}

/* 0 when the watchdog took the socket; -1: no watchdog, or no memory. */
static int linger_hand(int fd, double until) {
  int rc = -1;
  pthread_mutex_lock(&lg_lock);
  if (lg_reaper && lg_n == lg_cap) {
    int cap = lg_cap ? 2 * lg_cap : 16;
    struct lingerer *grown = realloc(lg_list, (size_t)cap * sizeof *grown);
    if (grown) {
      lg_list = grown;
      lg_cap = cap;
    }
  }
  if (lg_reaper && lg_n < lg_cap) {
    lg_list[lg_n++] = (struct lingerer){.fd = fd, .until = until};
    rc = 0;
  }
  pthread_mutex_unlock(&lg_lock);
  return rc;
}

void tcp_linger_close(int fd, int failed) {
  shutdown(fd, SHUT_WR);
  if (linger_done(fd) || failed) {
    close(fd);
    return;
  }
  double until = tcp_now() + LINGER_S;
  if (linger_hand(fd, until) != 0) linger_wait(fd, until);
}

void tcp_linger_start(void) {
  pthread_mutex_lock(&lg_lock);
  lg_reaper = 1;
  pthread_mutex_unlock(&lg_lock);
}

void tcp_linger_reap(double now) {
  pthread_mutex_lock(&lg_lock);
  int kept = 0;
  for (int i = 0; i < lg_n; i++) {
    if (linger_done(lg_list[i].fd) || now >= lg_list[i].until) close(lg_list[i].fd);
    else lg_list[kept++] = lg_list[i];
  }
  lg_n = kept;
  pthread_mutex_unlock(&lg_lock);
}

void tcp_linger_stop(void) {
  pthread_mutex_lock(&lg_lock);
  lg_reaper = 0;
  struct lingerer *left = lg_list;
  int n = lg_n;
  lg_list = NULL;
  lg_n = lg_cap = 0;
  pthread_mutex_unlock(&lg_lock);
  for (int i = 0; i < n; i++) linger_wait(left[i].fd, left[i].until);
  free(left);
}

int tcp_linger_count(void) {
  pthread_mutex_lock(&lg_lock);
  int n = lg_n;
  pthread_mutex_unlock(&lg_lock);
  return n;
}
