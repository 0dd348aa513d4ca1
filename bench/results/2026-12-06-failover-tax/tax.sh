#!/usr/bin/env bash
# failover tax: COLLX_FAILOVER_COPY default vs 0 vs COLLX_FAILOVER=0, alternating
set -u
here=/work/main/tests/netbed
. "$here/netbed.sh"
perf=${PERF:-/work/main/collx-perf}
RUNS=${RUNS:-2}; SECS=${SECS:-2}
out=${OUT:-/tmp/lx/tax}; mkdir -p $out/raw
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
echo "| run | config | 64 KiB GB/s | 256 KiB GB/s | 1 MiB GB/s | 8 B us | 64 KiB lat us |"
for ((k = 1; k <= RUNS; k++)); do
  for cfg in copy nocopy fo0; do
    case $cfg in copy) e=(COLLX_FAILOVER=1);; nocopy) e=(COLLX_FAILOVER=1 COLLX_FAILOVER_COPY=0);; fo0) e=(COLLX_FAILOVER=0);; esac
    m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "${e[@]}")
    run "$cfg-bw64k-$k" "-s 64K -d 8 -t $SECS" "${m[@]}"
    run "$cfg-bw256k-$k" "-s 256K -d 8 -t $SECS" "${m[@]}"
    run "$cfg-bw1m-$k" "-s 1M -d 8 -t $SECS" "${m[@]}"
    run "$cfg-lat8-$k" "--test lat -s 8 -t $SECS" "${m[@]}"
    run "$cfg-lat64k-$k" "--test lat -s 64K -t $SECS" "${m[@]}"
    printf '| %d | %s | %s | %s | %s | %s | %s |\n' "$k" "$cfg" "$(col $out/raw/$cfg-bw64k-$k.txt 65536 3)" \
      "$(col $out/raw/$cfg-bw256k-$k.txt 262144 3)" "$(col $out/raw/$cfg-bw1m-$k.txt 1048576 3)" \
      "$(col $out/raw/$cfg-lat8-$k.txt 8 4)" "$(col $out/raw/$cfg-lat64k-$k.txt 65536 4)"
  done
done
