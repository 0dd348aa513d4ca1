#!/usr/bin/env bash
# The cluster in a box (tests/netbed/netbed.sh) and collx across its hosts:
#   1. the bed comes up and goes away without a trace, also when a step
#      fails or the bed exists already;
#   2. a merged device of two NICs rate-limited to unequal speeds (1 and
#      3 Gbit/s) splits the bytes by speed: each NIC carries its share
#      (per-interface byte counters), in both progress modes (printed only
#      under a sanitizer, where the processor sets the pace);
#   3. a single NIC's traffic stays on that NIC;
#   4. collx-perf's ring all-reduce with each of 4 ranks on its own host
#      (--netns), every element checked, every host's NIC carrying its part.
# Throughput is printed, not asserted (bench/netbed.sh measures it).
# Root only: exit 77 (skip) when not root or when namespaces cannot be made.
# Runs from the build directory; COLLX_PERF may point elsewhere.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netbed.sh"
perf=${COLLX_PERF:-./collx-perf}

netbed_test_start "$perf"

bed=nbt$$
bed=${bed:0:8}
tmp=$(mktemp -d /tmp/collx-netbed.XXXXXX) || exit 1
srv=
cleanup() {
  [ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
  netbed_down "$bed"
  netbed_down "${bed}x" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0
check() { # ok(0/1) description
  if [ "$1" -eq 0 ]; then echo "PASS: $2"; pass=$((pass + 1)); else echo "FAIL: $2"; fail=$((fail + 1)); fi
}
namespaces_of() { ip netns list | awk '{print $1}' | grep -c "^$1-" ; }

# ---- 1. life of a bed -----------------------------------------------------
lb=${bed:0:7}x
if ! netbed_up "$lb" 3 2 100mbit 2>"$tmp/err"; then
  echo "SKIP: cannot make network namespaces here: $(cat "$tmp/err")"; exit 77
fi
check $([ "$(namespaces_of "$lb")" -eq 4 ] && echo 0 || echo 1) "up: 3 hosts and a switch ($(namespaces_of "$lb") namespaces)"
q=$(ip netns exec "$(netbed_ns "$lb" 2)" tc qdisc show dev eth0)
check $(printf '%s' "$q" | grep -q 'tbf.*rate 100Mbit' && echo 0 || echo 1) "up: NIC 0 rate-limited ($q)"
q=$(ip netns exec "$(netbed_ns "$lb" 2)" tc qdisc show dev eth1)
check $(printf '%s' "$q" | grep -q tbf && echo 1 || echo 0) "up: NIC 1 without a rate has no tbf ($q)"
netbed_up "$lb" 2 1 2>"$tmp/err"
check $([ $? -ne 0 ] && grep -q "exists already" "$tmp/err" && echo 0 || echo 1) "up of an existing bed is refused: $(cat "$tmp/err")"
netbed_down "$lb"
check $([ "$(namespaces_of "$lb")" -eq 0 ] && echo 0 || echo 1) "down leaves no namespace"
netbed_up "$lb" 2 2 100mbit 3furlongs 2>"$tmp/err"
rc=$?
check $([ $rc -ne 0 ] && [ "$(namespaces_of "$lb")" -eq 0 ] && grep -q "bad rate" "$tmp/err" && echo 0 || echo 1) \
  "a step that fails (bad rate) removes what was made: $(head -1 "$tmp/err")"
killed=$(bash -c '. "$1"; netbed_up "$2" 2 1 && trap "netbed_down $2" EXIT && kill -TERM $$; sleep 5' \
  sh "$here/netbed.sh" "$lb" 2>&1)
check $([ "$(namespaces_of "$lb")" -eq 0 ] && echo 0 || echo 1) "a script killed with the bed up removes it from its EXIT trap"

# ---- 2 and 3. collx across two hosts ---------------------------------------
if ! netbed_up "$bed" 2 2 1gbit 3gbit 2>"$tmp/err"; then
  check 1 "two hosts with 1 and 3 Gbit/s NICs: $(cat "$tmp/err")"
  echo "$pass passed, $fail failed"; exit 1
fi
PORT=18641

# perf_run LABEL RUN_ARGS ENV...: collx-perf server on host 0, client on
# host 1 sends 1 MiB messages, 8 in flight; sets sent0 sent1 (bytes host 1
# sent per NIC), moved (bytes the client reports) and gbps.
perf_run() {
  local label=$1 args=$2 b0 b1 crc src
  shift 2
  b0=$(netbed_bytes "$bed" 1 0 tx) b1=$(netbed_bytes "$bed" 1 1 tx)
  ip netns exec "$(netbed_ns "$bed" 0)" env "$@" timeout 60 "$perf" --listen -p $PORT --timeout 20 >"$tmp/$label.srv" 2>&1 &
  srv=$!
  # shellcheck disable=SC2086 # the run arguments are words on purpose
  ip netns exec "$(netbed_ns "$bed" 1)" env "$@" timeout 60 "$perf" "$(netbed_addr 0 0)" -p $PORT -s 1M -d 8 $args \
    --timeout 20 >"$tmp/$label.cli" 2>&1
  crc=$?
  wait "$srv"; src=$?; srv=
  sent0=$(($(netbed_bytes "$bed" 1 0 tx) - b0)) sent1=$(($(netbed_bytes "$bed" 1 1 tx) - b1))
  gbps=$(awk '$1 == 1048576 {print $3 * 8}' "$tmp/$label.cli")
  moved=$(awk '$1 == 1048576 {print $1 * $2}' "$tmp/$label.cli")
  check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "$label: collx-perf client (exit $crc) and server (exit $src)"
  [ $crc -ne 0 ] && tail -5 "$tmp/$label.cli" | sed 's/^/    /'
  echo "  $label: host 1 sent eth0 $sent0 B, eth1 $sent1 B; ${gbps:-?} Gb/s"
}

for progress in threads caller; do
  # Time-based (-t): the run the unbounded socket queues once split 50/50 in
  # caller progress (each socket took its turn of chunks, however slowly its
  # NIC drained them); a fixed count of 300 messages often hid it.
  perf_run "merged-$progress" "-t 2" COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_PROGRESS=$progress
  total=$((sent0 + sent1))
  share1=$(( total > 0 ? sent1 * 100 / total : 0 ))
  # 3 of 4 Gbit/s: 75%.  Within 10 points: a NIC that lags keeps fewer
  # chunks in flight, so the split follows the speeds without being exact.
  # Under a sanitizer (the CI's stages set COLLX_FAULTS_SCALE) among the
  # stage's other tests the processor, not the links, sets the pace: each
  # socket drains what it holds between two wake-ups, so the split tends to
  # even (TSan with six busy loops on 2 cores: 50-60%, idle: 74%).  There
  # the share is printed; the plain build checks it.
  if [ "${COLLX_FAULTS_SCALE:-1}" -gt 1 ]; then
    echo "  merged-$progress: the 3 Gbit/s NIC carried $share1% of the bytes (not checked under a sanitizer)"
  else
    check $([ $share1 -ge 65 ] && [ $share1 -le 85 ] && echo 0 || echo 1) \
      "merged-$progress: the 3 Gbit/s NIC carries its share of the bytes, 65-85% ($share1%)"
  fi
  check $([ $total -ge "${moved:-1}" ] && echo 0 || echo 1) "merged-$progress: the members carry the ${moved:-?} bytes moved ($total)"
done

perf_run single "-n 300" COLLX_IFNAME==eth1 COLLX_MERGE=none
check $([ $sent1 -ge "${moved:-1}" ] && echo 0 || echo 1) "single: eth1 carries the ${moved:-?} bytes moved ($sent1)"
check $([ $((sent0 * 100)) -lt $sent1 ] && echo 0 || echo 1) "single: eth0 carries < 1% of eth1's bytes ($sent0)"

# ---- 4. all-reduce across four hosts ---------------------------------------
netbed_down "$bed"
if ! netbed_up "$bed" 4 1 2>"$tmp/err"; then
  check 1 "four hosts: $(cat "$tmp/err")"
else
  before=() ns=()
  for i in 0 1 2 3; do before[$i]=$(netbed_bytes "$bed" $i 0 tx); ns[$i]=$(netbed_ns "$bed" $i); done
  COLLX_IFNAME=eth0 timeout 60 "$perf" --ranks 4 --netns "$(IFS=,; echo "${ns[*]}")" -s 4M -n 10 --timeout 20 \
    >"$tmp/ring.out" 2>&1
  rc=$?
  check $([ $rc -eq 0 ] && grep -q "correct at every size" "$tmp/ring.out" && echo 0 || echo 1) \
    "all-reduce over 4 hosts (--netns): every element right (exit $rc)"
  [ $rc -ne 0 ] && tail -5 "$tmp/ring.out" | sed 's/^/    /'
  # Ten timed 4 MiB all-reduces alone make each rank send 2 x 3/4 x 4 MiB x 10.
  least=$((2 * 3 * 4194304 * 10 / 4))
  for i in 0 1 2 3; do
    sent=$(($(netbed_bytes "$bed" $i 0 tx) - before[i]))
    check $([ $sent -ge $least ] && echo 0 || echo 1) "all-reduce: host $i's eth0 sent its part, >= $least B ($sent)"
  done
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
