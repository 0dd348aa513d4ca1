#!/usr/bin/env bash
# Build NCCL from a source tarball for one GPU architecture, so that the
# benchmarks can run under a release the GPU machine does not have (NCCL
# 2.30 and its ncclNet v12, say).  Nothing of NCCL is kept in the tree: the
# tarball travels with the working tree and the build stays on the machine.
#
#   bench/build-nccl.sh [--arch sm_90] [--jobs 16] [--funcs SPEC|all] TARBALL PREFIX
#
# TARBALL  NCCL sources, e.g. made where the mirror is with
#            git -C /work/.mirror/NVIDIA+nccl/repo archive --format=tar.gz \
#              --prefix=nccl/ -o nccl-2.30.7-1.tar.gz v2.30.7-1
# PREFIX   build directory; gets src/ (the unpacked sources), obj/, and the
#          result: PREFIX/include/nccl.h and PREFIX/lib/libnccl.so (give it
#          to bench/nccl-tests.sh --nccl-home and to run.sh as NCCL_HOME).
#
# --arch    one GPU architecture (default sm_90, the H100/H200): NVCC_GENCODE
#           is -gencode=arch=compute_90,code=sm_90, which alone keeps the build
#           to minutes.
# --jobs    parallel compiles (default 16).
# --funcs   which device functions to compile (NCCL's ONLY_FUNCS).  The
#           default builds what the benchmarks call: float-sum all-reduce and
#           reduce-scatter, all-gather, send/receive (which also carries
#           all-to-all).  "all" builds every function: many more minutes.
#           A collective the build lacks fails at run time, it is not slow.
#
# Incremental: when a 10-minute command limit cuts the build, the same call
# again goes on where make stopped (the objects stay in PREFIX/obj).  A
# finished build with the same tarball and settings returns at once.
# Output: the build log in PREFIX/build.log (its tail on failure), then one
# line "NCCL <version> built in PREFIX".  Exit 0 when PREFIX/lib/libnccl.so
# is there, 1 when the build failed, 2 on a usage error.

set -u
set -o pipefail

ARCH=sm_90
JOBS=16
FUNCS="AllReduce Sum f32 * *|ReduceScatter Sum f32 * *|AllGather * *|SendRecv"
POS=()
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCH=${2:?--arch needs a value}; shift ;;
    --arch=*) ARCH=${1#*=} ;;
    --jobs) JOBS=${2:?--jobs needs a value}; shift ;;
    --jobs=*) JOBS=${1#*=} ;;
    --funcs) FUNCS=${2?--funcs needs a value}; shift ;;
    --funcs=*) FUNCS=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "build-nccl: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) POS+=("$1") ;;
  esac
  shift
done
if [ ${#POS[@]} -ne 2 ]; then usage >&2; exit 2; fi
TARBALL=${POS[0]}
PREFIX=${POS[1]}
[ -f "$TARBALL" ] || { echo "build-nccl: no tarball $TARBALL" >&2; exit 2; }
case "$ARCH" in
  sm_[0-9]*) CC_NUM=${ARCH#sm_} ;;
  *) echo "build-nccl: --arch wants sm_NN (got $ARCH)" >&2; exit 2 ;;
esac
case "$JOBS" in ''|*[!0-9]*) echo "build-nccl: --jobs wants a number" >&2; exit 2 ;; esac
[ "$FUNCS" = all ] && FUNCS=""
GENCODE="-gencode=arch=compute_$CC_NUM,code=sm_$CC_NUM"

mkdir -p "$PREFIX" || exit 2
PREFIX=$(cd "$PREFIX" && pwd)
LOG=$PREFIX/build.log
STAMP=$PREFIX/.built-from
TAR_SUM=$(sha256sum "$TARBALL" | cut -c1-16)
WANT="$TAR_SUM $ARCH ${FUNCS:-all}"

if [ -f "$PREFIX/lib/libnccl.so" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "NCCL $(cat "$PREFIX/.version" 2>/dev/null || echo '?') already built in $PREFIX ($WANT)"
  exit 0
fi

# The sources: unpacked once per tarball (a different tarball starts over).
SRC=$PREFIX/src
if [ "$(cat "$PREFIX/.src-from" 2>/dev/null)" != "$TAR_SUM" ]; then
  rm -rf "$SRC" "${PREFIX:?}/obj" "${PREFIX:?}/lib" "${PREFIX:?}/include"
  mkdir -p "$SRC"
  if ! tar -xzf "$TARBALL" -C "$SRC" --strip-components=1; then
    echo "build-nccl: cannot unpack $TARBALL" >&2
    exit 1
  fi
  [ -f "$SRC/makefiles/version.mk" ] || { echo "build-nccl: $TARBALL does not hold NCCL's sources" >&2; exit 1; }
  echo "$TAR_SUM" >"$PREFIX/.src-from"
fi
VERSION=$(awk '/^NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$SRC/makefiles/version.mk")
echo "$VERSION" >"$PREFIX/.version"

# A build of other device functions or another architecture starts its
# objects over.
if [ -f "$STAMP.partial" ] && [ "$(cat "$STAMP.partial")" != "$WANT" ]; then rm -rf "${PREFIX:?}/obj"; fi
echo "$WANT" >"$STAMP.partial"

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
echo "build-nccl: NCCL $VERSION for $ARCH, -j$JOBS, functions: ${FUNCS:-all}; log $LOG"
T0=$(date +%s)
{
  echo "+ make -C $SRC -j$JOBS src.lib BUILDDIR=$PREFIX CUDA_HOME=$CUDA_HOME NVCC_GENCODE=$GENCODE ONLY_FUNCS=${FUNCS:-}"
  make -C "$SRC" -j"$JOBS" src.lib BUILDDIR="$PREFIX" CUDA_HOME="$CUDA_HOME" \
    NVCC_GENCODE="$GENCODE" ONLY_FUNCS="$FUNCS"
} >>"$LOG" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ ! -f "$PREFIX/lib/libnccl.so" ]; then
  echo "build-nccl: make failed (exit $rc) after $(( $(date +%s) - T0 ))s; the end of $LOG:" >&2
  tail -n 25 "$LOG" >&2
  exit 1
fi
mv "$STAMP.partial" "$STAMP"
echo "NCCL $VERSION built in $PREFIX in $(( $(date +%s) - T0 ))s ($(du -sh "$PREFIX/lib" | cut -f1) of libraries)"
exit 0
