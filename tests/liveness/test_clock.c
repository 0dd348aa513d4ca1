/*
 * Liveness against a clock step: the plugin's timed waits must not depend
 * on the wall clock.  The sending process sees CLOCK_REALTIME jump an hour
 * ahead of the kernel's (as after the wall clock of a host is stepped back
 * an hour while a wait is computed from the old reading): a watchdog
 * sleeping until a wall-clock deadline then sleeps for an hour, sends no
 * heartbeats, and its idle peer declares it dead after COLLX_TIMEOUT.
 *
 * The skew is applied by interposing clock_gettime in this program (the
 * core library is linked in statically, so its calls land here).
 */
#include <sys/syscall.h>
#include <time.h>

#include "lv.h"

/* Read by any thread of the plugin that asks the wall clock (the live
 * counters' watchdog sample among them). */
static _Atomic long realtime_skew_s;

int clock_gettime(clockid_t clk, struct timespec *ts) {
  long rc = syscall(SYS_clock_gettime, clk, ts);
  if (rc == 0 && clk == CLOCK_REALTIME) ts->tv_sec += realtime_skew_s;
  return (int)rc;
}

#define QUIET_S 5.0 /* more than COLLX_TIMEOUT (2) plus a watchdog tick */

static int sender(void *send, int to_parent, int from_parent) {
  realtime_skew_s = 3600;
  char cue;
  if (lv_wait_cue(from_parent, &cue) != 0) return 3;
  static char msg[64] = "after the quiet";
  void *req = NULL;
  double until = now_s() + 5;
  while (!req && now_s() < until)
    if (collx_isend(send, msg, sizeof msg, 1, &req) != ncclSuccess) return 4;
  if (!req || lv_wait(req, 5, NULL) != ncclSuccess) return 5;
  (void)to_parent;
  collx_close_send(send);
  return 0;
}

static int clock_step(void) {
  setenv("COLLX_TIMEOUT", "2", 1);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, sender) == 0, "pair setup");
  static char buf[64];
  void *data = buf;
  size_t size = sizeof buf;
  int tag = 1;
  void *req = NULL;
  LV_REQUIRE(collx_irecv(p.recv, 1, &data, &size, &tag, &req) == ncclSuccess && req, "irecv");
  double took = 0;
  ncclResult_t r = lv_wait(req, QUIET_S, &took);
  LV_REQUIRE(r == ncclInProgress, "the receive failed after %.2f s of an idle but live peer (result %d)", took, r);
  lv_cue(p.to_child, 'g');
  r = lv_wait(req, 5, &took);
  LV_REQUIRE(r == ncclSuccess && !strcmp(buf, "after the quiet"), "the message after the quiet did not arrive (%d)", r);
  LV_REQUIRE(lv_pair_reap(&p) == 0, "sender failed");
  collx_close_recv(p.recv);
  collx_close_listen(p.listen);
  lv_say("an idle peer whose wall clock jumped an hour stayed alive for %.0f s (COLLX_TIMEOUT=2)", QUIET_S);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {{"clock-step", clock_step, 20, 1}};
  return lv_main(argc, argv, cases, 1);
}
