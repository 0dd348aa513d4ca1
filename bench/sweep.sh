#!/usr/bin/env bash
# Try several collx settings against one Socket reference in a single GPU
# session: each variant is one `bench/run.sh --quick` of the collx
# configuration with COLLX_EXTRA_ENV set; the Socket reference runs once.
# Prints one line per variant and size, for bench/NOTES.md.
#
#   bench/sweep.sh BUILD_DIR RANKS "VAR=v VAR=v" ["VAR=v" ...]
#
# OUT_DIR, if set, receives sweep.txt (the lines printed).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?build dir}; ranks=${2:?ranks}; shift 2
out=${OUT_DIR:-/tmp}/sweep.txt
: >"$out"
run_variant() { # name configs env
  local name=$1 configs=$2 env=$3 dir=/tmp/sweep-$1
  rm -rf "$dir"
  COLLX_EXTRA_ENV="$env" RESULTS_DIR="$dir" TOTAL_BUDGET=${VARIANT_BUDGET:-60} \
    bash "$here/run.sh" --quick --configs "$configs" --ranks "$ranks" "$build" sweep >/dev/null 2>&1
  # table rows: size and the busbw / time columns of the configuration run
  awk -v n="$name" -v e="$env" -F'|' '/^\| [0-9]/ { gsub(/ /, "", $2); print n, "[" e "]", $2, $0 }' \
    "$dir/table.md" | tee -a "$out"
}
run_variant socket-ref "socket socket-tuned" ""
i=0
for env in "$@"; do
  i=$((i + 1))
  run_variant "v$i" collx "$env"
done
