/*
 * Unit test of the tuning policy (src/tune/tune.c): which cost tables it
 * rewrites, and that it rewrites only the entries of the other algorithms.
 * Prints one line per failed check; exits non-zero if any failed.
 */
#include <stdio.h>
#include <string.h>

#include "collx/tuner_abi.h"
#include "tune/tune.h"
#include "../common/check.h"

#define NALGO 7
#define NPROTO 3
#define MiB ((size_t)1 << 20)

static const struct collx_tune_settings on = {.enabled = 1, .tree_max = 4 * MiB, .ll_max = 4 * MiB};
static const struct collx_tune_settings off = {.enabled = 0, .tree_max = 4 * MiB, .ll_max = 4 * MiB};
/* The shipped shape: Tree up to 4 MiB, Simple above 64 KiB. */
static const struct collx_tune_settings simple = {.enabled = 1, .tree_max = 4 * MiB, .ll_max = 64 << 10};

/* A table as NCCL could hand it over: distinct positive times, with the
 * combinations it rules out (CollNet, NVLS) already ignored. */
static void fill(float t[NALGO * NPROTO]) {
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++) t[a * NPROTO + p] = 10.0f + (float)(a * NPROTO + p);
  for (int p = 0; p < NPROTO; p++) {
    t[NCCL_ALGO_COLLNET_DIRECT * NPROTO + p] = NCCL_ALGO_PROTO_IGNORE;
    t[NCCL_ALGO_NVLS * NPROTO + p] = NCCL_ALGO_PROTO_IGNORE;
  }
}

static int same(const float *a, const float *b, int n) {
  return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* The policy applied: Tree rows as they were, every other entry ignored. */
static void check_only_tree(const char *what, const struct collx_tune_settings *s, size_t nranks,
                            size_t nnodes, size_t nbytes) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(s, nranks, nnodes, ncclFuncAllReduce, nbytes, t, NALGO, NPROTO);
  CHECK(changed == 1, "%s: reported %d, want 1 (changed)", what, changed);
  CHECK(same(t, orig, NPROTO), "%s: Tree entries changed", what);
  for (int a = 0; a < NALGO; a++) {
    if (a == NCCL_ALGO_TREE) continue;
    for (int p = 0; p < NPROTO; p++)
      CHECK(t[a * NPROTO + p] == NCCL_ALGO_PROTO_IGNORE, "%s: algo %d proto %d left at %g", what,
            a, p, (double)t[a * NPROTO + p]);
  }
}

/* The policy stays out: the table is exactly as NCCL made it. */
static void check_unchanged(const char *what, const struct collx_tune_settings *s, size_t nranks,
                            size_t nnodes, int coll, size_t nbytes) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(s, nranks, nnodes, coll, nbytes, t, NALGO, NPROTO);
  CHECK(changed == 0, "%s: reported %d, want 0 (unchanged)", what, changed);
  CHECK(same(t, orig, NALGO * NPROTO), "%s: table changed", what);
}

static void test_policy(void) {
  check_only_tree("1 MiB, 2 ranks on 2 nodes", &on, 2, 2, MiB);
  check_only_tree("1 MiB, 4 ranks on 4 nodes", &on, 4, 4, MiB);
  check_only_tree("8 B, 2 ranks on 2 nodes", &on, 2, 2, 8);
  check_only_tree("4 MiB (the limit itself), 2 ranks on 2 nodes", &on, 2, 2, 4 * MiB);
  check_unchanged("8 MiB (over the limit)", &on, 2, 2, ncclFuncAllReduce, 8 * MiB);
  check_unchanged("4 MiB + 1 (over the limit)", &on, 2, 2, ncclFuncAllReduce, 4 * MiB + 1);
  check_unchanged("8 ranks on 2 nodes", &on, 8, 2, ncclFuncAllReduce, MiB);
  check_unchanged("1 rank on 1 node", &on, 1, 1, ncclFuncAllReduce, MiB);
  check_unchanged("4 ranks on 1 node", &on, 4, 1, ncclFuncAllReduce, MiB);
  check_unchanged("AllGather", &on, 2, 2, ncclFuncAllGather, MiB);
  check_unchanged("ReduceScatter", &on, 2, 2, ncclFuncReduceScatter, MiB);
  check_unchanged("Broadcast", &on, 2, 2, ncclFuncBroadcast, MiB);
  check_unchanged("COLLX_TUNER=0", &off, 2, 2, ncclFuncAllReduce, MiB);
  check_unchanged("NULL settings", NULL, 2, 2, ncclFuncAllReduce, MiB);
  struct collx_tune_settings zero = {.enabled = 1, .tree_max = 0};
  check_unchanged("COLLX_TUNER_TREE_MAX=0, 8 B", &zero, 2, 2, ncclFuncAllReduce, 8);
}

