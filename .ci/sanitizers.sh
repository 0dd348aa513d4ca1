#!/usr/bin/env bash
# CI stages beyond the README's `make test`: sanitizers, valgrind, fuzzing and
# the long soak.  Each stage prints "<stage>: N passed, N failed"; the last
# line of output is the sum over the stages, "N passed, N failed", and the
# exit status is 1 if anything failed.
#
#   .ci/sanitizers.sh            # from the top of the tree (or anywhere)
#
# Stages (measured 9-10 minutes in all on 2 cores):
#   asan+ubsan   out-of-tree build with --enable-asan --enable-ubsan; make check
#   tsan         out-of-tree build with --enable-tsan; make check (ASLR off:
#                TSan cannot map its shadow on high-entropy kernels)
#   valgrind     normal build; the conformance driver under
#                valgrind --error-exitcode=1 (driver timeouts x20)
#   fuzz         make fuzz FUZZ_SECONDS=20 (clang + libFuzzer)
#   soak         tests/soak/soak --seconds 60 (normal build)
#
# The check programs are built with the same -fsanitize flags as the plugin
# (AM_CFLAGS/AM_LDFLAGS), so the sanitizer runtime is loaded at program start
# and the plugin they dlopen finds it: no LD_PRELOAD is needed.
#
# The builds work on a copy of the tree (the files git knows, committed or
# not) under $COLLX_SAN_WORK (default _build/sanitizers), so an in-tree
# configure of the checkout does not get in the way of the out-of-tree
# builds.  Knobs: JOBS (make -j for the builds, default 2), CHECK_JOBS
# (tests at a time in a stage's make check, default 2), FUZZ_SECONDS (20), SOAK_SECONDS
# (60), STAGES (default "asan tsan valgrind fuzz soak"), SAN_DETECT_LEAKS
# (unset: ASan's default, LeakSanitizer on, except where a test opts out
# through __asan_default_options; 0 or 1 forces it for every test).
# Needs: clang, libclang-rt-14-dev (libFuzzer), valgrind; nftables or
# iptables for the packet-drop fault case (else it drops the link instead).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
work=${COLLX_SAN_WORK:-$top/_build/sanitizers}
jobs=${JOBS:-2}
check_jobs=${CHECK_JOBS:-2}
fuzz_seconds=${FUZZ_SECONDS:-20}
soak_seconds=${SOAK_SECONDS:-60}
stages=${STAGES:-asan tsan valgrind fuzz soak}
total_pass=0 total_fail=0
t_all=$(date +%s)
mkdir -p "$work/logs"
logs=$work/logs

say() { printf '%s\n' "$*"; }

# Record a stage's result: stage NAME PASSED FAILED [EXTRA]
stage_result() {
  total_pass=$((total_pass + $2))
  total_fail=$((total_fail + $3))
  say "$1: $2 passed, $3 failed${4:+ $4}"
}

# "N passed, N failed[, N skipped]" -> "N N N" from the last such line of a file.
counts_of() {
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || { echo ""; return; }
  local p f s
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
  echo "$p $f ${s:-0}"
}

# ---- a pristine copy of the sources ---------------------------------------
prepare_sources() {
  local src=$work/src
  rm -rf "$src"
  mkdir -p "$src"
  if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
       tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$src"
  else
    (cd "$top" && tar --exclude=./_build --exclude=./.git --exclude=./config.status --exclude=./config.h \
       --exclude=./config.log --exclude=./libtool --exclude=./stamp-h1 --exclude=Makefile \
       --exclude=.libs --exclude=.deps --exclude='*.o' --exclude='*.lo' --exclude='*.la' -cf - .) |
      tar -xf - -C "$src"
  fi
  (cd "$src" && ./autogen.sh) >"$logs/autogen.log" 2>&1
}

# configure + make in $work/NAME with the given configure options.
build() {
  local name=$1
  shift
  local b=$work/$name
  rm -rf "$b"
  mkdir -p "$b"
  (cd "$b" && "$work/src/configure" "$@" && make -j"$jobs") >"$logs/build-$name.log" 2>&1
}

