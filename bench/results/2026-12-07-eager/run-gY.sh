#!/bin/bash
# Issue 26: messages up to 64 or 128 KiB sent eagerly (no CTS, read by the
# caller straight into the receive buffer, no progress-thread wake-up)
# against the 16 KiB default, one build, alternating in one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 8K -e 1M -f 2 -n 100 -w 10 -c 1" AB_MIN_SIZE=8192 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 4 --ranks "4 2" --colls all_reduce --out $OUT/eager \
  .gpu/nccl-tests.tar.gz e16=$B e64=$B,COLLX_EAGER_SIZE=65536 > $OUT/eager.log 2>&1
echo "eager rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/eager/table.md
grep -h "via NET/collx" -r $OUT/eager 2>/dev/null | head -1
cd $OUT && tar czf eager.tgz eager eager.log && rm -rf eager
