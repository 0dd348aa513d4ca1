#!/bin/bash
# (gQ) Issue 26, two looks in one call, cut to fit it (H100s were not
# lent; every comparison here is within this call):
#  1. 2 ranks, all-gather and reduce-scatter 256 KiB-2 MiB: HEAD's tuner
#     (PAT up to 256 KiB a rank) against Ring with Simple from 256 KiB a
#     rank (COLLX_TUNER_RING_MIN=262144), both on 2 channels, 3 rounds:
#     gN had PAT's 512 KiB as slow as Ring's 1 MiB.
#  2. all-reduce 64 KiB-2 MiB, COLLX_EAGER_SIZE 64 KiB (HEAD) against
#     32 KiB, 3 rounds at 2 ranks and 2 at 4: gN had 256 KiB (Tree on 4
#     channels: 64 KiB messages, all eager) slower than 512 KiB.
# -n 50 -w 5.  Needs .gpu/collx-head.tar.gz and .gpu/nccl-tests.tar.gz.
T0=$(date +%s)
stamp() { echo "$1 rc=$2 at $(( $(date +%s)-T0 )) s"; }
B=$(bash bench/gpu-build.sh .gpu/collx-head.tar.gz /tmp/cx/head .gpu/nccl-tests.tar.gz) || exit 1
export TOTAL_BUDGET=40 RUN_TIMEOUT=35
NT_ARGS="-b 256K -e 2M -f 2 -n 50 -w 5 -c 1" AB_MIN_SIZE=262144 BENCH_EXTRA_ENV="NCCL_DEBUG_SUBSYS=INIT,NET,TUNING" \
  timeout 220 bash bench/ab.sh --rounds 3 --ranks 2 --colls "all_gather reduce_scatter" --out /tmp/ring2 \
  .gpu/nccl-tests.tar.gz head=$B ring256=$B,COLLX_TUNER_RING_MIN=262144 > $OUT/ring2.log 2>&1
stamp "ring 2 ranks" $?; cat /tmp/ring2/table.md
for b in head ring256; do for f in /tmp/ring2/$b-1/raw/*rank0.log; do echo "== $b ${f##*/}"
  grep -ho '\(AllGather\|ReduceScatter\): [0-9]* Bytes -> Algo.*' $f | sort -u | sort -t: -k2 -n; done; done 2>/dev/null > $OUT/choices.txt
for n in 2 4; do
  rounds=3; [ $n = 4 ] && rounds=2
  NT_ARGS="-b 64K -e 2M -f 2 -n 50 -w 5 -c 1" AB_MIN_SIZE=65536 \
    timeout 150 bash bench/ab.sh --rounds $rounds --ranks $n --colls all_reduce --out /tmp/eager$n \
    .gpu/nccl-tests.tar.gz e64=$B e32=$B,COLLX_EAGER_SIZE=32768 > $OUT/eager$n.log 2>&1
  stamp "eager $n ranks" $?; cat /tmp/eager$n/table.md
done
tar czf $OUT/gQ.tgz -C /tmp ring2 eager2 eager4 2>/dev/null
