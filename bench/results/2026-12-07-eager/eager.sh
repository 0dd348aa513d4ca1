#!/bin/bash
# COLLX_EAGER_SIZE 16 KiB against 64 KiB, alternating, across two namespaces
# of the netbed on one unlimited veth link (tests/netbed/netbed.sh up lat 2 1):
# ping-pong (collx-perf --test lat --compare: the ratio to plain TCP, one
# socket) and bandwidth (--test bw, depth 8), each progress mode.
# Env: ROUNDS (4), SECS (2), SIZES_LAT, SIZES_BW, EAGERS, MODES, BUILD.
set -u
B=${BUILD:-$(cd "$(dirname "$0")/../../.." && pwd)}
N=$B/tests/netbed/netbed.sh
ip netns list | grep -q '^lat-h0' || bash "$N" up lat 2 1 >/dev/null || exit 1
A1=$(bash "$N" addr 1 0)
pair() { # pair MODE EAGER ARGS...: one server, one client; prints the client's output
  local m=$1 e=$2; shift 2
  ip netns exec lat-h1 env COLLX_IFNAME==eth0 COLLX_PROGRESS=$m COLLX_EAGER_SIZE=$e "$B/collx-perf" --listen -p 18620 >/dev/null 2>&1 &
  sleep 0.3
  ip netns exec lat-h0 env COLLX_IFNAME==eth0 COLLX_PROGRESS=$m COLLX_EAGER_SIZE=$e "$B/collx-perf" "$A1" -p 18620 -t "${SECS:-2}" "$@" 2>&1
  wait
}
echo "round mode eager test size value"
for r in $(seq "${ROUNDS:-4}"); do
  for m in ${MODES:-caller threads}; do
    for e in ${EAGERS:-16384 65536}; do
      for s in ${SIZES_LAT:-32768 65536}; do
        v=$(pair "$m" "$e" --test lat -s "$s" --compare | awk '/collx \/ plain TCP/ {getline; getline; print $2 "/" $3 "=" $4; exit}')
        echo "$r $m $e lat $s $v"
      done
      for s in ${SIZES_BW:-32768 65536 131072}; do
        v=$(pair "$m" "$e" --test bw -s "$s" | awk '/#bytes/ {getline; print $3; exit}')
        echo "$r $m $e bw $s $v"
      done
    done
  done
done
