#!/usr/bin/env bash
# nccl-tests through collx against NCCL's Socket transport, default and
# tuned, on one GPU shared by several ranks (each its own "host", as in
# run.sh: MPS, NCCL_HOSTID per rank, NCCL_NVLS_ENABLE=0, loopback).  Builds
# nccl-tests from a source tarball against the NCCL in use, runs
# all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf and
# alltoall_perf with mpirun, checks from NCCL's log that the traffic went
# through the expected network and which ncclNet table NCCL loaded, and
# writes a table per collective plus a summary of collx against the better
# Socket.
#
#   bench/nccl-tests.sh [options] NCCL_TESTS_TARBALL PLUGIN_BUILD_DIR
#
# NCCL_TESTS_TARBALL  nccl-tests sources, made where the mirror is with
#                       git -C /work/.mirror/NVIDIA+nccl-tests/repo archive \
#                         --format=tar.gz --prefix=nccl-tests/ -o nccl-tests.tar.gz HEAD
# PLUGIN_BUILD_DIR    the plugin's build directory (.libs/libnccl-net-collx.so)
#
# Options:
#   --nccl-home DIR   the NCCL to build against and run with (DIR/include/nccl.h,
#                     DIR/lib/libnccl.so*: a bench/build-nccl.sh prefix); default:
#                     NCCL_HOME, else what run.sh finds (system, CUDA, pip wheel)
#   --ranks "2 4"     rank counts (BENCH_RANKS)
#   --colls "..."     collectives, from all_reduce all_gather reduce_scatter
#                     sendrecv alltoall (default: all five)
#   --configs "..."   from collx socket socket-tuned (default: all three)
#   --tag TAG         results directory tag (default h200)
#   --build-root DIR  where nccl-tests is built, one build per NCCL version and
#                     tarball, reused by later calls (default /tmp/collx-nccl-tests)
#   --force           run again what RESULTS_DIR already holds as OK
#   --resume TAR      start from the results.tar.gz of an earlier call (unpacked
#                     into RESULTS_DIR when that does not exist yet): a later call
#                     on a fresh machine then adds to the earlier runs
#
# Environment (all optional):
#   RESULTS_DIR     results directory (default bench/results/<date>-<tag>-nccl<version>-nccl-tests).
#                   Calls with the same RESULTS_DIR add to it (say --ranks 2, then
#                   --ranks 4, each within a 10-minute limit) and skip runs it holds
#                   as OK; every call rewrites the tables from all of them.
#   OUT_DIR         also copy tables.md, summary.md, busbw.png and results.tar.gz
#                   (the results directory, per-collective tables and plots and
#                   raw logs included) here
#   NT_ARGS         nccl-tests arguments (default "-b 8 -e 512M -f 2 -n 5 -w 2 -c 1")
#   RUN_TIMEOUT     seconds one run may take (default 150)
#   TOTAL_BUDGET    seconds for the whole call, build included; later runs are
#                   skipped once it is spent (default 540)
#   COLLX_EXTRA_ENV "VAR=value ..." for the collx runs (default: COLLX_RAIL_ID=lo=0
#                   COLLX_PLANE_ID=lo=0, so that NCCL 2.30's topology log shows
#                   the ids; set it to "" for none)
#   BENCH_EXTRA_ENV "VAR=value ..." for every run
#   SAMPLE_PROCS=1  while each run goes, count every rank's threads, collx's
#                   own threads (named cx-*) and open descriptors twice a second;
#                   the largest of each goes to raw/<run>.procs.rank<r>
#                   ("rank threads cx-threads descriptors")
#   USE_MPS=0, MPI_OPTS, CUDA_HOME, NCCL_HOME, PYTHON, JOBS (build, default 16),
#   NVCC_GENCODE (default -gencode=arch=compute_90,code=sm_90)
#
# Exit status: 0 when every run was valid and right, 1 when a run failed,
# timed out, was skipped or went through another network, 2 when nothing
# could run.  Targets (collx >= 2x the better Socket, 16-512 MiB) are in
# summary.md and do not change the exit status.

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T_START=$(date +%s)

