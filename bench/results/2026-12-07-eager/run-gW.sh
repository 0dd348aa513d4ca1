#!/bin/bash
# Issue 26: why all-gather trails Socket at 4 ranks, 1-8 MiB (NOTES 43, 45).
# Part 1: collx, Socket, Socket 4x4 in one call, NCCL's algorithm, protocol
# and channel count logged.  Part 2: the same build alternating with fewer
# streams and smaller chunks.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
RESULTS_DIR=/tmp/ag NT_ARGS="-b 512K -e 8M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 OUT_DIR=$OUT/ag \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/nccl-tests.sh --ranks 4 --colls "all_gather" \
  --configs "collx socket socket-tuned" --tag h200 .gpu/nccl-tests.tar.gz $B > $OUT/ag.log 2>&1
echo "ag rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/ag/tables.md | grep -v -- '---' | head -30
for f in /tmp/ag/raw/*.log; do echo "== $f"; grep -ho 'AllGather: [0-9]* Bytes -> Algo .*' $f | sort | uniq -c | sort -k3n | head -12; grep -ho "comm .* nRanks 4 .*\|[0-9]* coll channels.*\|Channel [0-9]*/[0-9]* :" $f | sed 's/0x[0-9a-f]*//g' | sort | uniq -c | head -6; done 2>/dev/null | head -120
NT_ARGS="-b 512K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=524288 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 2 --ranks 4 --colls all_gather --out $OUT/knobs \
  .gpu/nccl-tests.tar.gz def=$B ns1=$B,COLLX_NSTREAMS=1 > $OUT/knobs.log 2>&1
echo "knobs rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/knobs/table.md
cd $OUT && tar czf knobs.tgz knobs knobs.log && rm -rf knobs
