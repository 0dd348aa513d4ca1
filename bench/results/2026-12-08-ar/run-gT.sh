#!/bin/bash
# (gT) Issue 26, all-reduce 128 KiB-4 MiB at 2 and 4 ranks: HEAD's tuner
# (Tree with Simple on NCCL's 4 channels) against the same build on two
# channels (NCCL_MAX_NCHANNELS=2: the count the tuner's channel rule gives
# all-gather and reduce-scatter, never tried for all-reduce at 2 ranks) and
# against Ring with Simple (COLLX_TUNER_TREE_MAX=0 NCCL_ALGO=Ring
# NCCL_PROTO=Simple), three alternating rounds each, then Socket once at
# each rank count.  -n 30 -w 5.  Needs .gpu/collx-head.tar.gz and
# .gpu/nccl-tests.tar.gz.  Not run yet: on 2026-12-08 no device was lent.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head .gpu/nccl-tests.tar.gz) || exit 1
export TOTAL_BUDGET=40 RUN_TIMEOUT=35
for n in 2 4; do
  NT_ARGS="-b 128K -e 4M -f 2 -n 30 -w 5 -c 1" AB_MIN_SIZE=131072 BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
    timeout 200 bash bench/ab.sh --rounds 3 --ranks $n --colls all_reduce --out /tmp/ar$n \
    .gpu/nccl-tests.tar.gz head=$B ch2=$B,NCCL_MAX_NCHANNELS=2 \
    ring=$B,COLLX_TUNER_TREE_MAX=0,NCCL_ALGO=Ring,NCCL_PROTO=Simple > $OUT/ar$n.log 2>&1
  stamp "all-reduce $n ranks" $?; cat /tmp/ar$n/table.md
done
RESULTS_DIR=/tmp/sk NT_ARGS="-b 128K -e 4M -f 2 -n 30 -w 5 -c 1" TOTAL_BUDGET=80 RUN_TIMEOUT=35 \
  timeout 90 bash bench/nccl-tests.sh --ranks "2 4" --colls all_reduce --configs socket \
  --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/sk.log 2>&1
stamp "Socket" $?; cat /tmp/sk/tables.md 2>/dev/null
for n in 2 4; do for b in head ch2 ring; do f=$(ls /tmp/ar$n/$b-1/raw/*rank0.log 2>/dev/null | head -1); echo "== $n $b"
  grep -ho 'AllReduce: [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; done; done 2>/dev/null > $OUT/choices.txt
tar czf $OUT/gT.tgz -C /tmp ar2 ar4 sk 2>/dev/null
