#!/bin/bash
# mlat.sh SIZE [env..]: ping-pong across two hosts with two 1 Gb/s NICs merged
S=$1; shift
N=${NETBED:-tests/netbed/netbed.sh}
ip netns exec mg-h1 env COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "$@" ${PERF:-./collx-perf} --listen -p 18660 >/dev/null 2>&1 &
sleep 0.3
ip netns exec mg-h0 env COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 "$@" ${PERF:-./collx-perf} $(bash $N addr 1 0) -p 18660 --test lat -s $S -t 2 --compare 2>&1 | awk '/collx \/ plain TCP/ {getline; getline; print $2 "/" $3 "=" $4 " (each way " $6 ")"; exit}'
wait
