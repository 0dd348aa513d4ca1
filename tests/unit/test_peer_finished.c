/* When a receive comm's peer has closed everything, a receive still posted
 * fails only once nothing the peer sent can reach it: the control socket
 * is at its end, or its reader waits with a message for a receive that is
 * not posted.  A receive posted since the reader stopped is no verdict: the
 * reader (another thread, perhaps right now) has not looked again yet. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "transport/tcp/recv.h"
#include "transport/tcp/send.h"
#include "../common/check.h"

int main(void) {
  struct tcp_recv_comm *c = calloc(1, sizeof *c); /* large: not on the stack */
  if (!c) return 1;
  c->base.nstreams = 2;
  atomic_store(&c->recv_seq, 7);

  CHECK(!tcp_recv_peer_finished(c), "finished with every stream still open");
  atomic_store(&c->streams_eof, 2);
  CHECK(!tcp_recv_peer_finished(c), "finished while the control socket may still bring messages");

  /* The reader stopped at a message for receive 7, which was not posted. */
  atomic_store(&c->eager_rx_wait_seq, 7);
  atomic_store(&c->eager_rx_blocked, 1);
  CHECK(tcp_recv_peer_finished(c), "not finished, though the next message waits for a receive never posted");

  /* Receive 7 is posted now; the reader has not looked again. */
  atomic_store(&c->recv_seq, 8);
  CHECK(!tcp_recv_peer_finished(c), "finished before the reader saw the receive posted for its waiting message");

  /* The control socket is at its end: nothing more can come. */
  atomic_store(&c->base.ctrl.eof, 1);
  CHECK(tcp_recv_peer_finished(c), "not finished after the control socket closed");

  free(c);
  printf("test_peer_finished: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
