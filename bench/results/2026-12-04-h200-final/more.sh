#!/bin/bash
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
for n in split final; do
  if [ ! -f $B/$n/.libs/libnccl-net-collx.so ]; then mkdir -p $B/$n; tar xzf $R/.devcarry/collx-$n.tar.gz -C $B/$n --strip-components=1
  (cd $B/$n && ./configure >$B/$n.cfg.log 2>&1 && make -j8 >$B/$n.make.log 2>&1 || echo "BUILD FAIL $n") & fi
done
wait
echo "built in $(( $(date +%s) - t0 )) s"
ab() { local out=$1 rounds=$2 ranks=$3 colls=$4 n=$5; shift 5
  TOTAL_BUDGET=120 RUN_TIMEOUT=110 NT_ARGS="-b 16M -e 512M -f 2 -n $n -w 3 -c 1" \
    bench/ab.sh --out $OUT/$out --rounds $rounds --ranks "$ranks" --colls "$colls" .devcarry/nccl-tests.tar.gz "$@" > $OUT/$out.log 2>&1
  cat $OUT/$out/table.md; grep -h 'via NET/collx' $OUT/$out/*/summary.md 2>/dev/null | head -3; echo "[$out done at $(( $(date +%s) - t0 )) s]"; }
ab ar4n20 6 4 all_reduce 20 split=$B/split final=$B/final
ab r8b 1 8 "alltoall all_reduce" 10 final=$B/final split=$B/split
echo "total $(( $(date +%s) - t0 )) s"
