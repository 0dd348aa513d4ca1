#!/bin/bash
# I: 32-512 MiB at 4 ranks, old (861dbd1) / new (tun), 4 alternating rounds
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
RESULTS_DIR=$OUT/warm NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" bench/nccl-tests.sh --configs collx --ranks 2 --colls all_reduce --tag warm .gpu/nccl-tests.tar.gz $B/tun >/dev/null 2>&1
AB_MIN_SIZE=$((32<<20)) TOTAL_BUDGET=60 RUN_TIMEOUT=55 NT_ARGS="-b 32M -e 512M -f 2 -n 5 -w 2 -c 1" \
  bench/ab.sh --out $OUT/large4 --rounds 4 --ranks 4 --colls all_reduce .gpu/nccl-tests.tar.gz \
  old=$B/old new=$B/tun > $OUT/large4.log 2>&1
cat $OUT/large4/table.md
cd $OUT && tar czf gI.tar.gz large4 large4.log && rm -rf large4 warm
echo "total $(( $(date +%s) - t0 )) s"
