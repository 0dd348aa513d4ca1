#!/bin/bash
set -u
b=$1 out=$2 fo=${3:-1}; mkdir -p $out
. /work/main/tests/netbed/netbed.sh
bed=cg$$; bed=${bed:0:6}
netbed_up $bed 2 2 >/dev/null || exit 2
m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_FAILOVER=$fo)
ip netns exec $(netbed_ns $bed 0) env "${m[@]}" $b/collx-perf --listen -p 18653 --timeout 30 > $out/srv.txt 2>&1 &
sleep 0.5
ip netns exec $(netbed_ns $bed 1) env "${m[@]}" perf record -q -F 1000 --call-graph dwarf,16384 -o $out/cli.data -- $b/collx-perf $(netbed_addr 0 0) -p 18653 -s 64K -d 8 -t 2 --timeout 30 > $out/cli.txt 2>&1
wait
netbed_down $bed
