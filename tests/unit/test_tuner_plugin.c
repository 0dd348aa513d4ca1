/*
 * The tuner as NCCL finds it: dlopen the built plugin (RTLD_LOCAL, as NCCL
 * does), look up ncclTunerPlugin_v4 and ncclTunerPlugin_v6, and run init /
 * getCollInfo / destroy (finalize) on a 7x3 cost table through each; v6
 * also: NCCL's tuning constants and NVLink domain info left as they were,
 * no chunk-size hook.  Run from the build directory.
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

/* The table under test: v4, or v6 when tuner6 is set. */
static const ncclTuner_v4_t *tuner4;
static const ncclTuner_v6_t *tuner6;

static ncclResult_t t_init(size_t nranks, size_t nnodes, void **ctx) {
  if (!tuner6) return tuner4->init(nranks, nnodes, logger, ctx);
  ncclTunerConstants_v6_t constants, before;
  ncclNvlDomainInfo_v6_t nvl = {1, 2, 2}, nvl_before = nvl;
  for (size_t i = 0; i < sizeof constants / sizeof(double); i++) ((double *)&constants)[i] = 0.5 + (double)i;
  before = constants;
  ncclResult_t r = tuner6->init(ctx, 0xabcdef, nranks, nnodes, logger, &nvl, &constants);
  CHECK(!memcmp(&constants, &before, sizeof constants), "v6 init changed NCCL's tuning constants");
  CHECK(!memcmp(&nvl, &nvl_before, sizeof nvl), "v6 init changed the NVLink domain info");
  return r;
}

static ncclResult_t t_get(void *ctx, float *t, int *nchannels) {
  return (tuner6 ? tuner6->getCollInfo : tuner4->getCollInfo)(ctx, ncclFuncAllReduce, (size_t)1 << 20,
                                                              1, (float **)t, NALGO, NPROTO, 0, nchannels);
}

static ncclResult_t t_fini(void *ctx) { return tuner6 ? tuner6->finalize(ctx) : tuner4->destroy(ctx); }

/* One init / getCollInfo (all-reduce, 1 MiB) / destroy round; returns how
 * many non-Tree entries were left for NCCL to pick, or -1 on an error.
 * Tree's Simple entry always stays; its LL and LL128 entries stay only
 * when `tree_ll_kept` (the policy idle, or 1 MiB within COLLX_TUNER_LL_MAX). */
static int round_trip(size_t nranks, size_t nnodes, int tree_ll_kept) {
  void *ctx = NULL;
  float t[NALGO * NPROTO];
  int nchannels = 0;
  last_info[0] = '\0';
  if (t_init(nranks, nnodes, &ctx) != ncclSuccess) return -1;
  fill(t);
  ncclResult_t res = t_get(ctx, t, &nchannels);
  CHECK(nchannels == 0, "nChannels set to %d; collx leaves it to NCCL", nchannels);
  int left = 0;
  for (int i = NPROTO; i < NALGO * NPROTO; i++) left += t[i] != NCCL_ALGO_PROTO_IGNORE;
  for (int p = 0; p < NPROTO; p++) {
    float want = p == NCCL_PROTO_SIMPLE || tree_ll_kept ? 1.0f + (float)p : NCCL_ALGO_PROTO_IGNORE;
    CHECK(t[p] == want, "%zu ranks on %zu nodes: Tree entry %d is %g, want %g", nranks, nnodes, p,
          (double)t[p], (double)want);
  }
  if (t_fini(ctx) != ncclSuccess || res != ncclSuccess) return -1;
  return left;
}

/* The policy's cases, through whichever table is under test. */
static void check_table(const char *label) {
  printf("%s\n", label);
  int left = round_trip(2, 2, 0);
  CHECK(left == 0, "2 ranks on 2 nodes, 1 MiB all-reduce: %d non-Tree entries left", left);
  CHECK(strstr(last_info, "2 ranks on 2 nodes, all-reduce up to 4194304 bytes uses Tree, with Simple "
                          "above 65536 bytes"),
        "init logged \"%s\"", last_info);

  setenv("COLLX_TUNER_LL_MAX", "1048576", 1);
  left = round_trip(2, 2, 1);
  CHECK(left == 0, "COLLX_TUNER_LL_MAX=1048576: %d non-Tree entries left", left);
  unsetenv("COLLX_TUNER_LL_MAX");

  left = round_trip(8, 2, 1);
  CHECK(left == NALGO * NPROTO - NPROTO, "8 ranks on 2 nodes: table changed (%d left)", left);
  CHECK(strstr(last_info, "NCCL tunes alone"), "8 ranks on 2 nodes: init logged \"%s\"",
        last_info);

  setenv("COLLX_TUNER", "0", 1);
  left = round_trip(2, 2, 1);
  CHECK(left == NALGO * NPROTO - NPROTO, "COLLX_TUNER=0: table changed (%d left)", left);
  CHECK(strstr(last_info, "COLLX_TUNER=0"), "COLLX_TUNER=0: init logged \"%s\"", last_info);
  unsetenv("COLLX_TUNER");

  setenv("COLLX_TUNER_TREE_MAX", "65536", 1);
  left = round_trip(2, 2, 1);
  CHECK(left == NALGO * NPROTO - NPROTO, "COLLX_TUNER_TREE_MAX=65536, 1 MiB: table changed");
  CHECK(strstr(last_info, "up to 65536 bytes"), "COLLX_TUNER_TREE_MAX=65536: init logged \"%s\"",
        last_info);
  unsetenv("COLLX_TUNER_TREE_MAX");

  CHECK(t_fini(NULL) == ncclSuccess, "destroy(NULL) failed");
}

int main(void) {
  unsetenv("COLLX_TUNER");
  unsetenv("COLLX_TUNER_TREE_MAX");
  unsetenv("COLLX_TUNER_LL_MAX");
  void *h = dlopen("./.libs/libnccl-net-collx.so", RTLD_NOW | RTLD_LOCAL);
  tuner4 = h ? dlsym(h, "ncclTunerPlugin_v4") : NULL;
  const ncclTuner_v6_t *v6 = h ? dlsym(h, "ncclTunerPlugin_v6") : NULL;
  if (!tuner4 || !v6) {
    printf("FAIL: ncclTunerPlugin_v4 %s, ncclTunerPlugin_v6 %s in the plugin\n", tuner4 ? "found" : "missing",
           v6 ? "found" : "missing");
    return 1;
  }
  CHECK(tuner4->name && strcmp(tuner4->name, "collx") == 0, "v4 tuner named \"%s\"",
        tuner4->name ? tuner4->name : "(null)");
  CHECK(v6->name && strcmp(v6->name, "collx") == 0, "v6 tuner named \"%s\"", v6->name ? v6->name : "(null)");
  CHECK(v6->getChunkSize == NULL, "v6 getChunkSize set; collx keeps NCCL's chunk size");
  check_table("ncclTunerPlugin_v4");
  CHECK(tuner4->init(2, 2, logger, NULL) != ncclSuccess, "v4 init with a NULL context pointer succeeded");
  tuner6 = v6;
  check_table("ncclTunerPlugin_v6");
  CHECK(v6->init(NULL, 1, 2, 2, logger, NULL, NULL) != ncclSuccess, "v6 init with a NULL context pointer succeeded");
  dlclose(h);
  if (failures) {
    printf("test_tuner_plugin: %d of %d check(s) failed\n", failures, checks);
    return 1;
  }
  printf("test_tuner_plugin: all %d checks passed\n", checks);
  return 0;
}
