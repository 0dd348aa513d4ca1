#!/bin/bash
# Cases of tests/netbed/test_failover.sh run alone and repeated: the test's
# own set-up and the definitions of its sections 2b and 2c, cut from the
# test itself, then one case REPS times, each run's client and server logs
# kept as KEEP/CASE-N.cli and .srv (default KEEP=/tmp/failover-cut).  Root;
# from a build directory (collx-perf, collx-info), as the test runs:
#   bash .../cut.sh turn01|lossy|setupdown [REPS]
set -u
test=$(cd "$(dirname "$0")/../../.." && pwd)/tests/netbed/test_failover.sh
what=${1:?turn01, lossy or setupdown} reps=${2:-2} keep=${KEEP:-/tmp/failover-cut}
mkdir -p "$keep"
cut=$(mktemp /tmp/failover-cut.XXXXXX)
{
  sed -n '1,/^# ---- 1 and 2:/p' "$test" | sed '$d' | sed "s|^here=.*|here=$(dirname "$test")|"
  sed -n '/^sanitized=0$/,/^\[ \$sanitized -eq 1 \] && modes=/p' "$test"
  sed -n '/^# ---- 2b\./,/^turn_case turn01 /p' "$test" | sed '$d'
  sed -n '/^# ---- 2c\./,/^if \[ \$sanitized -eq 1 \]; then$/p' "$test" | sed '$d'
  case $what in
    turn01) echo 'one() { turn_case turn01 flap0_lose1 12 "eth0 down 3 s and back, then eth1 lost"; }' ;;
    lossy) echo 'one() { perf_opts="-v --in-order" run lossy 34 2 lossy1_lose0 "${merged[@]}"; eth1_lossless; check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "lossy: exit $crc $src ${secs}s"; all_up; }' ;;
    setupdown) echo 'one() { cable() { ip -n "$bed-sw" link set h1e1 "$1"; }; cable down; perf_opts=-v run setupdown 8 4 "cable up" "${merged[@]}" COLLX_CONNECT_TIMEOUT=4; check $([ $crc -eq 0 ] && [ $src -eq 0 ] && echo 0 || echo 1) "setupdown: exit $crc $src ${secs}s"; cable up; }' ;;
    *) echo "cut.sh: no case $what" >&2; exit 2 ;;
  esac
  cat <<LOOP
for i in \$(seq $reps); do
  one
  cp "\$tmp/$what.cli" "$keep/$what-\$i.cli"; cp "\$tmp/$what.srv" "$keep/$what-\$i.srv"
done
echo "\$pass passed, \$fail failed"
LOOP
} >"$cut"
bash "$cut"
rc=$?
rm -f "$cut"
exit $rc
