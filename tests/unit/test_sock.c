/* A connect to a closed port of this host that connects to itself (the
 * kernel may pick that port as the local one: TCP simultaneous open) is
 * reported as refused, not as a connection. */
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

int main(void) {
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
