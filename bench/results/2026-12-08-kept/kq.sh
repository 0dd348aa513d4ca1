#!/bin/bash
# kq.sh DIR...: collx-perf -v 64K -d 8 fo=1 from each build dir in turn, R rounds; prints GB/s and the send comm's close line
. /work/main/tests/netbed/netbed.sh
netbed_up kq 2 2 >/dev/null
for k in $(seq ${R:-3}); do for d in "$@"; do
  m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_FAILOVER=${FO:-1})
  ip netns exec $(netbed_ns kq 0) env "${m[@]}" $d/collx-perf -v --listen -p 18655 --timeout 30 > /tmp/kq.srv 2>&1 & sleep 0.4
  ip netns exec $(netbed_ns kq 1) env "${m[@]}" $d/collx-perf -v $(netbed_addr 0 0) -p 18655 -s ${S:-64K} -d 8 -t 3 --timeout 30 > /tmp/kq.cli 2>&1; wait
  echo "$k $d $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9.]+ ' /tmp/kq.cli | awk '{print $3}') $(grep -h 'send connection.*closed: [1-9]' /tmp/kq.cli | sed -E 's/.*closed: ([0-9]+) messages.*; ([0-9]+) sends found.*\(([0-9]+) isend.* ([0-9]+) done once.*/msgs \1 notready \2 nullisend \3 kept \4/')"
done; done
netbed_down kq