# make check in a build; stage result from tests/summary.sh.
check_stage() {
  local stage=$1 b=$work/$2
  shift 2
  local t0=$(date +%s)
  (cd "$b" && env "$@" make -j"$check_jobs" check) >"$logs/check-$stage.log" 2>&1
  sh "$work/src/tests/summary.sh" "$b" >"$logs/summary-$stage.log" 2>&1
  local c
  c=$(counts_of "$logs/summary-$stage.log")
  # What failed, and any sanitizer report, from the test logs.
  for trs in $(find "$b" -name '*.trs' | sort); do
    local log=${trs%.trs}.log
    grep -qE '^:test-result: (FAIL|ERROR)' "$trs" || continue
    say "  $stage: ${log#$b/}:"
    grep -E '^(FAIL|TIMEOUT)|^  \[.*\] FAIL|SUMMARY: (Address|Undefined|Thread|Leak)Sanitizer|runtime error:' "$log" |
      sort | uniq -c | sort -rn | head -n 15 | sed 's/^/    /'
  done
  if [ -z "$c" ]; then
    stage_result "$stage" 0 1 "(no summary; see $logs/check-$stage.log)"
  else
    set -- $c
    stage_result "$stage" "$1" "$2" "($3 skipped, $(($(date +%s) - t0)) s; logs in $b)"
  fi
}

if ! prepare_sources; then
  say "sources: autogen.sh failed (see $logs/autogen.log)"
  stage_result sources 0 1
  say "$total_pass passed, $total_fail failed"
  exit 1
fi

