#!/bin/bash
# The session's tree against its start (5016237), alternating: all_gather,
# reduce_scatter, all_reduce at 4 ranks, then 2 ranks all_gather, one call.
REPO=$(pwd); T0=$(date +%s)
for v in old new; do
  mkdir -p /tmp/$v && if [ $v = old ]; then tar xzf .gpu/old/collx-0.1.0.tar.gz -C /tmp/$v; else tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/$v; fi
  (cd /tmp/$v/collx-0.1.0 && ./configure -q >/tmp/$v/conf.log 2>&1 && make -j16 >/tmp/$v/build.log 2>&1) || { tail -20 /tmp/$v/build.log; exit 1; }
done
echo "built in $(( $(date +%s)-T0 )) s; load $(cat /proc/loadavg)"
NT_ARGS="-b 1M -e 64M -f 4 -n 20 -w 3 -c 1" AB_MIN_SIZE=1048576 TOTAL_BUDGET=100 RUN_TIMEOUT=90 \
  bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather reduce_scatter all_reduce" --out $OUT/t4 \
  .gpu/nccl-tests.tar.gz old=/tmp/old/collx-0.1.0 new=/tmp/new/collx-0.1.0 > $OUT/t4.log 2>&1
echo "t4 rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/t4/table.md
NT_ARGS="-b 1M -e 64M -f 4 -n 20 -w 3 -c 1" AB_MIN_SIZE=1048576 TOTAL_BUDGET=100 RUN_TIMEOUT=90 \
  bash bench/ab.sh --rounds 2 --ranks 2 --colls "all_gather" --out $OUT/t2 \
  .gpu/nccl-tests.tar.gz old=/tmp/old/collx-0.1.0 new=/tmp/new/collx-0.1.0 > $OUT/t2.log 2>&1
echo "t2 rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/t2/table.md
cd $OUT && tar czf t.tgz t4 t2 && rm -rf t4 t2
