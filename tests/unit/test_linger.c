/*
 * Lingering control sockets (linger.c): a control socket is closed only
 * once the peer's kernel has everything sent on it (or the peer closed,
 * or its time is up), and while the watchdog runs that wait is left to the
 * watchdog's ticks instead of the closing call.
 *
 * Over TCP pairs on loopback, the peer's end not reading until told, so
 * that the closing end's bytes stay unacknowledged (a full receive window)
 * for as long as the test wants:
 *   idle:     nothing unacknowledged: closed at once, left to no one;
 *   handed:   with the reaper on, close returns and leaves the socket open;
 *             the peer's late record (a CTS) is absorbed, the peer reads
 *             every byte then end of stream (no reset), and the next tick
 *             closes the socket;
 *   expired:  a peer that never reads: the tick past the deadline closes it;
 *   stop:     the reaper stopping closes what lingers, and after it a close
 *             waits for the peer itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/base.h"
#include "transport/tcp/linger.h"
#include "../common/check.h"

/* A connected loopback pair: *near non-blocking (as the plugin's are),
 * *far blocking; both with small buffers so that filling them is quick. */
static int tcp_pair(int *near, int *far) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &len) != 0)
    return -1;
  *near = socket(AF_INET, SOCK_STREAM, 0);
  int small = 64 * 1024;
  setsockopt(*near, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  if (connect(*near, (struct sockaddr *)&a, sizeof a) != 0) return -1;
  *far = accept(l, NULL, NULL);
  close(l);
  if (*far < 0) return -1;
  setsockopt(*far, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  return fcntl(*near, F_SETFL, O_NONBLOCK);
}

/* Write until the socket takes no more (the peer does not read): the bytes
 * written. */
static size_t fill(int fd) {
  static char junk[16384];
  size_t total = 0;
  ssize_t n;
  while ((n = send(fd, junk, sizeof junk, MSG_NOSIGNAL)) > 0) total += (size_t)n;
  return total;
}

static int is_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

/* Read from the peer's end until end of stream: the bytes read, or -1 on an
 * error (a reset), with errno. */
static long drain_to_eof(int fd) {
  char buf[16384];
  long total = 0;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return total;
    if (n < 0) return -1;
    total += n;
  }
}

static void idle(void) {
  int near, far;
  CHECK(tcp_pair(&near, &far) == 0, "idle: a loopback pair");
  tcp_linger_start();
  tcp_linger_close(near, 0);
  CHECK(tcp_linger_count() == 0, "idle: nothing unacknowledged, nothing left to linger (%d)", tcp_linger_count());
  CHECK(!is_open(near), "idle: the socket is closed at once");
  CHECK(drain_to_eof(far) == 0, "idle: the peer reads end of stream");
  tcp_linger_stop();
  close(far);
}

static void handed(void) {
  int near, far;
  CHECK(tcp_pair(&near, &far) == 0, "handed: a loopback pair");
  size_t sent = fill(near);
  tcp_linger_start();
  tcp_linger_close(near, 0);
  CHECK(tcp_linger_count() == 1, "handed: the full socket lingers (%d)", tcp_linger_count());
  CHECK(is_open(near), "handed: close returned with the socket still open");
  /* A record the peer sends after the close: to a closed socket it would
   * draw a reset. */
  CHECK(send(far, "cts", 3, MSG_NOSIGNAL) == 3, "handed: the peer sends a late record");
  tcp_linger_reap(tcp_now());
  CHECK(tcp_linger_count() == 1, "handed: a tick before the peer has read keeps it (%d)", tcp_linger_count());
  long got = drain_to_eof(far);
  CHECK(got == (long)sent, "handed: the peer reads all %zu bytes then end of stream (%ld, %s)", sent, got,
        got < 0 ? strerror(errno) : "no error");
  tcp_linger_reap(tcp_now());
  CHECK(tcp_linger_count() == 0, "handed: the tick after the peer took everything closes it (%d)",
        tcp_linger_count());
  CHECK(!is_open(near), "handed: closed");
  tcp_linger_stop();
  close(far);
}

static void expired(void) {
  int near, far;
  CHECK(tcp_pair(&near, &far) == 0, "expired: a loopback pair");
  fill(near);
  tcp_linger_start();
  tcp_linger_close(near, 0);
  CHECK(tcp_linger_count() == 1, "expired: lingers (%d)", tcp_linger_count());
  tcp_linger_reap(tcp_now() + 10);
  CHECK(tcp_linger_count() == 0 && !is_open(near), "expired: the tick past its deadline closes it (%d)",
        tcp_linger_count());
  tcp_linger_stop();
  close(far);
}

static void failed(void) {
  int near, far;
  CHECK(tcp_pair(&near, &far) == 0, "failed: a loopback pair");
  fill(near);
  tcp_linger_start();
  tcp_linger_close(near, 1);
  CHECK(tcp_linger_count() == 0 && !is_open(near), "failed: a failed comm's socket is closed at once (%d)",
        tcp_linger_count());
  tcp_linger_stop();
  close(far);
}

static void stop(void) {
  int near, far, near2, far2;
  CHECK(tcp_pair(&near, &far) == 0 && tcp_pair(&near2, &far2) == 0, "stop: two loopback pairs");
  fill(near);
  fill(near2);
  tcp_linger_start();
  tcp_linger_close(near, 0);
  tcp_linger_stop();
  CHECK(tcp_linger_count() == 0 && !is_open(near), "stop: the reaper's stop closes what lingers (%d)",
        tcp_linger_count());
  double t0 = tcp_now();
  tcp_linger_close(near2, 0);
  CHECK(tcp_linger_count() == 0 && !is_open(near2),
        "stop: with no reaper a close waits itself and closes (%d, %.3f s)", tcp_linger_count(), tcp_now() - t0);
  close(far);
  close(far2);
}

int main(void) {
  idle();
  handed();
  expired();
  failed();
  stop();
  printf("test_linger: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
