#!/usr/bin/env bash
# A cluster in a box: hosts as network namespaces on this machine, each with
# one or more veth NICs, NIC j of every host cabled to switch j (a bridge in
# a switch namespace), each NIC optionally rate-limited with tc tbf in both
# directions.  Root only.
#
#   netbed.sh up BED HOSTS NICS [RATE0 [RATE1 ...]]
#       BED: a short name (letters and digits, at most 8); HOSTS 2..16;
#       NICS 1..4; RATEj: tbf rate of NIC j on every host ("1gbit",
#       "300mbit"; "-" or absent: no limit).  On any failure everything
#       made so far is removed and the exit status is 1.
#   netbed.sh down BED          remove the bed (every namespace named BED-*)
#   netbed.sh ns BED I          the namespace of host I
#   netbed.sh addr I J          the IPv4 address of host I's NIC J
#   netbed.sh nic-down BED I J  / nic-up BED I J: take host I's NIC J down
#                               (link down on both ends) or bring it back
#   netbed.sh list              beds present on this machine
#
# Host I's NIC J is ethJ in namespace BED-hI, address 10.(240+J).0.(I+1)/24;
# switch J is bridge brJ in namespace BED-sw.  The addresses exist only inside
# the bed's namespaces.  IPv6 is off so the links carry no chatter, and the
# per-interface byte counters (ip netns exec BED-hI cat
# /sys/class/net/ethJ/statistics/tx_bytes) count the test's traffic only.
#
# Sourced (`. netbed.sh`), it defines the same commands as functions
# netbed_up, netbed_down, ... for test scripts, which call netbed_down from
# an EXIT trap so that nothing is left behind whatever happens.
set -u

netbed_ns() { echo "$1-h$2"; }
netbed_addr() { echo "10.$((240 + $2)).0.$(($1 + 1))"; }

netbed_check_name() {
  case $1 in
    "" | *[!A-Za-z0-9]*) echo "netbed: bad bed name '$1' (letters and digits only)" >&2; return 1 ;;
  esac
  [ ${#1} -le 8 ] || { echo "netbed: bed name '$1' is longer than 8 characters" >&2; return 1; }
}

# tbf on DEV in namespace NS at RATE: the burst holds 4 ms at that rate (and
# at least 32 KiB, so a 64 KiB TSO segment still passes at low rates).
netbed_limit() { # ns dev rate
  local bits burst
  bits=$(netbed_rate_bits "$3") || return 1
  burst=$((bits / 8 / 250))
  [ $burst -lt 65536 ] && burst=65536
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 50ms
}

netbed_rate_bits() { # "300mbit" -> 300000000
  local n unit
  n=${1%%[!0-9]*}
  unit=${1#"$n"}
  [ -n "$n" ] || { echo "netbed: bad rate '$1' (e.g. 300mbit, 1gbit)" >&2; return 1; }
  case $unit in
    kbit) echo $((n * 1000)) ;;
    mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
    *) echo "netbed: bad rate unit in '$1' (kbit, mbit or gbit)" >&2; return 1 ;;
  esac
}

netbed_list() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/-sw$//p'
}

netbed_down() { # bed
  local ns
  netbed_check_name "$1" || return 1
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $ns in "$1"-h* | "$1"-sw) ip netns del "$ns" 2>/dev/null ;; esac
  done
  return 0
}

netbed_up_steps() { # bed hosts nics rates...
  local bed=$1 hosts=$2 nics=$3 i j ns
  shift 3
  local rates=("$@")
  ip netns add "$bed-sw" || return 1
  ip -n "$bed-sw" link set lo up || return 1
  for ((j = 0; j < nics; j++)); do
    ip -n "$bed-sw" link add "br$j" type bridge || return 1
    ip -n "$bed-sw" link set "br$j" up || return 1
  done
  for ((i = 0; i < hosts; i++)); do
    ns=$(netbed_ns "$bed" $i)
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
    ip -n "$ns" link set lo up || return 1
    for ((j = 0; j < nics; j++)); do
      ip -n "$ns" link add "eth$j" type veth peer name "h${i}e$j" netns "$bed-sw" || return 1
      ip -n "$ns" addr add "$(netbed_addr $i $j)/24" dev "eth$j" || return 1
      ip -n "$ns" link set "eth$j" up || return 1
      ip -n "$bed-sw" link set "h${i}e$j" master "br$j" up || return 1
      local rate=${rates[$j]:--}
      if [ "$rate" != - ]; then
        netbed_limit "$ns" "eth$j" "$rate" || return 1
        netbed_limit "$bed-sw" "h${i}e$j" "$rate" || return 1
      fi
    done
  done
}

