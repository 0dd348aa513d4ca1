#!/bin/bash
# Issue 26: the tree at 50e6c6d (64 KiB eager, no peek after a bulky message) with
# COLLX_EAGER_SIZE 16, 32 and 64 KiB, 4 ranks, 32 KiB-2 MiB, alternating.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 32K -e 2M -f 2 -n 100 -w 10 -c 1" AB_MIN_SIZE=32768 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 4 --ranks 4 --colls all_reduce --out $OUT/eager \
  .gpu/nccl-tests.tar.gz e16=$B,COLLX_EAGER_SIZE=16384 e32=$B,COLLX_EAGER_SIZE=32768 e64=$B,COLLX_EAGER_SIZE=65536 > $OUT/eager.log 2>&1
echo "eager rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/eager/table.md
cd $OUT && tar czf eager.tgz eager eager.log && rm -rf eager
