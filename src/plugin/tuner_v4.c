/*
 * ncclTuner v4 shim: NCCL finds this table in the net plugin's library when
 * NCCL_TUNER_PLUGIN is unset, and asks it about every collective.  The
 * policy itself is src/tune/tune.c; this file keeps the per-communicator
 * context and the settings, which the v6 shim (tuner_v6.c) shares.
 */
#include <stdlib.h>

#include "collx/tuner_abi.h"
#include "plugin/shim_common.h"
#include "plugin/tuner_common.h"
#include "tune/tune.h"
#include "util/log.h"

struct tuner_ctx {
  size_t nranks, nnodes;
  struct collx_tune_settings settings;
};

static void log_policy(const struct tuner_ctx *c) {
  const char *why = collx_tune_inactive_reason(&c->settings, c->nranks, c->nnodes);
  if (why) {
    COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_TUNING, "tuner: %zu ranks on %zu nodes, NCCL tunes alone (%s)",
               c->nranks, c->nnodes, why);
    return;
  }
  char policy[256];
  collx_tune_describe(&c->settings, policy, sizeof policy);
  COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_TUNING, "tuner: %zu ranks on %zu nodes, %s", c->nranks, c->nnodes, policy);
}

/* A failing init would fail the whole communicator, so a context that
 * cannot be allocated only turns the tuner off for it. */
ncclResult_t tuner_ctx_init(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **context) {
  if (!context) return ncclInvalidArgument;
  collx_log_adopt_logger(logger);
  struct tuner_ctx *c = calloc(1, sizeof *c);
  *context = c;
  if (!c) {
    COLLX_WARN("tuner: out of memory; NCCL tunes alone");
    return ncclSuccess;
  }
  c->nranks = nranks;
  c->nnodes = nnodes;
  collx_tune_read_settings(&c->settings);
  log_policy(c);
  return ncclSuccess;
}

ncclResult_t tuner_get_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int num_pipe_ops,
                                 float **cost_table, int nalgo, int nproto, int reg_buff,
                                 int *nchannels) {
  const struct tuner_ctx *c = context;
  if (!c) return ncclSuccess;
  /* The table is one contiguous float array despite its declared type. */
  collx_tune(&c->settings, c->nranks, c->nnodes, (int)coll, nbytes, (float *)cost_table, nalgo, nproto);
  int channels = collx_tune_channels(&c->settings, c->nranks, c->nnodes, (int)coll, nbytes);
  if (channels && nchannels) *nchannels = channels;
  return ncclSuccess;
}

ncclResult_t tuner_ctx_free(void *context) {
  free(context);
  return ncclSuccess;
}

static ncclResult_t v4_init(size_t nranks, size_t nnodes, ncclDebugLogger_t logger,
                            void **context) {
  return tuner_ctx_init(nranks, nnodes, logger, context);
}

COLLX_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "collx",
    .init = v4_init,
    .getCollInfo = tuner_get_coll_info,
    .destroy = tuner_ctx_free,
};