log()  { printf '[nccl-tests] %s\n' "$*"; }
warn() { printf '[nccl-tests] WARNING: %s\n' "$*" >&2; }
err()  { printf '[nccl-tests] ERROR: %s\n' "$*" >&2; }
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; }

ALL_COLLS="all_reduce all_gather reduce_scatter sendrecv alltoall"
RANKS=${BENCH_RANKS:-"2 4"}
COLLS=$ALL_COLLS
CONFIGS="collx socket socket-tuned"
TAG=${BENCH_TAG:-h200}
BUILD_ROOT=/tmp/collx-nccl-tests
FORCE=0
RESUME=""
NCCL_DIR=${NCCL_HOME:-}
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nccl-home) NCCL_DIR=${2:?--nccl-home needs a value}; shift ;;
    --nccl-home=*) NCCL_DIR=${1#*=} ;;
    --ranks) RANKS=${2:?--ranks needs a value}; shift ;;
    --ranks=*) RANKS=${1#*=} ;;
    --colls) COLLS=${2:?--colls needs a value}; shift ;;
    --colls=*) COLLS=${1#*=} ;;
    --configs) CONFIGS=${2:?--configs needs a value}; shift ;;
    --configs=*) CONFIGS=${1#*=} ;;
    --tag) TAG=${2:?--tag needs a value}; shift ;;
    --tag=*) TAG=${1#*=} ;;
    --build-root) BUILD_ROOT=${2:?--build-root needs a value}; shift ;;
    --build-root=*) BUILD_ROOT=${1#*=} ;;
    --force) FORCE=1 ;;
    --resume) RESUME=${2:?--resume needs a value}; shift ;;
    --resume=*) RESUME=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    -*) err "unknown option $1"; usage >&2; exit 2 ;;
    *) POS+=("$1") ;;
  esac
  shift
done
if [ ${#POS[@]} -ne 2 ]; then usage >&2; exit 2; fi
NT_TARBALL=${POS[0]}
BUILD_DIR=${POS[1]}
[ -f "$NT_TARBALL" ] || { err "no nccl-tests tarball $NT_TARBALL"; exit 2; }
for c in $COLLS; do
  case " $ALL_COLLS " in *" $c "*) ;; *) err "unknown collective '$c' (from: $ALL_COLLS)"; exit 2 ;; esac
done
for c in $CONFIGS; do
  case "$c" in collx|socket|socket-tuned) ;; *) err "unknown configuration '$c'"; exit 2 ;; esac
done
for n in $RANKS; do
  case "$n" in ''|*[!0-9]*|0|1) err "--ranks wants counts of 2 or more (got '$n')"; exit 2 ;; esac
done
TAG=$(printf '%s' "$TAG" | tr -c 'A-Za-z0-9._-' '_')
read -r -a NT_ARGV <<<"${NT_ARGS:--b 8 -e 512M -f 2 -n 5 -w 2 -c 1}"
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
TOTAL_BUDGET=${TOTAL_BUDGET:-540}
COLLX_EXTRA_ENV=${COLLX_EXTRA_ENV-COLLX_RAIL_ID=lo=0 COLLX_PLANE_ID=lo=0}
JOBS=${JOBS:-16}
NVCC_GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset NCCL_NET NCCL_NET_PLUGIN NCCL_SOCKET_NTHREADS NCCL_NSOCKS_PERTHREAD NCCL_HOSTID \
      NCCL_DEBUG_FILE NCCL_DEBUG NCCL_DEBUG_SUBSYS

# --------------------------------------------------------------------------
# NCCL: the given prefix, else the same search as run.sh.

