#!/bin/bash
# Issue 26: collx gets 4 coll channels at 4 ranks on loopback, Socket 2
# (gW).  NCCL_MAX_NCHANNELS=2 against NCCL's choice, alternating, 4 ranks.
REPO=$(pwd); T0=$(date +%s)
mkdir -p /tmp/cx && tar xzf .gpu/collx-0.1.0.tar.gz -C /tmp/cx
(cd /tmp/cx/collx-0.1.0 && ./configure -q >/tmp/cx/conf.log 2>&1 && make -j16 >/tmp/cx/build.log 2>&1) || { tail -20 /tmp/cx/build.log /tmp/cx/conf.log; exit 1; }
B=/tmp/cx/collx-0.1.0
NT_ARGS="-b 512K -e 8M -f 2 -n 20 -w 3 -c 1" AB_MIN_SIZE=524288 TOTAL_BUDGET=60 RUN_TIMEOUT=60 \
  bash bench/ab.sh --rounds 2 --ranks 4 --colls "all_gather all_reduce" --out $OUT/ch \
  .gpu/nccl-tests.tar.gz def=$B ch2=$B,NCCL_MAX_NCHANNELS=2 > $OUT/ch.log 2>&1
echo "ch rc=$? at $(( $(date +%s)-T0 )) s"; cat $OUT/ch/table.md
grep -h "coll channels" -r $OUT/ch 2>/dev/null | sort | uniq -c | head -4
cd $OUT && tar czf ch.tgz ch ch.log && rm -rf ch
