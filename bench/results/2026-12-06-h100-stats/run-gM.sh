#!/bin/bash
# Live counters' cost on the GPU host: collx-perf ABBA pinned, then nccl-tests
# all_reduce with COLLX_STATS=0 and 1 alternating (bench/ab.sh), one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; nproc $(nproc); load $(cat /proc/loadavg)"
cd $B && ROUNDS=${ROUNDS:-16} taskset -c 2-9 bash $REPO/bench/stats_ab.sh > $OUT/stats_ab.txt 2>&1; cd $REPO
cat $OUT/stats_ab.txt
echo "stats_ab done at $(( $(date +%s)-T0 )) s"
NT_ARGS="-b 64M -e 512M -f 2 -n 10 -w 3 -c 1" TOTAL_BUDGET=120 RUN_TIMEOUT=90 timeout $((570 - ($(date +%s)-T0))) \
  bash bench/ab.sh --rounds ${ABR:-4} --ranks 2 --out $OUT/ab .gpu/nccl-tests.tar.gz off=$B,COLLX_STATS=0 on=$B,COLLX_STATS=1 > $OUT/ab.log 2>&1
echo "ab rc=$? at $(( $(date +%s)-T0 )) s"
cat $OUT/ab/table.md 2>/dev/null | head -40; tail -5 $OUT/ab.log
grep -h "via NET" $OUT/ab/*/raw/*.log 2>/dev/null | head -2
cd $OUT && tar czf ab.tgz ab && rm -rf ab
