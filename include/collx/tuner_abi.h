/*
 * collx - NCCL tuner plugin ABI (ncclTuner v4 and v6), as seen from the
 * plugin side.
 *
 * Written for collx from the documented layout of NCCL's external tuner
 * interface.  When NCCL_TUNER_PLUGIN is unset, NCCL looks for a tuner in
 * the network plugin's own library, newest interface first (2.28.3 tries
 * v5, v4, v3, v2; 2.30 tries v6 first); collx exports v6 for 2.30 and v4
 * for 2.28-2.29 (and any other release that knows v4), so releases that
 * know only older interfaces run without it.
 *
 * v6 over v4: init(context, commId, nRanks, nNodes, logger, nvlDomainInfo,
 * constants) instead of init(nRanks, nNodes, logger, context); destroy is
 * called finalize; an optional getChunkSize follows.  getCollInfo is
 * unchanged.
 * Only what collx needs is declared, and the layout is pinned with
 * _Static_assert below, as in net_abi.h.
 *
 * The contract of getCollInfo, as collx relies on it:
 *   - collCostTable is not a float ** in memory: it points at one contiguous
 *     float array of numAlgo rows of numProto columns; entry (a, p) is
 *     ((float *)collCostTable)[a * numProto + p], NCCL's estimated time.
 *   - NCCL marks the combinations it will not consider with
 *     NCCL_ALGO_PROTO_IGNORE (-1.0) and then picks the cheapest entry that is
 *     not negative, so a tuner steers NCCL by rewriting entries.
 *   - nChannels may be left untouched (NCCL then picks the channel count).
 *   - A result other than ncclSuccess makes NCCL fall back to its own
 *     tuning for that collective; a failing init fails the communicator.
 */
#ifndef COLLX_TUNER_ABI_H
#define COLLX_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "collx/net_abi.h" /* ncclResult_t, ncclDebugLogger_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Collective kinds passed as collType; numbering is part of the ABI. */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  /* NCCL 2.28 and later also pass these. */
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10
} ncclFunc_t;

/* Rows of the cost table (algorithms). */
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

/* Columns of the cost table (protocols). */
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

/* A cost-table entry NCCL will not consider. */
#define NCCL_ALGO_PROTO_IGNORE (-1.0f)

typedef struct {
  const char *name;
  /* Once per communicator; *context is handed back to the other calls. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       void **context);
  /* Once per collective (or group of collectives of one kind): rewrite
   * collCostTable, and optionally set *nChannels. */
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                              int regBuff, int *nChannels);
  /* When the communicator is destroyed. */
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

/* ---- v6 ------------------------------------------------------------------ */

/* The communicator's NVLink domains, as NCCL passes them to init. */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v6_t;

/* NCCL's tuning constants, which init may read and change (collx does
 * neither): latencies per algorithm and protocol, then per-link and per
 * compute-capability bandwidth caps. */
#define NCCL_TUNER_NUM_ALGORITHMS_V6 7
#define NCCL_TUNER_NUM_PROTOCOLS_V6 3
#define NCCL_TUNER_NUM_HW_LINKS_V6 3
#define NCCL_TUNER_NUM_COMPCAPS_V6 4
#define NCCL_TUNER_NUM_TUNING_SCALES_V6 3
typedef struct {
  double baseLatencies[NCCL_TUNER_NUM_ALGORITHMS_V6][NCCL_TUNER_NUM_PROTOCOLS_V6];
  double hwLatencies[NCCL_TUNER_NUM_HW_LINKS_V6][NCCL_TUNER_NUM_ALGORITHMS_V6]
                    [NCCL_TUNER_NUM_PROTOCOLS_V6];
  double llMaxBws[NCCL_TUNER_NUM_COMPCAPS_V6][NCCL_TUNER_NUM_TUNING_SCALES_V6];
  double perChMaxRingLL128Bws[NCCL_TUNER_NUM_COMPCAPS_V6][NCCL_TUNER_NUM_TUNING_SCALES_V6];
  double perChMaxTreeLL128Bws[NCCL_TUNER_NUM_COMPCAPS_V6][NCCL_TUNER_NUM_TUNING_SCALES_V6];
  double perChMaxTreeBws[NCCL_TUNER_NUM_COMPCAPS_V6][NCCL_TUNER_NUM_TUNING_SCALES_V6];
  double perChMaxNVLSTreeBws[NCCL_TUNER_NUM_COMPCAPS_V6][NCCL_TUNER_NUM_TUNING_SCALES_V6];
} ncclTunerConstants_v6_t;

typedef struct {
  const char *name;
  /* Once per communicator; *context is handed back to the other calls. */
  ncclResult_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t *nvlDomainInfo,
                       ncclTunerConstants_v6_t *constants);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes,
                              int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                              int regBuff, int *nChannels);
  ncclResult_t (*finalize)(void *context);
  /* May rewrite *chunkSize for a collective; NULL keeps NCCL's. */
  ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

/* ---- Layout pins (x86-64 / aarch64 LP64) --------------------------------- */
#if defined(__LP64__)
#if defined(__cplusplus) && !defined(_Static_assert)
#define _Static_assert static_assert /* the header is installed; C++ may include it */
#endif
/* collType travels as an int-sized enum. */
_Static_assert(sizeof(ncclFunc_t) == sizeof(int), "ncclFunc_t size");
/* Four pointer-sized members: name, then init, getCollInfo, destroy. */
_Static_assert(sizeof(ncclTuner_v4_t) == 4 * sizeof(void *), "ncclTuner_v4_t size");
_Static_assert(offsetof(ncclTuner_v4_t, name) == 0, "tuner v4.name");
_Static_assert(offsetof(ncclTuner_v4_t, init) == 1 * 8, "tuner v4.init");
_Static_assert(offsetof(ncclTuner_v4_t, getCollInfo) == 2 * 8, "tuner v4.getCollInfo");
_Static_assert(offsetof(ncclTuner_v4_t, destroy) == 3 * 8, "tuner v4.destroy");
/* v6: five pointer-sized members; 12-byte domain info; 144 doubles of
 * constants (21 + 63 + 5 * 12). */
_Static_assert(sizeof(ncclTuner_v6_t) == 5 * sizeof(void *), "ncclTuner_v6_t size");
_Static_assert(offsetof(ncclTuner_v6_t, init) == 1 * 8, "tuner v6.init");
_Static_assert(offsetof(ncclTuner_v6_t, getCollInfo) == 2 * 8, "tuner v6.getCollInfo");
_Static_assert(offsetof(ncclTuner_v6_t, finalize) == 3 * 8, "tuner v6.finalize");
_Static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 4 * 8, "tuner v6.getChunkSize");
_Static_assert(sizeof(ncclNvlDomainInfo_v6_t) == 12, "ncclNvlDomainInfo_v6_t size");
_Static_assert(sizeof(ncclTunerConstants_v6_t) == 144 * sizeof(double), "ncclTunerConstants_v6_t size");
_Static_assert(offsetof(ncclTunerConstants_v6_t, hwLatencies) == 21 * 8, "constants.hwLatencies");
_Static_assert(offsetof(ncclTunerConstants_v6_t, llMaxBws) == 84 * 8, "constants.llMaxBws");
_Static_assert(offsetof(ncclTunerConstants_v6_t, perChMaxNVLSTreeBws) == 132 * 8, "constants.perChMaxNVLSTreeBws");
#endif

#ifdef __cplusplus
}
#endif

#endif
