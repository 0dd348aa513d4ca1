#!/bin/bash
# alternate two build dirs through tax.sh, one round each, R rounds
R=${R:-6}
for k in $(seq $R); do for b in pold pb; do
  cd /tmp/$b && NETBED=/work/main/tests/netbed RUNS=1 SECS=3 CFGS="${CFGS:-batch fo0}" TESTS="${TESTS:-bw64k}" OUT=/tmp/abnt/$b-$k bash /work/main/bench/results/2026-12-07-spare-batch/tax.sh 2>&1 | grep '^| 1' | sed "s/^/$b r$k /"
done; done
