#!/usr/bin/env bash
# A merged device with one slow member, across two hosts of the cluster in
# a box (tests/netbed/netbed.sh): each host has four NICs, rate-limited with
# tbf to 1 Gb/s, 50 Mb/s, 2 Mb/s and 3 Gb/s, and collx-perf moves 1 MiB
# messages one way, 8 in flight, completed in order (--in-order: only the
# oldest request of each direction is tested, as NCCL's proxy does).
#
#   bench/degraded.sh [BUILD_DIR] [PLUGIN...]   (root)
#
# BUILD_DIR holds collx-perf (default .); each PLUGIN is a plugin .so to
# compare (default: the one collx-perf finds).  Configurations:
#   1g        the 1 Gb/s NIC alone (COLLX_IFNAME==eth0)
#   3g        the 3 Gb/s NIC alone (COLLX_IFNAME==eth3)
#   1g+50m    eth0 and the 50 Mb/s NIC merged (COLLX_MERGE=eth0+eth1)
#   1g+2m     eth0 and the 2 Mb/s NIC merged
#   1g+3g     eth0 and the 3 Gb/s NIC merged
# in each progress mode of PROGRESSES (default "caller threads").  Then
# (LOSSY=1, the default), on a second bed of two 1 Gb/s NICs: eth0 alone
# against eth0 merged with eth1, which loses 30% of its packets each way
# (nftables on the client's host) for the whole run.  Then, on
# a second bed of two NICs without a rate limit, what the change costs a
# healthy merged device with failover on (the default): 64 KiB and 1 MiB
# messages, 8 in flight, completed as they come and in order.
# The healthy part also gives the processor time both ends spent per GB
# moved (user + system, /usr/bin/time), which a busy machine disturbs less
# than the rate.
# Each configuration runs RUNS times (default 3), the plugins alternating
# within each run.  Writes a table (GB/s, the fraction of the reference: the
# 1 Gb/s NIC alone in the same mode and run, or for 1g+3g what the two NICs
# carried alone, summed; without those runs in CONFIGS, the nominal 4 Gb/s,
# which TCP's headers keep any flow about 5% below) and the
# count of WARNs naming a slow member to
# bench/results/<date>-degraded/table.md (RESULTS_DIR overrides).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../tests/netbed/netbed.sh"
build=${1:-.}
shift $(($# > 0 ? 1 : 0))
plugins=("$@")
[ ${#plugins[@]} -gt 0 ] || plugins=("")
perf=$build/collx-perf
RUNS=${RUNS:-3}
SECS=${SECS:-5}
CONFIGS=${CONFIGS:-"1g 3g 1g+50m 1g+2m 1g+3g"}
PROGRESSES=${PROGRESSES:-"caller threads"}
HEALTHY=${HEALTHY:-1}
LOSSY=${LOSSY:-1}
[ "$(id -u)" -eq 0 ] || { echo "bench/degraded.sh: needs root" >&2; exit 2; }
[ -x "$perf" ] || { echo "bench/degraded.sh: $perf not found" >&2; exit 2; }
out=${RESULTS_DIR:-$here/results/$(date +%Y-%m-%d)-degraded}
mkdir -p "$out/raw" || exit 2
bed=nbd$$
bed=${bed:0:8}
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; netbed_down "$bed"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
unset COLLX_IFNAME NCCL_SOCKET_IFNAME COLLX_MERGE COLLX_NSTREAMS COLLX_PROGRESS COLLX_SPEED_MBPS COLLX_FAILOVER

env_of() { # config -> the settings that make it
  case $1 in
    1g) echo "COLLX_IFNAME==eth0" ;;
    3g) echo "COLLX_IFNAME==eth3" ;;
    1g+50m) echo "COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1" ;;
    1g+2m) echo "COLLX_IFNAME==eth0,eth2 COLLX_MERGE=eth0+eth2" ;;
    1g+3g) echo "COLLX_IFNAME==eth0,eth3 COLLX_MERGE=eth0+eth3" ;;
  esac
}

