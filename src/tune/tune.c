/*
 * The tuning policy, one rank per node: all-reduce on Tree up to a size,
 * with Simple rather than LL/LL128 above a smaller size; all-gather and
 * reduce-scatter on Ring rather than PAT once each rank's share is large,
 * and on fewer channels up to a larger size.
 */
#include "tune/tune.h"

#include <stdio.h>

#include "collx/tuner_abi.h"
#include "util/params.h"

void collx_tune_read_settings(struct collx_tune_settings *s) {
  s->enabled = collx_param_int(COLLX_P_TUNER) == 1;
  s->tree_max = (size_t)collx_param_int(COLLX_P_TUNER_TREE_MAX);
  s->ll_max = (size_t)collx_param_int(COLLX_P_TUNER_LL_MAX);
  s->ring_min = (size_t)collx_param_int(COLLX_P_TUNER_RING_MIN);
  s->channels = (int)collx_param_int(COLLX_P_TUNER_CHANNELS);
  s->channels_max = (size_t)collx_param_int(COLLX_P_TUNER_CHANNELS_MAX);
}

/* The channel rule acts: a count to give, and sizes to give it to. */
static int channels_on(const struct collx_tune_settings *s) { return s->channels > 0 && s->channels_max > 0; }

void collx_tune_describe(const struct collx_tune_settings *s, char *buf, size_t len) {
  if (!len) return;
  if (!s || !s->enabled) {
    snprintf(buf, len, "NCCL tunes alone (COLLX_TUNER=0)");
    return;
  }
  char tree[96] = "all-reduce keeps NCCL's choice", ring[112] = "all-gather and reduce-scatter keep NCCL's choice";
  char chan[112] = "";
  if (s->tree_max)
    snprintf(tree, sizeof tree, "all-reduce up to %zu bytes uses Tree, with Simple above %zu bytes", s->tree_max,
             s->ll_max);
  if (s->ring_min)
    snprintf(ring, sizeof ring, "all-gather and reduce-scatter from %zu bytes a rank use Ring with Simple",
             s->ring_min);
  if (channels_on(s))
    snprintf(chan, sizeof chan, "; up to %zu bytes a rank they run on %d channels", s->channels_max, s->channels);
  snprintf(buf, len, "%s; %s%s", tree, ring, chan);
}

const char *collx_tune_inactive_reason(const struct collx_tune_settings *s, size_t nranks,
                                       size_t nnodes) {
  if (!s || !s->enabled) return "COLLX_TUNER=0";
  if (s->tree_max == 0 && s->ring_min == 0 && !channels_on(s))
    return "COLLX_TUNER_TREE_MAX=0, COLLX_TUNER_RING_MIN=0 and COLLX_TUNER_CHANNELS=0";
  if (nnodes < 2) return "one node";
  /* With several ranks on a node, some hops of a ring or tree stay inside
   * the node and never reach collx; the measurement says nothing there. */
  if (nranks != nnodes) return "not one rank per node";
  return NULL;
}

/* Whether NCCL could pick some entry of algorithm a: it skips the
 * "ignore" mark and takes only entries that are not negative. */
static int algo_usable(const float *table, int a, int nproto) {
  for (int p = 0; p < nproto; p++)
    if (table[a * nproto + p] >= 0.0f) return 1;
  return 0;
}

/* Mark one entry ignored; returns whether it was not already. */
static int ignore_entry(float *e) {
  int changed = *e != NCCL_ALGO_PROTO_IGNORE;
  *e = NCCL_ALGO_PROTO_IGNORE;
  return changed;
}

/* Mark every entry of every algorithm but Tree as ignored; returns whether
 * any entry changed. */
static int ignore_all_but_tree(float *table, int nalgo, int nproto) {
  int changed = 0;
  for (int a = 0; a < nalgo; a++) {
    if (a == NCCL_ALGO_TREE) continue;
    for (int p = 0; p < nproto; p++) changed |= ignore_entry(&table[a * nproto + p]);
  }
  return changed;
}

static int simple_usable(const float *table, int a, int nproto) {
  return nproto > NCCL_PROTO_SIMPLE && table[a * nproto + NCCL_PROTO_SIMPLE] >= 0.0f;
}

/* Leave algorithm a only its Simple entry.  Returns whether an entry
 * changed; nothing changes when Simple is not NCCL's to pick. */
