#!/bin/bash
# B1: collx (main) against Socket and Socket 4x4 at 2 and 4 ranks, 8 B-8 MiB
# (issue 26), then the profiler trace (issue 27).
set -u
R=$PWD B=/tmp/b
t0=$(date +%s)
nvidia-smi -L; nproc
mkdir -p $B/new; tar xzf $R/.gpu/collx-new.tar.gz -C $B/new --strip-components=1
(cd $B/new && ./configure >$B/new.cfg.log 2>&1 && make -j16 >$B/new.make.log 2>&1 || { echo "BUILD FAIL"; tail -5 $B/new.make.log; })
echo "built in $(( $(date +%s) - t0 )) s"
RESULTS_DIR=$OUT/sock1 NT_ARGS="-b 8 -e 8M -f 4 -n 20 -w 5 -c 1" TOTAL_BUDGET=260 RUN_TIMEOUT=40 \
  bench/nccl-tests.sh --configs "collx socket socket-tuned" --ranks "2 4" --colls all_reduce --tag sock .gpu/nccl-tests.tar.gz $B/new > $OUT/sock1.log 2>&1
echo "[sock1 at $(( $(date +%s) - t0 )) s]"; sed -n '/## /,$p' $OUT/sock1/tables.md 2>/dev/null | head -70
RESULTS_DIR=$OUT/profiler RUN_TIMEOUT=90 TOTAL_BUDGET=150 bash bench/profiler/run.sh .gpu/nccl-src.tar.gz .gpu/nccl-tests.tar.gz $B/new > $OUT/profiler.log 2>&1
echo "profiler rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 $OUT/profiler.log; head -30 $OUT/profiler/excerpt.md 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s"
