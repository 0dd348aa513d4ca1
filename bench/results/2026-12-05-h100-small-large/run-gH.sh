#!/bin/bash
# H: 8 B at 2 and 4 ranks, collx / Socket / Socket 4x4, 3 rounds; then 32-512 MiB old (861dbd1) / tun / tun COLLX_STATS=0
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
for n in old tun; do
  [ -f $B/$n/.libs/libnccl-net-collx.so ] && continue
  mkdir -p $B/$n; tar xzf $R/.gpu/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j8 >$B/$n.make.log 2>&1 || { echo "BUILD FAIL $n"; tail -5 $B/$n.make.log; }) &
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
RESULTS_DIR=$OUT/small/r$r NT_ARGS="-b 8 -e 8 -n 500 -w 50 -c 1" TOTAL_BUDGET=120 RUN_TIMEOUT=40 \
  bench/nccl-tests.sh --configs "collx socket socket-tuned" --ranks "2 4" --colls all_reduce --tag small .gpu/nccl-tests.tar.gz $B/tun > $OUT/small-r$r.log 2>&1
for f in $OUT/small/r$r/raw/*.out; do echo "r$r $(basename $f .out) $(grep -E '^ +8 ' $f | awk '{print $6, $10}')"; done
done
echo "[small at $(( $(date +%s) - t0 )) s]"
AB_MIN_SIZE=$((32<<20)) TOTAL_BUDGET=60 RUN_TIMEOUT=55 NT_ARGS="-b 32M -e 512M -f 2 -n 5 -w 2 -c 1" \
  bench/ab.sh --out $OUT/large4 --rounds 2 --ranks 4 --colls all_reduce .gpu/nccl-tests.tar.gz \
  old=$B/old new=$B/tun off=$B/tun,COLLX_STATS=0 > $OUT/large4.log 2>&1
cat $OUT/large4/table.md
cd $OUT && tar czf gH.tar.gz small small-r*.log large4 large4.log && rm -rf small large4
echo "total $(( $(date +%s) - t0 )) s"
