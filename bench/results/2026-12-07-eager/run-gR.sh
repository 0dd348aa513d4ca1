#!/bin/bash
# (gR) Issue 26, the one look the session's remaining device time (331 s)
# could hold: all-reduce 128 KiB-1 MiB at 2 ranks, COLLX_EAGER_SIZE 64 KiB
# (HEAD) against 32 KiB, alternating, 3 rounds, -n 50 -w 5.  gN had 256 KiB
# (Tree on 4 channels: 64 KiB messages, all eager) slower than 512 KiB.
# Needs .gpu/collx-head.tar.gz (make dist of HEAD) and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head .gpu/nccl-tests.tar.gz) || exit 1
echo "built at $(( $(date +%s)-T0 )) s"
export TOTAL_BUDGET=25 RUN_TIMEOUT=20
NT_ARGS="-b 128K -e 1M -f 2 -n 50 -w 5 -c 1" AB_MIN_SIZE=131072 \
  timeout 150 bash bench/ab.sh --rounds 3 --ranks 2 --colls all_reduce --out /tmp/eager2 \
  .gpu/nccl-tests.tar.gz e64=$B e32=$B,COLLX_EAGER_SIZE=32768 > $OUT/eager2.log 2>&1
echo "eager 2 ranks rc=$? at $(( $(date +%s)-T0 )) s"; cat /tmp/eager2/table.md
grep -h "via NET/collx" /tmp/eager2/*/raw/*rank0.log 2>/dev/null | head -2
