#!/bin/bash
# (gM) Issue 26, one call on the GPU host.  Needs .gpu/collx-head.tar.gz
# (make dist of the commit under test) and .gpu/nccl-tests.tar.gz.
#  1. 4 ranks, all-gather and reduce-scatter 512 KiB-4 MiB: HEAD's tuner
#     (PAT on 2 channels up to 512 KiB a rank) against Ring with Simple
#     from 256 KiB a rank (COLLX_TUNER_RING_MIN=262144, still 2 channels),
#     three alternating rounds: 1 MiB (256 KiB a rank) was the weak spot.
#  2. 2 ranks, collx against Socket, all-reduce, all-gather and
#     reduce-scatter, 128 KiB-16 MiB, in one call.
#  3. 8 B all-reduce at 2 and 4 ranks, collx against Socket, -n 200.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head) || exit 1
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $B > $OUT/warm.log 2>&1
stamp warm-up $?
NT_ARGS="-b 512K -e 4M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=524288 TOTAL_BUDGET=50 RUN_TIMEOUT=45 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 230 bash bench/ab.sh --rounds 3 --ranks 4 --colls "all_gather reduce_scatter" --out $OUT/ring \
  .gpu/nccl-tests.tar.gz head=$B ring256=$B,COLLX_TUNER_RING_MIN=262144 > $OUT/ring.log 2>&1
stamp ring $?; cat $OUT/ring/table.md
for f in $OUT/ring/head-1/raw/*rank0.log $OUT/ring/ring256-1/raw/*rank0.log; do echo "== ${f#$OUT/}"
  grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; done 2>/dev/null > $OUT/choices.txt
RESULTS_DIR=/tmp/r2 NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=140 RUN_TIMEOUT=40 OUT_DIR=$OUT/r2 \
  timeout 160 bash bench/nccl-tests.sh --ranks 2 --colls "all_reduce all_gather reduce_scatter" \
  --configs "collx socket" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/r2.log 2>&1
stamp r2 $?; grep '^|\|^##' $OUT/r2/tables.md 2>/dev/null | grep -v -- '---' | head -40
RESULTS_DIR=/tmp/lat NT_ARGS="-b 8 -e 8 -n 200 -w 20 -c 1" TOTAL_BUDGET=100 RUN_TIMEOUT=30 OUT_DIR=$OUT/lat \
  timeout 110 bash bench/nccl-tests.sh --ranks "2 4" --colls all_reduce \
  --configs "collx socket" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/lat.log 2>&1
stamp lat $?; grep '^|\|^##' $OUT/lat/tables.md 2>/dev/null | grep -v -- '---' | head -20
cd $OUT && tar czf ring.tgz ring && rm -rf ring
