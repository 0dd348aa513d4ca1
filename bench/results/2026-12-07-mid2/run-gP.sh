#!/bin/bash
# (gP) Issue 26, 2 ranks: all-reduce at 256 KiB took longer than at 512 KiB
# in gN (182-618 us against 200-217), and was level with Socket.  There
# NCCL runs Tree with Simple on 4 channels: messages of 64 KiB, exactly
# COLLX_EAGER_SIZE, so every one rides the control socket (one socket, read
# by the proxy thread) instead of the streams.  HEAD against
# COLLX_EAGER_SIZE=32768 and 16384, three alternating rounds, all-reduce
# 64 KiB-2 MiB at 2 ranks, then 4 ranks.  Needs .gpu/collx-head.tar.gz and
# .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head .gpu/nccl-tests.tar.gz) || exit 1
for n in 2 4; do
  NT_ARGS="-b 64K -e 2M -f 2 -n 50 -w 5 -c 1" AB_MIN_SIZE=65536 TOTAL_BUDGET=40 RUN_TIMEOUT=35 \
    timeout 220 bash bench/ab.sh --rounds 3 --ranks $n --colls all_reduce --out /tmp/eager$n \
    .gpu/nccl-tests.tar.gz e64=$B e32=$B,COLLX_EAGER_SIZE=32768 e16=$B,COLLX_EAGER_SIZE=16384 > $OUT/eager$n.log 2>&1
  stamp "eager $n ranks" $?; cat /tmp/eager$n/table.md
done
tar czf $OUT/eager.tgz -C /tmp eager2 eager4 2>/dev/null
