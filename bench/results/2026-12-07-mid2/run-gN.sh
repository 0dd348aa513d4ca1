#!/bin/bash
# (gN) Issue 26, 2 ranks: gM's single run had collx's all-gather at 512 KiB
# and 1 MiB at 0.63-0.67x Socket, where gK (an earlier sitting) had the
# same build's rule at 171 us and 3.01 GB/s.  Three alternating rounds of
# collx (HEAD) and Socket, all-gather, reduce-scatter and all-reduce,
# 256 KiB-2 MiB, -n 50, with NCCL's choices from the TUNING log.  Needs
# .gpu/collx-head.tar.gz and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head) || exit 1
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $B > $OUT/warm.log 2>&1
stamp warm-up $?
for r in 1 2 3; do
  RESULTS_DIR=/tmp/n2-$r NT_ARGS="-b 256K -e 2M -f 2 -n 50 -w 5 -c 1" TOTAL_BUDGET=100 RUN_TIMEOUT=40 \
    BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
    timeout 120 bash bench/nccl-tests.sh --ranks 2 --colls "all_gather reduce_scatter all_reduce" \
    --configs "collx socket" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/n2-$r.log 2>&1
  stamp "round $r" $?
  grep '^|\|^##' /tmp/n2-$r/tables.md 2>/dev/null | grep -v -- '---' | grep -v '^| size' | head -20
done
for f in /tmp/n2-1/raw/*collx*rank0.log; do echo "== ${f#/tmp/}"
  grep -ho '\(AllGather\|ReduceScatter\|AllReduce\): [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; done 2>/dev/null > $OUT/choices.txt
head -30 $OUT/choices.txt
tar czf $OUT/n2.tgz -C /tmp n2-1 n2-2 n2-3 2>/dev/null
