#!/usr/bin/env bash
# collx between hosts of the cluster in a box (tests/netbed/netbed.sh): links
# rate-limited with tc tbf, so that a send no longer runs at loopback speed.
#
#   bench/netbed.sh [BUILD_DIR]     (root; BUILD_DIR holds collx-perf, default .)
#
# Writes bench/results/<date>-netbed/table.md (RESULTS_DIR overrides):
#   1. one 10 Gb/s link: collx 1 MiB messages (8 in flight) against plain TCP
#      with one socket on the same link, in one run (collx-perf --compare), and
#      the fraction of the link each reaches; 8 B ping-pong against plain TCP;
#   2. two NICs of 1 and 3 Gb/s merged (COLLX_MERGE): the fraction of their
#      sum collx reaches and the share of the bytes each NIC carried (its
#      byte counters), in both progress modes;
#   3. what COLLX_FAILOVER costs on a healthy merged device (two NICs
#      without a rate limit): bandwidth at 64 KiB and 1 MiB, ping-pong at
#      8 B and 256 KiB, against COLLX_FAILOVER=0.
# Each configuration runs RUNS times (default 3), alternating, so that the
# machine's drift shows as spread rather than as a difference.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../tests/netbed/netbed.sh"
build=${1:-.}
perf=$build/collx-perf
RUNS=${RUNS:-3}
SECS=${SECS:-3}
[ "$(id -u)" -eq 0 ] || { echo "bench/netbed.sh: needs root" >&2; exit 2; }
[ -x "$perf" ] || { echo "bench/netbed.sh: $perf not found" >&2; exit 2; }
out=${RESULTS_DIR:-$here/results/$(date +%Y-%m-%d)-netbed}
mkdir -p "$out/raw" || exit 2
bed=nbb$$
bed=${bed:0:8}
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; netbed_down "$bed"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
unset COLLX_IFNAME NCCL_SOCKET_IFNAME COLLX_MERGE COLLX_NSTREAMS COLLX_PROGRESS COLLX_SPEED_MBPS

# run LABEL CLIENT_ARGS ENV...: server on host 0, client on host 1; the
# client's output in raw/LABEL.txt; per-NIC bytes host 1 sent in sent0/sent1.
run() {
  local label=$1 args=$2 b0 b1
  shift 2
  b0=$(netbed_bytes "$bed" 1 0 tx) b1=$(netbed_bytes "$bed" 1 1 tx)
  ip netns exec "$(netbed_ns "$bed" 0)" env "$@" "$perf" --listen -p 18651 --timeout 30 >"$out/raw/$label.srv" 2>&1 &
  srv=$!
  # shellcheck disable=SC2086 # client arguments are words on purpose
  ip netns exec "$(netbed_ns "$bed" 1)" env "$@" "$perf" "$(netbed_addr 0 0)" -p 18651 $args --timeout 30 \
    >"$out/raw/$label.txt" 2>&1 || echo "bench/netbed.sh: $label failed (raw/$label.txt)" >&2
  wait "$srv"; srv=
  sent0=$(($(netbed_bytes "$bed" 1 0 tx) - b0)) sent1=$(($(netbed_bytes "$bed" 1 1 tx) - b1))
}
ratio_line() { awk '/^ratio collx\/tcp/ {print; exit}' "$1"; }
col() { awk -v s="$2" -v c="$3" '$1 == s && NF >= c {v = $c} END {print v}' "$1"; }

{
  echo "# collx across network namespaces, rate-limited veth links"
  echo
  echo "$(date '+%Y-%m-%d %H:%M %Z'), $(nproc) cores, $(uname -r); \`bench/netbed.sh\`, $RUNS alternating runs of ${SECS} s per configuration."
  echo
} >"$out/table.md"

