#!/bin/sh
# Sum up a `make check` run: one result per test program, except programs
# that report their own cases with a closing "N passed, N failed" line (the
# conformance driver), which count case by case.  Prints the total as
# "N passed, N failed, N skipped" and exits non-zero if anything failed.
builddir=${1:-.}
passed=0 failed=0 skipped=0
for trs in $(find "$builddir" -name '*.trs' | sort); do
  log=${trs%.trs}.log
  result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" 2>/dev/null | tail -n 1)
  if [ -n "$line" ]; then
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
    # A program that died before its own summary still counts as a failure.
    if [ "$result" != PASS ] && [ "$result" != SKIP ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); fi
    continue
  fi
  case $result in
    PASS|XFAIL) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); echo "FAILED: ${trs%.trs} (see $log)" ;;
  esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
