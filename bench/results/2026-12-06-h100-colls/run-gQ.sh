#!/bin/bash
# all_gather / reduce_scatter over collx: NCCL's own algorithm choice against
# NCCL_ALGO=Ring, 2 and 4 ranks, alternating, one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
for r in 2 4; do
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=100 RUN_TIMEOUT=90 BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/ab.sh --rounds 2 --ranks $r --colls "all_gather reduce_scatter" --out $OUT/algo$r \
  .gpu/nccl-tests.tar.gz def=$B ring=$B,NCCL_ALGO=Ring > $OUT/algo$r.log 2>&1
echo "algo $r rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/algo$r/table.md
done
f=$(ls $OUT/algo4/def-1/raw/*all_gather*collx*.log 2>/dev/null | head -1); echo "$f"
grep -h 'AllGather: .* Algo\|Algo [A-Z]' $OUT/algo4/def-1/raw/*.log 2>/dev/null | sort | uniq -c | head -20
cd $OUT && tar czf algo.tgz algo2 algo4 && rm -rf algo2 algo4
