/*
 * The control socket's I/O, and with failover its spare.
 *
 * A connection with failover over several paths has two control sockets:
 * the first on path 0, a spare on path 1.  Every control byte is written
 * on both, in the same order (an item, a batch of records or an eager
 * message, is finished only once both have it), so that the loss of
 * either path loses nothing: no record needs sending again, and no eager
 * message needs matching again.  The reader reads one socket and drops
 * the other's copy up to the same place; when the one it reads is given
 * up, or goes quiet for COLLX_FAILOVER_MS while the other brings more, it
 * reads the other from that place on.  Without a spare these are plain
 * reads and writes of the one socket.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm.h"
#include "util/log.h"

void tcp_ctrl_io_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk) {
  c->ctrl2_fd = sk->spare_ctrl ? sk->spare_ctrl_fd : -1;
  atomic_store(&c->ctrl_live, c->ctrl2_fd >= 0 ? 3 : 1);
  c->ctrl_rd_other_dead = c->ctrl2_fd < 0;
  c->ctrl_rd_last = tcp_now();
}

static int ctrl_fd_of(const struct tcp_comm_base *c, int which) { return which ? c->ctrl2_fd : c->ctrl_fd; }

/* ---- writing -------------------------------------------------------------- */

void tcp_ctrl_lose(struct tcp_comm_base *c, int which, const char *why) {
  int bit = 1 << which;
  int before = atomic_fetch_and(&c->ctrl_live, ~bit);
  if (!(before & bit)) return;
  if (!(before & ~bit)) {
    tcp_comm_failf(c, ncclRemoteError, "the control connection is lost (%s)", why);
    return;
  }
  COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: control socket %d given up (%s); the other "
             "carries on", c->role->name, c->peer, c->devname, which, why);
  atomic_store(&c->ctrl_rd_switch, 1);
}

enum sock_io tcp_ctrl_send(struct tcp_comm_base *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                           size_t *done, size_t *done2) {
  enum sock_io result = SOCK_IO_DONE;
  for (int k = 0; k < 2; k++) {
    size_t *d = k ? done2 : done;
    if (!(atomic_load(&c->ctrl_live) >> k & 1) || *d == hlen + plen) continue;
    enum sock_io io = sock_send_two(ctrl_fd_of(c, k), hdr, hlen, payload, plen, d);
    if (io == SOCK_IO_DONE) continue;
    if (io == SOCK_IO_AGAIN) {
      result = SOCK_IO_AGAIN;
      continue;
    }
    if (!(atomic_load(&c->ctrl_live) & ~(1 << k))) return io; /* the last one: the caller fails the comm */
    tcp_ctrl_lose(c, k, tcp_io_reason(io));
  }
  return result;
}

size_t tcp_ctrl_records_written(const struct tcp_comm_base *c) {
  int live = atomic_load(&((struct tcp_comm_base *)c)->ctrl_live);
  if (live == 3) return c->ctrl_tx_done < c->ctrl2_tx_done ? c->ctrl_tx_done : c->ctrl2_tx_done;
  return live == 2 ? c->ctrl2_tx_done : c->ctrl_tx_done;
}

void tcp_ctrl_wait_writable(struct tcp_comm_base *c, int ms) {
  struct pollfd p[2];
  int n = 0, live = atomic_load(&c->ctrl_live);
  for (int k = 0; k < 2; k++)
    if (live >> k & 1) p[n++] = (struct pollfd){.fd = ctrl_fd_of(c, k), .events = POLLOUT};
  poll(p, (nfds_t)n, ms);
}

/* ---- reading -------------------------------------------------------------- */

/* Drop up to `len` bytes of socket fd, counted into *pos; TCP discards
 * them without copying (MSG_TRUNC).  -1 when it has failed or ended. */
