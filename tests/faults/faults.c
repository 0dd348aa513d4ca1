/*
 * collx fault tests: faults, bad input and load.
 *
 * Like the conformance driver, this program dlopens the BUILT plugin (argv
 * path, else $COLLX_PLUGIN, else ./.libs/libnccl-net-collx.so) and drives its
 * ncclNet table (v8 unless --abi N), but it injects faults: a peer killed
 * or frozen in the middle of a transfer, a rank that stops calling the
 * plugin for a while, packets dropped inside a pair of network namespaces,
 * stray and hostile clients on a listening port, garbage connection
 * handles, and API misuse (oversize messages, a 33rd request, NULL/stale
 * requests, double close, close with requests in flight, dlclose).
 *
 * Every case runs in its own forked process group: a leader that injects
 * the fault and judges, and workers that load the plugin
 * (tests/harness/case.h).  Run it under ASan/UBSan/TSan builds to prove that
 * nothing is written out of bounds (.ci/sanitizers.sh does).
 *
 *   faults [-v] [--list] [--case NAME[,NAME...]] [--abi N] [PLUGIN.so]
 *
 * Environment: COLLX_PLUGIN, COLLX_FAULTS_SCALE (multiplies deadlines and
 * tolerances for slow builds; the limits the plugin promises are printed
 * unscaled next to the measurement).  The workers run with COLLX_IFNAME=lo,
 * COLLX_TIMEOUT=3 and COLLX_CONNECT_TIMEOUT=1.
 *
 * Output: one PASS/FAIL/SKIP line per case with the measured times, then
 * "N passed, N failed, N skipped".  Exit 1 if anything failed, 77 if every
 * case was skipped, else 0.
 */
#include "../common/cases.h"
#include "faults.h"

void expect_error(const char *what, ncclResult_t rc) {
  if (rc == ncclSuccess)
    hx_fail("%s returned ncclSuccess, expected an error", what);
  else
    hx_summary("%s: %s; ", what, hx_result_str(rc));
}

int main(int argc, char **argv) {
  static const struct hx_case *const groups[] = {peer_cases, idle_cases, stray_cases, setup_cases,
                                                 misuse_cases, args_cases, NULL};
  const int sizes[] = {peer_count, idle_count, stray_count, setup_count, misuse_count, args_count};
  /* The plugin's thread placement stays out of the picture on a busy box. */
  static const char *const env[] = {"COLLX_IFNAME=lo", "COLLX_TIMEOUT=3", "COLLX_CONNECT_TIMEOUT=1",
                                    "COLLX_CPU_AFFINITY?=off", NULL};
  const struct hx_program prog = {
      .title = "collx fault tests (COLLX_TIMEOUT=3, COLLX_CONNECT_TIMEOUT=1)",
      .groups = groups,
      .group_sizes = sizes,
      .scale_env = "COLLX_FAULTS_SCALE",
      .env = env,
      .env_help = "COLLX_PLUGIN, COLLX_FAULTS_SCALE",
  };
  return hx_main(argc, argv, &prog);
}
