#!/bin/bash
# (gO) Issue 26, 2 ranks: gN had all-gather and reduce-scatter at 512 KiB
# (256 KiB a rank, PAT on 2 channels) taking as long as 1 MiB (512 KiB a
# rank, Ring with Simple).  HEAD's tuner against Ring with Simple from
# 256 KiB a rank (COLLX_TUNER_RING_MIN=262144) and from 128 KiB
# (131072), three alternating rounds, 256 KiB-2 MiB, -n 50.  Needs
# .gpu/collx-head.tar.gz and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head) || exit 1
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $B > $OUT/warm.log 2>&1
stamp warm-up $?
NT_ARGS="-b 256K -e 2M -f 2 -n 50 -w 5 -c 1" AB_MIN_SIZE=262144 TOTAL_BUDGET=50 RUN_TIMEOUT=40 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 400 bash bench/ab.sh --rounds 3 --ranks 2 --colls "all_gather reduce_scatter" --out /tmp/ring2 \
  .gpu/nccl-tests.tar.gz head=$B ring256=$B,COLLX_TUNER_RING_MIN=262144 ring128=$B,COLLX_TUNER_RING_MIN=131072 > $OUT/ring2.log 2>&1
stamp ring2 $?; cat /tmp/ring2/table.md
for b in head ring256 ring128; do for f in /tmp/ring2/$b-1/raw/*rank0.log; do echo "== $b ${f##*/}"
  grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; done; done 2>/dev/null > $OUT/choices.txt
head -30 $OUT/choices.txt
tar czf $OUT/ring2.tgz -C /tmp ring2 2>/dev/null
