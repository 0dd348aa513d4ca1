#!/bin/bash
# lat.sh NICS OLD_PERF NEW_PERF PLUGIN.so [rounds]: 8 B ping-pong across two
# netbed hosts (unlimited veth; NICS 1: eth0 alone, 2: eth0+eth1 merged),
# alternating two collx-perf builds against one plugin, each with --compare
# (plain TCP on one socket, then a socket each way).  Prints per run:
# tool, size, collx us, tcp us, ratio, tcp2 us, ratio2.
set -u
nics=$1 old=$2 new=$3 so=$4 rounds=${5:-4}
N=${NETBED:-tests/netbed/netbed.sh}
bash "$N" up pl 2 "$nics" >/dev/null
env=(COLLX_IFNAME==eth0)
[ "$nics" = 2 ] && env=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1)
for r in $(seq "$rounds"); do
  for t in old new; do
    perf=$old; [ $t = new ] && perf=$new
    ip netns exec pl-h1 env "${env[@]}" "$perf" --plugin "$so" --listen -p 18635 >/dev/null 2>&1 &
    sleep 0.3
    out=$(ip netns exec pl-h0 env "${env[@]}" "$perf" --plugin "$so" "$(bash "$N" addr 1 0)" -p 18635 \
      --test lat -s 8 -t 2 --compare 2>&1)
    wait
    echo "$t $(printf '%s\n' "$out" | grep -A1 'collx\[us\]' | tail -1)"
  done
done
bash "$N" down pl
