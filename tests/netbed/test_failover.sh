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
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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

for progress in $modes; do
  for nic in 1 0; do
    other=$((1 - nic))
    label=down$nic-$progress
    run "$label" 6 2 "nic_down $nic" "${merged[@]}" COLLX_PROGRESS=$progress
    check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
      "eth$nic down, $progress: every message right on both ends (client exit $crc, server $src, ${secs}s)"
    [ $crc -ne 0 ] || [ $src -ne 0 ] && show "$label"
    n=$(warns "$label")
    check $([ "$n" -ge 1 ] && [ "$n" -le 2 ] && echo 0 || echo 1) "eth$nic down, $progress: one WARN per sender ($n)"
    w=$(grep -h "lost the path" "$tmp/$label.cli" | head -1)
    check $(printf '%s' "$w" | grep -q "eth$nic to $(netbed_addr 0 "$nic")" && printf '%s' "$w" | grep -q "$(netbed_addr 0 0)" \
      && echo 0 || echo 1) "eth$nic down, $progress: the client's WARN names its NIC, the peer's address on it and the peer: ${w#*NET/collx }"
    # Twice the 8 MiB host 1 has in flight: sends went on after the loss.
    check $([ "$(after_bytes "$other")" -gt $((16 << 20)) ] && echo 0 || echo 1) \
      "eth$nic down, $progress: eth$other carried the rest ($(after_bytes "$other") B after the loss)"
    netbed_nic_up "$bed" 1 "$nic"
  done
done

# ---- 1b. small sends done once written -------------------------------------
# 128 KiB messages (above COLLX_EAGER_SIZE, so on the data streams) are
# done once written, from a copy kept until the
# receiver confirms them (COLLX_FAILOVER_COPY): the chunks a lost path held
# go out again from the copies, the caller having its buffers back.
kept_count() { grep -h "send connection .* done once written from a kept copy" "$tmp/$1.cli" | grep -oE '[0-9]+ done once written' | awk '{n += $1} END {print n + 0}'; }
for progress in $modes; do
  label=small0-$progress
  msg_size=128K perf_opts=-v run "$label" 6 2 "nic_down 0" "${merged[@]}" COLLX_PROGRESS=$progress
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
    "eth0 down, 128 KiB messages, $progress: every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show "$label"
  check $([ "$(kept_count "$label")" -gt 0 ] && echo 0 || echo 1) \
    "eth0 down, 128 KiB messages, $progress: the client's sends were done once written ($(kept_count "$label") from kept copies)"
  netbed_nic_up "$bed" 1 0
done

# ---- 1c. eager messages through the control channel --------------------------
# 4 KiB messages travel on the control socket itself, the spare written in
# batches (COLLX_CTRL_SPARE_BATCH): a message is done once the first socket
# took it, and the batch the spare lacks when eth0 goes must reach the
# receiver from the writer's history, in order.  64 KiB messages made eager
# (COLLX_EAGER_SIZE; a merged device's default stops at 16 KiB) fill the
# history with a batch and one whole message (threads only: the same code
# path in either mode).
eager_count() { grep -h "send connection .* closed:" "$tmp/$1.cli" | grep -oE '[0-9]+ eager' | awk '{n += $1} END {print n + 0}'; }
for progress in $modes; do
  for kib in 4 64; do
    [ $kib = 64 ] && [ $progress != threads ] && continue
    label=eager$kib-$progress
    msg_size=${kib}K perf_opts=-v run "$label" 6 2 "nic_down 0" "${merged[@]}" COLLX_PROGRESS=$progress \
      COLLX_EAGER_SIZE=$((kib << 10))
    check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
      "eth0 down, $kib KiB eager messages, $progress: every message right on both ends (client exit $crc, server $src, ${secs}s)"
    [ $crc -ne 0 ] || [ $src -ne 0 ] && show "$label"
    check $([ "$(eager_count "$label")" -gt 0 ] && echo 0 || echo 1) \
      "eth0 down, $kib KiB eager messages, $progress: they went eagerly ($(eager_count "$label") by the client)"
    netbed_nic_up "$bed" 1 0
  done
done

