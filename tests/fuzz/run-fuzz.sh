#!/bin/sh
# Run each collx fuzz target for a bounded time (called by `make fuzz`).
#   run-fuzz.sh SECONDS WORKDIR TARGET...
# Each target BIN is WORKDIR/../fuzz_TARGET; its seeds are in
# WORKDIR/seeds/TARGET, the corpus it grows in WORKDIR/corpus/TARGET, and a
# crashing input lands in WORKDIR/crash-TARGET-*.  FUZZ_JOBS targets run at
# a time (default 2: each fuzzer is one process on one core).  Prints one
# line per target, in the order given, and "N passed, N failed"; exits 1 if
# a target found something.
seconds=$1 work=$2
shift 2
bindir=$(dirname "$work")
jobs=${FUZZ_JOBS:-2}

# One target: its verdict (and, on failure, the lines that say why) goes to
# WORKDIR/TARGET.result, its first line PASS or FAIL.
fuzz_one() {
  t=$1 bin=$bindir/fuzz_$1 log=$work/$1.log out=$work/$1.result
  mkdir -p "$work/corpus/$t"
  start=$(date +%s)
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/crash-$t-" "$work/corpus/$t" "$work/seeds/$t" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1)
  corpus=$(ls "$work/corpus/$t" | wc -l)
  if [ $rc -eq 0 ]; then
    echo "PASS: fuzz_$t (${took} s, ${runs:-?} runs, ${cov:-cov: ?}, corpus $corpus)" >"$out"
  else
    {
      echo "FAIL: fuzz_$t (exit $rc after ${took} s; log $log)"
      grep -E 'collx fuzz oracle|ERROR: (AddressSanitizer|libFuzzer)|runtime error|SUMMARY|Test unit written' "$log" \
        | head -n 8 | sed 's/^/  /'
      tail -n 4 "$log" | sed 's/^/  | /'
    } >"$out"
  fi
}

running=0
for t in "$@"; do
  rm -f "$work/$t.result"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait
    running=0
  fi
done
wait

passed=0 failed=0
for t in "$@"; do
  if [ -f "$work/$t.result" ] && head -n 1 "$work/$t.result" | grep -q '^PASS'; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    [ -f "$work/$t.result" ] || echo "FAIL: fuzz_$t (no verdict; log $work/$t.log)"
  fi
  cat "$work/$t.result" 2>/dev/null
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