/* Tree already ruled out by NCCL (NCCL_ALGO=Ring, or no tree): no change. */
static void test_tree_ignored(void) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  for (int p = 0; p < NPROTO; p++) t[NCCL_ALGO_TREE * NPROTO + p] = NCCL_ALGO_PROTO_IGNORE;
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, NALGO, NPROTO);
  CHECK(changed == 0 && same(t, orig, NALGO * NPROTO), "all Tree entries ignored: table changed");

  /* One Tree protocol left (NCCL_PROTO=LL, say) is enough to act on. */
  fill(t);
  t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL128] = NCCL_ALGO_PROTO_IGNORE;
  t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
  changed = collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, NALGO, NPROTO);
  CHECK(changed == 1 && t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL] == 10.0f &&
            t[NCCL_ALGO_RING * NPROTO + NCCL_PROTO_LL] == NCCL_ALGO_PROTO_IGNORE,
        "one Tree protocol left: policy not applied");
}

/* Others already ignored: nothing to change, reported as such. */
static void test_already_tree_only(void) {
  float t[NALGO * NPROTO];
  fill(t);
  for (int i = NPROTO; i < NALGO * NPROTO; i++) t[i] = NCCL_ALGO_PROTO_IGNORE;
  int changed = collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, NALGO, NPROTO);
  CHECK(changed == 0, "table already Tree-only: reported %d, want 0", changed);
}

/* Odd shapes: no table, no rows, no columns, a Tree row only, and a wider
 * table than today's (the policy follows numAlgo/numProto, not 7x3). */
static void test_shapes(void) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  memcpy(orig, t, sizeof t);
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, NULL, NALGO, NPROTO) == 0,
        "NULL table: reported a change");
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, 0, NPROTO) == 0,
        "numAlgo 0: reported a change");
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, -1, NPROTO) == 0,
        "numAlgo -1: reported a change");
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, NALGO, 0) == 0,
        "numProto 0: reported a change");
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, NALGO, -3) == 0,
        "numProto -3: reported a change");
  CHECK(collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, t, 1, NPROTO) == 0,
        "Tree row only: reported a change");
  CHECK(same(t, orig, NALGO * NPROTO), "degenerate shapes: table changed");

  /* 8 algorithms x 4 protocols: every non-Tree entry ignored, nothing past. */
  float wide[8 * 4 + 1];
  for (int i = 0; i < 8 * 4 + 1; i++) wide[i] = 5.0f + (float)i;
  int changed = collx_tune(&on, 2, 2, ncclFuncAllReduce, MiB, wide, 8, 4);
  int ok = changed == 1 && wide[8 * 4] == 5.0f + 8 * 4;
  for (int p = 0; p < 4; p++) ok = ok && wide[p] == 5.0f + (float)p;
  for (int i = 4; i < 8 * 4; i++) ok = ok && wide[i] == NCCL_ALGO_PROTO_IGNORE;
  CHECK(ok, "8x4 table: wrong entries rewritten");
}

static void test_reasons(void) {
  CHECK(collx_tune_inactive_reason(&on, 2, 2) == NULL, "2 ranks on 2 nodes reported inactive");
  CHECK(collx_tune_inactive_reason(&on, 16, 16) == NULL, "16 ranks on 16 nodes reported inactive");
  const char *r = collx_tune_inactive_reason(&off, 2, 2);
  CHECK(r && strstr(r, "COLLX_TUNER=0"), "COLLX_TUNER=0: reason \"%s\"", r ? r : "(none)");
  r = collx_tune_inactive_reason(&on, 8, 2);
  CHECK(r && strstr(r, "rank per node"), "8 ranks on 2 nodes: reason \"%s\"", r ? r : "(none)");
  struct collx_tune_settings zero = {.enabled = 1, .tree_max = 0};
  r = collx_tune_inactive_reason(&zero, 2, 2);
  CHECK(r && strstr(r, "TREE_MAX=0"), "COLLX_TUNER_TREE_MAX=0: reason \"%s\"", r ? r : "(none)");
  r = collx_tune_inactive_reason(&on, 1, 1);
  CHECK(r && strstr(r, "one node"), "1 node: reason \"%s\"", r ? r : "(none)");
}