# run LABEL PLUGIN OPTS ENV...: server on host 0, client on host 1.
run() {
  local label=$1 plugin=$2 opts=$3 popt=()
  shift 3
  [ -n "$plugin" ] && popt=(--plugin "$plugin")
  ip netns exec "$(netbed_ns "$bed" 0)" env "$@" /usr/bin/time -f '%U %S' -o "$out/raw/$label.srv.cpu" \
    "$perf" "${popt[@]}" --listen -p 18652 --timeout 60 >"$out/raw/$label.srv" 2>&1 &
  srv=$!
  ip netns exec "$(netbed_ns "$bed" 1)" env "$@" /usr/bin/time -f '%U %S' -o "$out/raw/$label.cpu" \
    "$perf" "${popt[@]}" "$(netbed_addr 0 0)" -p 18652 \
    $opts -d 8 -t "$SECS" --timeout 60 >"$out/raw/$label.txt" 2>&1 ||
    echo "bench/degraded.sh: $label failed (raw/$label.txt)" >&2
  wait "$srv"; srv=
}
gbps() { awk -v s="${2:-1048576}" '$1 == s && NF >= 3 {v = $3} END {print v}' "$1"; }
# Processor seconds of both ends per GB the run moved: cpu_per_gb LABEL SIZE
cpu_per_gb() {
  local it cpu
  it=$(awk -v s="$2" '$1 == s && NF >= 3 {v = $2} END {print v + 0}' "$out/raw/$1.txt")
  cpu=$(cat "$out/raw/$1.cpu" "$out/raw/$1.srv.cpu" 2>/dev/null | awk 'NF == 2 {t += $1 + $2} END {print t + 0}')
  awk -v c="$cpu" -v n="$it" -v s="$2" 'BEGIN {if (n > 0) printf "%.2f", c / (n * s / 1e9); else print "-"}'
}

