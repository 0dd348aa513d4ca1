#!/bin/bash
# (gL) Issue 26, 4 ranks: collx with the channel rule (HEAD's tuner) and
# Socket in one call, all-gather, reduce-scatter and all-reduce, 128 KiB-16
# MiB, the ratio table of bench/nccl-tests.sh.  Needs .gpu/collx-chan.tar.gz.
T0=$(date +%s)
mkdir -p /tmp/cx/chan && tar xzf .gpu/collx-chan.tar.gz -C /tmp/cx/chan &&
  (cd /tmp/cx/chan/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) ||
  { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/chan/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader)"
RESULTS_DIR=/tmp/sk NT_ARGS="-b 128K -e 16M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=150 RUN_TIMEOUT=60 OUT_DIR=$OUT/sk \
  COLLX_EXTRA_ENV="COLLX_RAIL_ID=lo=0 COLLX_PLANE_ID=lo=0" \
  timeout 200 bash bench/nccl-tests.sh --ranks 4 --colls "all_gather reduce_scatter all_reduce" \
  --configs "collx socket" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/sk.log 2>&1
echo "sk rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/sk/tables.md 2>/dev/null | grep -v -- '---' | head -45