/* Above ll_max Tree keeps only Simple; at or below it Tree keeps every
 * protocol; and when Simple is not NCCL's to pick, LL stays. */
static void test_simple_above_ll_max(void) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(&simple, 4, 4, ncclFuncAllReduce, 128 << 10, t, NALGO, NPROTO);
  CHECK(changed == 1, "128 KiB over ll_max: reported %d, want 1", changed);
  CHECK(t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL] == NCCL_ALGO_PROTO_IGNORE &&
            t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL128] == NCCL_ALGO_PROTO_IGNORE,
        "128 KiB over ll_max: Tree LL/LL128 left at %g/%g",
        (double)t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL],
        (double)t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL128]);
  CHECK(t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_SIMPLE] == orig[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_SIMPLE],
        "128 KiB over ll_max: Tree Simple changed");
  CHECK(t[NCCL_ALGO_RING * NPROTO + NCCL_PROTO_SIMPLE] == NCCL_ALGO_PROTO_IGNORE,
        "128 KiB over ll_max: Ring left");

  fill(t);
  collx_tune(&simple, 4, 4, ncclFuncAllReduce, 64 << 10, t, NALGO, NPROTO);
  CHECK(same(t, orig, NPROTO), "64 KiB (ll_max itself): Tree protocols changed");

  /* NCCL_PROTO=LL: Tree Simple already ignored, so LL must stay. */
  fill(t);
  t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
  collx_tune(&simple, 4, 4, ncclFuncAllReduce, MiB, t, NALGO, NPROTO);
  CHECK(t[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL] == orig[NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_LL],
        "no Tree Simple to pick: Tree LL was ignored");

  /* A table already Tree+Simple only reports no change. */
  fill(t);
  for (int i = 0; i < NALGO * NPROTO; i++)
    if (i != NCCL_ALGO_TREE * NPROTO + NCCL_PROTO_SIMPLE) t[i] = NCCL_ALGO_PROTO_IGNORE;
  changed = collx_tune(&simple, 4, 4, ncclFuncAllReduce, MiB, t, NALGO, NPROTO);
  CHECK(changed == 0, "table already Tree+Simple only: reported %d, want 0", changed);

  /* Over tree_max nothing is touched, Simple rule included. */
  check_unchanged("8 MiB with ll_max 64 KiB", &simple, 4, 4, ncclFuncAllReduce, 8 * MiB);
}

/* All-gather and reduce-scatter: from ring_min bytes a rank on, PAT's row
 * ignored and Ring left only Simple, every other entry as it was. */
static const struct collx_tune_settings gather = {.enabled = 1, .tree_max = 4 * MiB, .ll_max = 64 << 10,
                                                  .ring_min = 512 << 10};

static int ignored_for_gather(int a, int p) {
  return a == NCCL_ALGO_PAT || (a == NCCL_ALGO_RING && p != NCCL_PROTO_SIMPLE);
}

static void check_ring_simple(const char *what, size_t nranks, int coll, size_t nbytes) {
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(&gather, nranks, nranks, coll, nbytes, t, NALGO, NPROTO);
  CHECK(changed == 1, "%s: reported %d, want 1", what, changed);
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++) {
      float want = ignored_for_gather(a, p) ? NCCL_ALGO_PROTO_IGNORE : orig[a * NPROTO + p];
      CHECK(t[a * NPROTO + p] == want, "%s: algo %d proto %d is %g, want %g", what, a, p,
            (double)t[a * NPROTO + p], (double)want);
    }
}

