/*
 * irecv and isend never wait for the control channel's writer.
 *
 * The writer's lock is also taken by other threads: a progress thread
 * writing a receive's DONE, the watchdog's heartbeat.  On a loaded machine
 * such a thread can lose the processor while it holds the lock, and a
 * caller that waited for it (NCCL's proxy thread, which serves every comm
 * of the rank) waited out that thread's time off the processor: one
 * irecv took 10.3 ms in CI with 0.06 ms on the processor.  So a CTS record
 * or an eager message posted while another thread writes is queued
 * without that lock, and the holder writes it as it lets go.
 *
 * Here the test's second thread holds the writer while the first posts:
 * each post must return (the alarm ends a post that waits), nothing is
 * written yet, and once the holder lets go everything posted is out, in
 * order.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/recv.h"
#include "transport/tcp/send.h"
#include "../common/check.h"
#include "sockbed.h"

#define EAGER 4096u

/* A post that waits for the holder waits for good: say so and stop. */
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: a post waited for the thread holding the writer (10 s)\n";
  (void)!write(1, msg, sizeof msg - 1);
  _exit(1);
}

/* A thread holding the writer until told to let go (tcp_ctrl_unlock, as
 * every holder does). */
struct holder {
  struct tcp_ctrl *k;
  pthread_t t;
  atomic_int held, release;
};

static void *hold(void *arg) {
  struct holder *h = arg;
  tcp_ctrl_lock(h->k);
  atomic_store(&h->held, 1);
  while (!atomic_load(&h->release)) usleep(1000);
  tcp_ctrl_unlock(h->k);
  return NULL;
}

static int holder_start(struct holder *h, struct tcp_ctrl *k) {
  h->k = k;
  atomic_store(&h->held, 0);
  atomic_store(&h->release, 0);
  if (pthread_create(&h->t, NULL, hold, h) != 0) return -1;
  while (!atomic_load(&h->held)) usleep(100);
  return 0;
}

static void holder_let_go(struct holder *h) {
  atomic_store(&h->release, 1);
  pthread_join(h->t, NULL);
}

/* Reads len bytes from fd, waiting up to a second for them. */
static int read_all(int fd, void *buf, size_t len) {
  size_t got = 0;
  for (int i = 0; got < len && i < 1000; i++) {
    ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
    if (n > 0)
      got += (size_t)n;
    else
      usleep(1000);
  }
  return got == len ? 0 : -1;
}

static int nothing_to_read(int fd) {
  char b;
  return recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) < 0;
}

/* ---- receive side: CTS records ---- */

static struct tcp_req *post_recv(struct tcp_recv_comm *c, char *buf) {
  void *data = buf;
  size_t size = EAGER;
  int tag = 0;
  struct tcp_req *r = NULL;
  return tcp_irecv(c, 1, &data, &size, &tag, &r) == ncclSuccess ? r : NULL;
}

/* The next record on the far end of the control socket is the CTS of seq. */
static int cts_next(struct sockbed *s, uint32_t seq) {
  struct wire_ctrl m;
  return read_all(s->ctrl[1], &m, sizeof m) == 0 && m.type == WIRE_CTS && m.seq == seq ? 0 : -1;
}

static void test_irecv_while_held(void) {
  struct sockbed s;
  struct tcp_recv_comm *c = sockbed_up(&s, sizeof *c, &tcp_recv_role, &tcp_recv_ctrl_ops, 1);
  static char buf[3][EAGER];
  struct holder h;
  if (!c || holder_start(&h, &c->base.ctrl) != 0) {
    CHECK(0, "receive test bed");
    return;
  }
  alarm(10);
  struct tcp_req *r0 = post_recv(c, buf[0]);
  struct tcp_req *r1 = post_recv(c, buf[1]);
  alarm(0);
  CHECK(r0 && r1, "two irecvs returned while another thread held the writer");
  CHECK(nothing_to_read(s.ctrl[1]), "their CTS records wait");
  holder_let_go(&h);
  CHECK(cts_next(&s, 0) == 0 && cts_next(&s, 1) == 0, "the holder wrote both as it let go, in order");
  struct tcp_req *r2 = post_recv(c, buf[2]);
  CHECK(r2 && cts_next(&s, 2) == 0, "the next irecv's CTS follows them");
  sockbed_down(&s);
}

/* ---- send side: eager messages ---- */

static void test_isend_while_held(void) {
  struct sockbed s;
  struct tcp_send_comm *c = sockbed_up(&s, sizeof *c, &tcp_send_role, &tcp_send_ctrl_ops, 1);
  static char msg[2][EAGER], got[EAGER];
  struct holder h;
  if (!c || holder_start(&h, &c->base.ctrl) != 0) {
    CHECK(0, "send test bed");
    return;
  }
  c->eager_max = EAGER;
  memset(msg[0], 'a', EAGER);
  memset(msg[1], 'b', EAGER);
  struct tcp_req *r[2] = {NULL, NULL};
  alarm(10);
  for (int i = 0; i < 2; i++) (void)tcp_isend(c, msg[i], EAGER, 0, &r[i]);
  alarm(0);
  CHECK(r[0] && r[1], "two eager isends returned while another thread held the writer");
  CHECK(nothing_to_read(s.ctrl[1]), "their messages wait");
  holder_let_go(&h);
  int in_order = 0;
  for (int i = 0; i < 2; i++) {
    struct wire_eager e;
    if (read_all(s.ctrl[1], &e, sizeof e) != 0 || e.type != WIRE_EAGER || e.size != EAGER ||
        read_all(s.ctrl[1], got, EAGER) != 0 || memcmp(got, msg[i], EAGER) != 0)
      break;
    in_order++;
  }
  CHECK(in_order == 2, "the holder wrote both as it let go, in order (%d)", in_order);
  int done = 0;
  for (int i = 0; i < 2 && r[i]; i++) {
    int d = 0;
    done += c->base.role->test(r[i], &d, NULL) == ncclSuccess && d;
  }
  CHECK(done == 2, "both sends are done (%d)", done);
  sockbed_down(&s);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  tcp_cfg.progress = COLLX_PROGRESS_CALLER;
  tcp_cfg.failover_ms = 2000;
  test_irecv_while_held();
  test_isend_while_held();
  printf("test_writer_busy: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
