#include "util/config.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/params.h"

/* COLLX_PROGRESS: auto picks caller on small hosts: NCCL's proxy thread
 * already spins on a core in test(), and progress threads beside it only add
 * wake-ups and context switches (bench/NOTES.md, CPU machine). */
static enum collx_progress progress_resolve(const char *mode) {
  if (!strcmp(mode, "caller")) return COLLX_PROGRESS_CALLER;
  if (!strcmp(mode, "threads")) return COLLX_PROGRESS_THREADS;
  if (*mode && strcmp(mode, "auto"))
    COLLX_WARN("COLLX_PROGRESS=%s is not threads, caller or auto; using auto", mode);
  cpu_set_t set;
  int ncpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return ncpus < 4 ? COLLX_PROGRESS_CALLER : COLLX_PROGRESS_THREADS;
}

/* Bounds and defaults are params.def's: collx_param_int clamps, so every
 * value below is already in range. */
void collx_config_load(struct collx_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->chunk_size = (size_t)collx_param_int(COLLX_P_CHUNK_SIZE);
  cfg->eager_size = (size_t)collx_param_int(COLLX_P_EAGER_SIZE);
  cfg->spin_us = (int)collx_param_int(COLLX_P_SPIN_US);
  cfg->inline_recv = collx_param_int(COLLX_P_INLINE_RECV) != 0;
  cfg->ctrl_peek = collx_param_int(COLLX_P_CTRL_PEEK) != 0;
  cfg->progress_setting = collx_param_str(COLLX_P_PROGRESS);
  cfg->progress = progress_resolve(cfg->progress_setting);
  cfg->timeout_s = (int)collx_param_int(COLLX_P_TIMEOUT);
  cfg->connect_timeout_s = (int)collx_param_int(COLLX_P_CONNECT_TIMEOUT);
  cfg->nstreams = (int)collx_param_int(COLLX_P_NSTREAMS);
  cfg->failover = collx_param_int(COLLX_P_FAILOVER) != 0;
  cfg->failover_ms = (int)collx_param_int(COLLX_P_FAILOVER_MS);
  cfg->failover_copy = (size_t)collx_param_int(COLLX_P_FAILOVER_COPY);
  cfg->ctrl_spare_batch = (size_t)collx_param_int(COLLX_P_CTRL_SPARE_BATCH);
}

size_t collx_eager_size(int members, char *why, size_t why_len) {
  size_t size = (size_t)collx_param_int(COLLX_P_EAGER_SIZE);
  int given = collx_param_is_set(COLLX_P_EAGER_SIZE);
  int capped = members > 1 && !given && size > COLLX_EAGER_MERGED_MAX;
  if (why)
    snprintf(why, why_len, "%s", capped ? "merged: an eager message rides one member; COLLX_EAGER_SIZE overrides"
                               : given  ? "COLLX_EAGER_SIZE"
                                        : "default");
  return capped ? COLLX_EAGER_MERGED_MAX : size;
}

const char *collx_progress_name(enum collx_progress p) {
  return p == COLLX_PROGRESS_CALLER ? "caller" : "threads";
}