static void test_gather_on_ring(void) {
  check_ring_simple("AllGather 1 MiB, 2 ranks (512 KiB a rank)", 2, ncclFuncAllGather, MiB);
  check_ring_simple("ReduceScatter 1 MiB, 2 ranks", 2, ncclFuncReduceScatter, MiB);
  check_ring_simple("AllGather 2 MiB, 4 ranks", 4, ncclFuncAllGather, 2 * MiB);
  check_ring_simple("AllGather 64 MiB, 4 ranks", 4, ncclFuncAllGather, 64 * MiB);
  check_unchanged("AllGather 1 MiB - 1, 2 ranks", &gather, 2, 2, ncclFuncAllGather, MiB - 1);
  check_unchanged("AllGather 1 MiB, 4 ranks (256 KiB a rank)", &gather, 4, 4, ncclFuncAllGather, MiB);
  check_unchanged("Broadcast 8 MiB, 2 ranks", &gather, 2, 2, ncclFuncBroadcast, 8 * MiB);
  check_unchanged("AllGather 8 MiB, 8 ranks on 2 nodes", &gather, 8, 2, ncclFuncAllGather, 32 * MiB);
  check_unchanged("AllGather with COLLX_TUNER_RING_MIN=0", &on, 2, 2, ncclFuncAllGather, 64 * MiB);

  /* NCCL_ALGO=PAT (Ring already ignored): PAT must stay. */
  float t[NALGO * NPROTO], orig[NALGO * NPROTO];
  fill(t);
  for (int p = 0; p < NPROTO; p++) t[NCCL_ALGO_RING * NPROTO + p] = NCCL_ALGO_PROTO_IGNORE;
  memcpy(orig, t, sizeof t);
  int changed = collx_tune(&gather, 2, 2, ncclFuncAllGather, 8 * MiB, t, NALGO, NPROTO);
  CHECK(changed == 0 && same(t, orig, NALGO * NPROTO), "no Ring to pick: PAT was ignored (reported %d)", changed);

  /* NCCL_PROTO=LL (Ring without Simple): Ring with LL is no better than
   * PAT, so the table stays as NCCL made it. */
  fill(t);
  t[NCCL_ALGO_RING * NPROTO + NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
  memcpy(orig, t, sizeof t);
  changed = collx_tune(&gather, 2, 2, ncclFuncAllGather, 8 * MiB, t, NALGO, NPROTO);
  CHECK(changed == 0 && same(t, orig, NALGO * NPROTO), "Ring without Simple: table changed (reported %d)", changed);

  /* Already PAT-free and Ring+Simple only: nothing to report. */
  fill(t);
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++)
      if (ignored_for_gather(a, p)) t[a * NPROTO + p] = NCCL_ALGO_PROTO_IGNORE;
  changed = collx_tune(&gather, 4, 4, ncclFuncReduceScatter, 8 * MiB, t, NALGO, NPROTO);
  CHECK(changed == 0, "table already Ring+Simple without PAT: reported %d, want 0", changed);

  /* A table without a PAT row (an older NCCL): untouched, nothing read past it. */
  fill(t);
  memcpy(orig, t, sizeof t);
  changed = collx_tune(&gather, 2, 2, ncclFuncAllGather, 8 * MiB, t, NCCL_ALGO_PAT, NPROTO);
  CHECK(changed == 0 && same(t, orig, NALGO * NPROTO), "table of %d algorithms: changed (reported %d)",
        NCCL_ALGO_PAT, changed);

  /* Tree off for all-reduce, Ring on for the gathers: still active. */
  struct collx_tune_settings ring_only = gather;
  ring_only.tree_max = 0;
  CHECK(collx_tune_inactive_reason(&ring_only, 2, 2) == NULL, "COLLX_TUNER_TREE_MAX=0 with RING_MIN set: inactive");
  check_unchanged("COLLX_TUNER_TREE_MAX=0: all-reduce 8 B", &ring_only, 2, 2, ncclFuncAllReduce, 8);
  check_unchanged("COLLX_TUNER_TREE_MAX=0: all-reduce 0 B", &ring_only, 2, 2, ncclFuncAllReduce, 0);
}

/* The one-line description the log and collx-info print. */
/* All-gather and reduce-scatter up to channels_max bytes a rank get
 * `channels`; everything else, and an inactive communicator, NCCL's count. */
