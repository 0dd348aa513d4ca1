#!/bin/bash
# F: tuner default vs off vs Tree+Simple, 4 rounds, 4 and 2 ranks, 16 KiB-2 MiB
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
if [ ! -f $B/new/.libs/libnccl-net-collx.so ]; then
mkdir -p $B/new; tar xzf $R/.gpu/collx-new.tar.gz -C $B/new --strip-components=1
(cd $B/new && ./configure >$B/new.cfg.log 2>&1 && make -j16 >$B/new.make.log 2>&1 || { echo "BUILD FAIL"; tail -5 $B/new.make.log; })
fi
echo "built in $(( $(date +%s) - t0 )) s"
N=$B/new,COLLX_TUNER=0
AB_MIN_SIZE=16384 TOTAL_BUDGET=40 RUN_TIMEOUT=35 NT_ARGS="-b 16K -e 2M -f 2 -n 60 -w 10 -c 1" \
  bench/ab.sh --out $OUT/tsweep --rounds 4 --ranks "4 2" --colls all_reduce .gpu/nccl-tests.tar.gz \
  def=$B/new off=$N tS=$N,NCCL_ALGO=Tree,NCCL_PROTO=Simple tLL=$N,NCCL_ALGO=Tree,NCCL_PROTO=LL > $OUT/tsweep.log 2>&1
cat $OUT/tsweep/table.md
cd $OUT && tar czf tsweep.tar.gz tsweep tsweep.log && rm -rf tsweep
echo "total $(( $(date +%s) - t0 )) s"
