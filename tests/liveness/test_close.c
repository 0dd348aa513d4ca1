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
 */
#include "lv.h"

#define MSG (256 * 1024)
#define MAXMSG 31

static char payload[MAXMSG + 1][MSG];

static int unread_sender(void *send, int to_parent, int from_parent) {
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
  char n = (char)k, cue;
  lv_cue(to_parent, n);
  if (lv_wait_cue(from_parent, &cue) != 0) return 4;
  double t0 = now_s();
  collx_close_send(send); /* the request in flight, if any, is given up */
  printf("    sender: %d messages complete, close took %.3f s\n", k, now_s() - t0);
  fflush(stdout);
  return 0;
}

static int unread_at_close(void) {
  setenv("COLLX_EAGER_SIZE", "262144", 1);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, unread_sender) == 0, "pair setup");
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
  LV_REQUIRE(lv_pair_reap(&p) == 0, "sender failed");
  LV_REQUIRE(whole == k, "%d of %d messages the sender completed arrived (first error %d)", whole, k, first_err);
  lv_say("all %d eager messages arrived after the sender closed with a CTS unread", (int)k);
  collx_close_recv(p.recv);
  collx_close_listen(p.listen);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"unread-at-close", unread_at_close, 20, 1},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
