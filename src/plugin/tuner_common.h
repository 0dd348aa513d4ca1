/* What the tuner shims (tuner_v4.c, tuner_v6.c) share: the per-communicator
 * context and getCollInfo, whose contract did not change from v4 to v6. */
#ifndef COLLX_PLUGIN_TUNER_COMMON_H
#define COLLX_PLUGIN_TUNER_COMMON_H

#include "collx/tuner_abi.h"

ncclResult_t tuner_ctx_init(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **context);
ncclResult_t tuner_get_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int num_pipe_ops,
                                 float **cost_table, int nalgo, int nproto, int reg_buff,
                                 int *nchannels);
ncclResult_t tuner_ctx_free(void *context);

#endif
