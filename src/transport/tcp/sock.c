#include "sock.h"
#include "tcpinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <linux/sockios.h>
#include <unistd.h>

int sock_set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) ? -1 : 0;
}

socklen_t sock_len(const struct sockaddr_storage *ss) {
  return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int sock_port(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
  return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void sock_set_port(struct sockaddr_storage *ss, int port) {
  if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

void sock_tune(int fd) {
  int one = 1;
  /* Control records and small messages must not wait for Nagle. */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void sock_limit_unsent(int fd, size_t bytes) {
  int v = bytes > INT_MAX ? INT_MAX : (int)bytes;
  setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v);
}

void sock_ack_deadline(int fd, int seconds) {
  if (seconds < 1) seconds = 1;
  unsigned ms = (unsigned)seconds * 1000u;
  int one = 1, idle = 1, intvl = 1, cnt = seconds;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  /* Probes while waiting with nothing unacknowledged (the listener's rank
   * not yet in accept): an answer is all that is asked. */
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

void sock_ack_deadline_off(int fd) {
  unsigned ms = 0;
  int zero = 0;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &zero, sizeof zero);
}

int sock_listen(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *bound) {
  int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t blen = sizeof *bound;
  /* A deep backlog: a burst of stray clients must not crowd out the peer. */
  if (bind(fd, addr, len) < 0 || listen(fd, 1024) < 0 ||
      getsockname(fd, (struct sockaddr *)bound, &blen) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int sock_set_tclass(int fd, int family, int tclass) {
  if (tclass < 0) return 0;
  if (family == AF_INET6) return setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
  return setsockopt(fd, IPPROTO_IP, IP_TOS, &tclass, sizeof tclass);
}

/* The class set on the listening socket before any connection arrives: the
 * kernel answers the handshake with it, and the accepted sockets copy it. */
int sock_listen_tc(const struct sockaddr *addr, socklen_t len, int tclass,
                   struct sockaddr_storage *bound) {
  int fd = sock_listen(addr, len, bound);
  if (fd >= 0 && sock_set_tclass(fd, addr->sa_family, tclass) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int sock_connect_start_tc(const struct sockaddr *to, socklen_t to_len, const struct sockaddr *from,
                          socklen_t from_len, int tclass) {
  int fd = socket(to->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sock_tune(fd);
  /* The source address is fixed here, its port at connect: a port then
   * serves one socket per destination instead of one socket in all, and
   * thousands of comms do not run out of ephemeral ports. */
  int one = 1;
  if (from) setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  /* Before connect, so that the handshake already carries the class. */
  if (sock_set_tclass(fd, to->sa_family, tclass) < 0 ||
      (from && bind(fd, from, from_len) < 0) ||
      (connect(fd, to, to_len) < 0 && errno != EINPROGRESS)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int sock_connect_start(const struct sockaddr *to, socklen_t to_len, const struct sockaddr *from,
                       socklen_t from_len) {
  return sock_connect_start_tc(to, to_len, from, from_len, -1);
}

int sock_connect_done(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -1;
  if (err) {
    errno = err;
    return -1;
  }
  /* getpeername succeeds only once the handshake has completed. */
  if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0) return errno == ENOTCONN ? 0 : -1;
  /* A connect to a closed port of this host can pick that very port as its
   * own and connect to itself (TCP simultaneous open): it would then read
   * its own hello back and wait forever.  Nobody was listening: refused. */
  struct sockaddr_storage self;
  socklen_t slen = sizeof self;
  if (getsockname(fd, (struct sockaddr *)&self, &slen) == 0 && slen == plen && !memcmp(&self, &peer, plen)) {
    errno = ECONNREFUSED;
    return -1;
  }
  return 1;
}

enum sock_io sock_send_two(int fd, const void *hdr, size_t hlen, const void *payload, size_t plen,
                           size_t *done) {
  return sock_send_two_upto(fd, hdr, hlen, payload, plen, done, hlen + plen);
}

enum sock_io sock_send_two_upto(int fd, const void *hdr, size_t hlen, const void *payload, size_t plen,
                                size_t *done, size_t end) {
  if (end > hlen + plen) end = hlen + plen;
  while (*done < end) {
    struct iovec iov[2];
    int cnt = 0;
    size_t hend = end < hlen ? end : hlen;
    if (*done < hend) iov[cnt++] = (struct iovec){(char *)hdr + *done, hend - *done};
    size_t pdone = *done > hlen ? *done - hlen : 0, pend = end > hlen ? end - hlen : 0;
    if (pend > pdone) iov[cnt++] = (struct iovec){(char *)payload + pdone, pend - pdone};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return SOCK_IO_AGAIN;
    return SOCK_IO_ERROR;
  }
  return SOCK_IO_DONE;
}

enum sock_io sock_send_some(int fd, const void *buf, size_t len, size_t *done) {
  return sock_send_two(fd, buf, len, NULL, 0, done);
}

enum sock_io sock_recv_some(int fd, void *buf, size_t len, size_t *done) {
  while (*done < len) {
    ssize_t n = recv(fd, (char *)buf + *done, len - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n == 0) return SOCK_IO_EOF;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return SOCK_IO_AGAIN;
    return SOCK_IO_ERROR;
  }
  return SOCK_IO_DONE;
}

static enum sock_io recv_once_flags(int fd, void *buf, size_t len, size_t *done, int flags) {
  for (;;) {
    ssize_t n = recv(fd, (char *)buf + *done, len - *done, MSG_DONTWAIT | flags);
    if (n > 0) {
      *done += (size_t)n;
      return SOCK_IO_DONE;
    }
    if (n == 0) return SOCK_IO_EOF;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return SOCK_IO_AGAIN;
    return SOCK_IO_ERROR;
  }
}

enum sock_io sock_recv_once(int fd, void *buf, size_t len, size_t *done) {
  return recv_once_flags(fd, buf, len, done, 0);
}

enum sock_io sock_peek_once(int fd, void *buf, size_t len, size_t *done) {
  return recv_once_flags(fd, buf, len, done, MSG_PEEK);
}

int sock_stall_ms(int fd, struct sock_stall *st, double now) {
  struct tcp_kernel_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
  int full = len >= sizeof ti;
  /* Bytes waiting: sent and not acknowledged, or not sent at all (a local
   * link that is down fails every transmission, and they stay unsent).
   * Unsent bytes against a closed window are a busy peer, not a dead one. */
  int waiting = ti.unacked > 0 || (full && ti.notsent_bytes > 0 && ti.snd_wnd > 0);
  if (!waiting || (full && ti.bytes_acked != st->acked)) {
    st->acked = ti.bytes_acked;
    st->since = waiting ? now : 0;
    return 0;
  }
  /* Waiting since we first saw it so, acknowledged nothing since: after
   * an idle spell the last ACK is old while new bytes are on their first
   * trip. */
  if (st->since == 0) st->since = now;
  double waited_ms = (now - st->since) * 1e3;
  return (int)(waited_ms < ti.last_ack_recv ? waited_ms : ti.last_ack_recv);
}

int sock_stalled(int fd, struct sock_stall *st, double now, int ms) { return sock_stall_ms(fd, st, now) >= ms; }

uint64_t sock_outq(int fd) {
  int n = 0;
  return ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? (uint64_t)n : 0;
}

int sock_drained(int fd, uint64_t *acked, uint64_t *busy_us) {
  struct tcp_kernel_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < offsetof(struct tcp_kernel_info, delivered))
    return -1;
  *acked = ti.bytes_acked;
  /* busy_time is already the sum: the kernel adds the time limited by the
   * peer's window and by the send buffer into it (rwnd_limited and
   * sndbuf_limited are its parts), so adding them again would halve the
   * rate of a stream that waits on its send buffer. */
  *busy_us = ti.busy_time;
  return 0;
}