for stage in $stages; do
  t0=$(date +%s)
  case $stage in
  asan)
    say "== asan+ubsan: build with --enable-asan --enable-ubsan, make check"
    if ! build asan --enable-asan --enable-ubsan; then
      tail -n 20 "$logs/build-asan.log" | sed 's/^/  | /'
      stage_result asan+ubsan 0 1 "(build failed, $logs/build-asan.log)"
      continue
    fi
    check_stage asan+ubsan asan \
      ASAN_OPTIONS=${SAN_DETECT_LEAKS:+detect_leaks=$SAN_DETECT_LEAKS:}halt_on_error=1:detect_stack_use_after_return=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      COLLX_FAULTS_SCALE=2 COLLX_DRIVER_TIMEOUT_SCALE=3
    ;;
  tsan)
    say "== tsan: build with --enable-tsan, make check"
    if ! build tsan --enable-tsan; then
      tail -n 20 "$logs/build-tsan.log" | sed 's/^/  | /'
      stage_result tsan 0 1 "(build failed, $logs/build-tsan.log)"
      continue
    fi
    noaslr=""
    setarch "$(uname -m)" -R true 2>/dev/null && noaslr="setarch $(uname -m) -R"
    # check_stage runs `env VARS make check`; setarch wraps make.
    t1=$(date +%s)
    (cd "$work/tsan" && env TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1" \
       COLLX_FAULTS_SCALE=3 COLLX_DRIVER_TIMEOUT_SCALE=4 $noaslr make -j"$check_jobs" check) >"$logs/check-tsan.log" 2>&1
    sh "$work/src/tests/summary.sh" "$work/tsan" >"$logs/summary-tsan.log" 2>&1
    for trs in $(find "$work/tsan" -name '*.trs' | sort); do
      log=${trs%.trs}.log
      grep -qE '^:test-result: (FAIL|ERROR)' "$trs" || continue
      say "  tsan: ${log#$work/tsan/}:"
      grep -E '^(FAIL|TIMEOUT)|^  \[.*\] FAIL|SUMMARY: ThreadSanitizer' "$log" | sort | uniq -c | sort -rn |
        head -n 15 | sed 's/^/    /'
    done
    c=$(counts_of "$logs/summary-tsan.log")
    if [ -z "$c" ]; then
      stage_result tsan 0 1 "(no summary; see $logs/check-tsan.log)"
    else
      set -- $c
      stage_result tsan "$1" "$2" "($3 skipped, $(($(date +%s) - t1)) s; logs in $work/tsan)"
    fi
    ;;
  valgrind)
    say "== valgrind: conformance driver under valgrind --error-exitcode=1 (normal build)"
    if ! command -v valgrind >/dev/null; then
      stage_result valgrind 0 1 "(valgrind is not installed)"
      continue
    fi
    if ! build plain; then
      tail -n 20 "$logs/build-plain.log" | sed 's/^/  | /'
      stage_result valgrind 0 1 "(build failed, $logs/build-plain.log)"
      continue
    fi
    (cd "$work/plain" && make -j"$jobs" tests/driver/conformance) >>"$logs/build-plain.log" 2>&1
    # Each forked process runs under valgrind too (fork keeps the tool); a
    # memory error makes that process exit 1 without a verdict, which the
    # harness reports as a failure of the case ("ended abnormally").  Leaks are reported, not
    # counted (the plugin keeps its device table until exit).
    (cd "$work/plain" && COLLX_DRIVER_TIMEOUT_SCALE=20 timeout 1200 valgrind -q --error-exitcode=1 \
       --keep-debuginfo=yes --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=none \
       ./tests/driver/conformance) >"$logs/valgrind.log" 2>&1
    grep -E '^(FAIL|TIMEOUT)|^  TIMEOUT|^  \[.*\] FAIL' "$logs/valgrind.log" | head -n 20 | sed 's/^/  /'
    nerr=$(grep -cE '^==[0-9]+== (Invalid|Conditional|Use of uninitialised|Syscall param|Mismatched|Source and destination)' \
      "$logs/valgrind.log")
    nleak=$(grep -cE 'definitely lost in loss record' "$logs/valgrind.log")
    c=$(counts_of "$logs/valgrind.log")
    if [ -z "$c" ]; then
      stage_result valgrind 0 1 "(the driver did not finish; see $logs/valgrind.log)"
    else
      set -- $c
      stage_result valgrind "$1" "$2" "($nerr memory errors, $nleak definite-leak records (not counted), $(($(date +%s) - t0)) s; $logs/valgrind.log)"
    fi
    ;;
  fuzz)
    say "== fuzz: make fuzz FUZZ_SECONDS=$fuzz_seconds"
    if [ ! -f "$work/plain/Makefile" ] && ! build plain; then
      stage_result fuzz 0 1 "(build failed, $logs/build-plain.log)"
      continue
    fi
    (cd "$work/plain" && make fuzz FUZZ_SECONDS="$fuzz_seconds") >"$logs/fuzz.log" 2>&1
    grep -E '^(PASS|FAIL)|^  ' "$logs/fuzz.log" | grep -vE '^ +CC ' | sed 's/^/  /'
    c=$(counts_of "$logs/fuzz.log")
    if [ -z "$c" ]; then
      tail -n 15 "$logs/fuzz.log" | sed 's/^/  | /'
      stage_result fuzz 0 1 "(could not build or run the fuzzers: is clang with libclang-rt installed?)"
    else
      set -- $c
      stage_result fuzz "$1" "$2" "($(($(date +%s) - t0)) s)"
    fi
    ;;
  soak)
    say "== soak: tests/soak/soak --seconds $soak_seconds (normal build)"
    if [ ! -f "$work/plain/Makefile" ] && ! build plain; then
      stage_result soak 0 1 "(build failed, $logs/build-plain.log)"
      continue
    fi
    (cd "$work/plain" && make -j"$jobs" tests/soak/soak >/dev/null 2>&1 &&
       ./tests/soak/soak --seconds "$soak_seconds") >"$logs/soak.log" 2>&1
    grep -E '^(PASS|FAIL)|^  ' "$logs/soak.log" | sed 's/^/  /'
    c=$(counts_of "$logs/soak.log")
    if [ -z "$c" ]; then
      stage_result soak 0 1 "(no result; see $logs/soak.log)"
    else
      set -- $c
      stage_result soak "$1" "$2" "($(($(date +%s) - t0)) s)"
    fi
    ;;
  *)
    say "unknown stage '$stage'"
    stage_result "$stage" 0 1
    ;;
  esac
done

say "sanitizers.sh: $(($(date +%s) - t_all)) s in all; logs in $logs"
say "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
