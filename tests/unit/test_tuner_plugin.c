/*
 * The tuner as NCCL finds it: dlopen the built plugin (RTLD_LOCAL, as NCCL
 * does), look up ncclTunerPlugin_v4, and run init / getCollInfo / destroy
 * on a 7x3 cost table.  Run from the build directory.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collx/tuner_abi.h"
#include "../common/check.h"

#define NALGO 7
#define NPROTO 3

static char last_info[1024];

/* Keeps the tuner's INFO line for the checks below. */
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_INFO && strstr(msg, "tuner:"))
    snprintf(last_info, sizeof last_info, "%s", msg);
  if (getenv("VERBOSE")) printf("%s\n", msg);
}

static void fill(float t[NALGO * NPROTO]) {
  for (int i = 0; i < NALGO * NPROTO; i++) t[i] = 1.0f + (float)i;
}

/* One init / getCollInfo (all-reduce, 1 MiB) / destroy round; returns how
 * many non-Tree entries were left for NCCL to pick, or -1 on an error. */
static int round_trip(const ncclTuner_v4_t *tuner, size_t nranks, size_t nnodes) {
  void *ctx = NULL;
  float t[NALGO * NPROTO];
  int nchannels = 0;
  last_info[0] = '\0';
  if (tuner->init(nranks, nnodes, logger, &ctx) != ncclSuccess) return -1;
  fill(t);
  ncclResult_t res = tuner->getCollInfo(ctx, ncclFuncAllReduce, (size_t)1 << 20, 1, (float **)t,
                                        NALGO, NPROTO, 0, &nchannels);
  CHECK(nchannels == 0, "nChannels set to %d; collx leaves it to NCCL", nchannels);
  int left = 0;
  for (int i = NPROTO; i < NALGO * NPROTO; i++) left += t[i] != NCCL_ALGO_PROTO_IGNORE;
  for (int p = 0; p < NPROTO; p++)
    CHECK(t[p] == 1.0f + (float)p, "Tree entry %d changed to %g", p, (double)t[p]);
  if (tuner->destroy(ctx) != ncclSuccess || res != ncclSuccess) return -1;
  return left;
}

int main(void) {
  unsetenv("COLLX_TUNER");
  unsetenv("COLLX_TUNER_TREE_MAX");
  void *h = dlopen("./.libs/libnccl-net-collx.so", RTLD_NOW | RTLD_LOCAL);
  const ncclTuner_v4_t *tuner = h ? dlsym(h, "ncclTunerPlugin_v4") : NULL;
  if (!tuner) {
    printf("FAIL: no ncclTunerPlugin_v4 in the plugin: %s\n", dlerror());
    return 1;
  }
  CHECK(tuner->name && strcmp(tuner->name, "collx") == 0, "tuner named \"%s\"",
        tuner->name ? tuner->name : "(null)");

  int left = round_trip(tuner, 2, 2);
  CHECK(left == 0, "2 ranks on 2 nodes, 1 MiB all-reduce: %d non-Tree entries left", left);
  CHECK(strstr(last_info, "2 ranks on 2 nodes, all-reduce up to 4194304 bytes uses Tree"),
        "init logged \"%s\"", last_info);

  left = round_trip(tuner, 8, 2);
  CHECK(left == NALGO * NPROTO - NPROTO, "8 ranks on 2 nodes: table changed (%d left)", left);
  CHECK(strstr(last_info, "NCCL tunes alone"), "8 ranks on 2 nodes: init logged \"%s\"",
        last_info);

  setenv("COLLX_TUNER", "0", 1);
  left = round_trip(tuner, 2, 2);
  CHECK(left == NALGO * NPROTO - NPROTO, "COLLX_TUNER=0: table changed (%d left)", left);
  CHECK(strstr(last_info, "COLLX_TUNER=0"), "COLLX_TUNER=0: init logged \"%s\"", last_info);
  unsetenv("COLLX_TUNER");

  setenv("COLLX_TUNER_TREE_MAX", "65536", 1);
  left = round_trip(tuner, 2, 2);
  CHECK(left == NALGO * NPROTO - NPROTO, "COLLX_TUNER_TREE_MAX=65536, 1 MiB: table changed");
  CHECK(strstr(last_info, "up to 65536 bytes"), "COLLX_TUNER_TREE_MAX=65536: init logged \"%s\"",
        last_info);
  unsetenv("COLLX_TUNER_TREE_MAX");

  CHECK(tuner->init(2, 2, logger, NULL) != ncclSuccess, "init with a NULL context pointer succeeded");
  CHECK(tuner->destroy(NULL) == ncclSuccess, "destroy(NULL) failed");
  dlclose(h);
  if (failures) {
    printf("test_tuner_plugin: %d of %d check(s) failed\n", failures, checks);
    return 1;
  }
  printf("test_tuner_plugin: all %d checks passed\n", checks);
  return 0;
}
