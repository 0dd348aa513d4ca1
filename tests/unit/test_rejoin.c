/* A lost path's new sockets (src/transport/tcp/rejoin.c) over loopback,
 * with a raw socket playing the other end:
 *   receiver: a hello that follows its connect by 300 ms (one of the
 *   sender's watchdog ticks and more) still puts the socket in place; a
 *   hello for a stream that is not lost, or none within a second, closes
 *   the socket;
 *   sender: a new socket the receiver closes after its hello is connected
 *   again once the retry time has passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/tcp.h"
#include "../common/check.h"

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static struct sockaddr_storage loopback(uint16_t port) {
  struct sockaddr_storage ss = {0};
  struct sockaddr_in *a = (struct sockaddr_in *)&ss;
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ss;
}

/* A comm of `nstreams` streams over 2 paths on loopback, path 0 (the
 * even streams) lost. */
static struct tcp_comm_base *comm_with_lost_path(struct sockaddr_storage *addr, int nstreams) {
  struct tcp_comm_base *c = calloc(1, sizeof *c);
  if (!c) exit(1);
  snprintf(c->peer, sizeof c->peer, "test peer");
  snprintf(c->devname, sizeof c->devname, "lo+lo");
  c->nstreams = nstreams;
  c->ctrl.fd[0] = c->ctrl.fd[1] = -1; /* no control channel: streams only */
  struct tcp_comm_sockets sk = {.paths = 2, .failover = 1};
  for (int p = 0; p < 2; p++) sk.path_local[p] = sk.path_remote[p] = addr;
  if (tcp_failover_init(c, &sk) != 0 || !c->paths) exit(1);
  atomic_store(&c->lost, tcp_path_streams(c, 0));
  return c;
}

static struct tcp_comm_base *comm_with_lost_stream(struct sockaddr_storage *addr) {
  return comm_with_lost_path(addr, 2);
}

static int raw_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_storage to = loopback(port);
  if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(struct sockaddr_in)) != 0) {
    perror("connect");
    exit(1);
  }
  return fd;
}

static struct wire_hello hello_for(int stream, uint64_t token) {
  return (struct wire_hello){.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = WIRE_HELLO_DATA,
                             .index = (uint16_t)stream, .secret = token};
}

/* 1 when the receiver closed fd: its end is readable with nothing in it. */
static int closed_by_receiver(int fd, int wait_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, wait_ms) <= 0) return 0;
  char b;
  return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

static void test_receiver(void) {
  struct sockaddr_storage addr = loopback(0);
  struct tcp_comm_base *c = comm_with_lost_stream(&addr);
  uint16_t port = 0;
  CHECK(tcp_rejoin_listen(c, 0, &port) == 0 && port != 0, "the receiver listens for path 0");
  uint64_t token = c->paths->token;

  /* A hello that comes 300 ms after its connect. */
  int late = raw_connect(port);
  sleep_ms(20);
  CHECK(tcp_rejoin_accept(c) == 0, "nothing in place before the hello");
  sleep_ms(300);
  CHECK(tcp_rejoin_accept(c) == 0, "nothing in place 300 ms on, still no hello");
  struct wire_hello h = hello_for(0, token);
  CHECK(send(late, &h, sizeof h, 0) == (ssize_t)sizeof h, "hello sent");
  sleep_ms(20);
  CHECK(tcp_rejoin_accept(c) == 1u, "a hello 300 ms after its connect puts the socket in place for stream 0 (%#x)",
        c->paths->ready);
  CHECK(!closed_by_receiver(late, 50), "the socket put in place stays open");

  /* A hello for stream 1, which is not lost. */
  int wrong = raw_connect(port);
  h = hello_for(1, token);
  CHECK(send(wrong, &h, sizeof h, 0) == (ssize_t)sizeof h, "hello sent");
  sleep_ms(20);
  tcp_rejoin_accept(c);
  CHECK(closed_by_receiver(wrong, 500), "a hello for a stream that is not lost closes the socket");

  /* No hello at all. */
  int mute = raw_connect(port);
  sleep_ms(20);
  tcp_rejoin_accept(c);
  CHECK(!closed_by_receiver(mute, 0), "a socket without a hello yet is kept a while");
  sleep_ms(1100);
  tcp_rejoin_accept(c);
  CHECK(closed_by_receiver(mute, 500), "a socket without a hello for over a second is closed");

  close(late);
  close(wrong);
  close(mute);
  tcp_failover_free(c);
  free(c);
}

/* A connection waiting on lfd within wait_ms, or -1. */
static int accept_within(int lfd, int wait_ms) {
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  return poll(&p, 1, wait_ms) == 1 ? accept(lfd, NULL, NULL) : -1;
}

/* Its hello, read within a second. */
static int read_hello(int fd, struct wire_hello *h) {
  struct timeval tv = {.tv_sec = 1};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return recv(fd, h, sizeof *h, MSG_WAITALL) == (ssize_t)sizeof *h ? 0 : -1;
}