# ---- 2. a member that comes back is used again ------------------------------
# The client's sender says (INFO, hence -v) when the path is back in use.
# From that moment to the end of the run the returning NIC must carry a
# fair part of what host 1 sends: a fraction of the other NIC's bytes, not
# a byte count, since a sanitizer on a loaded machine moves few MB/s.
rejoin_line() { grep -m1 "send connection .*the path eth$1 to .* is back in use" "$tmp/back$1.cli"; }
flap() { # nic: down now, up 3 s later; sets b_nic/b_other when the client uses it again
  nic_down "$1"
  sleep 3
  netbed_nic_up "$bed" 1 "$1"
  local waited=0
  until rejoin_line "$1" >/dev/null || [ $waited -ge 50 ]; do sleep 0.1; waited=$((waited + 1)); done
  rejoin_after=$(awk -v w=$waited 'BEGIN {printf "%.1f", w / 10}')
  "$info" --stats all --json >"$tmp/back$1.stats" 2>&1 # what a user sees now (/dev/shm is shared)
  b_nic=$(netbed_bytes "$bed" 1 "$1" tx) b_other=$(netbed_bytes "$bed" 1 $((1 - $1)) tx)
}
for nic in $back_nics; do
  perf_opts=-v run "back$nic" 12 2 "flap $nic" "${merged[@]}"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
    "eth$nic down for 3 s and back: every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show "back$nic"
  check $(rejoin_line "$nic" >/dev/null && echo 0 || echo 1) \
    "eth$nic down for 3 s and back: the client's sender uses it again ${rejoin_after}s after the link is up"
  counted=$(python3 -c '
import json, sys
procs = json.load(open(sys.argv[1]))
print(sum(1 for p in procs for c in p["conns"] if c["role"] == "send" and c["paths_lost"] >= 1 and c["paths_rejoined"] >= 1))
' "$tmp/back$nic.stats" 2>/dev/null)
  check $([ "${counted:-0}" -ge 1 ] && echo 0 || echo 1) \
    "eth$nic down for 3 s and back: collx-info --stats shows a send connection with a path lost and rejoined (${counted:-0})"
  again=$(($(netbed_bytes "$bed" 1 "$nic" tx) - b_nic)) other=$(($(netbed_bytes "$bed" 1 $((1 - nic)) tx) - b_other))
  check $([ "$again" -gt $((1 << 20)) ] && [ "$again" -ge $((other / 4)) ] && echo 0 || echo 1) \
    "eth$nic down for 3 s and back: from then on it carries its part ($again B, eth$((1 - nic)) $other B)"
done

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
[ $sanitized -eq 0 ] && turn_case turn010 flap0_flap1_lose0 20 "eth0 then eth1 down 3 s and back, then eth0 lost"

# ---- 2c. a lossy member, then the loss of the other ---------------------------
# 30% of eth1's packets dropped each way for 6 s: its control sockets may
# be given up while its streams hold on.  Such a socket comes back (its
# path is given up and returns whole), so once the loss is over and every
# control socket given up is back, eth0 may go.
eth1_lossy() {
  ip netns exec "$ns1" nft -f - <<'EOF'
table inet collx_lossy {
  chain in { type filter hook input priority 0; iifname "eth1" numgen random mod 100 < 30 drop; }
  chain out { type filter hook output priority 0; oifname "eth1" numgen random mod 100 < 30 drop; }
}
EOF
}
eth1_lossless() { ip netns exec "$ns1" nft delete table inet collx_lossy 2>/dev/null; }
# Control sockets 1 given up and back, on both ends: "given back" when
# every one given up came back.
ctrl1_given_up() { cat "$tmp/$1.cli" "$tmp/$1.srv" | grep -c "control socket 1 given up"; }
ctrl1_back() { cat "$tmp/$1.cli" "$tmp/$1.srv" | grep -c "control socket 1 is back"; }
# Each sender's losses of eth1, and its returns (after a back-off).
eth1_lost() { cat "$tmp/$1.cli" "$tmp/$1.srv" | grep -c "lost the path eth1 "; }
eth1_back() { cat "$tmp/$1.cli" "$tmp/$1.srv" | grep -c "path eth1 to .* is back in use"; }
eth1_lossy_6s() { eth1_lossy; sleep 6; eth1_lossless; }
lossy1_lose0() {
  eth1_lossy
  sleep 6
  eth1_lossless
  # A stream stalled during the loss can still be declared lost up to
  # COLLX_FAILOVER_MS (and a backed-off retransmission) after it: every
  # socket back is believed only once no new loss came for 2 s.
  local waited=0 stable=0 seen= now
  while [ $waited -lt 250 ]; do
    now="$(ctrl1_given_up lossy)/$(eth1_lost lossy)"
    if [ "$(ctrl1_back lossy)" -ge "$(ctrl1_given_up lossy)" ] && [ "$(eth1_back lossy)" -ge "$(eth1_lost lossy)" ] &&
      [ "$now" = "$seen" ]; then
      stable=$((stable + 1))
      [ $stable -ge 20 ] && break
    else
      stable=0
    fi
    seen=$now
    sleep 0.1; waited=$((waited + 1))
  done
  echo "$waited" >"$tmp/lossy.waits"
  nic_down 0
}

if [ $sanitized -eq 1 ]; then
  echo "SKIP: under a sanitizer: nftables and COLLX_FAILOVER=0 (the plain build runs them)"
elif command -v nft >/dev/null 2>&1; then
  perf_opts="-v --in-order" run lossy 34 2 lossy1_lose0 "${merged[@]}"
  eth1_lossless
  what="30% loss on eth1 for 6 s, then eth0 lost"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$what: every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show lossy
  check $([ "$(ctrl1_back lossy)" -ge "$(ctrl1_given_up lossy)" ] && ! grep -q "control connection is lost" "$tmp/lossy.cli" "$tmp/lossy.srv" \
    && echo 0 || echo 1) "$what: every control socket given up came back ($(ctrl1_given_up lossy) given up, $(ctrl1_back lossy) back; eth1 lost $(eth1_lost lossy) times, back $(eth1_back lossy); in $(awk '{printf "%.1f", $1 / 10}' "$tmp/lossy.waits") s)"
  all_up

  # Completed as they come (collx-perf's default), eth0's streams never run
  # out of work: a chunk left in a socket of the lossy member must go out
  # again on eth0 all the same, or its receive waits behind 256 others.
  run lossyany 12 2 eth1_lossy_6s "${merged[@]}"
  eth1_lossless
  what="30% loss on eth1 for 6 s, completed as they come"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$what: every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show lossyany

  run drop 6 2 eth1_drop "${merged[@]}"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) \
    "packets dropped (nftables): every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show drop
  check $([ "$(warns drop)" -ge 1 ] && echo 0 || echo 1) "packets dropped: the loss is WARNed ($(warns drop))"
  eth1_undrop

  # eth1 drops everything while the comm is made, for 4 s: the client's
  # streams on eth1 go unanswered for half its COLLX_CONNECT_TIMEOUT (2 s)
  # while the server, waiting 10 s for them, still answers on eth0.  The
  # host is alive: the client does not take eth1's silence for a dead host
  # but comes up without eth1 (its sockets made by eth0) and takes eth1
  # back once it passes packets again.
  eth1_drop
  perf_opts=-v cli_env=COLLX_CONNECT_TIMEOUT=2 run setupdrop 7 4 eth1_undrop "${merged[@]}" COLLX_CONNECT_TIMEOUT=10
  what="eth1 dropping everything for the first 4 s"
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$what: connected and every message right on both ends (client exit $crc, server $src, ${secs}s)"
  [ $crc -ne 0 ] || [ $src -ne 0 ] && show setupdrop
  n=$(grep -c "comes up without path 1" "$tmp/setupdrop.cli")
  check $([ "$n" -ge 1 ] && echo 0 || echo 1) "$what: the client came up without eth1 ($n connections)"
  n=$(grep -c "send connection .*the path eth1 to .* is back in use" "$tmp/setupdrop.cli")
  check $([ "$n" -ge 1 ] && echo 0 || echo 1) "$what: eth1 back in use once it passes packets ($n connections)"
  eth1_undrop
