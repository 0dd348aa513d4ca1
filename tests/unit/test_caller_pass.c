/*
 * Caller progress: one call moves at most TCP_CALLER_PASS_BYTES each way.
 *
 * With COLLX_PROGRESS=caller the sockets are written and read by NCCL's
 * proxy thread inside isend and test, and that thread serves every comm
 * of the rank: a call that filled a socket's whole buffer (or drained a
 * whole backlog) held it for 18 ms on a path that came back (bench/NOTES.md
 * 61).  So each call stops at the bound, inside a chunk if need be, and the
 * next call goes on from there.
 *
 * The bed's socket pairs get a send buffer far larger than the bound (as
 * root; without it the buffer itself would stop the call and the test
 * could not fail, so it is skipped), then one send and one receive of
 * MSG bytes in MSG / CHUNK chunks go through call by call: each call may
 * move no more than the bound, and every byte must arrive in order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/progress.h"
#include "transport/tcp/recv.h"
#include "transport/tcp/send.h"
#include "../common/check.h"
#include "sockbed.h"

#define MSG (4u << 20)
#define CHUNK (1u << 20)
#define HDR sizeof(struct wire_chunk)
#define ROOM (4 * MSG) /* the forced send buffer: the whole message and more */

/* Most bytes, headers included, that one call may put on a stream or take
 * from it: the bound, and the headers of the chunks it touches. */
static size_t call_most(void) {
  return TCP_CALLER_PASS_BYTES + (TCP_CALLER_PASS_BYTES / CHUNK + 2) * HDR;
}

static int room_forced(int fd) {
  int v = ROOM;
  return setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof v);
}

static size_t queued(int fd) {
  int n = 0;
  return ioctl(fd, SIOCINQ, &n) == 0 ? (size_t)n : SIZE_MAX;
}

static void fill(char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (char)(i * 7 + i / 4099);
}

/* ---- the send side ---- */

static int cts_for_one(struct sockbed *s, uint32_t seq, uint64_t size) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS, .seq = seq, .n = 1};
  m.e[0].size = size;
  return write(s->ctrl[1], &m, sizeof m) == (ssize_t)sizeof m ? 0 : -1;
}

/* The receiver's confirmation: the sender of a send this large (failover
 * on, no kept copy) waits for it. */
static int done_for(struct sockbed *s, uint32_t seq) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_DONE, .n = 1};
  m.e[0].size = seq;
  return write(s->ctrl[1], &m, sizeof m) == (ssize_t)sizeof m ? 0 : -1;
}

/* Reads what the stream holds into out at *got (headers checked and
 * dropped); -1 on a bad header. */
static int take_stream(int fd, char *out, size_t *got, size_t *in_hdr, struct wire_chunk *h, size_t *left) {
  for (;;) {
    if (*left == 0) {
      ssize_t n = recv(fd, (char *)h + *in_hdr, HDR - *in_hdr, MSG_DONTWAIT);
      if (n <= 0) return 0;
      *in_hdr += (size_t)n;
      if (*in_hdr < HDR) continue;
      *in_hdr = 0;
      if (h->magic != WIRE_MAGIC || h->offset != *got || h->len == 0 || h->len > CHUNK) return -1;
      *left = h->len;
    }
    ssize_t n = recv(fd, out + *got, *left, MSG_DONTWAIT);
    if (n <= 0) return 0;
    *got += (size_t)n;
    *left -= (size_t)n;
  }
}