/* A listener on loopback that plays the receiver; its port in *port. */
static int listener(int backlog, uint16_t *port) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_storage any = loopback(0), bound;
  socklen_t len = sizeof bound;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&any, sizeof(struct sockaddr_in)) != 0 || listen(lfd, backlog) != 0 ||
      getsockname(lfd, (struct sockaddr *)&bound, &len) != 0) {
    perror("listener");
    exit(1);
  }
  *port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  return lfd;
}

static void test_sender(void) {
  uint16_t port;
  int lfd = listener(4, &port);
  struct sockaddr_storage addr = loopback(0);
  struct tcp_comm_base *c = comm_with_lost_stream(&addr);
  const uint64_t token = 0x1234abcdULL;
  tcp_rejoin_offer(c, 0, port, token);

  double now = tcp_now();
  unsigned ready = 0;
  for (int t = 0; t < 100 && !(ready & 1u); t++, sleep_ms(5)) ready = tcp_rejoin_connect(c, now);
  CHECK(ready == 1u, "the sender's new socket for stream 0 has sent its hello (%#x)", ready);
  int got = accept_within(lfd, 1000);
  struct wire_hello h = {0};
  CHECK(got >= 0 && read_hello(got, &h) == 0, "the receiver's end reads a hello");
  CHECK(h.kind == WIRE_HELLO_DATA && h.index == 0 && h.secret == token, "the hello names stream 0 and the token");

  /* The receiver drops it (as when the hello came too late). */
  if (got >= 0) close(got);
  sleep_ms(20);
  ready = tcp_rejoin_connect(c, now);
  CHECK(ready == 0, "a new socket the receiver closed is given up (%#x)", ready);
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  CHECK(poll(&p, 1, 50) == 0, "no new connect before the retry time");
  for (int t = 0; t < 100 && !(ready & 1u); t++, sleep_ms(5)) ready = tcp_rejoin_connect(c, now + 1.5);
  CHECK(ready == 1u, "after the retry time the sender connects again and sends its hello (%#x)", ready);
  got = accept_within(lfd, 1000);
  CHECK(got >= 0 && read_hello(got, &h) == 0 && h.index == 0, "the receiver's end gets the new connection and its hello");
  if (got >= 0) close(got);
  close(lfd);
  tcp_failover_free(c);
  free(c);
}

/* A path of two streams: one new socket is through and has sent its
 * hello, the other's connect hangs (the receiver's accept queue is full).
 * When the attempt times out only the hanging one starts over: the one
 * through may already be in use at the receiver, and closing it would
 * leave that stream unused for good (the receiver no longer counts it
 * lost, so it refuses its next hello). */
static void test_sender_keeps_the_socket_through(void) {
  /* Backlog 0: one connection waits in the accept queue, a second's SYN
   * is dropped, so its connect hangs. */
  uint16_t port;
  int lfd = listener(0, &port);
  struct sockaddr_storage addr = loopback(0);
  struct tcp_comm_base *c = comm_with_lost_path(&addr, 4); /* path 0: streams 0 and 2 */
  tcp_rejoin_offer(c, 0, port, 0x77ULL);
  double now = tcp_now();
  unsigned ready = 0;
  for (int t = 0; t < 60 && !ready; t++, sleep_ms(5)) ready = tcp_rejoin_connect(c, now);
  for (int t = 0; t < 20; t++, sleep_ms(5)) ready = tcp_rejoin_connect(c, now);
  CHECK(ready == 1u || ready == 4u, "one of the path's two new sockets is through (%#x)", ready);
  unsigned through = ready;
  int got = accept(lfd, NULL, NULL);
  struct wire_hello h = {0};
  CHECK(got >= 0 && read_hello(got, &h) == 0 && (1u << h.index) == through, "its hello names it (%u)", h.index);
  /* The other has hung past the attempt's time. */
  ready = tcp_rejoin_connect(c, now + 1.5);
  CHECK(ready & through, "the socket through is kept when the other's attempt times out (%#x)", ready);
  CHECK(got >= 0 && !closed_by_receiver(got, 50), "the sender did not close the socket through");
  if (got >= 0) close(got);
  close(lfd);
  tcp_failover_free(c);
  free(c);
}

/* A path lost again soon after it came back waits longer each time
 * before the sender tries it: none after the first loss, then 2, 4, 8 ...
 * seconds, at most a minute. */
