#!/usr/bin/env bash
# NIC failover inside a merged device (COLLX_FAILOVER), across two hosts of
# the cluster in a box (tests/netbed/netbed.sh), each with two 1 Gbit/s
# NICs merged into one device, collx-perf moving 1 MiB messages both ways
# with every byte and the order of the messages checked (--check):
#   1. one member's link goes down mid-run, either of them (the first
#      carries the control socket, the second its spare): both ends finish
#      with every message right, each sender WARNs once naming the lost
#      path and the peer, and the other NIC carries the rest; the same
#      with 128 KiB messages, done once written from kept copies, and with
#      4 KiB messages, which travel on the control sockets themselves;
#   2. a member down for 3 s and back up carries traffic again, its
#      control socket too: a loss of the other member after it is survived
#      (and two flaps in turn, then a loss); a member's packets dropped by
#      nftables instead of its link going down; 30% of a member's packets
#      dropped for 6 s (in order, as NCCL completes), then the other member
#      lost: every control socket given up on the lossy member came back;
#      the same loss with messages completed as they come: chunks left in
#      the lossy member's sockets go out again on the other; a member
#      dropping everything while the comm is made, or down then: the
#      connection comes up without it (a WARN) instead of taking it for a
#      dead host, and takes it back once it answers; a member set down
#      before the plugin starts is taken as one and used once it is up;
#   3. with COLLX_FAILOVER=0 the same loss fails the run;
#   4. every member down: both ends fail with an error naming the peer
#      within COLLX_TIMEOUT (plus the tick that notices it).
# Root only: exit 77 (skip) when not root or when namespaces cannot be made.
# Runs from the build directory; COLLX_PERF may point elsewhere.
set -u
here=/work/main/tests/netbed
. "$here/netbed.sh"
perf=${COLLX_PERF:-./collx-perf}
info=${COLLX_INFO:-./collx-info}

netbed_test_start "$perf"