netbed_up "$bed" 2 4 1gbit 50mbit 2mbit 3gbit || exit 2
{
  echo "# A merged device with a slow member: 1 MiB messages, 8 in flight, in-order completion"
  echo
  echo "$(date '+%Y-%m-%d %H:%M %Z'), $(nproc) cores, $(uname -r); \`bench/degraded.sh\`, $RUNS alternating runs of ${SECS} s."
  echo
  echo "| run | progress | config | plugin | GB/s | of reference | slow-member WARNs |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$out/table.md"
declare -A ref ref3
for ((k = 1; k <= RUNS; k++)); do
  for progress in $PROGRESSES; do
    for cfg in $CONFIGS; do
      for ((p = 0; p < ${#plugins[@]}; p++)); do
        label="$cfg-$progress-p$p-$k"
        # shellcheck disable=SC2046 # the settings are words on purpose
        run "$label" "${plugins[$p]}" "-s 1M --in-order" $(env_of "$cfg") COLLX_PROGRESS=$progress
        bw=$(gbps "$out/raw/$label.txt")
        [ "$cfg" = 1g ] && ref[$p]=$bw
        [ "$cfg" = 3g ] && ref3[$p]=$bw
        r=${ref[$p]:-}
        [ "$cfg" = 3g ] && r=0.375 # its nominal 3 Gb/s in GB/s
        [ "$cfg" = 1g+3g ] && r=$(awk -v a="${ref[$p]:-}" -v b="${ref3[$p]:-}" \
          'BEGIN {if (a > 0 && b > 0) print a + b; else print 0.5}') # measured alone, else nominal
        warns=$(cat "$out/raw/$label.txt" "$out/raw/$label.srv" | grep -c "drains only")
        printf '| %d | %s | %s | %s | %s | %s | %s |\n' "$k" "$progress" "$cfg" "${plugins[$p]:-default}" "$bw" \
          "$(awk -v v="$bw" -v r="$r" 'BEGIN {if (r > 0 && v != "") printf "%.2f", v / r; else print "-"}')" \
          "$warns" >>"$out/table.md"
      done
    done
  done
done
netbed_down "$bed"

# ---- a lossy member ------------------------------------------------------------
if [ "$LOSSY" = 1 ]; then
  netbed_up "$bed" 2 2 1gbit 1gbit || exit 2
  ip netns exec "$(netbed_ns "$bed" 1)" nft -f - <<'EOF' || exit 2
table inet collx_lossy {
  chain in { type filter hook input priority 0; iifname "eth1" numgen random mod 100 < 30 drop; }
  chain out { type filter hook output priority 0; oifname "eth1" numgen random mod 100 < 30 drop; }
}
EOF
  {
    echo
    echo "## A lossy member: eth1 drops 30% of its packets each way, 1 MiB in order, ${SECS} s"
    echo
    echo "| run | plugin | 1g alone GB/s | 1g+lossy GB/s | of 1g alone | paths lost (both ends) | the client's control sockets given up / back |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
  } >>"$out/table.md"
  for ((k = 1; k <= RUNS; k++)); do
    for ((p = 0; p < ${#plugins[@]}; p++)); do
      run "lossy-alone-p$p-$k" "${plugins[$p]}" "-s 1M --in-order" COLLX_IFNAME==eth0
      run "lossy-merged-p$p-$k" "${plugins[$p]}" "-s 1M --in-order -v" COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1
      a=$(gbps "$out/raw/lossy-alone-p$p-$k.txt") m=$(gbps "$out/raw/lossy-merged-p$p-$k.txt")
      logs=("$out/raw/lossy-merged-p$p-$k.txt" "$out/raw/lossy-merged-p$p-$k.srv")
      printf '| %d | %s | %s | %s | %s | %s | %s / %s |\n' "$k" "${plugins[$p]:-default}" "$a" "$m" \
        "$(awk -v v="$m" -v r="$a" 'BEGIN {if (r > 0 && v != "") printf "%.2f", v / r; else print "-"}')" \
        "$(cat "${logs[@]}" | grep -c 'lost the path')" "$(cat "${logs[@]}" | grep -c 'control socket . given up')" \
        "$(cat "${logs[@]}" | grep -c 'control socket . is back')" >>"$out/table.md"
    done
  done
  netbed_down "$bed"
fi
[ "$HEALTHY" = 1 ] || { cat "$out/table.md"; exit 0; }

# ---- a healthy merged device: what the change costs -------------------------
netbed_up "$bed" 2 2 || exit 2
{
  echo
  echo "## A healthy merged device: two NICs without a rate limit, COLLX_FAILOVER=1 (default progress)"
  echo
  echo "| run | plugin | 64 KiB GB/s | 1 MiB GB/s | 1 MiB in order GB/s | 64 KiB cpu s/GB | 1 MiB cpu s/GB |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >>"$out/table.md"
m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1)
for ((k = 1; k <= RUNS; k++)); do
  for ((p = 0; p < ${#plugins[@]}; p++)); do
    run "healthy64k-p$p-$k" "${plugins[$p]}" "-s 64K" "${m[@]}"
    run "healthy1m-p$p-$k" "${plugins[$p]}" "-s 1M" "${m[@]}"
    run "healthy1mio-p$p-$k" "${plugins[$p]}" "-s 1M --in-order" "${m[@]}"
    printf '| %d | %s | %s | %s | %s | %s | %s |\n' "$k" "${plugins[$p]:-default}" \
      "$(gbps "$out/raw/healthy64k-p$p-$k.txt" 65536)" "$(gbps "$out/raw/healthy1m-p$p-$k.txt")" \
      "$(gbps "$out/raw/healthy1mio-p$p-$k.txt")" "$(cpu_per_gb "healthy64k-p$p-$k" 65536)" \
      "$(cpu_per_gb "healthy1m-p$p-$k" 1048576)" >>"$out/table.md"
  done
done
cat "$out/table.md"
