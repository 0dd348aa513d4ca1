#!/bin/sh
# Run each collx fuzz target for a bounded time (called by `make fuzz`).
#   run-fuzz.sh SECONDS WORKDIR TARGET...
# Each target BIN is WORKDIR/../fuzz_TARGET; its seeds are in
# WORKDIR/seeds/TARGET, the corpus it grows in WORKDIR/corpus/TARGET, and a
# crashing input lands in WORKDIR/crash-TARGET-*.  Prints one line per target
# and "N passed, N failed"; exits 1 if a target found something.
seconds=$1 work=$2
shift 2
bindir=$(dirname "$work")
passed=0 failed=0
for t in "$@"; do
  bin=$bindir/fuzz_$t
  mkdir -p "$work/corpus/$t"
  log=$work/$t.log
  start=$(date +%s)
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/crash-$t-" "$work/corpus/$t" "$work/seeds/$t" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1)
  corpus=$(ls "$work/corpus/$t" | wc -l)
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS: fuzz_$t (${took} s, ${runs:-?} runs, ${cov:-cov: ?}, corpus $corpus)"
  else
    failed=$((failed + 1))
    echo "FAIL: fuzz_$t (exit $rc after ${took} s; log $log)"
    grep -E 'collx fuzz oracle|ERROR: (AddressSanitizer|libFuzzer)|runtime error|SUMMARY|Test unit written' "$log" \
      | head -n 8 | sed 's/^/  /'
    tail -n 4 "$log" | sed 's/^/  | /'
  fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
