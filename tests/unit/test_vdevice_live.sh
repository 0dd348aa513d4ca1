#!/bin/sh
# Virtual devices on real interfaces: 9 veth pairs in a fresh network
# namespace (addresses 10.231.20.1 ... 10.231.28.1 on v0 ... v8), then
# tests/unit/test_vdevice_live drives makeVDevice through the plugin's v12 and
# v11 tables with COLLX_IFNAME naming the nine.  Root only: exit 77 (skip)
# when not root or when namespaces or veths cannot be made.  Run from the
# build directory.
prog=./tests/unit/test_vdevice_live
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
  echo "SKIP: needs root, ip and unshare"
  exit 77
fi
unshare -n true 2>/dev/null || { echo "SKIP: cannot make a network namespace"; exit 77; }
exec unshare -n sh -c '
  ip link set lo up || exit 77
  names=""
  for i in 0 1 2 3 4 5 6 7 8; do
    ip link add v$i type veth peer name v${i}p 2>/dev/null || { echo "SKIP: no veth"; exit 77; }
    ip addr add 10.231.2$i.1/24 dev v$i && ip link set v$i up && ip link set v${i}p up || exit 77
    names="$names${names:+,}v$i"
  done
  COLLX_IFNAME="=$names" COLLX_SOCKET_FAMILY=AF_INET COLLX_MERGE=none exec '"$prog"'
'