find_nccl() {
  local pairs=() p i l py pynccl=""
  if [ -n "$NCCL_DIR" ]; then
    pairs=("$NCCL_DIR/include:$NCCL_DIR/lib" "$NCCL_DIR/include:$NCCL_DIR/lib64")
  else
    for py in python3 /usr/bin/python3; do
      command -v "$py" >/dev/null 2>&1 || continue
      pynccl=$("$py" -c 'import os, nvidia.nccl as m; print(os.path.dirname(m.__file__) if m.__file__ else list(m.__path__)[0])' 2>/dev/null) && break
    done
    pairs=("/usr/include:/usr/lib/x86_64-linux-gnu" "$CUDA_HOME/include:$CUDA_HOME/lib64"
           "$CUDA_HOME/include:$CUDA_HOME/lib" "/usr/local/include:/usr/local/lib")
    [ -n "$pynccl" ] && pairs+=("$pynccl/include:$pynccl/lib")
  fi
  for p in "${pairs[@]}"; do
    i=${p%%:*}; l=${p#*:}
    if [ -f "$i/nccl.h" ] && ls "$l"/libnccl.so* >/dev/null 2>&1; then NCCL_INC=$i; NCCL_LIB=$l; return 0; fi
  done
  return 1
}
NCCL_INC=""; NCCL_LIB=""
if ! find_nccl; then
  err "NCCL not found${NCCL_DIR:+ in $NCCL_DIR} (nccl.h and libnccl.so*); give --nccl-home"
  exit 2
fi
NCCL_VER=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]/{v = v (v ? "." : "") $3} END {print v}' "$NCCL_INC/nccl.h")
log "NCCL $NCCL_VER: header $NCCL_INC, library $NCCL_LIB"
# nccl-tests built against NCCL 2.28 and later includes nccl_device.h (the
# device API); an installation without it cannot build them.
case "$NCCL_VER" in
  2.2[89].*|2.[3-9][0-9].*|[3-9].*)
    if [ ! -f "$NCCL_INC/nccl_device.h" ]; then
      err "$NCCL_INC has nccl.h $NCCL_VER but no nccl_device.h, which nccl-tests needs from 2.28 on;"
      err "build that NCCL with bench/build-nccl.sh from its tarball (git archive v$NCCL_VER-1) and give --nccl-home"
      exit 2
    fi ;;
esac

# --------------------------------------------------------------------------
# Results directory (shared by calls that add runs to it)

if [ -z "${RESULTS_DIR:-}" ]; then
  RESULTS_DIR=$SCRIPT_DIR/results/$(date +%Y-%m-%d)-$TAG-nccl$NCCL_VER-nccl-tests
fi
if [ -n "$RESUME" ] && [ ! -e "$RESULTS_DIR" ]; then
  mkdir -p "$RESULTS_DIR" && tar -xzf "$RESUME" -C "$RESULTS_DIR" --strip-components=1 \
    || { err "cannot unpack $RESUME into $RESULTS_DIR"; exit 2; }
  log "resumed from $RESUME: $(($(wc -l <"$RESULTS_DIR/raw/status.tsv" 2>/dev/null || echo 1) - 1)) earlier run(s)"
fi
RAW=$RESULTS_DIR/raw
mkdir -p "$RAW" || { err "cannot create $RAW"; exit 2; }
RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd)
RAW=$RESULTS_DIR/raw
prev_nccl=$(sed -n 's/^nccl: \([^ ]*\).*/\1/p' "$RAW/meta.txt" 2>/dev/null)
if [ -n "$prev_nccl" ] && [ "$prev_nccl" != "$NCCL_VER" ]; then
  err "$RESULTS_DIR holds runs under NCCL $prev_nccl, this one is $NCCL_VER: use another RESULTS_DIR"
  exit 2
