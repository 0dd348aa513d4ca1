#!/usr/bin/env bash
# collx's network events in NCCL's example profiler: build the example
# profiler (plugins/profiler/example; ext-profiler/example before NCCL 2.30)
# from an NCCL source tarball, run
# all_reduce_perf over collx with it loaded (bench/nccl-tests.sh: 2 ranks
# sharing one GPU, each its own host, traffic over loopback), and keep the
# trace with an excerpt of the proxy steps that carry collx's NET_SOCK events.
#
#   bench/profiler/run.sh [--nccl-home DIR] NCCL_SRC_TARBALL NCCL_TESTS_TARBALL PLUGIN_BUILD_DIR
#
# NCCL_SRC_TARBALL    NCCL sources, the same tarball bench/build-nccl.sh builds
#                     (the profiler must come from the NCCL release that runs):
#                       git -C /work/.mirror/NVIDIA+nccl/repo archive --format=tar.gz \
#                         --prefix=nccl/ -o nccl-2.30.7-1.tar.gz v2.30.7-1
# NCCL_TESTS_TARBALL  as for bench/nccl-tests.sh
# PLUGIN_BUILD_DIR    collx's build directory (.libs/libnccl-net-collx.so)
# --nccl-home DIR     the NCCL to run with (a bench/build-nccl.sh prefix);
#                     default: what bench/nccl-tests.sh finds
#
# Environment (optional): RESULTS_DIR (default bench/results/<date>-profiler),
# PROFILE_MASK (NCCL_PROFILE_EVENT_MASK, default 4095: every event, so that
# each NetPlugin event has its ProxyStep parent; 16|128 = 144 is the least
# that shows collx's events), NT_ARGS (default "-b 1M -e 16M -f 4 -n 3 -w 1
# -c 1": a short run, a small trace), CUDA_HOME (default /usr/local/cuda),
# BUILD_ROOT (default /tmp/collx-profiler).
#
# Output in RESULTS_DIR: trace_<commHash>_<rank>.json (the example profiler's Chrome trace,
# one file per communicator and rank; NCCL 2.30 names them so), excerpt.md (the command, event counts, and
# the first proxy steps with their NET_SOCK events), and what
# bench/nccl-tests.sh writes.  Exit 0 when the trace holds collx's events,
# 1 when the run failed or the trace has none, 2 on a usage error.

set -u
set -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NCCL_HOME_ARG=()
if [ "${1:-}" = --nccl-home ]; then NCCL_HOME_ARG=(--nccl-home "$2"); shift 2; fi
if [ $# -ne 3 ]; then
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
NCCL_SRC_TARBALL=$(readlink -f "$1") NT_TARBALL=$(readlink -f "$2") PLUGIN_DIR=$(readlink -f "$3")
for f in "$NCCL_SRC_TARBALL" "$NT_TARBALL"; do [ -f "$f" ] || { echo "run.sh: no file $f" >&2; exit 2; }; done
RESULTS_DIR=$(readlink -m "${RESULTS_DIR:-$here/../results/$(date +%Y-%m-%d)-profiler}")
BUILD_ROOT=${BUILD_ROOT:-/tmp/collx-profiler}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$RESULTS_DIR" "$BUILD_ROOT" || exit 2

# 1. The example profiler, from the NCCL sources (its Makefile includes
#    NCCL's makefiles/common.mk, so the whole tree is unpacked).
src=$BUILD_ROOT/nccl-src
rm -rf "$src" && mkdir -p "$src" && tar -xzf "$NCCL_SRC_TARBALL" -C "$src" --strip-components=1 || exit 1
# NCCL 2.30 keeps it in plugins/profiler/example, 2.28 in ext-profiler/example.
ex_dir=
for d in plugins/profiler/example ext-profiler/example; do
  [ -f "$src/$d/Makefile" ] && { ex_dir=$src/$d; break; }
done
[ -n "$ex_dir" ] || { echo "run.sh: no example profiler in $NCCL_SRC_TARBALL (plugins/profiler/example or ext-profiler/example)" >&2; exit 1; }
echo "# building the example profiler in $ex_dir"
make -C "$ex_dir" CUDA_HOME="$CUDA_HOME" >"$RESULTS_DIR/profiler-build.log" 2>&1 || {
  tail -20 "$RESULTS_DIR/profiler-build.log"; exit 1; }
PROFILER_SO=$ex_dir/libnccl-profiler-example.so
[ -f "$PROFILER_SO" ] || { echo "run.sh: $PROFILER_SO was not built" >&2; exit 1; }

# 2. all_reduce_perf over collx with the profiler loaded.
rm -f "$RESULTS_DIR"/trace_*.json
export RESULTS_DIR
export NT_ARGS=${NT_ARGS:--b 1M -e 16M -f 4 -n 3 -w 1 -c 1}
export COLLX_EXTRA_ENV="COLLX_RAIL_ID=lo=0 NCCL_PROFILER_PLUGIN=$PROFILER_SO NCCL_PROFILE_EVENT_MASK=${PROFILE_MASK:-4095} NCCL_PROFILE_DUMP_FILE=$RESULTS_DIR/trace"
cmd=("$here/../nccl-tests.sh" "${NCCL_HOME_ARG[@]}" --colls all_reduce --configs collx --ranks 2 --tag profiler --force
     "$NT_TARBALL" "$PLUGIN_DIR")
echo "+ COLLX_EXTRA_ENV=\"$COLLX_EXTRA_ENV\" NT_ARGS=\"$NT_ARGS\" ${cmd[*]}"
"${cmd[@]}"
rc=$?

# 3. The excerpt: events per trace file and the first proxy steps that
#    carry collx's events (the example prints a step's net events after it).
ex=$RESULTS_DIR/excerpt.md
{
  echo "# collx's network events in NCCL's example profiler"
  echo
  echo "Command (bench/profiler/run.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), nccl-tests.sh exit $rc):"
  echo
  echo '```'
  echo "COLLX_EXTRA_ENV=\"$COLLX_EXTRA_ENV\" NT_ARGS=\"$NT_ARGS\" ${cmd[*]}"
  echo '```'
  echo
  echo "| trace file | proxy step spans (cat NET) | NET_SOCK events (collx) |"
  echo "| --- | --- | --- |"
  for t in "$RESULTS_DIR"/trace_*.json; do
    [ -f "$t" ] || continue
    echo "| $(basename "$t") | $(grep -c '"cat": "NET", "ph": "b"' "$t") | $(grep -c '"cat": "NET_SOCK", "ph": "b"' "$t") |"
  done
  echo
  echo "First NET_SOCK events with the lines before them (their proxy step):"
  echo
  echo '```'
  for t in "$RESULTS_DIR"/trace_*.json; do
    [ -f "$t" ] || continue
    grep -m 1 -q NET_SOCK "$t" && { echo "== $(basename "$t")"; grep -m 6 -B 3 NET_SOCK "$t"; break; }
  done
  echo '```'
} >"$ex"
cat "$ex"
total=$(cat "$RESULTS_DIR"/trace_*.json 2>/dev/null | grep -c '"cat": "NET_SOCK", "ph": "b"')
if [ "${total:-0}" -eq 0 ]; then
  echo "run.sh: no NET_SOCK event in the trace: collx's events did not reach the profiler" >&2
  exit 1
fi
[ $rc -eq 0 ] || exit 1
echo "# $total NET_SOCK events in $RESULTS_DIR"
exit 0
