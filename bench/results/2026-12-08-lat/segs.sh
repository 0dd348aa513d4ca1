#!/bin/bash
# segs.sh BUILD_DIR: segments per 8 B round trip across two netbed hosts
# (one unlimited veth NIC).  First plain TCP (segs_pingpong.py, 20000
# round trips) on one socket and on a socket each way, counting h0's
# segments with nstat; then collx-perf --test lat -s 8 for 4 s, with
# `ss -tin` of h0's connections 3 s in (segs_out, segs_in, data_segs_*).
set -u
b=$1 here=$(cd "$(dirname "$0")" && pwd) N=${NETBED:-tests/netbed/netbed.sh}
bash "$N" up sg 2 1 >/dev/null
a0=$(bash "$N" addr 0 0) a1=$(bash "$N" addr 1 0)
for m in one two; do
  ip netns exec sg-h0 nstat -n
  ip netns exec sg-h1 python3 "$here/segs_pingpong.py" $m srv "$a0" & sleep 0.3
  ip netns exec sg-h0 python3 "$here/segs_pingpong.py" $m cli "$a1"; wait
  ip netns exec sg-h0 nstat | grep -E 'TcpOutSegs|TcpInSegs|TcpExtTCPPureAcks|TcpExtTCPHPAcks'
done
so=$b/.libs/libnccl-net-collx.so
ip netns exec sg-h1 env COLLX_IFNAME==eth0 "$b/collx-perf" --plugin "$so" --listen -p 18635 >/dev/null 2>&1 &
sleep 0.3
ip netns exec sg-h0 env COLLX_IFNAME==eth0 "$b/collx-perf" --plugin "$so" "$a1" -p 18635 --test lat -s 8 -t 4 2>&1 | grep -E '^ +8 +[0-9]' &
sleep 3
ip netns exec sg-h0 ss -tin | grep -oE '^ESTAB.*|segs_out:[0-9]+ segs_in:[0-9]+( data_segs_out:[0-9]+)?( data_segs_in:[0-9]+)?'
wait; wait
bash "$N" down sg
