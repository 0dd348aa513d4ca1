#!/usr/bin/env bash
# The failover tax with the spare control socket written in batches, on the
# cluster in a box (tests/netbed/netbed.sh): two hosts, two veth NICs each
# merged into one device, no rate limit; collx-perf 8 in flight.  Configs,
# alternating round by round: batch (the defaults), nobatch
# (COLLX_CTRL_SPARE_BATCH=0, the spare written with every record), nocopy
# (COLLX_FAILOVER_COPY=0), fo0 (COLLX_FAILOVER=0).  Run as root from the
# build directory:  RUNS=8 SECS=3 CFGS="batch fo0" TESTS="bw64k lat8" OUT=dir tax.sh
set -u
here=${NETBED:-tests/netbed}
. "$here/netbed.sh"
perf=${PERF:-./collx-perf}
RUNS=${RUNS:-2}; SECS=${SECS:-2}
out=${OUT:-tax-out}; mkdir -p "$out/raw"
bed=nbt$$; bed=${bed:0:8}; srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; netbed_down "$bed"; }
trap cleanup EXIT
run() {
  local label=$1 args=$2; shift 2
  ip netns exec "$(netbed_ns "$bed" 0)" env "$@" "$perf" --listen -p 18651 --timeout 30 >"$out/raw/$label.srv" 2>&1 &
  srv=$!
  ip netns exec "$(netbed_ns "$bed" 1)" env "$@" "$perf" "$(netbed_addr 0 0)" -p 18651 $args --timeout 30 >"$out/raw/$label.txt" 2>&1 || echo "$label failed" >&2
  wait "$srv"; srv=
}
col() { awk -v s="$2" -v c="$3" '$1 == s && NF >= c {v = $c} END {print v}' "$1"; }
netbed_up "$bed" 2 2 || exit 2
tests=${TESTS:-bw64k bw256k bw1m lat8}
echo "| run | config | $tests |"
for ((k = 1; k <= RUNS; k++)); do
  for cfg in ${CFGS:-batch nobatch nocopy fo0}; do
    case $cfg in batch) e=(COLLX_FAILOVER=1);; nobatch) e=(COLLX_FAILOVER=1 COLLX_CTRL_SPARE_BATCH=0);;
      nocopy) e=(COLLX_FAILOVER=1 COLLX_FAILOVER_COPY=0);; fo0) e=(COLLX_FAILOVER=0);; esac
    m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "${e[@]}")
    row="| $k | $cfg |"
    for t in $tests; do
      case $t in
        bw64k) run "$cfg-$t-$k" "-s 64K -d 8 -t $SECS" "${m[@]}"; v=$(col "$out/raw/$cfg-$t-$k.txt" 65536 3);;
        bw256k) run "$cfg-$t-$k" "-s 256K -d 8 -t $SECS" "${m[@]}"; v=$(col "$out/raw/$cfg-$t-$k.txt" 262144 3);;
        bw1m) run "$cfg-$t-$k" "-s 1M -d 8 -t $SECS" "${m[@]}"; v=$(col "$out/raw/$cfg-$t-$k.txt" 1048576 3);;
        lat8) run "$cfg-$t-$k" "--test lat -s 8 -t $SECS" "${m[@]}"; v=$(col "$out/raw/$cfg-$t-$k.txt" 8 4);;
      esac
      row="$row $v |"
    done
    echo "$row"
  done
done
