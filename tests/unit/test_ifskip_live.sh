#!/bin/sh
# Container and CNI interfaces on a real (namespaced) host: a veth pair
# veth-cx0/veth-cx1 and a bridge cni0, each with an address, beside lo.
# collx-info must skip all of them by default and fail with a WARN that
# names them and why, and list each one when COLLX_IFNAME names it.  Root
# only: exit 77 (skip) when not root or when namespaces or veths cannot be
# made.  Run from the build directory.
info=./collx-info
[ -x "$info" ] || { echo "FAIL: $info not built"; exit 1; }
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
  echo "SKIP: needs root, ip and unshare"
  exit 77
fi
unshare -n true 2>/dev/null || { echo "SKIP: cannot make a network namespace"; exit 77; }
exec unshare -n sh -c '
  unset COLLX_IFNAME NCCL_SOCKET_IFNAME COLLX_SOCKET_FAMILY COLLX_MERGE COLLX_RAIL_ID
  ip link set lo up || exit 77
  ip link add veth-cx0 type veth peer name veth-cx1 2>/dev/null || { echo "SKIP: no veth"; exit 77; }
  ip link add cni0 type bridge 2>/dev/null || { echo "SKIP: no bridge"; exit 77; }
  ip addr add 10.231.40.1/24 dev veth-cx0 && ip addr add 10.231.41.1/24 dev cni0 || exit 77
  ip link set veth-cx0 up && ip link set veth-cx1 up && ip link set cni0 up || exit 77
  fails=0
  fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
  out=$(COLLX_DEBUG=INFO '"$info"' 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "default selection used a skipped interface: $out"
  for want in "lo (loopback)" "veth-cx0 (container veth)" "cni0 (CNI bridge)"; do
    printf "%s\n" "$out" | grep "WARN" | grep -qF "$want" || fail "the WARN does not name $want: $out"
  done
  # spec, then 1/0: whether veth-cx0 and cni0 must be listed
  for row in "veth-cx0 1 0" "=cni0 0 1" "veth,cni 1 1"; do
    set -- $row
    out=$(COLLX_IFNAME=$1 '"$info"' 2>&1) || fail "COLLX_IFNAME=$1: collx-info failed: $out"
    for pair in "veth-cx0 $2" "cni0 $3"; do
      set -- $row; name=${pair% *}; want=${pair#* }
      got=0; printf "%s\n" "$out" | grep -Eq "^[0-9]+ +$name " && got=1
      [ $got -eq $want ] || fail "COLLX_IFNAME=$1: $name listed: $got, expected $want: $out"
    done
  done
  out=$(COLLX_IFNAME=^lo COLLX_DEBUG=INFO '"$info"' 2>&1) && fail "COLLX_IFNAME=^lo used a skipped interface: $out"
  [ $fails -eq 0 ] && echo "PASS: veth and cni0 skipped by default, used when named"
  exit $fails
'
