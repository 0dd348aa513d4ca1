#!/bin/bash
# (gI) Issue 26, 4 ranks, one call: more alternating rounds of the tuner as
# committed (HEAD at 1b06a3e) against 7063ee9 (gH lost its first "old" run
# to the nccl-tests build eating that run's time budget: a warm-up run
# builds nccl-tests first here), then Socket for all-gather,
# reduce-scatter and all-reduce in the same call, and collx's all-reduce
# (the tuner's Tree rule) beside it.
T0=$(date +%s)
build() {
  mkdir -p /tmp/cx/$1 && tar xzf .gpu/collx-$1.tar.gz -C /tmp/cx/$1 &&
  (cd /tmp/cx/$1/collx-0.1.0 && ./configure -q >/tmp/cx/$1.conf.log 2>&1 && make -j8 >/tmp/cx/$1.build.log 2>&1) ||
  { tail -20 /tmp/cx/$1.build.log /tmp/cx/$1.conf.log; exit 1; }
}
build new & build old & wait
NEW=/tmp/cx/new/collx-0.1.0 OLD=/tmp/cx/old/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR=/tmp/warm \
  bash bench/nccl-tests.sh --ranks 2 --colls all_reduce --configs collx --tag warm .gpu/nccl-tests.tar.gz $NEW > $OUT/warm.log 2>&1
echo "warm-up rc=$? at $(( $(date +%s)-T0 )) s"
NT_ARGS="-b 512K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=524288 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 250 bash bench/ab.sh --rounds 3 --ranks 4 --colls "all_gather reduce_scatter" --out $OUT/ag \
  .gpu/nccl-tests.tar.gz old=$OLD new=$NEW > $OUT/ag.log 2>&1
echo "ag rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ag/table.md
RESULTS_DIR=/tmp/sk NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=100 RUN_TIMEOUT=60 OUT_DIR=$OUT/sk \
  timeout 150 bash bench/nccl-tests.sh --ranks 4 --colls "all_gather reduce_scatter all_reduce" \
  --configs "socket" --tag h100 .gpu/nccl-tests.tar.gz $NEW > $OUT/sk.log 2>&1
echo "sk rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/sk/tables.md 2>/dev/null | grep -v -- '---' | head -40
NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
  timeout 120 bash bench/ab.sh --rounds 1 --ranks 4 --colls "all_reduce all_gather reduce_scatter" --out $OUT/cx \
  .gpu/nccl-tests.tar.gz new=$NEW old=$OLD > $OUT/cx.log 2>&1
echo "cx rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/cx/table.md
cd $OUT && tar czf ab.tgz ag cx sk ag.log cx.log sk.log warm.log 2>/dev/null && rm -rf ag cx sk
