#!/bin/bash
# Issue 26: COLLX_EAGER_SIZE 16 KiB against 64 KiB at 4 ranks, 4 more
# alternating rounds, then Socket and Socket 4x4 in the same call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8K -e 1M -f 2 -n 100 -w 10 -c 1" AB_MIN_SIZE=8192 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 4 --ranks 4 --colls all_reduce --out $OUT/eager \
  .gpu/nccl-tests.tar.gz e64=$B,COLLX_EAGER_SIZE=65536 e16=$B,COLLX_EAGER_SIZE=16384 > $OUT/eager.log 2>&1
echo "eager rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/eager/table.md
RESULTS_DIR=/tmp/sock NT_ARGS="-b 8K -e 1M -f 2 -n 100 -w 10 -c 1" TOTAL_BUDGET=120 RUN_TIMEOUT=60 OUT_DIR=$OUT/sock \
  bash bench/nccl-tests.sh --ranks 4 --colls all_reduce --configs "socket socket-tuned" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/sock.log 2>&1
echo "sock rc=$? at $(( $(date +%s)-T0 )) s"; grep '^|' $OUT/sock/tables.md | head -20
cd $OUT && tar czf eager.tgz eager eager.log && rm -rf eager
