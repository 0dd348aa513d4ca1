#!/bin/bash
# Per-stream profiler events under NCCL 2.28.3 + the live counters' cost, one call.
REPO=$(pwd)
T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
echo "built in $(( $(date +%s)-T0 )) s"
RESULTS_DIR=$OUT/prof NT_ARGS="-b 1M -e 16M -f 4 -n 3 -w 1 -c 1" timeout 300 bash bench/profiler/run.sh \
  .gpu/nccl-src.tar.gz .gpu/nccl-tests.tar.gz /tmp/cx/collx-0.1.0 > $OUT/prof.log 2>&1
echo "profiler run rc=$? at $(( $(date +%s)-T0 )) s"
tail -5 $OUT/prof.log
grep -h "via NET\|NET/Plugin" $OUT/prof/*.log 2>/dev/null | head -3
for t in $OUT/prof/trace_*.json; do
  [ -f "$t" ] || continue
  b=$(grep '"cat": "NET_SOCK", "ph": "b"' "$t")
  echo "$(basename $t): $(printf '%s\n' "$b" | grep -c '"sock": -1,') message events, $(printf '%s\n' "$b" | grep -c '"sock": [0-9]') stream events"
done
cd /tmp/cx/collx-0.1.0 && ROUNDS=10 bash $REPO/bench/stats_ab.sh > $OUT/stats_ab.txt 2>&1
cat $OUT/stats_ab.txt; nproc; cat /proc/loadavg
echo "done at $(( $(date +%s)-T0 )) s"
cd $OUT && tar czf results.tgz prof prof.log stats_ab.txt && rm -rf prof
