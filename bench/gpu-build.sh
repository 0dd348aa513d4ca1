#!/usr/bin/env bash
# Build a `make dist` tarball of collx on the GPU host, where a run starts
# on a bare machine: unpack it under DIR, configure, make, and print the
# build directory (the one bench/nccl-tests.sh and bench/ab.sh take).  On a
# failure the tails of the configure and make logs go to stderr.
#
#   B=$(bash bench/gpu-build.sh TARBALL DIR [NCCL_TESTS_TARBALL]) || exit 1
#
# With NCCL_TESTS_TARBALL it also builds nccl-tests, through one 8-byte
# all-reduce at 2 ranks (DIR/warm.log), so that the runs after it do not
# spend their time budget on that build.  Progress lines go to stderr.
set -u
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: gpu-build.sh TARBALL DIR [NCCL_TESTS_TARBALL]" >&2; exit 2; }
tarball=$1 dir=$2 nt=${3:-}
t0=$(date +%s)
[ -f "$tarball" ] || { echo "gpu-build.sh: no tarball $tarball" >&2; exit 2; }
mkdir -p "$dir" && tar xzf "$tarball" -C "$dir" || exit 1
src=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'collx-*' | head -n 1)
[ -n "$src" ] || { echo "gpu-build.sh: $tarball holds no collx-* directory" >&2; exit 1; }
if ! (cd "$src" && ./configure -q >"$dir/configure.log" 2>&1 && make -j"$(nproc)" >"$dir/make.log" 2>&1); then
  tail -n 20 "$dir/configure.log" "$dir/make.log" >&2
  exit 1
fi
echo "collx built in $(( $(date +%s) - t0 )) s; load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)" >&2
if [ -n "$nt" ]; then
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  NT_ARGS="-b 8 -e 8 -n 1 -w 1 -c 1" TOTAL_BUDGET=200 RUN_TIMEOUT=60 RESULTS_DIR="$dir/warm" \
    bash "$here/nccl-tests.sh" --ranks 2 --colls all_reduce --configs collx --tag warm "$nt" "$src" >"$dir/warm.log" 2>&1
  echo "nccl-tests built and run once: rc=$? at $(( $(date +%s) - t0 )) s" >&2
fi
echo "$src"
