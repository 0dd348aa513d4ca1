/*
 * collx's algorithm choice for NCCL, as a pure function of the
 * communicator's shape, the collective and NCCL's cost table.  The tuner
 * shim (src/plugin/tuner_v4.c) reads the settings (collx_tune_read_settings,
 * the one reader of COLLX_TUNER*) and calls it; the unit tests call it
 * directly; collx-info --plan prints the policy.
 *
 * Why: under NCCL 2.28.3 with one rank per node over collx, NCCL picks
 * Ring with its LL protocol for all-reduce up to 4 MiB, and Tree (NCCL still
 * choosing the protocol) was as fast or much faster at every size from 8 B
 * to 4 MiB at 2 and 4 ranks; from 8 MiB up NCCL's own choice was as good or
 * better (bench/NOTES.md, attempt 15).  Within Tree, NCCL then picks LL up
 * to about 256 KiB, which cost the 128 KiB all-reduce at 4 ranks (39).
 * For all-gather and reduce-scatter NCCL keeps PAT up to 1-2 MiB a rank,
 * where Ring with Simple was 1.5-2x faster from 512 KiB a rank on (43, 59),
 * and on all of collx's 4 channels their messages are half the size of
 * Socket's, which gets 2: on 2 channels they were up to 1.8x faster up to
 * 1 MiB a rank (63).
 */
#ifndef COLLX_TUNE_TUNE_H
#define COLLX_TUNE_TUNE_H

#include <stddef.h>

struct collx_tune_settings {
  int enabled;      /* COLLX_TUNER: 0 leaves every table as NCCL made it */
  size_t tree_max;  /* COLLX_TUNER_TREE_MAX: largest all-reduce sent to Tree */
  size_t ll_max;    /* COLLX_TUNER_LL_MAX: largest one of those left LL/LL128 */
  size_t ring_min;  /* COLLX_TUNER_RING_MIN: smallest share a rank of an all-gather or
                       reduce-scatter run on Ring with Simple */
  int channels;        /* COLLX_TUNER_CHANNELS: channels of an all-gather or reduce-scatter... */
  size_t channels_max; /* ...of at most COLLX_TUNER_CHANNELS_MAX bytes a rank */
};

/* The settings as COLLX_TUNER and the COLLX_TUNER_* variables give them
 * (bounded by params.def). */
void collx_tune_read_settings(struct collx_tune_settings *s);

/* The policy in one line for the log and collx-info ("all-reduce up to ...
 * uses Tree ...; all-gather and reduce-scatter from ... use Ring with
 * Simple"), or why it changes nothing; truncated to fit `len`. */
void collx_tune_describe(const struct collx_tune_settings *s, char *buf, size_t len);

/* NULL when the policy acts on a communicator of `nranks` ranks over
 * `nnodes` nodes, else why it does not (for the log). */
const char *collx_tune_inactive_reason(const struct collx_tune_settings *s, size_t nranks,
                                       size_t nnodes);

/* Apply the policy to NCCL's cost table for one collective of `nbytes`
 * (NCCL's count: for all-gather and reduce-scatter, every rank's share
 * together): `table` is `nalgo` rows of `nproto` entries, `coll` an
 * ncclFunc_t.  On an active communicator:
 *  - an all-reduce of at most tree_max bytes, where Tree has an entry NCCL
 *    may pick: every entry of the other algorithms is set to "ignore", so
 *    NCCL picks Tree with the protocol it rates best; above ll_max bytes
 *    Tree's LL and LL128 entries are ignored too, when Simple is there;
 *  - an all-gather or reduce-scatter of at least ring_min bytes a rank,
 *    where Ring has an entry NCCL may pick: PAT's entries are ignored, and
 *    Ring's LL and LL128 entries too, when Simple is there.
 * Returns 1 when the table was changed, 0 when it was left as it was. */
int collx_tune(const struct collx_tune_settings *s, size_t nranks, size_t nnodes, int coll, size_t nbytes,
               float *table, int nalgo, int nproto);

/* The channel count for one collective of `nbytes` (as collx_tune counts
 * them), or 0 to leave it to NCCL: on an active communicator, an
 * all-gather or reduce-scatter of at most channels_max bytes a rank runs
 * on `channels` channels. */
int collx_tune_channels(const struct collx_tune_settings *s, size_t nranks, size_t nnodes, int coll,
                        size_t nbytes);

#endif
