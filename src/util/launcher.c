/*
 * What the job launcher says about this node: how many ranks it started
 * here.  The stream count shares the node's cores among them.
 */
#include "util/launcher.h"

#include <stdlib.h>

/* Variables that launchers set to the number of ranks on this node. */
static const char *const local_size_vars[] = {
    "LOCAL_WORLD_SIZE",            /* torchrun */
    "OMPI_COMM_WORLD_LOCAL_SIZE",  /* Open MPI */
    "MPI_LOCALNRANKS",             /* MPICH (Hydra) */
    "SLURM_NTASKS_PER_NODE",       /* Slurm, when --ntasks-per-node is given */
};

/* A positive count at the start of `s` ("4", or Slurm's "4(x2)"), else 0. */
static int leading_count(const char *s) {
  if (!s) return 0;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || v < 1 || v > 4096 || (*end && *end != '(' && *end != ',')) return 0;
  return (int)v;
}

int collx_launcher_local_ranks(const char **from) {
  for (size_t i = 0; i < sizeof local_size_vars / sizeof local_size_vars[0]; i++) {
    int n = leading_count(getenv(local_size_vars[i]));
    if (n > 0) {
      if (from) *from = local_size_vars[i];
      return n;
    }
  }
  if (from) *from = NULL;
  return 1;
}
