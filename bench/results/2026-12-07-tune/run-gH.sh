#!/bin/bash
# (gH) Issue 26 under NCCL, 4 ranks, one call, alternating:
#  1. the tuner as committed (HEAD: Ring with Simple for all-gather and
#     reduce-scatter from 512 KiB a rank) against 7063ee9 (before it), which
#     leaves NCCL's choice (PAT, Ring with LL) below 2 MiB a rank;
#  2. all-reduce: the tuner's Tree rule (Tree up to 4 MiB, Simple above
#     64 KiB) against Ring with Simple (COLLX_TUNER_TREE_MAX=0,
#     NCCL_ALGO=Ring, NCCL_PROTO=Simple), on HEAD.
# Needs .gpu/collx-new.tar.gz (make dist of HEAD), .gpu/collx-old.tar.gz
# (make dist of 7063ee9) and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
build() {
  mkdir -p /tmp/cx/$1 && tar xzf .gpu/collx-$1.tar.gz -C /tmp/cx/$1 &&
  (cd /tmp/cx/$1/collx-0.1.0 && ./configure -q >/tmp/cx/$1.conf.log 2>&1 && make -j8 >/tmp/cx/$1.build.log 2>&1) ||
  { tail -20 /tmp/cx/$1.build.log /tmp/cx/$1.conf.log; exit 1; }
}
build new & build old & wait
NEW=/tmp/cx/new/collx-0.1.0 OLD=/tmp/cx/old/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 512K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=524288 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 250 bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather reduce_scatter" --out $OUT/ag \
  .gpu/nccl-tests.tar.gz old=$OLD new=$NEW > $OUT/ag.log 2>&1
echo "ag rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ag/table.md
for f in $OUT/ag/*-1/raw/*rank0.log; do echo "== $f"; grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sed 's/ with.*//' | sort -u | head -12; done 2>/dev/null
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 250 bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_reduce" --out $OUT/ar \
  .gpu/nccl-tests.tar.gz tree=$NEW ring=$NEW,COLLX_TUNER_TREE_MAX=0,NCCL_ALGO=Ring,NCCL_PROTO=Simple > $OUT/ar.log 2>&1
echo "ar rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ar/table.md
cd $OUT && tar czf ab.tgz ag ar ag.log ar.log && rm -rf ag ar
