#!/bin/bash
# latp.sh PLUGIN SIZE [env..]: ping-pong collx/plain TCP median ratio, given plugin .so
P=$1; S=$2; shift 2
N=${NETBED:-tests/netbed/netbed.sh}; A1=$(bash $N addr 1 0)
ip netns exec lat-h1 env COLLX_IFNAME==eth0 "$@" ${PERF:-./collx-perf} --plugin $P --listen -p 18640 >/dev/null 2>&1 &
sleep 0.3
ip netns exec lat-h0 env COLLX_IFNAME==eth0 "$@" ${PERF:-./collx-perf} --plugin $P $A1 -p 18640 --test lat -s $S -t 2 --compare 2>&1 | awk '/collx \/ plain TCP/ {getline; getline; print $2 "/" $3 "=" $4; exit}'
wait
