#!/bin/bash
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
for n in final lazy; do
  mkdir -p $B/$n; tar xzf $R/.devcarry/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j8 >$B/$n.make.log 2>&1 || echo "BUILD FAIL $n") &
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
TOTAL_BUDGET=90 RUN_TIMEOUT=80 NT_ARGS="-b 16M -e 512M -f 2 -n 10 -w 3 -c 1" \
  bench/ab.sh --out $OUT/lz --rounds 2 --ranks 4 --colls "all_reduce alltoall" .devcarry/nccl-tests.tar.gz final=$B/final lazy=$B/lazy > $OUT/lz.log 2>&1
cat $OUT/lz/table.md; grep -h 'via NET/collx' $OUT/lz.log | head -2
grep -h 'progress threads' $OUT/lz/lazy-1/raw/*rank0* 2>/dev/null | head -2 | cut -c1-200
echo "total $(( $(date +%s) - t0 )) s"