static int keep_only_simple(float *table, int a, int nproto) {
  if (!simple_usable(table, a, nproto)) return 0;
  int changed = 0;
  for (int p = 0; p < nproto; p++)
    if (p != NCCL_PROTO_SIMPLE) changed |= ignore_entry(&table[a * nproto + p]);
  return changed;
}

static int allreduce_on_tree(const struct collx_tune_settings *s, size_t nbytes, float *table, int nalgo,
                             int nproto) {
  /* A table without a Tree row gives nothing to steer. */
  if (nalgo <= NCCL_ALGO_TREE || s->tree_max == 0 || nbytes > s->tree_max) return 0;
  /* If NCCL already ruled Tree out (NCCL_ALGO, or no tree for this
   * communicator), removing the rest would leave it nothing to pick. */
  if (!algo_usable(table, NCCL_ALGO_TREE, nproto)) return 0;
  int changed = ignore_all_but_tree(table, nalgo, nproto);
  /* Above ll_max, Tree with Simple: NCCL rates LL cheapest up to about 256
   * KiB, but LL doubles the bytes and has the GPU write them to host memory
   * in 8-byte stores, and at 4 ranks Tree+LL at 128 KiB took 340-348 us
   * where Tree+Simple took 268-325 (bench/NOTES.md 39). */
  if (nbytes > s->ll_max) changed |= keep_only_simple(table, NCCL_ALGO_TREE, nproto);
  return changed;
}

/* An all-gather or reduce-scatter whose share per rank is ring_min or more
 * runs Ring with Simple.  NCCL's model, fed collx's speed, keeps PAT up to
 * 1 MiB a rank at 4 ranks and 2 MiB at 2, where PAT's messages of at most
 * 64 KiB held collx to 1.4-1.9 GB/s of bus bandwidth; Ring with Simple
 * moved 1.5-2x that from 512 KiB a rank on, and was slower below
 * (bench/NOTES.md 59).  Simple matters as much as Ring: with PAT out of
 * the table NCCL picks Ring with LL up to 1 MiB a rank, and that was
 * slower than PAT (0.6-0.9 GB/s). */
static int gather_on_ring(const struct collx_tune_settings *s, size_t nranks, size_t nbytes, float *table,
                          int nalgo, int nproto) {
  if (s->ring_min == 0 || nranks == 0 || nbytes / nranks < s->ring_min) return 0;
  /* Without Ring+Simple to pick (NCCL_ALGO, NCCL_PROTO), PAT stays. */
  if (nalgo <= NCCL_ALGO_PAT || !simple_usable(table, NCCL_ALGO_RING, nproto)) return 0;
  int changed = 0;
  for (int p = 0; p < nproto; p++) changed |= ignore_entry(&table[NCCL_ALGO_PAT * nproto + p]);
  return changed | keep_only_simple(table, NCCL_ALGO_RING, nproto);
}

int collx_tune(const struct collx_tune_settings *s, size_t nranks, size_t nnodes, int coll, size_t nbytes,
               float *table, int nalgo, int nproto) {
  if (!table || nalgo < 1 || nproto < 1) return 0;
  if (collx_tune_inactive_reason(s, nranks, nnodes)) return 0;
  if (coll == ncclFuncAllReduce) return allreduce_on_tree(s, nbytes, table, nalgo, nproto);
  if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter)
    return gather_on_ring(s, nranks, nbytes, table, nalgo, nproto);
  return 0;
}

/* NCCL gives collx's connections 4 channels (Socket's 2) and splits every
 * collective over all of them, so a mid-size all-gather or reduce-scatter
 * travels in messages half the size Socket's are: at 4 ranks two channels
 * took 128 KiB from 162-182 to 111-112 us and 2 MiB from 1.43-1.73 to
 * 2.60-2.62 GB/s, and were level from 8 MiB (bench/NOTES.md 63). */
int collx_tune_channels(const struct collx_tune_settings *s, size_t nranks, size_t nnodes, int coll,
                        size_t nbytes) {
  if (collx_tune_inactive_reason(s, nranks, nnodes)) return 0;
  if (coll != ncclFuncAllGather && coll != ncclFuncReduceScatter) return 0;
  if (!channels_on(s) || nranks == 0 || nbytes / nranks > s->channels_max) return 0;
  return s->channels;
}
