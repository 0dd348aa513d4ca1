#!/bin/bash
# (gG) The rule as proposed, by environment on the tree at 7063ee9: Ring with
# Simple from 512 KiB a rank (COLLX_TUNER_RING_MIN=524288, NCCL_PROTO=Simple:
# below that NCCL runs PAT, which has only Simple) against NCCL's choice, 2
# and 4 ranks, two alternating rounds.  On the warm machine of run-gD.sh.
B=/tmp/cx/collx-0.1.0
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=90 RUN_TIMEOUT=60 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/ab.sh --rounds 2 --ranks "2 4" --colls "all_gather reduce_scatter" --out $OUT/ab4 \
  .gpu/nccl-tests.tar.gz def=$B r512=$B,COLLX_TUNER_RING_MIN=524288,NCCL_PROTO=Simple > $OUT/ab4.log 2>&1
cat $OUT/ab4/table.md
