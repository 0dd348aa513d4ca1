#!/bin/bash
# (gE, gF) NCCL's choice against Ring with Simple for every all-gather and
# reduce-scatter (COLLX_TUNER_RING_MIN=65536 with NCCL_PROTO=Simple: gD's
# `ring` left NCCL free to pick LL, which it did up to 1 MiB a rank).
# Run on the warm machine of run-gD.sh (its build in /tmp/cx); RANKS=4 (gE)
# or RANKS=2 (gF).
B=/tmp/cx/collx-0.1.0
NT_ARGS="-b 256K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=262144 TOTAL_BUDGET=90 RUN_TIMEOUT=60 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/ab.sh --rounds 3 --ranks "${RANKS:-4}" --colls "all_gather reduce_scatter" --out $OUT/ab2 \
  .gpu/nccl-tests.tar.gz def=$B ringS=$B,COLLX_TUNER_RING_MIN=65536,NCCL_PROTO=Simple > $OUT/ab2.log 2>&1
cat $OUT/ab2/table.md
