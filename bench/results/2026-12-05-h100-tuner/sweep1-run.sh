#!/bin/bash
# E: algorithm / protocol / channel sweep by environment, 2 and 4 ranks, 8 KiB-8 MiB
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
if [ ! -f $B/new/.libs/libnccl-net-collx.so ]; then
mkdir -p $B/new; tar xzf $R/.gpu/collx-new.tar.gz -C $B/new --strip-components=1
(cd $B/new && ./configure >$B/new.cfg.log 2>&1 && make -j16 >$B/new.make.log 2>&1 || { echo "BUILD FAIL"; tail -5 $B/new.make.log; })
fi
echo "built in $(( $(date +%s) - t0 )) s"
N=$B/new,COLLX_TUNER=0
AB_MIN_SIZE=8192 TOTAL_BUDGET=40 RUN_TIMEOUT=35 NT_ARGS="-b 8K -e 8M -f 2 -n 30 -w 5 -c 1" \
  bench/ab.sh --out $OUT/sweep --rounds 2 --ranks "${RANKS:-4 2}" --colls all_reduce .gpu/nccl-tests.tar.gz \
  def=$B/new off=$N tLL=$N,NCCL_ALGO=Tree,NCCL_PROTO=LL tS=$N,NCCL_ALGO=Tree,NCCL_PROTO=Simple \
  rS=$N,NCCL_ALGO=Ring,NCCL_PROTO=Simple rLL=$N,NCCL_ALGO=Ring,NCCL_PROTO=LL \
  tS2=$N,NCCL_ALGO=Tree,NCCL_PROTO=Simple,NCCL_MAX_NCHANNELS=2 tS1=$N,NCCL_ALGO=Tree,NCCL_PROTO=Simple,NCCL_MAX_NCHANNELS=1 > $OUT/sweep.log 2>&1
cat $OUT/sweep/table.md
cd $OUT && tar czf sweep.tar.gz sweep sweep.log && rm -rf sweep
echo "total $(( $(date +%s) - t0 )) s"