netbed_up() { # bed hosts nics [rate...]
  local bed=${1:-} hosts=${2:-} nics=${3:-}
  netbed_check_name "$bed" || return 1
  case $hosts in "" | *[!0-9]*) echo "netbed: HOSTS must be a number" >&2; return 1 ;; esac
  case $nics in "" | *[!0-9]*) echo "netbed: NICS must be a number" >&2; return 1 ;; esac
  [ "$hosts" -ge 2 ] && [ "$hosts" -le 16 ] || { echo "netbed: HOSTS must be 2..16, not $hosts" >&2; return 1; }
  [ "$nics" -ge 1 ] && [ "$nics" -le 4 ] || { echo "netbed: NICS must be 1..4, not $nics" >&2; return 1; }
  [ "$(id -u)" -eq 0 ] || { echo "netbed: needs root (network namespaces)" >&2; return 1; }
  command -v ip >/dev/null 2>&1 || { echo "netbed: no ip command (iproute2)" >&2; return 1; }
  if [ -n "$(ip netns list 2>/dev/null | awk -v b="$bed-sw" '$1 == b')" ]; then
    echo "netbed: bed $bed exists already (netbed.sh down $bed)" >&2
    return 1
  fi
  shift 3
  if ! netbed_up_steps "$bed" "$hosts" "$nics" "$@"; then
    echo "netbed: setting up $bed failed; removing what was made" >&2
    netbed_down "$bed"
    return 1
  fi
}

netbed_nic_set() { # bed host nic up|down
  ip -n "$(netbed_ns "$1" "$2")" link set "eth$3" "$4" && ip -n "$1-sw" link set "h${2}e$3" "$4"
}
netbed_nic_down() { netbed_nic_set "$1" "$2" "$3" down; }
netbed_nic_up() { netbed_nic_set "$1" "$2" "$3" up; }

# Bytes host I has sent (tx) or received (rx) on NIC J.
netbed_bytes() { # bed host nic tx|rx
  ip netns exec "$(netbed_ns "$1" "$2")" cat "/sys/class/net/eth$3/statistics/$4_bytes" 2>/dev/null || echo 0
}

# For a failed case of a test: the last lines of both ends' logs
# (DIR/LABEL.cli and .srv), and any sanitizer report whole (an end that
# exits 66 under the CI's TSan stage has reported one).
netbed_show() { # dir label
  tail -4 "$1/$2.cli" | sed 's/^/    client: /'
  tail -4 "$1/$2.srv" | sed 's/^/    server: /'
  sed -n '/^WARNING: .*Sanitizer/,/^SUMMARY: /p; /^ERROR: .*Sanitizer/,/^SUMMARY: /p' "$1/$2.cli" "$1/$2.srv" | head -80
}

# For every case of a fault test: the longest plugin call of each kind
# that runs under the fault, and how many isend/irecv/test calls took over
# 10 ms, at both ends (collx-perf's "longest plugin call" line): what "no
# call blocks" is judged by.  With --call-waits, how many of those waited
# in the plugin, how many were only preempted, and the most processor time
# any of them used; and how many closes took over 10 ms, split the same way.
netbed_longest() { # dir label
  local end line
  for end in cli srv; do
    line=$(grep -h -m1 "longest plugin call" "$1/$2.$end" 2>/dev/null) || continue
    printf '# %s %s: %s; %s\n' "$2" "$([ $end = cli ] && echo client || echo server)" \
      "$(printf '%s' "$line" | grep -oE '(isend|irecv|test|closeSend|closeRecv) [0-9.]+ ms' | paste -sd, - | sed 's/,/, /g')" \
      "$(printf '%s' "$line" | grep -oE '[0-9]+ over 10 ms( \([^)]*\))?|closes over 10 ms: [0-9]+( \([^)]*\))?' |
        paste -sd'|' - | sed 's/|/; /g')"
  done
}

# For the tests of the bed: skip (exit 77) where no bed can be made, fail
# when collx-perf ($1) is missing, and clear the settings a caller's
# environment could bring in.
netbed_test_start() { # perf
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (network namespaces)"; exit 77; fi
  if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
    echo "SKIP: no ip or tc command (iproute2)"; exit 77
  fi
  if [ ! -x "$1" ]; then echo "FAIL: $1 not found (run from the build directory)"; echo "0 passed, 1 failed"; exit 1; fi
  unset COLLX_IFNAME NCCL_SOCKET_IFNAME COLLX_MERGE COLLX_NSTREAMS COLLX_TOPO_XML HWLOC_XMLFILE COLLX_PROGRESS \
    COLLX_CPU_AFFINITY COLLX_SOCKET_FAMILY COLLX_SPEED_MBPS COLLX_PLUGIN COLLX_FAILOVER COLLX_FAILOVER_MS COLLX_TIMEOUT
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cmd=${1:-}
  [ $# -gt 0 ] && shift
  case $cmd in
    up) netbed_up "$@" ;;
    down) netbed_down "${1:-}" ;;
    ns) netbed_ns "$@" ;;
    addr) netbed_addr "$@" ;;
    nic-down) netbed_nic_down "$@" ;;
    nic-up) netbed_nic_up "$@" ;;
    bytes) netbed_bytes "$@" ;;
    list) netbed_list ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
fi