else
  echo "SKIP: no nft command: the nftables case"
fi

# ---- 2d. a member down when the connection is made -------------------------
# Host 1's eth1 cable is out when the run starts (its switch port down: the
# NIC is up without carrier, so both plugins have it in their merged
# device) and goes back in 4 s in.  The sockets on eth1 get no route or
# no answer: each connector makes them by eth0 instead (at once, or after
# half of COLLX_CONNECT_TIMEOUT), the connection comes up with eth1 given
# up and a WARN naming it, and eth1 carries traffic again once it is back.
cable() { ip -n "$bed-sw" link set h1e1 "$1"; }
cable down
perf_opts=-v run setupdown 8 4 "cable up" "${merged[@]}" COLLX_CONNECT_TIMEOUT=4
what="eth1's cable out when the connection is made"
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$what: connected and every message right on both ends (client exit $crc, server $src, ${secs}s)"
[ $crc -ne 0 ] || [ $src -ne 0 ] && show setupdown
n=$(grep -c "WARN.*lost the path eth1 to .*no answer during setup" "$tmp/setupdown.srv")
m=$(grep -c "WARN.*lost the path eth1 to .*no answer during setup" "$tmp/setupdown.cli")
check $([ "$n" -ge 1 ] && [ "$m" -ge 1 ] && echo 0 || echo 1) "$what: both ends came up without eth1, WARNed ($n, $m)"
n=$(cat "$tmp/setupdown.cli" "$tmp/setupdown.srv" | grep -c "send connection .*the path eth1 to .* is back in use")
check $([ "$n" -ge 2 ] && [ "$after1" -gt $((1 << 20)) ] && echo 0 || echo 1) \
  "$what: eth1 back in use on both ends once it is back ($n connections; $after1 B sent on it after)"