static int drop_bytes(int fd, uint64_t len, uint64_t *pos) {
  while (len > 0) {
    ssize_t n = recv(fd, NULL, len < (1u << 30) ? (size_t)len : (1u << 30), MSG_DONTWAIT | MSG_TRUNC);
    if (n > 0) {
      *pos += (uint64_t)n;
      len -= (uint64_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  return 0;
}

/* Read the other socket from now on; first drop what of it was read
 * from the first (ctrl_rd_skip). */
static void reader_switch(struct tcp_comm_base *c) {
  if (c->ctrl_rd_other_dead) return;
  c->ctrl_rd = !c->ctrl_rd;
  c->ctrl_rd_skip = c->ctrl_rd_pos - c->ctrl_rd_other_pos;
  c->ctrl_rd_other_dead = 1; /* the one given up is not read again */
  c->ctrl_rd_last = tcp_now();
  COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: reading control socket %d from byte %llu on",
             c->role->name, c->peer, c->devname, c->ctrl_rd, (unsigned long long)c->ctrl_rd_pos);
}

/* Keep the copy on the socket not read drained up to where the reader is,
 * so that the peer's writes to it never stall for room: once it lags by
 * CTRL_SPARE_LAG (a call that finds less costs a syscall per read for
 * nothing), and at the watchdog's look whatever the lag. */
#define CTRL_SPARE_LAG (256 * 1024)

static void other_drain(struct tcp_comm_base *c, int any_lag) {
  if (c->ctrl_rd_other_dead || c->ctrl_rd_other_pos >= c->ctrl_rd_pos) return;
  if (!any_lag && c->ctrl_rd_pos - c->ctrl_rd_other_pos < CTRL_SPARE_LAG) return;
  if (drop_bytes(ctrl_fd_of(c, !c->ctrl_rd), c->ctrl_rd_pos - c->ctrl_rd_other_pos, &c->ctrl_rd_other_pos) != 0)
    c->ctrl_rd_other_dead = 1;
}

enum sock_io tcp_ctrl_recv(struct tcp_comm_base *c, void *buf, size_t len, size_t *done, int once) {
  if (c->ctrl2_fd < 0) return once ? sock_recv_once(c->ctrl_fd, buf, len, done) : sock_recv_some(c->ctrl_fd, buf, len, done);
  if (atomic_exchange(&c->ctrl_rd_switch, 0) && !(atomic_load(&c->ctrl_live) >> c->ctrl_rd & 1)) reader_switch(c);
  int fd = ctrl_fd_of(c, c->ctrl_rd);
  if (c->ctrl_rd_skip) {
    uint64_t pos = 0;
    int rc = drop_bytes(fd, c->ctrl_rd_skip, &pos);
    c->ctrl_rd_skip -= pos;
    if (rc != 0) return SOCK_IO_ERROR;
    if (c->ctrl_rd_skip) return SOCK_IO_AGAIN;
  }
  size_t before = *done;
  enum sock_io io = once ? sock_recv_once(fd, buf, len, done) : sock_recv_some(fd, buf, len, done);
  c->ctrl_rd_pos += *done - before;
  if (*done > before) c->ctrl_rd_last = tcp_now();
  if ((io == SOCK_IO_ERROR || io == SOCK_IO_EOF) && !c->ctrl_rd_other_dead && *done == before) {
    /* The path of the one read failed; the copy on the other is whole. */
    tcp_ctrl_lose(c, c->ctrl_rd, tcp_io_reason(io));
    atomic_store(&c->ctrl_rd_switch, 0);
    reader_switch(c);
    return tcp_ctrl_recv(c, buf, len, done, once);
  }
  other_drain(c, 0);
  return io;
}

/* ---- the watchdog's look ---------------------------------------------------- */

/* The socket read has brought nothing for COLLX_FAILOVER_MS and holds
 * nothing unread (a reader waiting for a receive leaves bytes there on
 * purpose), while the other has bytes beyond it. */
static int reader_behind(struct tcp_comm_base *c, double now) {
  if (c->ctrl_rd_other_dead || now - c->ctrl_rd_last < tcp_cfg.failover_ms * 1e-3) return 0;
  int here = 0, there = 0;
  if (ioctl(ctrl_fd_of(c, c->ctrl_rd), FIONREAD, &here) != 0 || here > 0) return 0;
  if (ioctl(ctrl_fd_of(c, !c->ctrl_rd), FIONREAD, &there) != 0) return 0;
  return c->ctrl_rd_other_pos + (uint64_t)there > c->ctrl_rd_pos;
}

void tcp_ctrl_watch(struct tcp_comm_base *c, double now) {
  if (c->ctrl2_fd < 0) return;
  char why[64];
  snprintf(why, sizeof why, "no acknowledgement for %d ms", tcp_cfg.failover_ms);
  for (int k = 0; k < 2; k++)
    if ((atomic_load(&c->ctrl_live) >> k & 1) && tcp_fd_stalled(ctrl_fd_of(c, k), &c->ctrl_stall[k], now))
      tcp_ctrl_lose(c, k, why);
  if (pthread_mutex_trylock(&c->ctrl_rx_lock) != 0) return;
  other_drain(c, 1);
  if (reader_behind(c, now)) {
    tcp_ctrl_lose(c, c->ctrl_rd, "nothing arrives on it while the spare brings more");
    atomic_store(&c->ctrl_rd_switch, 0);
    reader_switch(c);
  }
  pthread_mutex_unlock(&c->ctrl_rx_lock);
}

/* ---- close ---------------------------------------------------------------- */

/* How long close waits for the peer's kernel to take what is still queued
 * on the control socket. */
#define TCP_CLOSE_LINGER_S 0.2

/* Close a control socket without a reset.  Closing a socket with unread
 * bytes (a heartbeat or CTS that came after the last read) makes the
 * kernel send a reset, which drops what it still holds for the peer (eager
 * messages) and fails the peer's reads.  So: end our direction (the peer
 * reads everything, then end of stream), read and drop what has come in,
 * and close once the peer has acknowledged all the data we sent, the peer
 * has closed too, or a short while has passed.  A comm that has failed
 * does not wait: its peer is gone. */
static void close_gently(struct tcp_comm_base *c, int fd) {
  shutdown(fd, SHUT_WR);
  double until = tcp_now() + (tcp_comm_failed(c) ? 0 : TCP_CLOSE_LINGER_S);
  static __thread char sink[4096];
  for (;;) {
    ssize_t n;
    while ((n = recv(fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    /* The count includes our FIN, which the peer's kernel acknowledges
     * late (a delayed ACK, 40 ms on Linux): all our data is in once only
     * the FIN is left. */
    int unacked = 0;
    if (ioctl(fd, SIOCOUTQ, &unacked) != 0 || unacked <= 1) break;
    if (tcp_now() >= until) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, 5);
  }
  close(fd);
}

void tcp_ctrl_close(struct tcp_comm_base *c) {
  close_gently(c, c->ctrl_fd);
  if (c->ctrl2_fd >= 0) close_gently(c, c->ctrl2_fd);
}
