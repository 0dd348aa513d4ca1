#!/bin/bash
# D: timeline traces at 4 ranks, collx and Socket, 8 B / 128 KiB / 512 KiB all_reduce
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
if [ ! -f $B/new/.libs/libnccl-net-collx.so ]; then
mkdir -p $B/new; tar xzf $R/.gpu/collx-new.tar.gz -C $B/new --strip-components=1
(cd $B/new && ./configure >$B/new.cfg.log 2>&1 && make -j16 >$B/new.make.log 2>&1 || { echo "BUILD FAIL"; tail -5 $B/new.make.log; })
fi
echo "built in $(( $(date +%s) - t0 )) s"
RESULTS_DIR=$OUT/prof2 RUN_TIMEOUT=60 TOTAL_BUDGET=100 bash bench/profiler/run.sh .gpu/nccl-src.tar.gz .gpu/nccl-tests.tar.gz $B/new > $OUT/prof2.log 2>&1
echo "profiler rc=$? at $(( $(date +%s) - t0 )) s"
P=$(ls /tmp/collx-profiler/nccl-src/ext-profiler/example/libnccl-profiler-example.so /tmp/collx-profiler/*/plugins/profiler/example/libnccl-profiler-example.so 2>/dev/null | head -1)
echo "profiler so: $P"
rm -rf $OUT/prof2
for sz in 8 128K 512K; do
 for cfg in collx socket; do
  d=$OUT/tl/$cfg-$sz; mkdir -p $d
  BENCH_EXTRA_ENV="NCCL_PROFILER_PLUGIN=$P NCCL_PROFILE_EVENT_MASK=4095 NCCL_PROFILE_DUMP_FILE=$d/trace" \
  RESULTS_DIR=$d/run NT_ARGS="-b $sz -e $sz -n 20 -w 5 -c 1" TOTAL_BUDGET=60 RUN_TIMEOUT=50 \
   bench/nccl-tests.sh --configs "$cfg" --ranks 4 --colls all_reduce --tag tl --force .gpu/nccl-tests.tar.gz $B/new > $d.log 2>&1
  echo "$cfg $sz rc=$? traces: $(ls $d/trace* 2>/dev/null | wc -l)"; grep -h "^ *[0-9]" $d/run/raw/*.out 2>/dev/null | head -2
 done
done
cd $OUT && tar czf tl.tar.gz tl && rm -rf tl
echo "total $(( $(date +%s) - t0 )) s"
