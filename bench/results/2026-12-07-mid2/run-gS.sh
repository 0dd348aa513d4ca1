#!/bin/bash
# (gS) Issue 26's state at this session's head, against NCCL's Socket as
# NCCL sets it up and Socket 4x4 (socket-tuned), in one call: 8 B
# all-reduce at 2 and 4 ranks (-n 200), then ROUNDS rounds (default 1) of
# COLLS (default all-reduce, all-gather, reduce-scatter) at 4 ranks,
# 128 KiB-16 MiB (-n 20), CONFIGS (default collx and Socket) run back to
# back within each collective: cut to fit the device time left.  Needs
# .gpu/collx-head.tar.gz and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head .gpu/nccl-tests.tar.gz) || exit 1
RESULTS_DIR=/tmp/s8 NT_ARGS="-b 8 -e 8 -n 200 -w 20 -c 1" TOTAL_BUDGET=80 RUN_TIMEOUT=30 \
  timeout 90 bash bench/nccl-tests.sh --ranks "2 4" --colls all_reduce --configs "collx socket" \
  --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/s8.log 2>&1
stamp "8 B" $?; cat /tmp/s8/summary.md 2>/dev/null | head -20
for r in $(seq ${ROUNDS:-1}); do
  RESULTS_DIR=/tmp/s4-$r NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 5 -c 1" TOTAL_BUDGET=170 RUN_TIMEOUT=40 \
    timeout 180 bash bench/nccl-tests.sh --ranks 4 --colls "${COLLS:-all_reduce all_gather reduce_scatter}" \
    --configs "${CONFIGS:-collx socket}" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/s4-$r.log 2>&1
  stamp "round $r" $?; cat /tmp/s4-$r/summary.md 2>/dev/null
done
for d in s8 s4-1 s4-2; do cp /tmp/$d/tables.md $OUT/$d-tables.md 2>/dev/null; done
tar czf $OUT/gS.tgz -C /tmp s8 s4-1 s4-2 2>/dev/null
