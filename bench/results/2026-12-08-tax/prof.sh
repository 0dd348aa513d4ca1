#!/bin/bash
# prof.sh BUILD OUT: perf record both ends of collx-perf -s 64K -d 8 -t 4 across two merged netbed NICs, failover on and off
set -u
b=$1 out=$2; mkdir -p $out
. /work/main/tests/netbed/netbed.sh
bed=pf$$; bed=${bed:0:6}
netbed_up $bed 2 2 >/dev/null || exit 2
for cfg in on off; do
  fo=1; [ $cfg = off ] && fo=0
  m=(COLLX_IFNAME==eth0,eth1 COLLX_MERGE=eth0+eth1 COLLX_FAILOVER=$fo)
  ip netns exec $(netbed_ns $bed 0) env "${m[@]}" perf record -q -F 4000 -o $out/$cfg.srv.data -- $b/collx-perf --listen -p 18652 --timeout 30 > $out/$cfg.srv.txt 2>&1 &
  sleep 0.5
  ip netns exec $(netbed_ns $bed 1) env "${m[@]}" perf record -q -F 4000 -o $out/$cfg.cli.data -- $b/collx-perf $(netbed_addr 0 0) -p 18652 -s 64K -d 8 -t 4 --timeout 30 > $out/$cfg.cli.txt 2>&1
  wait
  grep -E '^ +65536' $out/$cfg.cli.txt
done
netbed_down $bed
for f in on.srv on.cli off.srv off.cli; do
  perf report -i $out/$f.data --no-children --sort dso,sym --percent-limit 0.7 --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > $out/$f.top
done
