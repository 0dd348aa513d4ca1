#!/bin/bash
# G: tuner with Simple above 64 KiB (tun) against main (new), alternating; Socket in the same call
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
for n in new tun; do
  [ -f $B/$n/.libs/libnccl-net-collx.so ] && continue
  mkdir -p $B/$n; tar xzf $R/.gpu/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j8 >$B/$n.make.log 2>&1 || { echo "BUILD FAIL $n"; tail -5 $B/$n.make.log; }) &
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
RESULTS_DIR=$OUT/warm NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" bench/nccl-tests.sh --configs collx --ranks 2 --colls all_reduce --tag warm .gpu/nccl-tests.tar.gz $B/new >/dev/null 2>&1
AB_MIN_SIZE=16384 TOTAL_BUDGET=40 RUN_TIMEOUT=35 NT_ARGS="-b 16K -e 4M -f 2 -n 60 -w 10 -c 1" \
  bench/ab.sh --out $OUT/tun --rounds 3 --ranks "4 2" --colls all_reduce .gpu/nccl-tests.tar.gz \
  main=$B/new tun=$B/tun > $OUT/tun.log 2>&1
cat $OUT/tun/table.md
RESULTS_DIR=$OUT/sockG NT_ARGS="-b 16K -e 4M -f 2 -n 60 -w 10 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 \
  bench/nccl-tests.sh --configs "socket socket-tuned collx" --ranks "4 2" --colls all_reduce --tag sockG .gpu/nccl-tests.tar.gz $B/tun > $OUT/sockG.log 2>&1
sed -n '/## /,$p' $OUT/sockG/tables.md 2>/dev/null | grep -v "^$" | head -40
cd $OUT && tar czf gG.tar.gz tun tun.log sockG sockG.log && rm -rf tun sockG warm
echo "total $(( $(date +%s) - t0 )) s"