fi
STATUS=$RAW/status.tsv
[ -f "$STATUS" ] || printf '#name\tcoll\tnranks\tconfig\tstatus\trc\tvalid\tnet_lines\tother_lines\trows\tseconds\tnet_table\tnote\n' >"$STATUS"
META=$RAW/meta.txt
meta() { # KEY VALUE: replace the key's line
  if [ -f "$META" ]; then grep -v "^$1: " "$META" >"$META.tmp"; mv "$META.tmp" "$META"; fi
  printf '%s: %s\n' "$1" "$2" >>"$META"
}
meta date "$(date '+%Y-%m-%d %H:%M:%S %Z')"
meta host "$(hostname 2>/dev/null || echo '?')"
meta nccl "$NCCL_VER ($NCCL_LIB)"
meta args "${NT_ARGV[*]}"
meta env "${COLLX_EXTRA_ENV:+collx runs: $COLLX_EXTRA_ENV}${COLLX_EXTRA_ENV:+${BENCH_EXTRA_ENV:+; }}${BENCH_EXTRA_ENV:+every run: $BENCH_EXTRA_ENV}"
log "results: $RESULTS_DIR (ranks: $RANKS; collectives: $COLLS; configurations: $CONFIGS)"

WORK=$(mktemp -d /tmp/collx-nt.XXXXXX) || { err "mktemp failed"; exit 2; }
MPS_STARTED=0
MPS_DIR=${BENCH_MPS_DIR:-/tmp/collx-bench-mps}
stop_mps() {
  if [ "$MPS_STARTED" = 1 ]; then
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log \
      timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1 || warn "MPS quit did not answer"
    MPS_STARTED=0
  fi
}
cleanup() {
  stop_mps
  local pids
  pids=$(pgrep -f -- "$BUILD_ROOT/.*_perf" 2>/dev/null || true)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'err "interrupted"; exit 130' INT TERM

# --------------------------------------------------------------------------
# The plugin

PLUGIN_SO=""
for cand in "$BUILD_DIR/.libs/libnccl-net-collx.so" "$BUILD_DIR/libnccl-net-collx.so" "$BUILD_DIR/lib/libnccl-net-collx.so"; do
  [ -f "$cand" ] && { PLUGIN_SO=$(cd "$(dirname "$cand")" && pwd)/$(basename "$cand"); break; }
done
PLUGIN_DIR=${PLUGIN_SO:+$(dirname "$PLUGIN_SO")}
PLUGIN_VERSION=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$BUILD_DIR/config.h" 2>/dev/null | head -n1)
meta plugin "${PLUGIN_VERSION:-?} (${PLUGIN_SO:-not found})"
[ -n "$PLUGIN_SO" ] || { case " $CONFIGS " in *" collx "*) err "no libnccl-net-collx.so under $BUILD_DIR; collx runs will be skipped" ;; esac; }

# --------------------------------------------------------------------------
# Build nccl-tests against this NCCL (one build per NCCL version and
# tarball: a build against 2.28 refuses to run on 2.30).  NCCL and MPI are
# presented as the NCCL_HOME / MPI_HOME layouts nccl-tests' Makefile wants.

command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 || { err "mpirun and mpicc are needed"; exit 2; }
[ -x "$CUDA_HOME/bin/nvcc" ] || { err "no nvcc in $CUDA_HOME/bin (set CUDA_HOME)"; exit 2; }
NT_SUM=$(sha256sum "$NT_TARBALL" | cut -c1-12)
NT_DIR=$BUILD_ROOT/nccl-tests-$NT_SUM-nccl$NCCL_VER
NT_BIN=$NT_DIR/build
mkdir -p "$NT_DIR" || { err "cannot create $NT_DIR"; exit 2; }

