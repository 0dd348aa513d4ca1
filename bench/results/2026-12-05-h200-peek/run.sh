#!/bin/bash
# A: profiler trace (issue 27); small sizes at 4 ranks: 861dbd1 (old) vs main
# (new, COLLX_CTRL_PEEK on) vs main with COLLX_CTRL_PEEK=0, alternating.
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
for n in old new; do
  mkdir -p $B/$n; tar xzf $R/.gpu/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j8 >$B/$n.make.log 2>&1 || { echo "BUILD FAIL $n"; tail -5 $B/$n.make.log; }) &
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
RESULTS_DIR=$OUT/profiler RUN_TIMEOUT=90 TOTAL_BUDGET=130 bash bench/profiler/run.sh .gpu/nccl-src.tar.gz .gpu/nccl-tests.tar.gz $B/new > $OUT/profiler.log 2>&1
echo "profiler rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 $OUT/profiler.log; head -30 $OUT/profiler/excerpt.md 2>/dev/null
(cd $OUT && tar czf gA.tar.gz profiler profiler.log 2>/dev/null)
AB_MIN_SIZE=8 TOTAL_BUDGET=55 RUN_TIMEOUT=45 NT_ARGS="-b 8 -e 2M -f 4 -n 30 -w 5 -c 1" \
  bench/ab.sh --out $OUT/small4 --rounds 2 --ranks 4 --colls all_reduce .gpu/nccl-tests.tar.gz \
  old=$B/old new=$B/new nopeek=$B/new,COLLX_CTRL_PEEK=0 > $OUT/small4.log 2>&1
cat $OUT/small4/table.md; grep -rh 'via NET' $OUT/small4 | sort | uniq -c | head -3
cd $OUT && tar czf gA.tar.gz profiler profiler.log small4 small4.log 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s"
