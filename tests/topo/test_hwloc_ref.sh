#!/bin/sh
# hwloc is the reference: for every NIC of every topology in
# tests/topo/xml, the NUMA nodes, nodeset and cpuset collx reports
# (collx-topo-dump) must be what hwloc-calc reports for that OS device.
# Runs from the build directory; COLLX_TOPO_DUMP may point elsewhere.
dump=${COLLX_TOPO_DUMP:-./tests/topo/collx-topo-dump}
dir=${COLLX_TOPO_DIR:-${srcdir:-.}/tests/topo/xml}

if ! command -v hwloc-calc >/dev/null 2>&1; then
  echo "SKIP: hwloc-calc not installed (Debian: hwloc)"
  exit 77
fi
if [ ! -d "$dir" ]; then
  echo "FAIL: no topologies in $dir (they ship in tests/topo/xml; COLLX_TOPO_DIR overrides)"
  exit 1
fi
if [ ! -x "$dump" ]; then
  echo "FAIL: $dump not found (run from the build directory)"
  exit 1
fi

fail=0 checked=0

# Network OS devices as hwloc's own tools list them (osdev_type 2 in the
# XML when lstopo is absent), so that a NIC collx misses is noticed.
hwloc_nics() {
  if command -v lstopo-no-graphics >/dev/null 2>&1; then
    lstopo-no-graphics --input "$1" --only osdev | sed -n 's/^Net "\(.*\)"$/\1/p'
  else
    grep -o 'name="[^"]*" osdev_type="2"' "$1" | sed 's/name="\([^"]*\)".*/\1/'
  fi
}

# The value of key $2 in the key=value line $1.
field() {
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

expect() { # what, got, want
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: collx says '$2', hwloc-calc says '$3'"
    fail=1
  fi
}

for xml in "$dir"/*.xml; do
  base=$(basename "$xml")
  want_n=$(hwloc_nics "$xml" | wc -l)
  got_n=$("$dump" "$xml" | wc -l)
  expect "$base: number of NICs" "$got_n" "$want_n"
  for nic in $(hwloc_nics "$xml"); do
    line=$("$dump" "$xml" "$nic")
    expect "$base $nic found" "$(field "$line" found)" 1
    expect "$base $nic cpuset" "$(field "$line" cpuset)" "$(hwloc-calc --input "$xml" "os=$nic")"
    expect "$base $nic nodeset" "$(field "$line" nodeset)" \
      "$(hwloc-calc --input "$xml" --nodeset-output "os=$nic")"
    expect "$base $nic NUMA nodes" "$(field "$line" numa)" \
      "$(hwloc-calc --input "$xml" --local-memory --physical-output "os=$nic")"
    checked=$((checked + 1))
  done
done

# The JSON printer must emit JSON (checked where python3 is available).
if command -v python3 >/dev/null 2>&1; then
  for xml in "$dir"/*.xml; do
    out=$(COLLX_MERGE=auto "$dump" --plan-json "$xml" 2>&1) || continue
    [ -z "$out" ] && continue
    if ! printf '%s\n' "$out" | python3 -m json.tool >/dev/null 2>&1; then
      echo "FAIL: $(basename "$xml"): --plan-json is not valid JSON"
      fail=1
    fi
  done
fi

echo "test_hwloc_ref: $checked NICs compared with hwloc-calc"
[ "$checked" -gt 0 ] || { echo "FAIL: no NIC compared"; fail=1; }
exit $fail
