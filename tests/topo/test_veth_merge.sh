#!/bin/sh
# Live check of NIC merging (issue 3): a merged device's traffic leaves
# through every member interface.
#
# Two network namespaces, A and B, joined by two veth pairs (v0: 10.231.0.1
# <-> 10.231.0.2, v1: 10.231.1.1 <-> 10.231.1.2; /24 each, only inside the
# namespaces, IPv6 off so the links carry no chatter).  collx-perf --listen
# runs in A, collx-perf 10.231.0.1 in B, and the byte counters of the veths
# (read inside the namespaces: sysfs shows the reader's namespace) say where
# the data went:
#   1. COLLX_MERGE=v0+v1 (explicit), COLLX_NSTREAMS=4, --bidir, with stream
#      threads and with COLLX_PROGRESS=caller: both sides see one device
#      v0+v1, and in each direction each member carries at least 25% of the
#      bytes, together at least the bytes moved;
#   2. COLLX_MERGE=none, COLLX_IFNAME==v0: everything on v0, v1 carries less
#      than 1% of v0's bytes;
#   3. COLLX_MERGE=auto with COLLX_TOPO_XML=tests/topo/veth-topo.xml (a
#      hand-written topology with NICs v0 and v1 below one PCIe switch):
#      collx-info --topology shows the merge, and the live run stripes as
#      in 1.  Without the file the veths are virtual NICs with no place in
#      the topology, and auto leaves them apart (checked with collx-info).
# Root only: exit 77 (skip) when not root or when namespaces or veths cannot
# be made.  Runs from the build directory; COLLX_PERF, COLLX_INFO and
# COLLX_VETH_XML may point elsewhere.  Prints PASS/FAIL per check and
# "N passed, N failed"; exit 0 only when all pass.
perf=${COLLX_PERF:-./collx-perf}
info=${COLLX_INFO:-./collx-info}
xml=${COLLX_VETH_XML:-${srcdir:-.}/tests/topo/veth-topo.xml}

SIZE=1048576 # -s 1M
ITERS=300    # -n 300: 300 MiB each way per run
PORT=18631
# Messages in flight (-d).  One: every 1 MiB message is still striped over
# all four streams (256 KiB chunks), and collx-perf then tests its receives
# in order.  With more in flight collx-perf completes receives out of order,
# and a stream that lags by 32 messages makes the plugin's irecv fail with
# "more than 32 requests outstanding" while only depth-1 are (reported;
# COLLX_VETH_DEPTH=8 reproduces it here now and then, mostly in the auto run
# whose threads are not pinned).
DEPTH=${COLLX_VETH_DEPTH:-1}

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: test_veth_merge needs root (network namespaces)"
  exit 77
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "SKIP: no ip command (iproute2)"
  exit 77
fi
for f in "$perf" "$info"; do
  if [ ! -x "$f" ]; then
    echo "FAIL: $f not found (run from the build directory)"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
if [ ! -r "$xml" ]; then
  echo "FAIL: $xml not found (set srcdir or COLLX_VETH_XML)"
  echo "0 passed, 1 failed"
  exit 1
fi
# The settings under test are set per run; nothing from the caller leaks in.
unset COLLX_IFNAME NCCL_SOCKET_IFNAME COLLX_MERGE COLLX_NSTREAMS COLLX_TOPO_XML HWLOC_XMLFILE COLLX_PROGRESS \
  COLLX_CPU_AFFINITY COLLX_SOCKET_FAMILY COLLX_SPEED_MBPS COLLX_PLUGIN

A=cxvA$$
B=cxvB$$
tmp=$(mktemp -d /tmp/collx-veth.XXXXXX) || exit 1
srv=
cleanup() {
  if [ -n "$srv" ]; then
    kill "$srv" 2>/dev/null
    wait "$srv" 2>/dev/null
  fi
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "$A" 2>"$tmp/err" || ! ip netns add "$B" 2>>"$tmp/err"; then
  echo "SKIP: ip netns is not usable here: $(cat "$tmp/err")"
  exit 77
fi
setup() {
  for n in "$A" "$B"; do
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
      net.ipv6.conf.default.disable_ipv6=1 || return 1
  done
  ip -n "$A" link add v0 type veth peer name v0 netns "$B" &&
    ip -n "$A" link add v1 type veth peer name v1 netns "$B" &&
    ip -n "$A" addr add 10.231.0.1/24 dev v0 &&
    ip -n "$A" addr add 10.231.1.1/24 dev v1 &&
    ip -n "$B" addr add 10.231.0.2/24 dev v0 &&
    ip -n "$B" addr add 10.231.1.2/24 dev v1 || return 1
  for n in "$A" "$B"; do
    for i in lo v0 v1; do ip -n "$n" link set "$i" up || return 1; done
  done
}
if ! setup 2>"$tmp/err"; then
  echo "SKIP: cannot set up veth pairs between namespaces: $(cat "$tmp/err")"
  exit 77
fi

pass=0
fail=0
check() { # ok(0/1) description
  if [ "$1" -eq 0 ]; then
    echo "PASS: $2"
    pass=$((pass + 1))
  else
    echo "FAIL: $2"
    fail=$((fail + 1))
  fi
}

# counter NS IF tx|rx
counter() {
  ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3_bytes" 2>/dev/null || echo 0
}
# Snapshot of the four counters that matter: what A and B send on v0, v1.
snap() { # prefix
  for n in A B; do
    eval "ns=\$$n"
    for i in v0 v1; do
      eval "${1}_${n}_${i}=$(counter "$ns" "$i" tx)"
    done
  done
}

# perf LABEL ENV...: one client/server run with ENV on both sides; sets
# d_A_v0 d_A_v1 d_B_v0 d_B_v1 (bytes each side sent per veth) and perf_rc.
perf_run() {
  label=$1
  shift
  snap b
  ip netns exec "$A" env "$@" timeout 60 "$perf" --listen -p $PORT --timeout 20 \
    >"$tmp/$label.srv" 2>&1 &
  srv=$!
  ip netns exec "$B" env "$@" timeout 60 "$perf" 10.231.0.1 -p $PORT -s 1M -n $ITERS -d "$DEPTH" \
    $PERF_ARGS --timeout 20 >"$tmp/$label.cli" 2>&1
  crc=$?
  wait "$srv"
  src=$?
  srv=
  snap e
  for k in A_v0 A_v1 B_v0 B_v1; do
    eval "d_$k=\$((e_$k - b_$k))"
  done
  perf_rc=0
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then perf_rc=1; fi
  check $perf_rc "$label: collx-perf client (exit $crc) and server (exit $src) succeed"
  if [ $perf_rc -ne 0 ]; then
    echo "  client output:"; sed 's/^/    /' "$tmp/$label.cli" | tail -15
    echo "  server output:"; sed 's/^/    /' "$tmp/$label.srv" | tail -15
  fi
  echo "  $label: bytes sent  A->B v0 $d_A_v0  v1 $d_A_v1 | B->A v0 $d_B_v0  v1 $d_B_v1"
}

# devices LABEL NAME: both sides report device NAME.
devices_are() {
  line=$(grep 'Devices' "$tmp/$1.cli" | head -1)
  case $line in
    *"client #0 $2 ("*"server $2 ("*) ok=0 ;;
    *) ok=1 ;;
  esac
  check $ok "$1: both sides use device $2 (${line# *: })"
}

