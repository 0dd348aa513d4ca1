#!/bin/bash
# Issue 26, all-gather and reduce-scatter at 4 ranks, 256 KiB-8 MiB: NCCL
# runs PAT for collx up to 1 MiB a rank (4 channels) and Ring for Socket
# (2 channels).  The same build alternating: NCCL's choice, Ring from 64 KiB
# a rank (COLLX_TUNER_RING_MIN), Ring on 2 channels, NCCL's choice with eager
# messages up to 16 KiB (not 64); then Socket in the same call, with NCCL's
# choices logged.
T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 256K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=262144 TOTAL_BUDGET=90 RUN_TIMEOUT=60 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  bash bench/ab.sh --rounds 3 --ranks 4 --colls "all_gather reduce_scatter" --out $OUT/ab \
  .gpu/nccl-tests.tar.gz def=$B ring=$B,COLLX_TUNER_RING_MIN=65536 \
  ring2ch=$B,COLLX_TUNER_RING_MIN=65536,NCCL_MAX_NCHANNELS=2 e16=$B,COLLX_EAGER_SIZE=16384 > $OUT/ab.log 2>&1
echo "ab rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ab/table.md
for f in $OUT/ab/*-1/raw/*rank0.log; do echo "== $f"; grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sed 's/ with.*//' | sort -u | head -12; done 2>/dev/null
RESULTS_DIR=/tmp/sk NT_ARGS="-b 256K -e 8M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=100 RUN_TIMEOUT=60 OUT_DIR=$OUT/sk \
  bash bench/nccl-tests.sh --ranks 4 --colls "all_gather reduce_scatter" \
  --configs "socket" --tag h200 .gpu/nccl-tests.tar.gz $B > $OUT/sk.log 2>&1
echo "sk rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/sk/tables.md 2>/dev/null | grep -v -- '---' | head -30
cd $OUT && tar czf ab.tgz ab ab.log && rm -rf ab
