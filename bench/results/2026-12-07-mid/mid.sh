#!/bin/bash
# mid.sh PERF PLUGIN.so [rounds]: ping-pong 128 KiB-1 MiB across two netbed
# hosts (one unlimited veth link) with the progress threads on, one variant
# after another in each round (settings for both ends in VARIANTS, `;`
# between variants, `,` between settings, "-" for none), then plain TCP
# once.  Prints per run: variant, then size and us per half round trip.
set -u
perf=$1 so=$2 rounds=${3:-3}
N=${NETBED:-tests/netbed/netbed.sh}
VARIANTS=${VARIANTS:-"-;CX_SEND_INLINE=1048576;CX_SEND_INLINE=1048576,COLLX_INLINE_RECV=1,CX_RECV_BULK=1;COLLX_PROGRESS=caller"}
ARGS=${ARGS:---test lat --min 128K --max 1M -t 1}
bash "$N" up mb 2 1 >/dev/null
IFS=';' read -r -a vs <<<"$VARIANTS"
one() {
  local v=$1 extra=$2 env=(COLLX_IFNAME==eth0 COLLX_PROGRESS=threads)
  [ "$v" != - ] && { IFS=',' read -r -a kv <<<"$v"; env+=("${kv[@]}"); }
  ip netns exec mb-h1 env "${env[@]}" "$perf" --plugin "$so" --listen -p 18636 >/dev/null 2>&1 &
  sleep 0.3
  out=$(ip netns exec mb-h0 env "${env[@]}" "$perf" --plugin "$so" "$(bash "$N" addr 1 0)" -p 18636 $ARGS $extra 2>&1)
  wait
  printf '%s\n' "$out" | awk -v v="$v" '/^ *[0-9]+[KMG]?B? +[0-9.]+/ {printf "%s | %s\n", v, $0}'
}
for r in $(seq "$rounds"); do
  for v in "${vs[@]}"; do one "$v" ""; done
done
one - --compare | sed 's/^/tcp-run: /'
bash "$N" down mb