# striped LABEL DIR BYTES_V0 BYTES_V1: each member >= 25%, sum >= moved.
striped() {
  total=$(($3 + $4))
  moved=$((SIZE * ITERS))
  if [ "$total" -gt 0 ]; then
    s0=$(($3 * 1000 / total))
    s1=$(($4 * 1000 / total))
  else
    s0=0
    s1=0
  fi
  share="v0 $(($s0 / 10)).$(($s0 % 10))%, v1 $(($s1 / 10)).$(($s1 % 10))% of $total bytes"
  ok=1
  [ "$s0" -ge 250 ] && [ "$s1" -ge 250 ] && ok=0
  check $ok "$1 $2: every member carries >= 25% ($share)"
  ok=1
  [ "$total" -ge "$moved" ] && ok=0
  check $ok "$1 $2: members together carry >= the $moved bytes moved ($total)"
}

# ---- 1. explicit merge, both directions, either way of moving the bytes -----
PERF_ARGS=--bidir
for progress in threads caller; do
  perf_run explicit-$progress COLLX_IFNAME==v0,v1 COLLX_MERGE=v0+v1 COLLX_NSTREAMS=4 COLLX_PROGRESS=$progress
  devices_are explicit-$progress v0+v1
  striped explicit-$progress "B->A" "$d_B_v0" "$d_B_v1"
  striped explicit-$progress "A->B" "$d_A_v0" "$d_A_v1"
done

# ---- 2. no merge, v0 only ---------------------------------------------------
PERF_ARGS=--bidir
perf_run single COLLX_IFNAME==v0 COLLX_MERGE=none COLLX_NSTREAMS=4
devices_are single v0
for dir in "B->A B" "A->B A"; do
  set -- $dir
  eval "on=\$d_${2}_v0 off=\$d_${2}_v1"
  ok=1
  [ "$on" -ge $((SIZE * ITERS)) ] && ok=0
  check $ok "single $1: v0 carries >= the $((SIZE * ITERS)) bytes moved ($on)"
  ok=1
  [ $((off * 100)) -lt "$on" ] && ok=0
  check $ok "single $1: v1 carries < 1% of v0's bytes ($off vs $on)"
done

# ---- 3. COLLX_MERGE=auto from a topology file --------------------------------
# Twice: with libxml2 (collx-info links hwloc normally) and with hwloc's
# minimalistic parser, the only one a plugin dlopened RTLD_LOCAL gets (hwloc
# cannot load its libxml2 component there).
for parser in libxml2 minimal; do
  lx=1
  [ $parser = minimal ] && lx=0
  out=$(HWLOC_LIBXML_IMPORT=$lx COLLX_MERGE=auto "$info" --topology "$xml" --ifaces v0,v1 2>&1)
  ok=1
  printf '%s\n' "$out" | grep -q '^device 0  v0+v1$' &&
    ! printf '%s\n' "$out" | grep -q '^device 1' && ok=0
  check $ok "collx-info --topology $(basename "$xml") --ifaces v0,v1, COLLX_MERGE=auto, $parser XML parser: one device v0+v1"
  [ $ok -ne 0 ] && printf '%s\n' "$out" | sed 's/^/    /'
done

# The same veths without the file: virtual NICs, nothing to share, apart.
out=$(ip netns exec "$A" env COLLX_IFNAME==v0,v1 COLLX_MERGE=auto "$info" 2>&1)
ok=1
printf '%s\n' "$out" | grep -Eq '^0 +v0 ' && printf '%s\n' "$out" | grep -Eq '^1 +v1 ' && ok=0
check $ok "COLLX_MERGE=auto without a topology file leaves the virtual v0 and v1 apart"
[ $ok -ne 0 ] && printf '%s\n' "$out" | sed 's/^/    /'

PERF_ARGS=
perf_run auto COLLX_IFNAME==v0,v1 COLLX_MERGE=auto "COLLX_TOPO_XML=$xml" COLLX_NSTREAMS=4
devices_are auto v0+v1
striped auto "B->A" "$d_B_v0" "$d_B_v1"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
