#!/bin/bash
# The other collectives from 1 MiB, collx against Socket and Socket 4x4, one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
RES=""; [ -f .gpu/colls.tgz ] && RES="--resume .gpu/colls.tgz"
RESULTS_DIR=/tmp/colls NT_ARGS="${NTA:--b 1M -e 512M -f 4 -n 5 -w 2 -c 1}" TOTAL_BUDGET=540 RUN_TIMEOUT=120 OUT_DIR=$OUT \
  bash bench/nccl-tests.sh $RES --ranks "${RANKS:-4}" --colls "${COLLS:-all_gather reduce_scatter sendrecv alltoall}" \
  --configs "collx socket socket-tuned" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/nt.log 2>&1
echo "nt rc=$? at $(( $(date +%s)-T0 )) s"
tail -30 $OUT/nt.log; cat $OUT/summary.md 2>/dev/null | head -60
