#!/bin/bash
# all_gather / reduce_scatter with the tuner's Ring rule, against Socket and Socket 4x4, one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
RESULTS_DIR=/tmp/colls3 NT_ARGS="-b 1M -e 64M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=400 RUN_TIMEOUT=90 OUT_DIR=$OUT \
  bash bench/nccl-tests.sh --ranks "2 4" --colls "all_gather reduce_scatter" \
  --configs "collx socket socket-tuned" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/nt3.log 2>&1
echo "nt3 rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/tables.md | grep -v -- '---' | head -60
