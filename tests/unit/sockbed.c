/* The socket-pair test bed (sockbed.h). */
#include "sockbed.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/recv.h"
#include "transport/tcp/send.h"

/* The bed hands out a comm it made as its base; the roles cast back. */
_Static_assert(offsetof(struct tcp_send_comm, base) == 0, "a send comm starts with its base");
_Static_assert(offsetof(struct tcp_recv_comm, base) == 0, "a receive comm starts with its base");

/* Socket pairs, not loopback TCP: nothing to listen on or wait for, and
 * a closed end fails the other's writes at once, as a lost path does. */
static int pair(int *near, int *far) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
  *near = fds[0];
  *far = fds[1];
  return 0;
}

/* "a+b+c" for three paths: the merged device's name in messages. */
static void name_device(struct tcp_comm_base *b, int paths) {
  size_t n = 0;
  for (int i = 0; i < paths && n + 2 < sizeof b->devname; i++) {
    if (i) b->devname[n++] = '+';
    b->devname[n++] = (char)('a' + i);
  }
  b->devname[n] = '\0';
}

static int streams_up(struct sockbed *s, int n) {
  struct tcp_comm_base *b = s->b;
  s->nstreams = b->nstreams = n;
  for (int i = 0; i < n; i++) {
    if (pair(&b->streams[i].fd, &s->far[i]) != 0) return -1;
    b->streams[i].index = i;
    b->streams[i].comm = b;
    pthread_mutex_init(&b->streams[i].lock, NULL);
  }
  return 0;
}

void *sockbed_up(struct sockbed *s, size_t size, const struct tcp_comm_role *role,
                 const struct tcp_ctrl_ops *ops, int paths) {
  struct tcp_comm_base *b = calloc(1, size);
  s->b = b;
  s->nstreams = 0;
  if (!b) return NULL;
  b->role = role;
  snprintf(b->peer, sizeof b->peer, "test peer");
  name_device(b, paths);
  struct tcp_comm_sockets sk = {.paths = paths, .failover = 1};
  if (tcp_failover_init(b, &sk) != 0 || pair(&s->ctrl[0], &s->ctrl[1]) != 0 ||
      pair(&s->spare[0], &s->spare[1]) != 0 ||
      tcp_ctrl_init(&b->ctrl, b, ops, s->ctrl[0], s->spare[0]) != 0 || streams_up(s, paths) != 0)
    return NULL;
  /* the role's part: queues, locks, requests */
  return b->role->init(b, &sk) == 0 ? b : NULL;
}

void sockbed_down(struct sockbed *s) {
  struct tcp_comm_base *b = s->b;
  for (int i = 0; i < s->nstreams; i++) {
    close(b->streams[i].fd);
    if (s->far[i] >= 0) close(s->far[i]);
  }
  atomic_store(&b->error, ncclRemoteError); /* close the control sockets at once */
  tcp_ctrl_close(&b->ctrl);
  close(s->ctrl[1]);
  close(s->spare[1]);
  b->role->release(b);
  tcp_failover_free(b);
  free(b);
}
