#!/bin/bash
# NCCL's protocol at 256 KiB-16 MiB for all_gather / reduce_scatter over collx
# (default against NCCL_PROTO=Simple, alternating), then the four
# collectives 1-16 MiB at -n 20 against Socket, one call.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
NT_ARGS="-b 256K -e 16M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=262144 TOTAL_BUDGET=100 RUN_TIMEOUT=90 \
  bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather reduce_scatter" --out $OUT/proto \
  .gpu/nccl-tests.tar.gz def=$B simple=$B,NCCL_PROTO=Simple > $OUT/proto.log 2>&1
echo "proto rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/proto/table.md
RESULTS_DIR=/tmp/colls2 NT_ARGS="-b 1M -e 16M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=$((560 - ($(date +%s)-T0))) RUN_TIMEOUT=90 OUT_DIR=$OUT/c2 \
  bash bench/nccl-tests.sh --ranks "2 4" --colls "all_gather reduce_scatter sendrecv alltoall" \
  --configs "collx socket socket-tuned" --tag h100 .gpu/nccl-tests.tar.gz $B > $OUT/nt2.log 2>&1
echo "nt2 rc=$? at $(( $(date +%s)-T0 )) s"
grep -A12 '^### \|^## ' $OUT/c2/tables.md | grep '^|\|^##' | grep -v -- '---' | head -80
cd $OUT && tar czf proto.tgz proto && rm -rf proto
