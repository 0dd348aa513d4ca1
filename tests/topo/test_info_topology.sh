#!/bin/sh
# collx-info --topology FILE [--ifaces] [--json] and --gpus: the plan and the
# GPU x NIC matrix through the tool.  Runs from the build directory;
# COLLX_INFO may point at another binary.
info=${COLLX_INFO:-./collx-info}
dir=${COLLX_TOPO_DIR:-${srcdir:-.}/tests/topo/xml}
fail=0

if [ ! -x "$info" ]; then
  echo "FAIL: $info not found (run from the build directory)"
  exit 1
fi
if [ ! -d "$dir" ]; then
  echo "FAIL: no topologies in $dir (they ship in tests/topo/xml; COLLX_TOPO_DIR overrides)"
  exit 1
fi
unset COLLX_CPU_AFFINITY COLLX_MERGE COLLX_NSTREAMS COLLX_SPEED_MBPS COLLX_TOPO_XML HWLOC_XMLFILE

check() { # description, command...
  what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}

xml=$dir/24em64t-2n6c2t-pci.xml
out=$(COLLX_MERGE=auto "$info" --topology "$xml")
check "text plan names the merged device" \
  sh -c 'printf "%s\n" "$1" | grep -q "^device 0  eth0+eth1$"' sh "$out"
check "text plan has the GPU x NIC matrix" \
  sh -c 'printf "%s\n" "$1" | grep -Eq "^gpu0 0000:06:00.0 +host-bridge"' sh "$out"

out=$("$info" --topology "$xml" --ifaces eth1,eth2)
check "--ifaces limits the plan" \
  sh -c 'printf "%s\n" "$1" | grep -c "^device " | grep -qx 2' sh "$out"

if command -v python3 >/dev/null 2>&1; then
  json=$(COLLX_MERGE=eth0+eth2 "$info" --topology "$xml" --json)
  check "--json: explicit merge, matrix" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
devs = [x["name"] for x in d["plan"]["devices"]]
assert devs == ["eth0+eth2", "eth1", "ib0"], devs
assert d["plan"]["devices"][0]["speed_mbps"] == 20000
assert len(d["gpu_nic"]["gpus"]) == 3 and d["gpu_nic"]["nics"] == ["eth0", "eth1", "eth2", "ib0"]
' "$json"
  json=$("$info" --gpus --json)
  check "--gpus --json parses" python3 -c 'import json, sys; json.loads(sys.argv[1])' "$json"
fi

# This host's own plan, as the plugin makes it (loopback: no locality).
out=$(COLLX_IFNAME==lo "$info" --plan)
check "--plan shows this host's plan for the selected interface" \
  sh -c 'printf "%s\n" "$1" | grep -q "^topology  this machine" &&
         printf "%s\n" "$1" | grep -q "^device 0  lo"' sh "$out"
if command -v python3 >/dev/null 2>&1; then
  json=$(COLLX_IFNAME==lo "$info" --plan --json)
  check "--plan --json parses and names lo" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["plan"]["this_system"] and [x["name"] for x in d["plan"]["devices"]] == ["lo"]
' "$json"
fi

# The tuner's policy, as the plugin reads it from the same settings.
out=$(COLLX_IFNAME==lo COLLX_TUNER_RING_MIN=1048576 COLLX_TUNER_CHANNELS=3 "$info" --plan)
check "--plan prints the tuner's policy with COLLX_TUNER_RING_MIN" \
  sh -c 'printf "%s\n" "$1" | grep -q "^tuner     one rank per node: .*from 1048576 bytes a rank use Ring with Simple"' sh "$out"
check "--plan prints the tuner's channel rule with COLLX_TUNER_CHANNELS" \
  sh -c 'printf "%s\n" "$1" | grep -q "^tuner     .*bytes a rank they run on 3 channels"' sh "$out"
out=$(COLLX_IFNAME==lo COLLX_TUNER=0 "$info" --plan)
check "--plan says when the tuner is off" sh -c 'printf "%s\n" "$1" | grep -q "^tuner     NCCL tunes alone"' sh "$out"
if command -v python3 >/dev/null 2>&1; then
  json=$(COLLX_IFNAME==lo COLLX_TUNER_RING_MIN=1048576 COLLX_TUNER_CHANNELS_MAX=65536 "$info" --plan --json)
  check "--plan --json carries the tuner's settings" python3 -c '
import json, sys
t = json.loads(sys.argv[1])["tuner"]
assert t["enabled"] is True and t["ring_min"] == 1048576 and t["tree_max"] > 0
assert t["channels"] == 2 and t["channels_max"] == 65536
' "$json"
fi

# One stream-count policy: what collx-info --plan prints is what the plugin
# logs and what a connection opens.  With the 24-CPU topology standing in
# for this machine (lo is not in it: all 24 CPUs are candidates), 2 ranks on
# the node give 4 streams (one per 100 Gb/s of lo's 400 Gb/s) and 6 ranks 3
# (three quarters of 24 / 6 CPUs).
perf=${COLLX_PERF:-./collx-perf}
for case in "2 4" "6 3"; do
  set -- $case
  plan=$(COLLX_TOPO_XML=$xml COLLX_LOCAL_RANKS=$1 COLLX_IFNAME==lo "$info" --plan | sed -n 's/^  streams   \([0-9]*\) per connection.*/\1/p')
  run=$(COLLX_TOPO_XML=$xml COLLX_LOCAL_RANKS=$1 COLLX_IFNAME==lo "$perf" --self -v -s 1K -n 1 2>&1)
  logged=$(printf '%s\n' "$run" | sed -n 's/.*device 0 lo: \([0-9]*\) streams per connection.*/\1/p' | head -n 1)
  opened=$(printf '%s\n' "$run" | sed -n 's/.*accepted connection from .* with \([0-9]*\) streams.*/\1/p' | head -n 1)
  check "$1 ranks on the node: collx-info --plan ($plan), the plugin's log ($logged) and the connection ($opened) say $2 streams" \
    test "$plan" = "$2" -a "$logged" = "$2" -a "$opened" = "$2"
done

"$info" --topology "$dir/no-such-file.xml" >/dev/null 2>&1
check "a missing file fails" test $? -eq 1
"$info" --json >/dev/null 2>&1
check "--json alone is a usage error" test $? -eq 2
for modes in "--topology $xml --plan" "--plan --topology $xml" "--gpus --plan" "--params --version"; do
  # shellcheck disable=SC2086 # the modes are words on purpose
  err=$("$info" $modes 2>&1 >/dev/null)
  rc=$?
  check "'$modes' is a usage error naming both modes" \
    sh -c '[ "$1" -eq 2 ] && printf "%s\n" "$2" | grep -q "are different modes: give one of them"' sh "$rc" "$err"
done
err=$("$info" --topology "$xml" --topology "$xml" 2>&1 >/dev/null)
check "--topology twice is a usage error" \
  sh -c '[ "$1" -eq 2 ] && printf "%s\n" "$2" | grep -q "given twice"' sh "$?" "$err"

[ $fail -eq 0 ] && echo "test_info_topology: ok"
exit $fail
