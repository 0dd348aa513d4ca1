#!/bin/sh
# collx-perf bulk with the live counters off and on (COLLX_STATS=0/1), in
# ABBA order (0 1, then 1 0, ...), ROUNDS rounds; run from the build
# directory.  Prints "round N COLLX_STATS=S GB/s load-average".
for i in $(seq 1 ${ROUNDS:-10}); do
  if [ $((i % 2)) -eq 1 ]; then order="0 1"; else order="1 0"; fi
  for s in $order; do
    bw=$(COLLX_STATS=$s ./collx-perf --self -s 4M -d 8 -t 3 2>&1 | awk '/^ *4194304/ {print $3}')
    echo "round $i COLLX_STATS=$s $bw $(cut -d' ' -f1 /proc/loadavg)"
  done
done