static void test_channels(void) {
  struct collx_tune_settings s = gather;
  s.channels = 2;
  s.channels_max = MiB;
  int n = collx_tune_channels(&s, 4, 4, ncclFuncAllGather, 4 * 128 << 10);
  CHECK(n == 2, "all-gather of 128 KiB a rank at 4 ranks: %d channels, want 2", n);
  n = collx_tune_channels(&s, 4, 4, ncclFuncReduceScatter, 4 * MiB);
  CHECK(n == 2, "reduce-scatter of 1 MiB a rank (the limit itself): %d channels, want 2", n);
  n = collx_tune_channels(&s, 2, 2, ncclFuncAllGather, 2 * MiB + 2);
  CHECK(n == 0, "all-gather of just over 1 MiB a rank: %d channels, want 0 (NCCL's)", n);
  n = collx_tune_channels(&s, 4, 4, ncclFuncAllReduce, 64 << 10);
  CHECK(n == 0, "all-reduce: %d channels, want 0 (NCCL's)", n);
  n = collx_tune_channels(&s, 8, 2, ncclFuncAllGather, 8 * 1024);
  CHECK(n == 0, "8 ranks on 2 nodes: %d channels, want 0 (NCCL's)", n);
  n = collx_tune_channels(&s, 0, 0, ncclFuncAllGather, 8 * 1024);
  CHECK(n == 0, "no ranks: %d channels, want 0", n);
  struct collx_tune_settings none = s;
  none.channels = 0;
  n = collx_tune_channels(&none, 4, 4, ncclFuncAllGather, 4 * 1024);
  CHECK(n == 0, "COLLX_TUNER_CHANNELS=0: %d channels, want 0", n);
  struct collx_tune_settings no_max = s;
  no_max.channels_max = 0;
  n = collx_tune_channels(&no_max, 4, 4, ncclFuncAllGather, 0);
  CHECK(n == 0, "COLLX_TUNER_CHANNELS_MAX=0, an empty all-gather: %d channels, want 0", n);
  struct collx_tune_settings disabled = s;
  disabled.enabled = 0;
  n = collx_tune_channels(&disabled, 4, 4, ncclFuncAllGather, 4 * 1024);
  CHECK(n == 0, "COLLX_TUNER=0: %d channels, want 0", n);
  /* The channel rule alone keeps the tuner active. */
  struct collx_tune_settings only = {.enabled = 1, .channels = 2, .channels_max = MiB};
  CHECK(collx_tune_inactive_reason(&only, 4, 4) == NULL, "channels alone reported inactive");
  n = collx_tune_channels(&only, 4, 4, ncclFuncAllGather, 4 * 1024);
  CHECK(n == 2, "channels alone: %d channels, want 2", n);
}

static void test_describe(void) {
  char buf[256];
  struct collx_tune_settings narrow = gather;
  narrow.channels = 2;
  narrow.channels_max = MiB;
  collx_tune_describe(&narrow, buf, sizeof buf);
  CHECK(strstr(buf, "; up to 1048576 bytes a rank they run on 2 channels") != NULL,
        "channel rule described as \"%s\"", buf);
  collx_tune_describe(&gather, buf, sizeof buf);
  CHECK(strcmp(buf, "all-reduce up to 4194304 bytes uses Tree, with Simple above 65536 bytes; all-gather and "
                    "reduce-scatter from 524288 bytes a rank use Ring with Simple") == 0,
        "shipped shape described as \"%s\"", buf);
  collx_tune_describe(&off, buf, sizeof buf);
  CHECK(strstr(buf, "COLLX_TUNER=0") != NULL, "off described as \"%s\"", buf);
  struct collx_tune_settings no_ring = gather;
  no_ring.ring_min = 0;
  collx_tune_describe(&no_ring, buf, sizeof buf);
  CHECK(strstr(buf, "all-gather and reduce-scatter keep NCCL's choice") != NULL, "RING_MIN=0 described as \"%s\"",
        buf);
  char small[8];
  memset(small, 'x', sizeof small);
  collx_tune_describe(&gather, small, 6);
  CHECK(strlen(small) == 5 && small[6] == 'x', "a short buffer overrun or not terminated");
}

int main(void) {
  test_describe();
  test_policy();
  test_gather_on_ring();
  test_channels();
  test_simple_above_ll_max();
  test_tree_ignored();
  test_already_tree_only();
  test_shapes();
  test_reasons();
  if (failures) {
    printf("test_tune: %d of %d check(s) failed\n", failures, checks);
    return 1;
  }
  printf("test_tune: all %d checks passed\n", checks);
  return 0;
}