static void test_send_bounded(char *src, char *dst) {
  struct sockbed s;
  struct tcp_send_comm *c = sockbed_up(&s, sizeof *c, &tcp_send_role, &tcp_send_ctrl_ops, 1);
  if (!c) {
    CHECK(0, "send test bed");
    return;
  }
  c->max_chunk = CHUNK;
  CHECK(room_forced(c->base.streams[0].fd) == 0, "the stream's send buffer forced to %u bytes", ROOM);
  CHECK(cts_for_one(&s, 0, MSG) == 0, "the peer's CTS for %u bytes written", MSG);
  struct tcp_req *r = NULL;
  for (int i = 0; i < 100 && !r; i++)
    if (tcp_isend(c, src, MSG, 0, &r) != ncclSuccess) break;
  CHECK(r != NULL, "isend of %u bytes took", MSG);
  size_t on_wire = queued(s.far[0]);
  CHECK(on_wire > 0 && on_wire <= call_most(), "isend wrote %zu bytes (at most %zu)", on_wire, call_most());

  size_t got = 0, in_hdr = 0, left = 0, worst = on_wire;
  int calls = 0, done = 0, bad = 0, confirmed = 0;
  struct wire_chunk h;
  bad |= take_stream(s.far[0], dst, &got, &in_hdr, &h, &left);
  while (r && !done && calls < 1000 && !bad) {
    if (c->base.role->test(r, &done, NULL) != ncclSuccess) break;
    calls++;
    size_t now = queued(s.far[0]);
    if (now > worst) worst = now;
    bad |= take_stream(s.far[0], dst, &got, &in_hdr, &h, &left);
    if (got == MSG && !confirmed) confirmed = done_for(&s, 0) == 0;
  }
  /* the send may be done (kept copy or the last write) with its tail
   * still in the socket */
  bad |= take_stream(s.far[0], dst, &got, &in_hdr, &h, &left);
  CHECK(!bad && done && got == MSG && memcmp(src, dst, MSG) == 0, "every byte arrived in order (%zu of %u, %d calls)",
        got, MSG, calls);
  CHECK(worst <= call_most() && calls >= (int)(MSG / TCP_CALLER_PASS_BYTES) - 1,
        "no call wrote more than %zu bytes (most %zu; %d calls)", call_most(), worst, calls);
  sockbed_down(&s);
}

/* ---- the receive side ---- */

static int peer_sends(struct sockbed *s, const char *src) {
  for (uint64_t off = 0; off < MSG; off += CHUNK) {
    struct wire_chunk h = {.magic = WIRE_MAGIC, .seq = 0, .total = MSG, .offset = off, .len = CHUNK};
    if (write(s->far[0], &h, sizeof h) != (ssize_t)sizeof h || write(s->far[0], src + off, CHUNK) != (ssize_t)CHUNK)
      return -1;
  }
  return 0;
}

static void test_recv_bounded(char *src, char *dst) {
  struct sockbed s;
  struct tcp_recv_comm *c = sockbed_up(&s, sizeof *c, &tcp_recv_role, &tcp_recv_ctrl_ops, 1);
  if (!c) {
    CHECK(0, "receive test bed");
    return;
  }
  memset(dst, 0, MSG);
  void *data = dst;
  size_t size = MSG;
  int tag = 0;
  struct tcp_req *r = NULL;
  CHECK(tcp_irecv(c, 1, &data, &size, &tag, &r) == ncclSuccess && r, "irecv of %u bytes posted", MSG);
  CHECK(room_forced(s.far[0]) == 0 && peer_sends(&s, src) == 0, "the peer wrote %u bytes in %u chunks", MSG,
        MSG / CHUNK);
  size_t before = queued(c->base.streams[0].fd), most = 0;
  int calls = 0, done = 0;
  while (r && !done && calls < 1000) {
    if (c->base.role->test(r, &done, NULL) != ncclSuccess) break;
    calls++;
    size_t after = queued(c->base.streams[0].fd);
    if (before - after > most) most = before - after;
    before = after;
  }
  CHECK(done && memcmp(src, dst, MSG) == 0, "the receive completed with every byte right (%d calls)", calls);
  CHECK(most > 0 && most <= call_most(), "no call read more than %zu bytes (most %zu)", call_most(), most);
  sockbed_down(&s);
}

int main(void) {
  tcp_cfg.progress = COLLX_PROGRESS_CALLER;
  tcp_cfg.failover_ms = 2000;
  int probe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, probe) != 0) return 99;
  int can = room_forced(probe[0]) == 0;
  close(probe[0]);
  close(probe[1]);
  if (!can) {
    printf("test_caller_pass: SKIP (SO_SNDBUFFORCE needs root; a smaller buffer would bound the calls itself)\n");
    return 77;
  }
  char *src = malloc(MSG), *dst = malloc(MSG);
  if (!src || !dst) return 99;
  fill(src, MSG);
  test_send_bounded(src, dst);
  test_recv_bounded(src, dst);
  free(src);
  free(dst);
  printf("test_caller_pass: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
