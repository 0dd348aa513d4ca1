#!/bin/sh
# Device discovery through collx-info: an explicit exact selection finds the
# loopback interface, and a selection that matches nothing fails with a
# message naming the filter.  Runs from the build directory (automake's
# harness does that); COLLX_INFO may point at another binary.
info=${COLLX_INFO:-./collx-info}
fail=0

if [ ! -x "$info" ]; then
  echo "FAIL: $info not found or not executable (run from the build directory)"
  exit 1
fi

# Only what this test sets may steer discovery.
unset NCCL_SOCKET_IFNAME COLLX_SOCKET_FAMILY COLLX_SPEED_MBPS COLLX_MERGE

# Without an up loopback interface there is nothing to select by name.
# IFF_UP is bit 0 of the flags sysfs reports.
lo_flags=$(cat /sys/class/net/lo/flags 2>/dev/null)
if [ -z "$lo_flags" ] || [ $((lo_flags & 1)) -eq 0 ]; then
  echo "SKIP: no loopback interface that is up"
  exit 77
fi

out=$(COLLX_IFNAME==lo "$info" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: COLLX_IFNAME==lo: collx-info exited $rc: $out"
  fail=1
elif ! printf '%s\n' "$out" | grep -Eq '^0 +lo( |$)'; then
  echo "FAIL: COLLX_IFNAME==lo: lo is not listed as device 0:"
  printf '%s\n' "$out"
  fail=1
fi

out=$(COLLX_IFNAME=doesnotexist "$info" 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 0 ]; then
  echo "FAIL: COLLX_IFNAME=doesnotexist: collx-info exited 0"
  fail=1
elif ! printf '%s\n' "$out" | grep -q 'COLLX_IFNAME="doesnotexist"'; then
  echo "FAIL: COLLX_IFNAME=doesnotexist: stderr does not name the filter:"
  printf '%s\n' "$out"
  fail=1
fi

# COLLX_RAIL_ID / COLLX_PLANE_ID: the ids NCCL 2.30 gets (ncclNet v12).
out=$(COLLX_IFNAME==lo COLLX_RAIL_ID=lo=3 COLLX_PLANE_ID=lo=1 "$info" 2>&1)
if ! printf '%s\n' "$out" | grep -q 'rail: 3, plane: 1'; then
  echo "FAIL: COLLX_RAIL_ID=lo=3 COLLX_PLANE_ID=lo=1: no 'rail: 3, plane: 1' line:"
  printf '%s\n' "$out" | sed 's/^/  /'
  fail=1
fi
# lo has no PCI device: the automatic rule gives it no rail.
out=$(COLLX_IFNAME==lo "$info" 2>&1)
if printf '%s\n' "$out" | grep -q 'rail:'; then
  echo "FAIL: lo got a rail without COLLX_RAIL_ID:"
  printf '%s\n' "$out" | sed 's/^/  /'
  fail=1
fi

[ $fail -eq 0 ] && echo "test_devices: all checks passed"
exit $fail
