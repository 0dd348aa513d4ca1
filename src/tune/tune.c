/*
 * The tuning policy: all-reduce on Tree up to a size, one rank per node,
 * with Simple rather than LL/LL128 above a smaller size.
 */
#include "tune/tune.h"

#include "collx/tuner_abi.h"

const char *collx_tune_inactive_reason(const struct collx_tune_settings *s, size_t nranks,
                                       size_t nnodes) {
  if (!s || !s->enabled) return "COLLX_TUNER=0";
  if (s->tree_max == 0) return "COLLX_TUNER_TREE_MAX=0";
  if (nnodes < 2) return "one node";
  /* With several ranks on a node, some hops of a ring or tree stay inside
   * the node and never reach collx; the measurement says nothing there. */
  if (nranks != nnodes) return "not one rank per node";
  return NULL;
}

/* Whether NCCL could pick some Tree entry: it skips the "ignore" mark and
 * takes only entries that are not negative. */
static int tree_usable(const float *table, int nproto) {
  for (int p = 0; p < nproto; p++)
    if (table[NCCL_ALGO_TREE * nproto + p] >= 0.0f) return 1;
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

/* Above ll_max, leave Tree only Simple: NCCL rates LL cheapest up to about
 * 256 KiB, but LL doubles the bytes and has the GPU write them to host
 * memory in 8-byte stores, and at 4 ranks Tree+LL at 128 KiB took 340-348
 * us where Tree+Simple took 268-325 (bench/NOTES.md 39).  Returns whether
 * an entry changed; nothing changes when Simple is not NCCL's to pick. */
static int ignore_tree_ll(float *table, int nproto) {
  if (nproto <= NCCL_PROTO_SIMPLE || table[NCCL_ALGO_TREE * nproto + NCCL_PROTO_SIMPLE] < 0.0f)
    return 0;
  int changed = 0;
  for (int p = 0; p < nproto; p++)
    if (p != NCCL_PROTO_SIMPLE) changed |= ignore_entry(&table[NCCL_ALGO_TREE * nproto + p]);
  return changed;
}

int collx_tune_allreduce(const struct collx_tune_settings *s, size_t nranks, size_t nnodes,
                         int coll, size_t nbytes, float *table, int nalgo, int nproto) {
  /* A table without a Tree row (or without columns) gives nothing to steer. */
  if (!table || nalgo <= NCCL_ALGO_TREE || nproto < 1) return 0;
  if (coll != ncclFuncAllReduce) return 0;
  if (collx_tune_inactive_reason(s, nranks, nnodes)) return 0;
  if (nbytes > s->tree_max) return 0;
  /* If NCCL already ruled Tree out (NCCL_ALGO, or no tree for this
   * communicator), removing the rest would leave it nothing to pick. */
  if (!tree_usable(table, nproto)) return 0;
  int changed = ignore_all_but_tree(table, nalgo, nproto);
  if (nbytes > s->ll_max) changed |= ignore_tree_ll(table, nproto);
  return changed;
}
