#!/bin/bash
# Issue 26, mid sizes at 4 ranks: is the pool's hand-off (a wake-up each side
# of a hop) what Socket does not pay?  .gpu/collx-mid.tar.gz is `make dist` of
# a scratch tree (main at 7063ee9 plus inline-knobs.patch, read from the environment,
# not committed): CX_SEND_INLINE, the largest striped send the posting thread
# writes itself (64 KiB in the tree), and CX_RECV_BULK=1, with which
# COLLX_INLINE_RECV=1 also reads payloads, not only small chunks.  The same
# build alternating: the pool (thr), sends up to 1 MiB written inline (snd),
# that and bulk read inline (inl), no pool at all (caller); then Socket.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-mid.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
NT_ARGS="-b 128K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=131072 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather all_reduce" --out $OUT/ab \
  .gpu/nccl-tests.tar.gz thr=$B snd=$B,CX_SEND_INLINE=1048576 inl=$B,CX_SEND_INLINE=1048576,COLLX_INLINE_RECV=1,CX_RECV_BULK=1 caller=$B,COLLX_PROGRESS=caller > $OUT/ab.log 2>&1
echo "ab rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ab/table.md
RESULTS_DIR=/tmp/sk NT_ARGS="-b 128K -e 8M -f 2 -n 20 -w 3 -c 1" TOTAL_BUDGET=100 RUN_TIMEOUT=60 OUT_DIR=$OUT/sk \
  bash bench/nccl-tests.sh --ranks 4 --colls "all_gather all_reduce" \
  --configs "socket" --tag h200 .gpu/nccl-tests.tar.gz $B > $OUT/sk.log 2>&1
echo "sk rc=$? at $(( $(date +%s)-T0 )) s"
grep '^|\|^##' $OUT/sk/tables.md 2>/dev/null | grep -v -- '---' | head -30
cd $OUT && tar czf ab.tgz ab ab.log && rm -rf ab