static void test_backoff(void) {
  CHECK(tcp_path_backoff(1) == 0 && tcp_path_backoff(2) == 2 && tcp_path_backoff(3) == 4 &&
            tcp_path_backoff(7) == 60 && tcp_path_backoff(20) == 60,
        "0, 2, 4 ... 60 s (%g %g %g %g)", tcp_path_backoff(1), tcp_path_backoff(2), tcp_path_backoff(3),
        tcp_path_backoff(7));
  static const struct tcp_comm_role role = {.name = "send", .sends = 1};
  uint16_t port;
  int lfd = listener(4, &port);
  struct sockaddr_storage addr = loopback(0);
  struct tcp_comm_base *c = comm_with_lost_path(&addr, 2);
  c->role = &role;
  unsigned path0 = tcp_path_streams(c, 0);
  for (int loss = 1; loss <= 3; loss++) {
    atomic_fetch_and(&c->lost, ~path0); /* it came back */
    double before = tcp_now();
    CHECK(tcp_path_lose(c, 0, "test: lost again") == path0, "loss %d gives the path up", loss);
    double wait = c->paths->p[0].next_try - before;
    CHECK(wait >= tcp_path_backoff(loss) && wait < tcp_path_backoff(loss) + 0.5, "loss %d: tried again in %.1f s", loss,
          wait);
  }
  tcp_rejoin_offer(c, 0, port, 0x55ULL);
  double now = tcp_now();
  tcp_rejoin_connect(c, now + 1);
  CHECK(accept_within(lfd, 100) < 0, "an offer does not cut the wait short: no connect 1 s on");
  unsigned ready = 0;
  for (int t = 0; t < 100 && !(ready & 1u); t++, sleep_ms(5)) ready = tcp_rejoin_connect(c, now + 4.5);
  int got = accept_within(lfd, 1000);
  CHECK(ready & 1u && got >= 0, "once the wait is over it connects (%#x)", ready);
  if (got >= 0) close(got);
  close(lfd);
  tcp_failover_free(c);
  free(c);
}

/* A control socket given up while its path's streams stay in use: due
 * (its path to be given up) after TCP_CTRL_ALONE_S, once per spell; never
 * while its path is lost, nor when its path holds the last streams in use. */
static void test_ctrl_alone(void) {
  struct sockaddr_storage addr = loopback(0);
  struct tcp_comm_base *c = comm_with_lost_path(&addr, 4); /* path 0: streams 0 and 2; path 1: 1 and 3 */
  atomic_store(&c->lost, 0);
  c->ctrl.spare = 1;
  atomic_store(&c->ctrl.live, 3);
  double t = 100.0;
  CHECK(tcp_ctrl_alone(c, t) == 0 && tcp_ctrl_alone(c, t + 5) == 0, "both control sockets live: nothing due");
  atomic_store(&c->ctrl.live, 1); /* slot 1 (path 1) given up, its streams in use */
  CHECK(tcp_ctrl_alone(c, t) == 0, "slot 1 just given up: not due yet");
  CHECK(tcp_ctrl_alone(c, t + TCP_CTRL_ALONE_S / 2) == 0, "slot 1 given up half the grace: not due");
  unsigned due = tcp_ctrl_alone(c, t + TCP_CTRL_ALONE_S);
  CHECK(due == 2u, "slot 1 given up for the grace: path 1 due (%#x)", due);
  CHECK(tcp_ctrl_alone(c, t + TCP_CTRL_ALONE_S + 0.1) == 0, "due once per spell");
  atomic_store(&c->lost, tcp_path_streams(c, 1)); /* its path given up: it comes back with it */
  CHECK(tcp_ctrl_alone(c, t + 10) == 0 && tcp_ctrl_alone(c, t + 20) == 0, "path 1 lost: nothing due");
  atomic_store(&c->lost, 0); /* the streams back, the control socket not yet */
  CHECK(tcp_ctrl_alone(c, t + 30) == 0 && tcp_ctrl_alone(c, t + 30 + TCP_CTRL_ALONE_S / 2) == 0,
        "streams back, control socket on its way: the grace starts over");
  atomic_store(&c->ctrl.live, 3);
  CHECK(tcp_ctrl_alone(c, t + 40) == 0, "control socket back: nothing due");
  atomic_store(&c->ctrl.live, 2);       /* slot 0 given up alone ... */
  atomic_store(&c->lost, tcp_path_streams(c, 1)); /* ... and path 1 lost: path 0 holds the last streams */
  CHECK(tcp_ctrl_alone(c, t + 50) == 0 && tcp_ctrl_alone(c, t + 60) == 0, "the last path in use is never due");
  CHECK(!tcp_path_spared(c, 0) && !tcp_path_spared(c, 1), "path 1 lost: neither path may be given up for its control socket");
  atomic_store(&c->lost, 0);
  CHECK(tcp_path_spared(c, 0) && tcp_path_spared(c, 1), "both paths in use: either may be given up");
  atomic_store(&c->lost, 0);
  tcp_ctrl_alone(c, t + 70);
  CHECK(tcp_ctrl_alone(c, t + 70 + TCP_CTRL_ALONE_S) == 1u, "slot 0 given up alone: path 0 due");
  c->ctrl.spare = 0;
  CHECK(tcp_ctrl_alone(c, t + 80) == 0 && tcp_ctrl_alone(c, t + 90) == 0, "no spare: nothing due");
  tcp_failover_free(c);
  free(c);
}

int main(void) {
  tcp_cfg.chunk_size = 512 * 1024;
  test_ctrl_alone();
  test_receiver();
  test_sender();
  test_sender_keeps_the_socket_through();
  test_backoff();
  printf("test_rejoin: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