shim_prefixes() {
  local sh=$NT_DIR/prefix so inc lib
  rm -rf "$sh"; mkdir -p "$sh/nccl/lib" "$sh/mpi"
  ln -s "$NCCL_INC" "$sh/nccl/include"
  so=$(ls "$NCCL_LIB"/libnccl.so* | sort | head -n1)
  ln -s "$so" "$sh/nccl/lib/libnccl.so"
  inc=""; lib=""
  for d in $(mpicc --showme:incdirs 2>/dev/null) $(mpicc -show 2>/dev/null | tr ' ' '\n' | sed -n 's/^-I//p'); do
    [ -z "$inc" ] && [ -f "$d/mpi.h" ] && inc=$d
  done
  for d in $(mpicc --showme:libdirs 2>/dev/null) $(mpicc -show 2>/dev/null | tr ' ' '\n' | sed -n 's/^-L//p') /usr/lib/x86_64-linux-gnu; do
    [ -z "$lib" ] && ls "$d"/libmpi.so* >/dev/null 2>&1 && lib=$d
  done
  [ -n "$inc" ] && [ -n "$lib" ] || { err "cannot find mpi.h / libmpi.so from mpicc"; return 1; }
  ln -s "$inc" "$sh/mpi/include"
  ln -s "$lib" "$sh/mpi/lib"
  NT_NCCL_HOME=$sh/nccl
  NT_MPI_HOME=$sh/mpi
}

build_nccl_tests() {
  local want="" c missing=0
  for c in $COLLS; do want+=" $NT_BIN/${c}_perf"; [ -x "$NT_BIN/${c}_perf" ] || missing=1; done
  shim_prefixes || return 1
  if [ $missing = 0 ]; then log "nccl-tests already built in $NT_BIN"; return 0; fi
  if [ ! -f "$NT_DIR/src/Makefile" ]; then
    rm -rf "$NT_DIR/src"; mkdir -p "$NT_DIR/src"
    tar -xzf "$NT_TARBALL" -C "$NT_DIR/src" --strip-components=1 || { err "cannot unpack $NT_TARBALL"; return 1; }
  fi
  local t0=$SECONDS
  log "building nccl-tests ($(echo $COLLS)) against NCCL $NCCL_VER, -j$JOBS (log $RAW/nccl-tests-build.log)"
  # shellcheck disable=SC2086  # $want is a list of targets
  if ! make -C "$NT_DIR/src/src" -j"$JOBS" MPI=1 MPI_HOME="$NT_MPI_HOME" NCCL_HOME="$NT_NCCL_HOME" \
       CUDA_HOME="$CUDA_HOME" NVCC_GENCODE="$NVCC_GENCODE" BUILDDIR="$NT_BIN" $want \
       >"$RAW/nccl-tests-build.log" 2>&1; then
    err "building nccl-tests failed:"; tail -n 25 "$RAW/nccl-tests-build.log" >&2
    return 1
  fi
  log "nccl-tests built in $((SECONDS - t0))s"
}
build_nccl_tests || exit 2
meta nccl_tests "$(sed -n 's/^#define NCCL_TESTS_VERSION *"\(.*\)"/\1/p' "$NT_DIR/src/src/common.h" 2>/dev/null | head -n1) (tarball $NT_SUM)"

export LD_LIBRARY_PATH="$NCCL_LIB:$NT_MPI_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --------------------------------------------------------------------------
# MPS and the launcher (as run.sh: every rank its own host)

