/*
 * Closing a send comm with bytes unread on its control socket (here a
 * clear-to-send that came in after its last read) must not reset the
 * connection: a reset throws away the eager messages the kernel still
 * holds for the receiver, and fails the receiver's reads.
 *
 * unread-at-close: the receiver posts nothing while the sender sends
 * 256 KiB eager messages until the socket is full (K of them complete: in
 * the kernel, not yet all read).  The receiver posts one receive (its CTS
 * reaches the sender, unread), and the sender closes at once while the
 * receiver posts K - 1 more: all K messages must arrive whole.
 *
 * unread-at-handoff: the same, with the sender holding a second comm (a
 * pair with itself) while it closes, so that the closing call leaves its
 * control sockets to the watchdog (linger.c) rather than waiting for the
 * peer's acknowledgement itself; then it closes the second comm, the last,
 * which waits out what still lingers (the soak checks that no descriptor
 * outlives the last close).
 */
#include "lv.h"

#define MSG (256 * 1024)
#define MAXMSG 31

static char payload[MAXMSG + 1][MSG];

/* A send and a receive comm of this process with itself. */
struct self_pair {
  void *listen, *send, *recv;
};

static int self_pair_open(struct self_pair *sp) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  memset(sp, 0, sizeof *sp);
  if (collx_listen(0, handle, &sp->listen) != ncclSuccess) return -1;
  return lv_pair_in_process(sp->listen, handle, &sp->send, &sp->recv, 10);
}

static void self_pair_close(struct self_pair *sp) {
  collx_close_send(sp->send);
  collx_close_recv(sp->recv);
  collx_close_listen(sp->listen);
}

static int unread_sender(void *send, int to_parent, int from_parent, int keep_another) {
  void *req[MAXMSG + 1];
  int k = 0;
  for (; k <= MAXMSG; k++) {
    memset(payload[k], 'a' + k, MSG);
    req[k] = NULL;
    if (collx_isend(send, payload[k], MSG, 0, &req[k]) != ncclSuccess || !req[k]) break;
    double took;
    if (lv_wait(req[k], 0.1, &took) != ncclSuccess) break; /* the socket is full */
  }
  if (k == 0 || k > MAXMSG) {
    printf("    sender: %d messages complete: the socket never filled\n", k);
    return 3;
  }
  struct self_pair other;
  if (keep_another && self_pair_open(&other) != 0) {
    printf("    sender: cannot open a second comm\n");
    return 5;
  }
  char n = (char)k, cue;
  lv_cue(to_parent, n);
  if (lv_wait_cue(from_parent, &cue) != 0) return 4;
  double t0 = now_s();
  collx_close_send(send); /* the request in flight, if any, is given up */
  printf("    sender: %d messages complete, close took %.3f s%s\n", k, now_s() - t0,
         keep_another ? " (another comm open)" : "");
  fflush(stdout);
  if (!keep_another) return 0;
  /* The receiver reads everything before the cue. */
  if (lv_wait_cue(from_parent, &cue) != 0) return 4;
  t0 = now_s();
  self_pair_close(&other);
  printf("    sender: the last close took %.3f s\n", now_s() - t0);
  fflush(stdout);
  return 0;
}

static int unread_sender_alone(void *send, int to_parent, int from_parent) {
  return unread_sender(send, to_parent, from_parent, 0);
}

static int unread_sender_beside(void *send, int to_parent, int from_parent) {
  return unread_sender(send, to_parent, from_parent, 1);
}

static int unread_case(int keep_another) {
  setenv("COLLX_EAGER_SIZE", "262144", 1);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, keep_another ? unread_sender_beside : unread_sender_alone) == 0, "pair setup");
  char k;
  LV_REQUIRE(lv_wait_cue(p.from_child, &k) == 0, "sender");
  static char bufs[MAXMSG + 1][MSG];
  void *reqs[MAXMSG + 1];
  size_t size = MSG;
  int tag = 0;
  void *data = bufs[0];
  LV_REQUIRE(collx_irecv(p.recv, 1, &data, &size, &tag, &reqs[0]) == ncclSuccess, "irecv 0");
  lv_cue(p.to_child, 'c'); /* its CTS is in the sender's socket now */
  for (int i = 1; i < k; i++) {
    data = bufs[i];
    LV_REQUIRE(collx_irecv(p.recv, 1, &data, &size, &tag, &reqs[i]) == ncclSuccess, "irecv %d", i);
  }
  int whole = 0;
  ncclResult_t first_err = ncclSuccess;
  for (int i = 0; i < k; i++) {
    ncclResult_t r = lv_wait(reqs[i], 3, NULL);
    if (r == ncclSuccess && bufs[i][0] == 'a' + i && bufs[i][MSG - 1] == 'a' + i) whole++;
    else if (first_err == ncclSuccess) first_err = r;
    if (r == ncclInProgress) break;
  }
  if (keep_another) lv_cue(p.to_child, 'd');
  int rc = lv_pair_reap(&p);
  LV_REQUIRE(whole == k, "%d of %d messages the sender completed arrived (first error %d)", whole, k, first_err);
  LV_REQUIRE(rc == 0, "sender failed (%d)", rc);
  lv_say("all %d eager messages arrived after the sender closed with a CTS unread%s", (int)k,
         keep_another ? ", its control sockets left to its watchdog" : "");
  collx_close_recv(p.recv);
  collx_close_listen(p.listen);
  return 0;
}

static int unread_at_close(void) { return unread_case(0); }
static int unread_at_handoff(void) { return unread_case(1); }

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"unread-at-close", unread_at_close, 20, 1},
      {"unread-at-handoff", unread_at_handoff, 20, 1},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
