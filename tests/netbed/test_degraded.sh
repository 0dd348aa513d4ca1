#!/usr/bin/env bash
# A slow member of a merged device (issue 25), across two hosts of the
# cluster in a box (tests/netbed/netbed.sh): a 1 Gbit/s NIC merged with a
# 2 Mbit/s one, collx-perf moving 1 MiB messages, 8 in flight, completed in
# order (--in-order, as NCCL's proxy does) with every byte checked:
#   1. one way: the merged device reaches at least half of what the
#      1 Gbit/s NIC alone carries, a quarter under a sanitizer (before, a
#      chunk waiting in the slow member's socket held every message behind
#      it: about 1%), and the sender names the slow member in one WARN;
#   2. both ways at once: every message right on both ends (chunks sent
#      twice, both copies arriving at once, are read once);
#   3. with COLLX_FAILOVER=0 (no second copies): every message right.
# Speed targets (0.95 of the NIC alone) are bench/degraded.sh's; the
# threshold here is generous, for loaded CI machines.
# Root only: exit 77 (skip) when not root or when namespaces cannot be made.
# Runs from the build directory; COLLX_PERF may point elsewhere.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netbed.sh"
perf=${COLLX_PERF:-./collx-perf}

netbed_test_start "$perf"

bed=nbs$$
bed=${bed:0:8}
tmp=$(mktemp -d /tmp/collx-degraded.XXXXXX) || exit 1
srv=
cleanup() {
  [ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
  netbed_down "$bed"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0
check() { # ok(0/1) description
  if [ "$1" -eq 0 ]; then echo "PASS: $2"; pass=$((pass + 1)); else echo "FAIL: $2"; fail=$((fail + 1)); fi
}

# eth0 (1 Gbit/s) and eth1 (2 Mbit/s) make the merged device; eth2 carries
# collx-perf's own bootstrap connection.
if ! netbed_up "$bed" 2 3 1gbit 2mbit 2>"$tmp/err"; then
  echo "SKIP: cannot make network namespaces here: $(cat "$tmp/err")"; exit 77
fi
PORT=18654
ns0=$(netbed_ns "$bed" 0) ns1=$(netbed_ns "$bed" 1)
SECS=${COLLX_DEGRADED_SECS:-4}

# run LABEL OPTS ENV...: collx-perf server on host 0, client on host 1, 1 MiB
# messages, 8 in flight, in order, checked, for SECS s.  Sets crc, src (exit
# codes) and bw (the client's GB/s, its send direction).
run() {
  local label=$1 opts=$2
  shift 2
  ip netns exec "$ns0" env "$@" timeout 90 "$perf" --listen -p $PORT --timeout 30 >"$tmp/$label.srv" 2>&1 &
  srv=$!
  # shellcheck disable=SC2086 # options are words on purpose
  ip netns exec "$ns1" env "$@" timeout 90 "$perf" "$(netbed_addr 0 2)" -p $PORT -s 1M -d 8 --in-order --check \
    $opts -t "$SECS" --timeout 30 >"$tmp/$label.cli" 2>&1
  crc=$?
  wait "$srv"; src=$?; srv=
  bw=$(awk '$1 == 1048576 && NF >= 3 {v = $3} END {print v + 0}' "$tmp/$label.cli")
}
show() { netbed_show "$tmp" "$1"; }
slow_warns() { grep -c "drains only" "$tmp/$1.$2"; }

merged=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1)

# ---- 1. one way: the slow member costs little, and is named once -----------
run alone "" COLLX_IFNAME==eth0
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "1 Gbit/s NIC alone: $bw GB/s (exit $crc, $src)"
ref=$bw
run oneway "-v" "${merged[@]}"
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "merged with 2 Mbit/s: every message right (exit $crc, $src)"
[ $crc -ne 0 ] || [ $src -ne 0 ] && show oneway
# Under a sanitizer (the CI's stages set COLLX_FAULTS_SCALE) the processor,
# not the link, sets the pace, and the merged device's second copies cost
# it more: a quarter there (TSan measured 0.68; the code before: 0.01).
least=0.5
[ "${COLLX_FAULTS_SCALE:-1}" -gt 1 ] && least=0.25
check $(awk -v b="$bw" -v r="$ref" -v l=$least 'BEGIN {exit !(r > 0 && b >= l * r)}' && echo 0 || echo 1) \
  "merged with 2 Mbit/s, in order: $bw GB/s, at least $least of the 1 Gbit/s NIC alone ($ref)"
n=$(slow_warns oneway cli)
w=$(grep -h "drains only" "$tmp/oneway.cli" | head -1)
check $([ "$n" -eq 1 ] && printf '%s' "$w" | grep -q "member eth1 to $(netbed_addr 0 1)" && echo 0 || echo 1) \
  "the sender names the slow member once ($n): ${w#*NET/collx }"
# Why not, where it was not: what became of the slow member's path.
[ "$n" -eq 1 ] || grep -hE "path|member|given up|stuck|closed:" "$tmp/oneway.cli" | head -12 | sed 's/^/    client: /'
check $([ "$(slow_warns oneway srv)" -eq 0 ] && echo 0 || echo 1) \
  "the receiver, which sends nothing, names no member ($(slow_warns oneway srv))"

# ---- 2. both ways: chunks sent twice are read once --------------------------
run bidir "--bidir" "${merged[@]}"
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
  "merged with 2 Mbit/s, both ways: every message right on both ends (exit $crc, $src; $bw GB/s one way)"
[ $crc -ne 0 ] || [ $src -ne 0 ] && show bidir

# ---- 3. without failover: no second copies, still every byte right ----------
run nofo "" "${merged[@]}" COLLX_FAILOVER=0
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
  "COLLX_FAILOVER=0: every message right (exit $crc, $src; $bw GB/s)"
[ $crc -ne 0 ] || [ $src -ne 0 ] && show nofo

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