MPS_STATE=off
if [ "${USE_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  mkdir -p "$MPS_DIR/pipe" "$MPS_DIR/log"
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  echo quit | timeout 15 nvidia-cuda-mps-control >/dev/null 2>&1 && sleep 1
  if timeout 30 nvidia-cuda-mps-control -d >"$RAW/mps-start.txt" 2>&1; then
    MPS_STARTED=1; MPS_STATE=on
  else
    warn "could not start MPS: $(cat "$RAW/mps-start.txt")"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi
[ "$MPS_STATE" = on ] || warn "MPS is off: ranks time-share the GPU, timings are not meaningful"
meta mps "$MPS_STATE"

WRAP=$WORK/rankwrap.sh
cat >"$WRAP" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}
NCCL_HOSTID="bench-host-$r"
export NCCL_HOSTID
[ -n "${BENCH_NCCL_LOG_PREFIX:-}" ] && NCCL_DEBUG_FILE="$BENCH_NCCL_LOG_PREFIX.rank$r.log" && export NCCL_DEBUG_FILE
[ -n "${BENCH_PROCS_PREFIX:-}" ] || exec "$@"
# SAMPLE_PROCS=1: the rank's peak threads, cx-* threads and descriptors,
# counted twice a second while it runs.
"$@" &
pid=$!
t=0 c=0 f=0
while kill -0 $pid 2>/dev/null; do
  n=$(ls /proc/$pid/task 2>/dev/null | wc -l); [ "$n" -gt $t ] && t=$n
  n=$(cat /proc/$pid/task/*/comm 2>/dev/null | grep -c '^cx-'); [ "$n" -gt $c ] && c=$n
  n=$(ls /proc/$pid/fd 2>/dev/null | wc -l); [ "$n" -gt $f ] && f=$n
  echo "$r $t $c $f" >"$BENCH_PROCS_PREFIX.rank$r"
  sleep 0.5
done
wait $pid
EOF
chmod +x "$WRAP"

# mpirun options that work here, tried with a two-rank MPI program.
MPI_BASE=(--allow-run-as-root --oversubscribe --bind-to none)
MPI_CHOSEN=()
probe_mpi() {
  local src=$WORK/probe.c bin=$WORK/probe c opts
  printf '#include <mpi.h>\nint main(int c, char **v) { int x = 1, y = 0; MPI_Init(&c, &v);\n  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); MPI_Finalize(); return y == 2 ? 0 : 1; }\n' >"$src"
  mpicc "$src" -o "$bin" >"$RAW/mpi-probe.txt" 2>&1 || { err "mpicc cannot build a test program"; return 1; }
  if [ -n "${MPI_OPTS:-}" ]; then read -r -a MPI_CHOSEN <<<"$MPI_OPTS"; return 0; fi
  for c in "--mca pml ob1 --mca btl self,vader,tcp" "--mca pml ob1 --mca btl self,vader,tcp --mca plm isolated" \
           "--mca pml ob1 --mca btl self,tcp --mca plm isolated" \
           "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca plm isolated" ""; do
    read -r -a opts <<<"$c"
    echo "+ mpirun ${MPI_BASE[*]} -np 2 $c $bin" >>"$RAW/mpi-probe.txt"
    if timeout -k 5 40 mpirun "${MPI_BASE[@]}" -np 2 "${opts[@]}" "$bin" >>"$RAW/mpi-probe.txt" 2>&1; then
      MPI_CHOSEN=("${opts[@]}"); return 0
    fi
  done
  err "mpirun failed with every option set tried (raw/mpi-probe.txt)"; return 1
}
probe_mpi || exit 2
meta launcher "mpirun ${MPI_BASE[*]} ${MPI_CHOSEN[*]}"

# --------------------------------------------------------------------------
# One run

FAILED_RUNS=0

# Whether RESULTS_DIR already holds run NAME as OK (and valid).
have_ok() { awk -F'\t' -v n="$1" '$1 == n && $5 == "OK" && $7 == "yes" { f = 1 } END { exit !f }' "$STATUS"; }

record() { # the status line of a run, replacing an earlier one of the same name
  grep -v "^$1"$'\t' "$STATUS" >"$STATUS.tmp"; mv "$STATUS.tmp" "$STATUS"
  printf '%s\n' "$(IFS=$'\t'; echo "$*")" >>"$STATUS"
}

# run_one COLL NRANKS CONFIG
run_one() {
  local coll=$1 n=$2 cfg=$3 name="$1-$2r-$3"
  local out=$RAW/$name.out errf=$RAW/$name.err prefix=$RAW/$name.nccl
  local envs=() expect note="" status="" rc=0 kv
  if [ "$FORCE" = 0 ] && have_ok "$name"; then log "$name: OK in $RESULTS_DIR already (--force runs it again)"; return; fi
  rm -f "$prefix".rank*.log "$out" "$errf"
  envs=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=${BENCH_NCCL_SUBSYS:-INIT,ENV,NET,GRAPH,TUNING}"
        NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo COLLX_IFNAME=lo NCCL_IB_DISABLE=1
        "BENCH_NCCL_LOG_PREFIX=$prefix")
  # Every rank shares the one GPU; without this nccl-tests gives local rank
  # r the GPU r and refuses ("Invalid number of GPUs").
  envs+=(NCCL_TESTS_DEVICE=0)
  case "$cfg" in
    collx)
      expect=collx
      envs+=(NCCL_NET_PLUGIN=collx NCCL_NET=collx "LD_LIBRARY_PATH=$PLUGIN_DIR:$LD_LIBRARY_PATH")
      for kv in $COLLX_EXTRA_ENV; do envs+=("$kv"); done ;;
    socket) expect=Socket; envs+=(NCCL_NET=Socket) ;;
    socket-tuned) expect=Socket; envs+=(NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4) ;;
  esac
  for kv in ${BENCH_EXTRA_ENV:-}; do envs+=("$kv"); done
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && envs+=("CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY" "CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY")

  local left=$((TOTAL_BUDGET - ($(date +%s) - T_START)))
  if [ "$cfg" = collx ] && [ -z "$PLUGIN_SO" ]; then status=SKIPPED; note="plugin .so not found"
  elif [ $left -lt 30 ]; then status=SKIPPED; note="time budget (TOTAL_BUDGET=$TOTAL_BUDGET s) spent"
  fi
  if [ -n "$status" ]; then
    warn "$name: $status ($note)"
    record "$name" "$coll" "$n" "$cfg" "$status" "" no 0 0 0 0 "" "$note"
    FAILED_RUNS=$((FAILED_RUNS + 1))
    return
  fi
  local tmo=$RUN_TIMEOUT
  [ $left -lt $tmo ] && tmo=$left
  printf '%s\n' "${envs[@]}" >"$RAW/$name.env"
  local cmd=(timeout -k 15 "$tmo" mpirun "${MPI_BASE[@]}" -np "$n" "${MPI_CHOSEN[@]}")
  for kv in "${envs[@]}"; do cmd+=(-x "${kv%%=*}"); done
  cmd+=("$WRAP" "$NT_BIN/${coll}_perf" "${NT_ARGV[@]}" -g 1)
  echo "+ ${cmd[*]}" >"$errf"
  log "run $name (timeout ${tmo}s)"
  local t0=$SECONDS
  rm -f "$RAW/$name".procs.rank*
  [ "${SAMPLE_PROCS:-0}" = 1 ] && envs+=("BENCH_PROCS_PREFIX=$RAW/$name.procs")
  env "${envs[@]}" "${cmd[@]}" >"$out" 2>>"$errf"
  rc=$?
  local secs=$((SECONDS - t0)) left_pids
  left_pids=$(pgrep -f -- "$NT_BIN/${coll}_perf" 2>/dev/null || true)
  [ -n "$left_pids" ] && { kill -9 $left_pids 2>/dev/null; sleep 1; }

  # Which network carried it (NCCL logs each connection "... via NET/<name>/<dev>"),
  # and which ncclNet table NCCL took from the plugin.
  local net_lines=0 other_lines=0 valid=no table=""
  if ls "$prefix".rank*.log >/dev/null 2>&1; then
    net_lines=$(cat "$prefix".rank*.log | grep -c "via NET/$expect/" || true)
    other_lines=$(cat "$prefix".rank*.log | grep -E '\] via ' | grep -vc "via NET/$expect/" || true)
    table=$(cat "$prefix".rank*.log | sed -n 's/.*NET\/Plugin: Loaded net plugin collx (\(v[0-9]*\)).*/\1/p' | sort -u | tr '\n' ' ')
  fi
  table=${table% }
  [ "$net_lines" -gt 0 ] && [ "$other_lines" -eq 0 ] && valid=yes
  if [ "$cfg" = collx ] && [ -z "$table" ]; then valid=no; note="no 'NET/Plugin: Loaded net plugin collx (vN)' in the log"; fi
  local rows wrong
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13' "$out" 2>/dev/null | wc -l)
  # #wrong out of place ($9) and in place ($13); sendrecv and alltoall
  # print N/A in place, which is no error.
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 + 0 > 0 || $13 + 0 > 0)' "$out" 2>/dev/null | wc -l)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT
  elif [ "$wrong" -gt 0 ]; then status=WRONG
  elif [ $rc -eq 0 ] && [ "$rows" -gt 0 ]; then status=OK
  else status="FAILED(rc=$rc)"
  fi
  [ $valid = no ] && [ -z "$note" ] && note="no 'via NET/$expect/' in the NCCL log (or other transports seen)"
  record "$name" "$coll" "$n" "$cfg" "$status" "$rc" "$valid" "$net_lines" "$other_lines" "$rows" "$secs" "$table" "$note"
  log "$name: $status, $rows sizes, ${secs}s, via NET/$expect: $net_lines, other: $other_lines${table:+, ncclNet $table} -> $([ $valid = yes ] && echo valid || echo INVALID)"
  if [ "$status" != OK ] || [ $valid = no ]; then
    FAILED_RUNS=$((FAILED_RUNS + 1))
    tail -n 8 "$errf" >&2
    cat "$prefix".rank*.log 2>/dev/null | grep -E 'NCCL WARN|collx.*WARN' | head -n 6 >&2
  fi
}

