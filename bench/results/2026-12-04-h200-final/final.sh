#!/bin/bash
# Final measurements of issue 15 on the GPU host: builds, then alternating runs.
set -u
R=$PWD B=/tmp/b
mkdir -p $B
t0=$(date +%s)
for n in split final; do
  mkdir -p $B/$n; tar xzf $R/.devcarry/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j5 >$B/$n.make.log 2>&1 || { echo "BUILD FAIL $n"; tail -20 $B/$n.make.log; }) &
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
ab() { local out=$1 rounds=$2 ranks=$3 colls=$4; shift 4
  TOTAL_BUDGET=90 RUN_TIMEOUT=80 NT_ARGS="-b 16M -e 512M -f 2 -n 10 -w 3 -c 1" \
    bench/ab.sh --out $OUT/$out --rounds $rounds --ranks "$ranks" --colls "$colls" .devcarry/nccl-tests.tar.gz "$@" > $OUT/$out.log 2>&1
  cat $OUT/$out/table.md; grep -h 'via NET' $OUT/$out.log | grep -v 'other: 0' ; echo "[$out done at $(( $(date +%s) - t0 )) s]"; }
ab ar4 4 4 all_reduce split=$B/split final=$B/final
ab ar2 2 2 all_reduce split=$B/split final=$B/final
ab a2a4 2 4 "alltoall sendrecv" split=$B/split final=$B/final
ab r8 1 8 "alltoall all_reduce" split=$B/split final=$B/final
echo "total $(( $(date +%s) - t0 )) s"
