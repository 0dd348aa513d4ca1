/*
 * A sender's LOST notice (failover: "these streams are given up") is
 * never dropped.  It is written between chunks on a stream left, and the
 * watchdog's heartbeat on a data stream writes the same header slot: when
 * the stream carrying the notice fails in the middle of it, whoever was
 * writing must put the notice back for another stream, or the receiver
 * never lets go of the lost streams and their chunks are never sent again.
 *
 * Three paths, a stream each: path 1 is lost and its notice is on stream
 * 0 when stream 0's socket fails under the watchdog's heartbeat.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/send.h"
#include "../common/check.h"
#include "sockbed.h"

int main(void) {
  tcp_cfg.progress = COLLX_PROGRESS_CALLER; /* no driver to kick */
  tcp_cfg.failover_ms = 2000;
  struct sockbed s;
  struct tcp_send_comm *c = sockbed_up(&s, sizeof *c, &tcp_send_role, &tcp_send_ctrl_ops, 3);
  if (!c) return 1;
  struct tcp_comm_base *b = &c->base;

  /* Path 1 (stream 1) lost; its notice is the header stream 0 writes. */
  atomic_store(&b->lost, 2u);
  struct tcp_send_stream *t = &c->tx[0];
  t->hb = (struct wire_chunk){.magic = WIRE_MAGIC, .flags = WIRE_CHUNK_LOST, .total = 2u};
  t->hb_done = 0;
  t->hb_active = 1;
  close(s.far[0]); /* stream 0's path fails: its next write gets EPIPE */
  s.far[0] = -1;

  /* The watchdog writes it (with caller progress it serves the streams
   * while a path is lost, then the heartbeat on the first stream left). */
  b->role->watch(b, tcp_now() + 10);

  /* Announced: still pending, or already written on stream 2. */
  unsigned pending = atomic_load(&c->notice_pending);
  struct wire_chunk h;
  if (recv(s.far[2], &h, sizeof h, MSG_DONTWAIT | MSG_WAITALL) == (ssize_t)sizeof h && h.flags == WIRE_CHUNK_LOST)
    pending |= (unsigned)h.total;
  CHECK(tcp_stream_lost(b, 0), "stream 0's path is given up after its write failed");
  CHECK(pending & 2u, "the notice for stream 1 is back, to go out on another stream (announced %#x)", pending);
  CHECK(pending & 1u, "stream 0's own loss is to be announced too (announced %#x)", pending);
  CHECK(!tcp_comm_failed(b), "the comm lives on its third path (%s)", b->error_what);

  sockbed_down(&s);
  printf("test_lost_notice: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
