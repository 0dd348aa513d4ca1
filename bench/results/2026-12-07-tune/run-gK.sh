#!/bin/bash
# (gK) Issue 26: the tuner's channel rule (COLLX_TUNER_CHANNELS=2 for
# all-gather and reduce-scatter up to COLLX_TUNER_CHANNELS_MAX=1 MiB a
# rank, through the tuner's nChannels) against the same build with
# COLLX_TUNER_CHANNELS=0 and against NCCL_MAX_NCHANNELS=2 (gJ's), 2 and 4
# ranks, two alternating rounds.  Needs .gpu/collx-chan.tar.gz (make dist).
T0=$(date +%s)
mkdir -p /tmp/cx/chan && tar xzf .gpu/collx-chan.tar.gz -C /tmp/cx/chan &&
  (cd /tmp/cx/chan/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) ||
  { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/chan/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $B > $OUT/warm.log 2>&1
echo "warm-up rc=$? at $(( $(date +%s)-T0 )) s"
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 420 bash bench/ab.sh --rounds 2 --ranks "2 4" --colls "all_gather reduce_scatter" --out $OUT/ch \
  .gpu/nccl-tests.tar.gz rule=$B off=$B,COLLX_TUNER_CHANNELS=0 max2=$B,COLLX_TUNER_CHANNELS=0,NCCL_MAX_NCHANNELS=2 > $OUT/ch.log 2>&1
echo "ch rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ch/table.md
for f in $OUT/ch/rule-1/raw/*rank0.log; do echo "== ${f#$OUT/}"; grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; grep -h "tuner:" $f | head -2; done 2>/dev/null > $OUT/choices.txt
head -40 $OUT/choices.txt
cd $OUT && tar czf ab.tgz ch && rm -rf ch
