#!/usr/bin/env bash
# Build a `make dist` tarball of collx on the GPU host, where a run starts
# on a bare machine: unpack it under DIR, configure, make, and print the
# build directory (the one bench/nccl-tests.sh and bench/ab.sh take).  On a
# failure the tails of the configure and make logs go to stderr.
#
#   B=$(bash bench/gpu-build.sh TARBALL DIR) || exit 1
set -u
[ $# -eq 2 ] || { echo "usage: gpu-build.sh TARBALL DIR" >&2; exit 2; }
tarball=$1 dir=$2
[ -f "$tarball" ] || { echo "gpu-build.sh: no tarball $tarball" >&2; exit 2; }
mkdir -p "$dir" && tar xzf "$tarball" -C "$dir" || exit 1
src=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'collx-*' | head -n 1)
[ -n "$src" ] || { echo "gpu-build.sh: $tarball holds no collx-* directory" >&2; exit 1; }
if ! (cd "$src" && ./configure -q >"$dir/configure.log" 2>&1 && make -j"$(nproc)" >"$dir/make.log" 2>&1); then
  tail -n 20 "$dir/configure.log" "$dir/make.log" >&2
  exit 1
fi
echo "$src"