bed=nbf$$
bed=${bed:0:8}
tmp=$(mktemp -d /tmp/collx-failover.XXXXXX) || exit 1
srv=
cleanup() {
  [ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
  netbed_down "$bed"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0 perf_opts=
check() { # ok(0/1) description
  if [ "$1" -eq 0 ]; then echo "PASS: $2"; pass=$((pass + 1)); else echo "FAIL: $2"; fail=$((fail + 1)); fi
}

# eth0 and eth1 make the merged device; eth2 carries collx-perf's own
# bootstrap connection, which must outlive the NIC the test takes away.
if ! netbed_up "$bed" 2 3 1gbit 1gbit 2>"$tmp/err"; then
  echo "SKIP: cannot make network namespaces here: $(cat "$tmp/err")"; exit 77
fi
PORT=18651
ns0=$(netbed_ns "$bed" 0) ns1=$(netbed_ns "$bed" 1)

# run LABEL SECS AT ACTION ENV...: collx-perf server on host 0, client on
# host 1, 1 MiB messages both ways, 8 in flight, checked, for SECS s;
# ACTION (a shell function) runs AT seconds in.  Sets crc, src (exit
# codes), secs (the client's wall time) and after0/after1 (bytes host 1's
# eth0/eth1 sent after the action).  perf_opts: more options for both ends;
# cli_env: more settings (NAME=value ...) for the client only; msg_size:
# the message size (default 1M).
run() {
  local label=$1 dur=$2 at=$3 action=$4 t0 b0
  shift 4
  ip netns exec "$ns0" env "$@" timeout 90 "$perf" $perf_opts --call-waits --listen -p $PORT --timeout 30 >"$tmp/$label.srv" 2>&1 &
  srv=$!
  t0=$(date +%s.%N)
  ip netns exec "$ns1" env "$@" ${cli_env:-} timeout 90 "$perf" $perf_opts --call-waits "$(netbed_addr 0 2)" -p $PORT -s "${msg_size:-1M}" -d 8 --bidir --check \
    -t "$dur" --timeout 30 >"$tmp/$label.cli" 2>&1 &
  local cli=$!
  sleep "$at"
  b0=$(netbed_bytes "$bed" 1 0 tx) b1=$(netbed_bytes "$bed" 1 1 tx)
  $action
  wait "$cli"; crc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  wait "$srv"; src=$?; srv=
  netbed_longest "$tmp" "$label"
  after0=$(($(netbed_bytes "$bed" 1 0 tx) - b0)) after1=$(($(netbed_bytes "$bed" 1 1 tx) - b1))
}
after_bytes() { if [ "$1" -eq 0 ]; then echo "$after0"; else echo "$after1"; fi; }
show() { netbed_show "$tmp" "$1"; }
warns() { cat "$tmp/$1.cli" "$tmp/$1.srv" | grep -c "lost the path" ; }

merged=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_FAILOVER_MS=1000)
nic_down() { netbed_nic_down "$bed" 1 "$1"; }
eth1_drop() {
  ip netns exec "$ns1" nft -f - <<'EOF'
table inet collx_failover {
  chain in { type filter hook input priority 0; iifname "eth1" drop; }
  chain out { type filter hook output priority 0; oifname "eth1" drop; }
}
EOF
}
eth1_undrop() { ip netns exec "$ns1" nft delete table inet collx_failover 2>/dev/null; }
all_down() { netbed_nic_down "$bed" 1 0; netbed_nic_down "$bed" 1 1; }
all_up() { netbed_nic_up "$bed" 1 0; netbed_nic_up "$bed" 1 1; }

# ---- 1 and 2: one member lost, in both progress modes -----------------------
# eth1 carries data streams and the spare control socket; eth0 the first
# control socket too.
# Under a sanitizer (the CI's stages set COLLX_FAULTS_SCALE) each run is
# several times slower: the cases that add no code path (caller progress,
# a second member coming back, nftables, the off switch) run in the plain
# build only.
sanitized=0
[ "${COLLX_FAULTS_SCALE:-1}" -gt 1 ] && sanitized=1
modes="threads caller" back_nics="1 0"
[ $sanitized -eq 1 ] && modes=threads back_nics=0
# ---- 2b. losses in turn, each after the last member came back ---------------
# The control sockets come back with their path, so a member that flapped
# can carry the comm alone when the other is lost next.  ctrl_back N: both
# of the client's comms (--bidir) have control socket N back.
ctrl_back() { [ "$(grep -c "control socket $1 is back" "$tmp/$2.cli")" -ge 2 ]; }
flap_wait() { # nic label: down 3 s, up, then wait until its control socket and streams are back
  nic_down "$1"
  sleep 3
  netbed_nic_up "$bed" 1 "$1"
  local waited=0
  until { ctrl_back "$1" "$2" && grep -q "path eth$1 to .* is back in use" "$tmp/$2.cli"; } || [ $waited -ge 60 ]; do
    sleep 0.1; waited=$((waited + 1))
  done
  echo "$waited" >>"$tmp/$2.waits"
}
flap0_lose1() { flap_wait 0 turn01; nic_down 1; }
flap0_flap1_lose0() { flap_wait 0 turn010; flap_wait 1 turn010; nic_down 0; }
turn_case() { # label action secs what
  perf_opts=-v run "$1" "$3" 2 "$2" "${merged[@]}"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1)     "$4: every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show "$1"
  check $(grep -q "is back (from byte" "$tmp/$1.cli" && ! grep -q "control connection is lost" "$tmp/$1.cli" "$tmp/$1.srv"     && echo 0 || echo 1) "$4: the control sockets came back each time ($(grep -c 'is back (from byte' "$tmp/$1.cli") on the client)"
  all_up
}
turn_case turn01 flap0_lose1 12 "eth0 down 3 s and back, then eth1 lost"
for i in $(seq ${REPS:-3}); do
  turn_case turn01 flap0_lose1 12 "eth0 down 3 s and back, then eth1 lost"
  netbed_longest "$tmp" turn01
  cp "$tmp/turn01.cli" /tmp/lx/t01-$i.cli; cp "$tmp/turn01.srv" /tmp/lx/t01-$i.srv
done
echo "$pass passed, $fail failed"
