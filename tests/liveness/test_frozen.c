/*
 * A frozen sender is found out even while its receiver holds an early
 * eager message unread (its receive not posted yet), with the sender's
 * heartbeats queued behind it on the control socket; and a live sender in
 * that same position is not.
 *
 * frozen-parked: receiver posts 8 receives (one of BIG bytes, seven of 8);
 *   the sender sends BIG, then 31 eight-byte messages (the 8th of them and
 *   later wait for receives never posted), and is stopped (SIGSTOP) while
 *   BIG is still in flight.  The receiver tests its first receive: it must
 *   fail within COLLX_TIMEOUT (2 s) plus a little.
 * live-parked: the sender sends 9 eight-byte messages to 8 receives and
 *   stays alive but idle; the receiver completes its 8, waits 2.5 x
 *   COLLX_TIMEOUT without posting the 9th, then posts it: the message is
 *   delivered, no error.
 */
#include <signal.h>

#include "lv.h"

#define BIG (256u << 20)
#define SMALL 8
#define NSMALL 31
#define POSTED 8

static int send_all(void *send, int n, size_t size, char *buf, void **reqs) {
  for (int i = 0; i < n; i++) {
    reqs[i] = NULL;
    double until = now_s() + 5;
    while (!reqs[i] && now_s() < until)
      if (collx_isend(send, buf, size, 0, &reqs[i]) != ncclSuccess) return -1;
    if (!reqs[i]) return -1;
  }
  return 0;
}

static int frozen_sender(void *send, int to_parent, int from_parent) {
  (void)from_parent;
  char *big = malloc(BIG);
  static char small[SMALL];
  void *reqs[1 + NSMALL];
  if (!big) return 3;
  memset(big, 7, BIG);
  if (send_all(send, 1, BIG, big, reqs) != 0) return 4;
  if (send_all(send, NSMALL, SMALL, small, reqs + 1) != 0) return 5;
  lv_cue(to_parent, 'f'); /* the parent stops us now */
  for (;;) { /* until stopped, keep moving what we can, as NCCL's proxy would */
    int done;
    collx_test(reqs[0], &done, NULL);
  }
}

static int post_receives(void *recv, int n, char **bufs, size_t *sizes, void **reqs) {
  for (int i = 0; i < n; i++) {
    int tag = 0;
    void *data = bufs[i];
    if (collx_irecv(recv, 1, &data, &sizes[i], &tag, &reqs[i]) != ncclSuccess || !reqs[i]) return -1;
  }
  return 0;
}

static int frozen_parked(void) {
  setenv("COLLX_TIMEOUT", "2", 1);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, frozen_sender) == 0, "pair setup");
  char *bufs[POSTED];
  size_t sizes[POSTED];
  void *reqs[POSTED];
  static char smallbuf[POSTED][SMALL];
  bufs[0] = malloc(BIG);
  sizes[0] = BIG;
  LV_REQUIRE(bufs[0], "memory");
  for (int i = 1; i < POSTED; i++) {
    bufs[i] = smallbuf[i];
    sizes[i] = SMALL;
  }
  LV_REQUIRE(post_receives(p.recv, POSTED, bufs, sizes, reqs) == 0, "irecv");
  char cue;
  LV_REQUIRE(lv_wait_cue(p.from_child, &cue) == 0, "sender did not get going");
  kill(p.child, SIGSTOP);
  double took = 0;
  ncclResult_t r = lv_wait(reqs[0], 10, &took);
  kill(p.child, SIGKILL);
  lv_pair_reap(&p);
  collx_close_recv(p.recv); /* the other receives are given up with it */
  collx_close_listen(p.listen);
  LV_REQUIRE(r != ncclSuccess || took < 0.01, "first receive completed (%d) after the stop: BIG too small to be in flight", r);
  LV_REQUIRE(r != ncclInProgress, "no error %.1f s after the sender froze (COLLX_TIMEOUT=2)", took);
  LV_REQUIRE(took < 4, "the error took %.1f s (COLLX_TIMEOUT=2)", took);
  lv_say("frozen sender found out %.2f s after SIGSTOP (COLLX_TIMEOUT=2), result %d", took, r);
  return 0;
}

static int live_sender(void *send, int to_parent, int from_parent) {
  static char msgs[POSTED + 1][SMALL];
  void *reqs[POSTED + 1];
  for (int i = 0; i <= POSTED; i++) snprintf(msgs[i], SMALL, "m%d", i);
  for (int i = 0; i <= POSTED; i++)
    if (send_all(send, 1, SMALL, msgs[i], &reqs[i]) != 0) return 4;
  for (int i = 0; i <= POSTED; i++)
    if (lv_wait(reqs[i], 15, NULL) != ncclSuccess) return 5;
  lv_cue(to_parent, 'd');
  char cue;
  lv_wait_cue(from_parent, &cue);
  collx_close_send(send);
  return 0;
}

static int live_parked(void) {
  setenv("COLLX_TIMEOUT", "2", 1);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, live_sender) == 0, "pair setup");
  static char bufs[POSTED + 1][SMALL];
  char *b[POSTED + 1];
  size_t sizes[POSTED + 1];
  void *reqs[POSTED + 1];
  for (int i = 0; i <= POSTED; i++) {
    b[i] = bufs[i];
    sizes[i] = SMALL;
  }
  LV_REQUIRE(post_receives(p.recv, POSTED, b, sizes, reqs) == 0, "irecv");
  for (int i = 0; i < POSTED; i++) LV_REQUIRE(lv_wait(reqs[i], 5, NULL) == ncclSuccess, "receive %d", i);
  /* The 9th message waits unread in the control socket, heartbeats behind it. */
  sleep_s(5);
  LV_REQUIRE(post_receives(p.recv, 1, b + POSTED, sizes + POSTED, reqs + POSTED) == 0,
             "irecv after the quiet: the live sender was declared dead");
  double took = 0;
  ncclResult_t r = lv_wait(reqs[POSTED], 5, &took);
  LV_REQUIRE(r == ncclSuccess, "the 9th receive failed (%d) after 5 s of a live sender waiting", r);
  LV_REQUIRE(!strcmp(bufs[POSTED], "m8"), "9th message is \"%s\"", bufs[POSTED]);
  char cue;
  LV_REQUIRE(lv_wait_cue(p.from_child, &cue) == 0, "sender's sends");
  lv_cue(p.to_child, 'q');
  LV_REQUIRE(lv_pair_reap(&p) == 0, "sender failed");
  collx_close_recv(p.recv);
  collx_close_listen(p.listen);
  lv_say("a live sender behind an unread message stayed alive 5 s (COLLX_TIMEOUT=2)");
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"frozen-parked", frozen_parked, 20, 1},
      {"live-parked", live_parked, 20, 1},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
