/*
 * collx conformance driver.
 *
 * dlopens the BUILT plugin (argv path, else $COLLX_PLUGIN, else
 * ./.libs/libnccl-net-collx.so), looks up its ncclNet table (v8 unless
 * --abi N) and drives it the way NCCL's proxy thread does: non-blocking
 * connect/accept polled in a loop, isend/irecv that may answer "not ready"
 * with a NULL request, test() polled until done, up to 32 requests in
 * flight per comm.  Every plugin call must return within 0.5 s.
 *
 * Every case runs in freshly forked processes (tests/harness/case.h): the
 * harness itself never loads the plugin, and a hang is a FAIL with the step
 * each process was at.
 *
 *   conformance [-v] [--list] [--case NAME[,NAME...]]... [--abi N] [PLUGIN.so]
 *
 * Environment: COLLX_PLUGIN (plugin path), COLLX_DRIVER_TIMEOUT_SCALE (scales
 * every timeout and per-call limit, for slow or sanitizer builds),
 * COLLX_DRIVER_SEED (seed of the random message sizes).  COLLX_IFNAME is set
 * to "lo" for the processes.
 *
 * Last line of output: "N passed, N failed, N skipped"; exit status 1 when
 * anything failed, 0 otherwise (99 on a usage or setup error).
 */
#include "../common/cases.h"
#include "driver.h"

int main(int argc, char **argv) {
  static const struct hx_case *const groups[] = {driver_basic_cases, driver_window_cases, misuse_cases, stray_cases,
                                                 driver_eager_cases, NULL};
  const int sizes[] = {driver_basic_count, driver_window_count, misuse_count, stray_count, driver_eager_count};
  static const char *const env[] = {"COLLX_IFNAME=lo", NULL};
  const struct hx_program prog = {
      .title = "collx conformance driver",
      .groups = groups,
      .group_sizes = sizes,
      .scale_env = "COLLX_DRIVER_TIMEOUT_SCALE",
      .seed_env = "COLLX_DRIVER_SEED",
      .call_limit_s = 0.5,
      .env = env,
      .env_help = "COLLX_PLUGIN, COLLX_DRIVER_TIMEOUT_SCALE, COLLX_DRIVER_SEED",
  };
  return hx_main(argc, argv, &prog);
}
