#ifndef COLLX_UTIL_LAUNCHER_H
#define COLLX_UTIL_LAUNCHER_H

/* Ranks the job launcher started on this node (LOCAL_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE, the
 * first one set to a positive count); 1 when none is.  *from, if given,
 * names the variable used (NULL for none). */
int collx_launcher_local_ranks(const char **from);

#endif
