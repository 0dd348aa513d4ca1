#!/usr/bin/env bash
# one collx-perf run on a 2-NIC unlimited netbed: ARGS, ENV...
set -u
. /work/main/tests/netbed/netbed.sh
perf=${PERF:-/work/main/collx-perf}
bed=nbo$$; bed=${bed:0:8}; srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; netbed_down "$bed"; }
trap cleanup EXIT
netbed_up "$bed" 2 2 || exit 2
args=$1; shift
ip netns exec "$(netbed_ns "$bed" 0)" env "$@" "$perf" -v --listen -p 18651 --timeout 30 >/tmp/lx/one.srv 2>&1 &
srv=$!
ip netns exec "$(netbed_ns "$bed" 1)" env "$@" "$perf" -v "$(netbed_addr 0 0)" -p 18651 $args --timeout 30 >/tmp/lx/one.cli 2>&1
wait $srv; srv=