# ---- 1. one 10 Gb/s link ---------------------------------------------------
netbed_up "$bed" 2 1 10gbit || exit 2
{
  echo "## One 10 Gb/s link (tbf), 1 MiB messages, 8 in flight"
  echo
  echo "| run | collx GB/s | plain TCP GB/s | collx / link | TCP / link | 8 B collx us | 8 B TCP us |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >>"$out/table.md"
for ((k = 1; k <= RUNS; k++)); do
  run "link10g-bw-$k" "-s 1M -d 8 -t $SECS --compare" COLLX_IFNAME==eth0
  run "link10g-lat-$k" "--test lat -s 8 -t $SECS --compare" COLLX_IFNAME==eth0
  f=$out/raw/link10g-bw-$k.txt l=$out/raw/link10g-lat-$k.txt
  cb=$(awk '/collx \/ plain TCP/ {t = 1} t && $1 == 1048576 {print $2; exit}' "$f")
  tb=$(awk '/collx \/ plain TCP/ {t = 1} t && $1 == 1048576 {print $3; exit}' "$f")
  cl=$(awk '/collx \/ plain TCP/ {t = 1} t && $1 == 8 {print $2; exit}' "$l")
  tl=$(awk '/collx \/ plain TCP/ {t = 1} t && $1 == 8 {print $3; exit}' "$l")
  printf '| %d | %s | %s | %s | %s | %s | %s |\n' "$k" "$cb" "$tb" \
    "$(awk -v v="$cb" 'BEGIN {printf "%.2f", v * 8 / 10}')" "$(awk -v v="$tb" 'BEGIN {printf "%.2f", v * 8 / 10}')" \
    "$cl" "$tl" >>"$out/table.md"
done
netbed_down "$bed"

# ---- 2. two unequal NICs merged --------------------------------------------
netbed_up "$bed" 2 2 1gbit 3gbit || exit 2
{
  echo
  echo "## Two NICs merged, 1 and 3 Gb/s (tbf), 1 MiB messages, 8 in flight"
  echo
  echo "| run | progress | collx GB/s | of the 4 Gb/s sum | 1 Gb/s NIC share | 3 Gb/s NIC share |"
  echo "| --- | --- | --- | --- | --- | --- |"
} >>"$out/table.md"
for ((k = 1; k <= RUNS; k++)); do
  for progress in threads caller; do
    run "merged-$progress-$k" "-s 1M -d 8 -t $SECS" COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_PROGRESS=$progress
    bw=$(col "$out/raw/merged-$progress-$k.txt" 1048576 3)
    tot=$((sent0 + sent1))
    printf '| %d | %s | %s | %s | %s | %s |\n' "$k" "$progress" "$bw" \
      "$(awk -v v="$bw" 'BEGIN {printf "%.2f", v * 8 / 4}')" \
      "$(awk -v a=$sent0 -v t=$tot 'BEGIN {printf "%.1f%%", t ? 100 * a / t : 0}')" \
      "$(awk -v a=$sent1 -v t=$tot 'BEGIN {printf "%.1f%%", t ? 100 * a / t : 0}')" >>"$out/table.md"
  done
done
netbed_down "$bed"

# ---- 3. what failover costs on a healthy merged device ---------------------
# Two NICs without a rate limit (veth runs at memory speed, so the plugin's
# own work shows): COLLX_FAILOVER=1 (the default: each striped send waits for
# the receiver's DONE, and a spare control socket carries a copy of every
# control byte) against 0, alternating.
netbed_up "$bed" 2 2 || exit 2
{
  echo
  echo "## Failover on a healthy merged device: two NICs, no rate limit, COLLX_FAILOVER=1 against 0"
  echo
  echo "| run | COLLX_FAILOVER | 64 KiB GB/s | 1 MiB GB/s | 8 B median us | 256 KiB median us |"
  echo "| --- | --- | --- | --- | --- | --- |"
} >>"$out/table.md"
for ((k = 1; k <= RUNS; k++)); do
  for fo in 1 0; do
    m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_FAILOVER=$fo)
    run "fo$fo-bw64k-$k" "-s 64K -d 8 -t $SECS" "${m[@]}"
    run "fo$fo-bw1m-$k" "-s 1M -d 8 -t $SECS" "${m[@]}"
    run "fo$fo-lat8-$k" "--test lat -s 8 -t $SECS" "${m[@]}"
    run "fo$fo-lat256k-$k" "--test lat -s 256K -t $SECS" "${m[@]}"
    printf '| %d | %s | %s | %s | %s | %s |\n' "$k" "$fo" "$(col "$out/raw/fo$fo-bw64k-$k.txt" 65536 3)" \
      "$(col "$out/raw/fo$fo-bw1m-$k.txt" 1048576 3)" "$(col "$out/raw/fo$fo-lat8-$k.txt" 8 4)" \
      "$(col "$out/raw/fo$fo-lat256k-$k.txt" 262144 4)" >>"$out/table.md"
  done
done
cat "$out/table.md"
