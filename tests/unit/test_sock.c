/* The socket helpers the streams use:
 *  - a connect to a closed port of this host that connects to itself (the
 *    kernel may pick that port as the local one: TCP simultaneous open) is
 *    reported as refused, not as a connection;
 *  - a header and payload written up to a byte limit (a caller's pass with
 *    a budget) stop exactly there, inside the header or the payload, and
 *    the bytes that arrive are the chunk's, in order. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/sock.h"

/* A port of 127.0.0.1 that nobody listens on (bound once, then released). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

static int self_connect_refused(void) {
  int port = free_port();
  if (port < 0) {
    printf("FAIL: no free loopback port: %s\n", strerror(errno));
    return 1;
  }
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  /* Leaving from the port it goes to forces what an unlucky retry gets. */
  int fd = sock_connect_start((struct sockaddr *)&to, sizeof to, (struct sockaddr *)&to, sizeof to);
  if (fd < 0) {
    printf("PASS: the kernel itself refused the connect (%s)\n", strerror(errno));
    return 0;
  }
  int r = 0;
  for (int i = 0; i < 1000 && r == 0; i++) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, 10);
    r = sock_connect_done(fd);
  }
  int e = errno;
  close(fd);
  if (r == 1) {
    printf("FAIL: a socket connected to itself on port %d was reported as connected\n", port);
    return 1;
  }
  if (r == 0) {
    printf("FAIL: the self-connect on port %d neither completed nor failed in 10 s\n", port);
    return 1;
  }
  if (e != ECONNREFUSED) {
    printf("FAIL: the self-connect on port %d failed with %s, expected ECONNREFUSED\n", port, strerror(e));
    return 1;
  }
  printf("PASS: a self-connected socket on port %d is reported as refused\n", port);
  return 0;
}

/* Write hdr + payload to a socket pair in the steps of `ends`, then read
 * all of it back and compare. */
static int send_upto_in_steps(const size_t *ends, int n) {
  char hdr[8], payload[100], got[sizeof hdr + sizeof payload];
  for (size_t i = 0; i < sizeof hdr; i++) hdr[i] = (char)('A' + i);
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (char)i;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    printf("FAIL: socketpair: %s\n", strerror(errno));
    return 1;
  }
  size_t done = 0;
  int bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    enum sock_io io = sock_send_two_upto(sv[0], hdr, sizeof hdr, payload, sizeof payload, &done, ends[i]);
    size_t want = ends[i] < sizeof got ? ends[i] : sizeof got;
    if (io != SOCK_IO_DONE || done != want) {
      printf("FAIL: writing up to byte %zu: io %d, %zu bytes written, expected %zu\n", ends[i], (int)io, done, want);
      bad = 1;
    }
  }
  size_t have = 0;
  while (!bad && have < done) {
    ssize_t k = recv(sv[1], got + have, done - have, 0);
    if (k <= 0) bad = 1;
    else have += (size_t)k;
  }
  close(sv[0]);
  close(sv[1]);
  if (bad) return 1;
  if (done != sizeof got || memcmp(got, hdr, sizeof hdr) != 0 || memcmp(got + sizeof hdr, payload, sizeof payload) != 0) {
    printf("FAIL: the bytes written in steps are not the header and payload in order (%zu bytes)\n", done);
    return 1;
  }
  return 0;
}

static int send_upto_stops_at_the_limit(void) {
  const size_t inside_header[] = {3, 8, 50, 108};
  const size_t inside_payload[] = {20, 20, 107, 500};
  const size_t whole[] = {108};
  if (send_upto_in_steps(inside_header, 4) || send_upto_in_steps(inside_payload, 4) || send_upto_in_steps(whole, 1))
    return 1;
  printf("PASS: a header and payload written up to a limit stop there (in the header, in the payload, past the end)\n");
  return 0;
}

int main(void) {
  int failed = self_connect_refused();
  failed |= send_upto_stops_at_the_limit();
  return failed;
}
