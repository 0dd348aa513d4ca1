/*
 * Failover: when the receiver sends a receive's DONE.
 *
 * A sender that keeps a copy of a message (COLLX_FAILOVER_COPY) marks its
 * chunks WIRE_CHUNK_LAZY_DONE: it does not wait for the DONE, so the
 * receiver writes it with the next records it writes anyway (a CTS) or
 * at its watchdog's next tick, saving a write on both control sockets per
 * message.  A message without the mark gets its DONE at once.
 *
 * The receive role over socket pairs, two paths, a stream each; the test
 * plays the sender: chunks into a stream, records read from the control
 * socket.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/recv.h"
#include "../common/check.h"
#include "sockbed.h"

#define MSG 4096u

struct bed {
  struct tcp_recv_comm *c;
  struct sockbed s;
  char buf[2][MSG];
};

static int bed_up(struct bed *d) {
  d->c = sockbed_up(&d->s, sizeof *d->c, &tcp_recv_role, &tcp_recv_ctrl_ops, 2);
  return d->c ? 0 : -1;
}

/* What the receiver wrote on its control socket since the last look: how
 * many CTS records, and whether a DONE named `seq`. */
struct seen {
  int cts, done;
};

static struct seen records_since(struct bed *d, uint32_t seq) {
  struct seen s = {0, 0};
  struct wire_ctrl m;
  for (;;) {
    ssize_t n = recv(d->s.ctrl[1], &m, sizeof m, MSG_DONTWAIT | MSG_WAITALL);
    if (n != (ssize_t)sizeof m) break;
    if (m.type == WIRE_CTS) s.cts++;
    for (int i = 0; m.type == WIRE_DONE && i < m.n; i++) s.done += (uint32_t)m.e[i].size == seq;
  }
  return s;
}

static int sender_writes(struct bed *d, uint32_t seq, uint8_t flags) {
  struct wire_chunk h = {.magic = WIRE_MAGIC, .flags = flags, .seq = seq, .total = MSG, .offset = 0, .len = MSG};
  char payload[MSG];
  memset(payload, (int)seq + 1, sizeof payload);
  return write(d->s.far[0], &h, sizeof h) == (ssize_t)sizeof h &&
                 write(d->s.far[0], payload, sizeof payload) == (ssize_t)sizeof payload
             ? 0
             : -1;
}

static struct tcp_req *post(struct bed *d, int slot) {
  void *data = d->buf[slot];
  size_t size = MSG;
  int tag = 0;
  struct tcp_req *r = NULL;
  return tcp_irecv(d->c, 1, &data, &size, &tag, &r) == ncclSuccess ? r : NULL;
}

static int wait_done(struct bed *d, struct tcp_req *r) {
  int done = 0;
  for (int i = 0; i < 1000 && !done; i++)
    if (d->c->base.role->test(r, &done, NULL) != ncclSuccess) return -1;
  return done ? 0 : -1;
}

/* A lazy DONE waits for the next CTS, or for the tick. */
static void test_lazy(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed for the lazy DONE");
    return;
  }
  struct tcp_req *r0 = post(&d, 0);
  CHECK(r0 && records_since(&d, 0).cts == 1, "receive 0 posted, its CTS out");
  CHECK(sender_writes(&d, 0, WIRE_CHUNK_LAZY_DONE) == 0 && r0 && wait_done(&d, r0) == 0,
        "receive 0 completes from a chunk marked LAZY_DONE");
  CHECK(records_since(&d, 0).done == 0, "its DONE is not written on its own");

  struct tcp_req *r1 = post(&d, 1);
  struct seen s = records_since(&d, 0);
  /* The first CTS records go out at once (match_hold_init): this one is
   * written now, and the DONE with it. */
  CHECK(r1 && s.cts == 1 && s.done == 1, "the next CTS carries it along (CTS %d, DONE %d)", s.cts, s.done);

  CHECK(sender_writes(&d, 1, WIRE_CHUNK_LAZY_DONE) == 0 && r1 && wait_done(&d, r1) == 0, "receive 1 completes");
  CHECK(records_since(&d, 1).done == 0, "its DONE waits too");
  d.c->base.role->watch(&d.c->base, tcp_now());
  CHECK(records_since(&d, 1).done == 1, "with no CTS to follow, the watchdog's tick writes it");
  sockbed_down(&d.s);
}

/* Without the mark, the DONE goes out as the receive completes. */
static void test_prompt(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed for the prompt DONE");
    return;
  }
  struct tcp_req *r0 = post(&d, 0);
  (void)records_since(&d, 0);
  CHECK(sender_writes(&d, 0, 0) == 0 && r0 && wait_done(&d, r0) == 0, "receive 0 completes from a plain chunk");
  CHECK(records_since(&d, 0).done == 1, "its DONE is written at once");
  sockbed_down(&d.s);
}

int main(void) {
  tcp_cfg.progress = COLLX_PROGRESS_CALLER; /* the test's calls read the streams */
  tcp_cfg.failover_ms = 2000;
  test_lazy();
  test_prompt();
  printf("test_lazy_done: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