cable up

# ---- 2e. a member set down before the start ----------------------------------
# Host 1's eth1 is set down (ip link set down) before the run and up 4 s
# in.  A NIC set down keeps its IPv4 address; COLLX_MERGE names it, so the
# client's plugin takes it as a member that starts lost (an INFO says so)
# rather than leaving it out for the life of the process, and it carries
# traffic again on both ends once it is up.
nic_down 1
perf_opts=-v run initdown 8 4 "netbed_nic_up $bed 1 1" "${merged[@]}" COLLX_CONNECT_TIMEOUT=4
what="eth1 set down before the start"
check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$what: connected and every message right on both ends (client exit $crc, server $src, ${secs}s)"
[ $crc -ne 0 ] || [ $src -ne 0 ] && show initdown
n=$(grep -c "eth1 is down; COLLX_MERGE names it" "$tmp/initdown.cli")
check $([ "$n" -ge 1 ] && echo 0 || echo 1) "$what: the client's plugin took it as a member ($n)"
n=$(cat "$tmp/initdown.cli" "$tmp/initdown.srv" | grep -c "send connection .*the path eth1 to .* is back in use")
check $([ "$n" -ge 2 ] && [ "$after1" -gt $((1 << 20)) ] && echo 0 || echo 1) \
  "$what: eth1 back in use on both ends once it is up ($n connections; $after1 B sent on it after)"
all_up

# ---- 3. failover off ----------------------------------------------------------
if [ $sanitized -eq 0 ]; then
  run off 6 2 "nic_down 1" "${merged[@]}" COLLX_FAILOVER=0 COLLX_TIMEOUT=5
  check $([ $crc -ne 0 ] || [ $src -ne 0 ] && echo 0 || echo 1) \
    "COLLX_FAILOVER=0: the loss fails the run (client exit $crc, server $src, ${secs}s)"
  netbed_nic_up "$bed" 1 1
fi

# ---- 4. every member lost -------------------------------------------------------
run alldown 20 2 all_down "${merged[@]}" COLLX_TIMEOUT=5
took=$(awk -v s="$secs" 'BEGIN {printf "%.1f", s - 2}')
check $([ $crc -ne 0 ] && [ $src -ne 0 ] && echo 0 || echo 1) \
  "every member down: both ends fail (client exit $crc, server $src), ${took}s after the loss"
check $(awk -v t="$took" 'BEGIN {exit !(t < 5 + 4)}' && echo 0 || echo 1) \
  "every member down: the error comes within COLLX_TIMEOUT=5 s and the watchdog's ticks (${took}s)"
# Whichever end's plugin fails first names its peer; the other may exit
# first on collx-perf's own bootstrap connection ("has gone away").
plugin_error() { grep -h "NET/collx" "$tmp/alldown.$1" | grep -v "lost the path" | grep -iE "error|fail|every path|dead|silent" |
  grep "$2" | head -1; }
e=$(plugin_error cli "$(netbed_addr 0 0)")
[ -n "$e" ] || e=$(plugin_error srv "$(netbed_addr 1 0)")
check $([ -n "$e" ] && echo 0 || echo 1) "every member down: the error names the peer: ${e#*NET/collx }"
all_up

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
