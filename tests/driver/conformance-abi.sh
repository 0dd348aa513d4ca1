#!/bin/sh
# The conformance cases whose calls change shape between ncclNet versions
# (properties layout, int/size_t sizes, profiler handles, connect config),
# through each older table the plugin exports; every case runs through v8 in
# the other conformance tests.  A version added to the plugin and to the
# harness's table (tests/harness/net.c) is one more word in VERSIONS.
# Prints the summed "N passed, N failed, N skipped".  Run from the build directory.
VERSIONS="7 9 10 11 12"
CASES=properties,mixed-sizes,grouped,zero-byte,oversize,33rd-request
passed=0 failed=0 skipped=0 rc=0
for v in $VERSIONS; do
  out=$(COLLX_PROGRESS=threads ./tests/driver/conformance --abi "$v" --case "$CASES" "$@") || rc=1
  printf '%s\n' "$out" | sed "s/^/[v$v] /"
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  [ -n "$line" ] || { failed=$((failed + 1)); rc=1; continue; }
  passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
  failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
  skipped=$((skipped + $(echo "$line" | cut -d' ' -f5)))
done
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
