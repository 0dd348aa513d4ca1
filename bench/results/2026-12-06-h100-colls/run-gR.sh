#!/bin/bash
# COLLX_TUNER_RING_MIN: default (2 MiB a rank) against 0 (NCCL's PAT), all_gather
# and reduce_scatter, 2 and 4 ranks, alternating, one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
for r in 2 4; do
NT_ARGS="-b 1M -e 64M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=1048576 TOTAL_BUDGET=100 RUN_TIMEOUT=90 BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/ab.sh --rounds 3 --ranks $r --colls "all_gather reduce_scatter" --out $OUT/ring$r \
  .gpu/nccl-tests.tar.gz pat=$B,COLLX_TUNER_RING_MIN=0 ring=$B > $OUT/ring$r.log 2>&1
echo "ring $r rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ring$r/table.md
grep -h 'Bytes -> Algo' $OUT/ring$r/ring-1/raw/*all_gather*rank0.log | sort -u -k6 | awk '{$1="";$2="";print}' | sort -u | head -8
grep -h 'tuner:' $OUT/ring$r/ring-1/raw/*all_gather*rank0.log | head -1
done
cd $OUT && tar czf ring.tgz ring2 ring4 && rm -rf ring2 ring4
