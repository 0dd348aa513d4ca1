#!/bin/bash
# mbw.sh SIZE [env..]: bandwidth across two hosts with two 1 Gb/s NICs merged
S=$1; shift
N=${NETBED:-tests/netbed/netbed.sh}
ip netns list | grep -q '^mg-h0' || bash $N up mg 2 2 1gbit 1gbit >/dev/null
ip netns exec mg-h1 env COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "$@" ${PERF:-./collx-perf} --listen -p 18630 >/tmp/lx/msrv.log 2>&1 &
sleep 0.3
ip netns exec mg-h0 env COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "$@" ${PERF:-./collx-perf} $(bash $N addr 1 0) -p 18630 --test bw -s $S -t ${T:-3} ${X:-} 2>&1 | awk '/#bytes/ {f=1; next} f && $1 ~ /^[0-9]+$/ {print $3; exit}'
wait
