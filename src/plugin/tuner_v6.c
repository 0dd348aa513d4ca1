/*
 * ncclTuner v6 shim (NCCL 2.30): v4's getCollInfo behind an init that
 * receives the communicator's id, its NVLink domains and NCCL's tuning
 * constants, and a finalize.  collx's policy needs neither the domains nor
 * the constants, and leaves the constants as NCCL made them; it sets no
 * chunk size (getChunkSize is optional, NULL keeps NCCL's).  NCCL 2.28 and
 * 2.29 know tables up to v5 and use the v4 one.
 */
#include "plugin/shim_common.h"
#include "plugin/tuner_common.h"

static ncclResult_t v6_init(void **context, uint64_t comm_id, size_t nranks, size_t nnodes,
                            ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t *nvl_domains,
                            ncclTunerConstants_v6_t *constants) {
  return tuner_ctx_init(nranks, nnodes, logger, context);
}

COLLX_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = "collx",
    .init = v6_init,
    .getCollInfo = tuner_get_coll_info,
    .finalize = tuner_ctx_free,
    .getChunkSize = NULL,
};
