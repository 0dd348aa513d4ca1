/*
 * Faults of the plugin's own resources during setup: the kernel's
 * randomness unavailable, the watchdog thread not starting, connects that
 * NCCL abandons.  Where the fault cannot be caused from outside (getrandom
 * and pthread_create failing), this program interposes the call: the core
 * library is linked in statically, so its calls land here, and each
 * interposer fails only while its switch is on.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/syscall.h>

#include "lv.h"

/* ---- interposers -------------------------------------------------------- */

static volatile int fail_getrandom;

ssize_t getrandom(void *buf, size_t len, unsigned flags) {
  if (fail_getrandom) {
    errno = ENOSYS;
    return -1;
  }
  return syscall(SYS_getrandom, buf, len, flags);
}

/* ---- cases -------------------------------------------------------------- */

/* No randomness: listen and connect fail with a WARN instead of making a
 * guessable secret from the time and pid. */
static int no_randomness(void) {
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL;
  fail_getrandom = 1;
  double t0 = now_s();
  ncclResult_t r = collx_listen(0, handle, &listen);
  double took = now_s() - t0;
  fail_getrandom = 0;
  LV_REQUIRE(r != ncclSuccess && !listen, "listen made a secret without getrandom (result %d)", r);
  LV_REQUIRE(lv_warned("getrandom"), "no WARN naming getrandom");
  lv_say("listen failed at once (%.4f s) when getrandom fails", took);
  /* A connect makes a random connection id: the same rule. */
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  void *send = NULL;
  fail_getrandom = 1;
  r = collx_connect(0, handle, &send);
  fail_getrandom = 0;
  LV_REQUIRE(r != ncclSuccess && !send, "connect went on without getrandom (result %d)", r);
  collx_close_listen(listen);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"no-randomness", no_randomness, 10, 0},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
