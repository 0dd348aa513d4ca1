/* collx-perf: Plain sockets: the bootstrap, the baseline, and the bootstrap's wire format. */
#include "perf.h"

/* ========================================================================
 * Plain sockets: bootstrap and baseline
 * ======================================================================== */

void set_nonblock(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
    die("fcntl: %s", strerror(errno));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Wait for `ev` on fd until `deadline`; dies on timeout. */
static void fd_wait(int fd, short ev, uint64_t deadline, const char *what) {
  for (;;) {
    uint64_t t = now_ns();
    if (t >= deadline) die("%s: nothing within %.0f s (--timeout)", what, o.timeout);
    uint64_t left_ms = deadline == UINT64_MAX ? 500 : (deadline - t) / 1000000 + 1;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, left_ms > 500 ? 500 : (int)left_ms);
    beat();
    if (r > 0) return; /* includes HUP/ERR: the read or write reports it */
    if (r < 0 && errno != EINTR) die("%s: poll: %s", what, strerror(errno));
  }
}

/* Whole-buffer I/O on a non-blocking socket, with the --timeout deadline. */
void xwrite(int fd, const void *buf, size_t len, const char *what) {
  uint64_t dl = deadline_in();
  const char *p = buf;
  while (len) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      fd_wait(fd, POLLOUT, dl, what);
    } else if (r < 0 && errno != EINTR) {
      die("%s: %s (has the peer process failed?)", what, strerror(errno));
    }
  }
}

void xread(int fd, void *buf, size_t len, const char *what) {
  uint64_t dl = deadline_in();
  char *p = buf;
  while (len) {
    ssize_t r = recv(fd, p, len, 0);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r == 0) {
      die("%s: the peer process closed the connection (see its error, if any)", what);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      fd_wait(fd, POLLIN, dl, what);
    } else if (errno != EINTR) {
      die("%s: %s", what, strerror(errno));
    }
  }
}

/* Dies when the peer at the other end of a socket has gone. */
void check_peer(int fd, const char *who) {
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
    die("the %s has gone away while %s", who, g_phase);
}

int tcp_listen(int family, int loopback, int port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    a->sin6_family = AF_INET6;
    a->sin6_addr = loopback ? in6addr_loopback : in6addr_any;
    a->sin6_port = htons((uint16_t)port);
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
    a->sin_port = htons((uint16_t)port);
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  set_nonblock(fd, 1);
  return fd;
}

int sock_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) die("getsockname: %s", strerror(errno));
  return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int tcp_accept(int lfd, const char *what) {
  uint64_t dl = deadline_in();
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      set_nodelay(fd);
      return fd;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      fd_wait(lfd, POLLIN, dl, what);
    else
      die("%s: accept: %s", what, strerror(errno));
  }
}

/* Connect to an address, retrying while the peer is not listening yet. */
int tcp_connect_addr(const struct sockaddr *sa, socklen_t salen, uint64_t dl, int *err) {
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (connect(fd, sa, salen) == 0) return fd;
  if (errno == EINPROGRESS) {
    uint64_t t = now_ns(), lim = t + 2000000000ull;
    if (lim > dl) lim = dl;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, lim > t ? (int)((lim - t) / 1000000 + 1) : 0);
    if (r > 0) {
      int soerr = 0;
      socklen_t l = sizeof soerr;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l);
      if (soerr == 0) return fd;
      *err = soerr;
    } else {
      *err = ETIMEDOUT;
    }
  } else {
    *err = errno;
  }
  close(fd);
  return -1;
}

int tcp_connect_host(const char *host, int port, const char *what) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int e = getaddrinfo(host, ps, &hints, &res);
  if (e) die("%s: cannot resolve %s: %s", what, host, gai_strerror(e));
  uint64_t dl = deadline_in();
  int err = 0;
  for (;;) {
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int fd = tcp_connect_addr(ai->ai_addr, ai->ai_addrlen, dl, &err);
      if (fd >= 0) {
        freeaddrinfo(res);
        set_nodelay(fd);
        return fd;
      }
    }
    beat();
    if (now_ns() >= dl)
      die("%s: cannot connect to %s port %d within %.0f s: %s", what, host, port, o.timeout,
          strerror(err));
    usleep(100000);
  }
}

/* Blocking I/O for the baseline data sockets (SO_*TIMEO bounds each call). */
void set_io_timeouts(int fd) {
  set_nonblock(fd, 0);
  if (o.timeout > 0) {
    struct timeval tv = {.tv_sec = (time_t)o.timeout,
                         .tv_usec = (suseconds_t)((o.timeout - floor(o.timeout)) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
}

void bsend_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
    beat();
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      die("baseline TCP send: %s while %s",
          errno == EAGAIN ? "no progress within --timeout" : strerror(errno), g_phase);
    }
  }
}

void brecv_all(int fd, char *p, size_t len) {
  while (len) {
    ssize_t r = recv(fd, p, len, MSG_WAITALL);
    beat();
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      die("baseline TCP receive: %s while %s",
          r == 0 ? "peer closed the connection"
          : errno == EAGAIN ? "no data within --timeout" : strerror(errno), g_phase);
    }
  }
}

/* Latency baseline: poll the socket without sleeping, as the plugin's
 * caller polls test(), so that neither side of the comparison pays for a
 * wake-up from a blocking read (in an idle VM that alone costs tens of us). */
void precv_all(int fd, char *p, size_t len) {
  uint64_t deadline = 0;
  while (len) {
    ssize_t r = recv(fd, p, len, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!deadline) deadline = o.timeout > 0 ? now_ns() + timeout_ns() : UINT64_MAX;
      beat();
      if (now_ns() > deadline) die("baseline TCP receive: no data within --timeout while %s", g_phase);
      continue;
    }
    die("baseline TCP receive: %s while %s", r == 0 ? "peer closed the connection" : strerror(errno),
        g_phase);
  }
}

/* ========================================================================
 * Wire format of the bootstrap (big-endian 64-bit words)
 * ======================================================================== */

void wsend(int fd, const uint64_t *v, int n, const char *what) {
  uint64_t b[16];
  for (int i = 0; i < n; i++) b[i] = htobe64(v[i]);
  xwrite(fd, b, (size_t)n * 8, what);
}

void wrecv(int fd, uint64_t *v, int n, const char *what) {
  uint64_t b[16];
  xread(fd, b, (size_t)n * 8, what);
  for (int i = 0; i < n; i++) v[i] = be64toh(b[i]);
}
