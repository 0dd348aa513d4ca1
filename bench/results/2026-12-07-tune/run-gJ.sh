#!/bin/bash
# (gJ) Issue 26, 4 ranks, the middle sizes where collx is level with Socket
# (1-2 MiB all-gather and reduce-scatter, NOTES 62): HEAD at 1b06a3e as it
# is, on two channels (NCCL_MAX_NCHANNELS=2, as NCCL gives Socket), and
# with eager messages up to 256 KiB (COLLX_EAGER_SIZE=262144: Ring's 128 KiB
# messages at 512 KiB a rank go without a CTS), two alternating rounds.
T0=$(date +%s)
mkdir -p /tmp/cx/new && tar xzf .gpu/collx-new.tar.gz -C /tmp/cx/new &&
  (cd /tmp/cx/new/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) ||
  { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
NEW=/tmp/cx/new/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $NEW > $OUT/warm.log 2>&1
echo "warm-up rc=$? at $(( $(date +%s)-T0 )) s"
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 400 bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather reduce_scatter all_reduce" --out $OUT/ch \
  .gpu/nccl-tests.tar.gz def=$NEW ch2=$NEW,NCCL_MAX_NCHANNELS=2 e256=$NEW,COLLX_EAGER_SIZE=262144 > $OUT/ch.log 2>&1
echo "ch rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ch/table.md
for f in $OUT/ch/*-1/raw/*rank0.log; do echo "== ${f#$OUT/}"; grep -ho '\(AllGather\|ReduceScatter\|AllReduce\): [0-9]* Bytes -> Algo.*' $f | sed 's/ with.*//' | sort -u | sort -t: -k2 -n; done 2>/dev/null > $OUT/choices.txt
cd $OUT && tar czf ab.tgz ch && rm -rf ch
