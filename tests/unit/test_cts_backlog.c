/*
 * irecv never waits for room on the control socket.  Each receive queues a
 * CTS record; when the socket takes nothing (a lossy path under the spare,
 * a peer that has stopped reading) the records that do not fit the
 * channel wait in the receive comm's backlog, and irecv returns at once.
 * Once the socket drains, every CTS goes out, in order.
 *
 * One receive comm over a socket pair whose near end's buffer is full of
 * filler; 100 receives, each completed by a MATCHED eager message the far
 * end writes (the other direction of the socket flows).  Before the
 * backlog, the 35th irecv waited for room for good (the alarm ends it).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/recv.h"
#include "transport/tcp/tcp.h"
#include "../common/check.h"

#define RECEIVES 100

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Fill the near end's send buffer: it takes nothing more. */
static size_t fill(int fd) {
  static char junk[4096];
  size_t total = 0;
  for (;;) {
    ssize_t n = send(fd, junk, sizeof junk, MSG_DONTWAIT);
    if (n <= 0) return total;
    total += (size_t)n;
  }
}

static void send_matched(int far, uint32_t seq, uint64_t value) {
  struct wire_eager h = {.magic = WIRE_MAGIC, .type = WIRE_EAGER, .flags = WIRE_EAGER_MATCHED, .seq = seq,
                         .size = sizeof value};
  if (send(far, &h, sizeof h, 0) != (ssize_t)sizeof h || send(far, &value, sizeof value, 0) != (ssize_t)sizeof value)
    exit(2);
}

/* Read exactly len bytes from the far end (the comm is pumped meanwhile,
 * so that what it holds back goes out). */
static int far_read(struct tcp_recv_comm *c, int far, void *buf, size_t len) {
  size_t got = 0;
  for (int idle = 0; got < len && idle < 2000;) {
    ssize_t n = recv(far, (char *)buf + got, len - got, MSG_DONTWAIT);
    if (n > 0) {
      got += (size_t)n;
      idle = 0;
      continue;
    }
    tcp_recv_write_due_cts(c);
    tcp_ctrl_pump(&c->base.ctrl);
    usleep(1000);
    idle++;
  }
  return got == len ? 0 : -1;
}

int main(void) {
  alarm(60);
  tcp_cfg.progress = COLLX_PROGRESS_CALLER;
  struct tcp_recv_comm *c = calloc(1, sizeof *c);
  if (!c) return 2;
  struct tcp_comm_base *b = &c->base;
  b->role = &tcp_recv_role;
  snprintf(b->peer, sizeof b->peer, "test peer");
  snprintf(b->devname, sizeof b->devname, "test0");
  int s[2], t[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, t) != 0) return 2;
  if (tcp_ctrl_init(&b->ctrl, b, &tcp_recv_ctrl_ops, s[0], -1) != 0) return 2;
  b->nstreams = 1;
  b->streams[0].fd = t[0];
  b->streams[0].comm = b;
  pthread_mutex_init(&b->streams[0].lock, NULL);
  struct tcp_comm_sockets sk = {.paths = 1};
  if (b->role->init(b, &sk) != 0) return 2;
  size_t filler = fill(s[0]);
  CHECK(filler > 0, "the control socket's buffer is full (%zu bytes of filler)", filler);

  static uint64_t buf[RECEIVES];
  double slowest = 0;
  int right = 0;
  for (uint32_t i = 0; i < RECEIVES; i++) {
    void *data = &buf[i];
    size_t size = sizeof buf[i];
    int tag = 7;
    struct tcp_req *r = NULL;
    double t0 = now_s();
    ncclResult_t rc = tcp_irecv(c, 1, &data, &size, &tag, &r);
    double took = now_s() - t0;
    if (took > slowest) slowest = took;
    if (rc != ncclSuccess || !r) {
      CHECK(0, "irecv %u: result %d", i, (int)rc);
      break;
    }
    send_matched(s[1], i, 1000 + i);
    int done = 0;
    for (int k = 0; k < 100000 && !done && !tcp_comm_failed(b); k++) b->role->test(r, &done, NULL);
    right += done && buf[i] == 1000 + i;
  }
  CHECK(right == RECEIVES, "%d of %d receives complete with their message", right, RECEIVES);
  CHECK(slowest < 0.1, "no irecv waits for room: the slowest took %.1f ms", slowest * 1e3);
  CHECK(c->cts_backlog_len > 0, "CTS records wait in the backlog (%d)", c->cts_backlog_len);

  /* The far end reads its filler, then every CTS record, in order. */
  static char sink[1 << 16];
  size_t left = filler;
  while (left > 0) {
    size_t n = left < sizeof sink ? left : sizeof sink;
    if (far_read(c, s[1], sink, n) != 0) break;
    left -= n;
  }
  int in_order = 0;
  for (uint32_t i = 0; i < RECEIVES; i++) {
    struct wire_ctrl m;
    if (far_read(c, s[1], &m, sizeof m) != 0 || m.type != WIRE_CTS || m.seq != i || m.n != 1 || m.e[0].tag != 7)
      break;
    in_order++;
  }
  CHECK(left == 0 && in_order == RECEIVES, "the far end gets its filler, then CTS 0..%d in order (%d)", RECEIVES - 1,
        in_order);
  CHECK(c->cts_backlog_len == 0 && !tcp_comm_failed(b), "the backlog is empty, no failure (%s)", b->error_what);

  atomic_store(&b->error, ncclRemoteError); /* close the control socket at once */
  tcp_ctrl_close(&b->ctrl);
  close(s[1]);
  close(t[0]);
  close(t[1]);
  b->role->release(b);
  free(c);
  printf("test_cts_backlog: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