for n in $RANKS; do
  for coll in $COLLS; do
    for cfg in $CONFIGS; do run_one "$coll" "$n" "$cfg"; done
  done
done
stop_mps

# What NCCL said about the plugin, once per results directory: the table it
# loaded, the tuner, collx's own "ready" line, and (NCCL 2.30) the rail and
# plane ids of the NICs in its topology.
for f in "$RAW"/*-collx.nccl.rank0.log; do
  [ -f "$f" ] || continue
  grep -hE 'NET/Plugin|TUNER/Plugin|NET/collx : collx .* ready|ncclTopoPopulateNics|streams per new connection' "$f" \
    | sed 's/^[^ ]* [^ ]* //' | sort -u >"$RAW/plugin-lines.txt"
  break
done

# --------------------------------------------------------------------------
# Report: tables per collective, summary, plot (bench/nt_report.py)

PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do command -v "$p" >/dev/null 2>&1 && { PY=$p; break; }; done
if [ -n "$PY" ]; then
  "$PY" "$SCRIPT_DIR/nt_report.py" --raw "$RAW" --out "$RESULTS_DIR" || err "nt_report.py failed"
else
  err "no python3: tables not written"
fi
if [ -n "${OUT_DIR:-}" ]; then
  # Four files: what comes back from a machine is a few flat files.
  mkdir -p "$OUT_DIR"
  for f in tables.md summary.md busbw.png; do [ -f "$RESULTS_DIR/$f" ] && cp "$RESULTS_DIR/$f" "$OUT_DIR/"; done
  tar -czf "$OUT_DIR/results.tar.gz" -C "$(dirname "$RESULTS_DIR")" "$(basename "$RESULTS_DIR")" \
    && log "copied tables.md, summary.md, busbw.png and results.tar.gz (the whole results directory) to $OUT_DIR"
fi
[ -f "$RESULTS_DIR/summary.md" ] && cat "$RESULTS_DIR/summary.md"
log "done in $(( $(date +%s) - T_START ))s; results in $RESULTS_DIR"
[ $FAILED_RUNS -eq 0 ] && exit 0
exit 1
