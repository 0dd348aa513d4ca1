#!/usr/bin/env bash
# collx GPU benchmark: all-reduce through collx against NCCL's own Socket
# transport, on one GPU shared by 2 and 4 ranks, each rank posing as its own
# host.  One call does everything: build bench/allreduce.c, start CUDA MPS,
# run every configuration, check from NCCL's log which network carried the
# traffic, and write table.md, busbw.png, summary.txt and raw.tar.gz.
#
#   bench/run.sh [--quick] [--tag TAG] [--ranks "2 4"] [--configs "..."] BUILD_DIR [TAG]
#
# BUILD_DIR is the plugin's build directory (it holds .libs/libnccl-net-collx.so);
# COLLX_BUILD_DIR may give it instead.  bench/README.md describes the output,
# the settings below, and why MPS and NCCL_HOSTID are needed.
#
# Environment (all optional):
#   RESULTS_DIR      where results go (default bench/results/<date>-<tag>)
#   OUT_DIR          also copy table.md, busbw.png, summary.txt, raw.tar.gz here
#   BENCH_ARGS       arguments for allreduce instead of the defaults
#   BENCH_EXTRA_ENV  "VAR=value ..." added to every run
#   COLLX_EXTRA_ENV  "VAR=value ..." added to the collx runs only
#   RUN_TIMEOUT      seconds one run may take (default 200, --quick 100)
#   TOTAL_BUDGET     seconds for all runs together; later runs are skipped once
#                    it is spent (default 480, --quick 300)
#   USE_MPS=0        do not start MPS     LAUNCHER=mpi|local   force a launcher
#   MPI_OPTS         mpirun options instead of the probed ones
#   CUDA_HOME, NCCL_HOME, PYTHON, COLLX_NET_NAME (default collx)
#
# Exit status: 0 when every run was valid and right (targets may still FAIL:
# summary.txt says), 1 when some run failed, 2 when nothing could run.

set -u
set -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T_START=$(date +%s)

log()  { printf '[bench] %s\n' "$*"; }
warn() { printf '[bench] WARNING: %s\n' "$*" >&2; }
err()  { printf '[bench] ERROR: %s\n' "$*" >&2; }

usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}

# --------------------------------------------------------------------------
# Arguments

QUICK=0
TAG=${BENCH_TAG:-h200}
BUILD_DIR=${COLLX_BUILD_DIR:-}
RANKS=${BENCH_RANKS:-"2 4"}
CONFIGS=${BENCH_CONFIGS:-"collx socket socket-tuned"}
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --tag) TAG=${2:?--tag needs a value}; shift ;;
    --tag=*) TAG=${1#*=} ;;
    --ranks) RANKS=${2:?--ranks needs a value}; shift ;;
    --ranks=*) RANKS=${1#*=} ;;
    --configs) CONFIGS=${2:?--configs needs a value}; shift ;;
    --configs=*) CONFIGS=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    -*) err "unknown option $1"; usage >&2; exit 2 ;;
    *) POS+=("$1") ;;
  esac
  shift
done
[ ${#POS[@]} -ge 1 ] && BUILD_DIR=${POS[0]}
[ ${#POS[@]} -ge 2 ] && TAG=${POS[1]}
TAG=$(printf '%s' "$TAG" | tr -c 'A-Za-z0-9._-' '_')
if [ -z "$BUILD_DIR" ]; then
  err "no plugin build directory: give it as the first argument or in COLLX_BUILD_DIR"
  usage >&2
  exit 2
fi
for c in $CONFIGS; do
  case "$c" in collx|socket|socket-tuned) ;; *) err "unknown configuration '$c'"; exit 2 ;; esac
done

if [ "$QUICK" = 1 ]; then
  DEFAULT_ARGS="-l 8,1M,16M,128M,512M -w 2 -n 20 -N 3 -B 1G"
  RUN_TIMEOUT=${RUN_TIMEOUT:-100}
  TOTAL_BUDGET=${TOTAL_BUDGET:-300}
  MODE=quick
else
  DEFAULT_ARGS="-b 8 -e 512M -f 2 -w 5 -n 200 -N 5 -B 2G"
  RUN_TIMEOUT=${RUN_TIMEOUT:-200}
  TOTAL_BUDGET=${TOTAL_BUDGET:-480}
  MODE=full
fi
read -r -a ARGS <<<"${BENCH_ARGS:-$DEFAULT_ARGS}"
COLLX_NET_NAME=${COLLX_NET_NAME:-collx}

# --------------------------------------------------------------------------
# Where things go

DATE=$(date +%Y-%m-%d)
if [ -z "${RESULTS_DIR:-}" ]; then
  RESULTS_DIR=$SCRIPT_DIR/results/$DATE-$TAG
  [ -e "$RESULTS_DIR" ] && RESULTS_DIR=$RESULTS_DIR-$(date +%H%M%S)
fi
RAW=$RESULTS_DIR/raw
if ! mkdir -p "$RAW"; then err "cannot create $RAW"; exit 2; fi
RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd)
RAW=$RESULTS_DIR/raw
WORK=$(mktemp -d /tmp/collx-bench.XXXXXX) || { err "mktemp failed"; exit 2; }
log "results: $RESULTS_DIR   (mode $MODE, ranks: $RANKS, configs: $CONFIGS)"

META=$RAW/meta.txt
: >"$META"
meta() { printf '%s: %s\n' "$1" "$2" >>"$META"; }
meta date "$(date '+%Y-%m-%d %H:%M:%S %Z')"
meta host "$(hostname 2>/dev/null || echo '?')"
meta mode "$MODE"
meta args "${ARGS[*]}"
# Settings added to the runs, so that a table says what it measured.
meta env "${COLLX_EXTRA_ENV:+collx runs: $COLLX_EXTRA_ENV; }${BENCH_EXTRA_ENV:+every run: $BENCH_EXTRA_ENV}"
meta results "$RESULTS_DIR"

# What the caller's environment says about NCCL, CUDA, MPI and collx.
env | grep -E '^(NCCL|COLLX|CUDA|OMPI|PMIX|LD_LIBRARY_PATH)' | sort >"$RAW/env-at-start.txt" || true
# Variables the configurations set themselves must not leak in from outside.
unset NCCL_NET NCCL_NET_PLUGIN NCCL_SOCKET_NTHREADS NCCL_NSOCKS_PERTHREAD NCCL_HOSTID \
      NCCL_DEBUG_FILE NCCL_DEBUG NCCL_DEBUG_SUBSYS

# --------------------------------------------------------------------------
# Clean-up: stop the MPS daemon this script started, remove the work dir.

MPS_STARTED=0
MPS_DIR=${BENCH_MPS_DIR:-/tmp/collx-bench-mps}
stop_mps() {
  if [ "$MPS_STARTED" = 1 ]; then
    log "stopping MPS"
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log \
      timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1 || warn "MPS quit did not answer"
    MPS_STARTED=0
  fi
}
FINISHED=0
cleanup() {
  stop_mps
  # On an early exit, still hand back what there is.
  if [ "$FINISHED" = 0 ] && [ -n "${OUT_DIR:-}" ] && [ -d "$RAW" ]; then
    mkdir -p "$OUT_DIR" && tar -czf "$OUT_DIR/raw.tar.gz" -C "$RESULTS_DIR" raw 2>/dev/null \
      && log "early exit: raw files packed into $OUT_DIR/raw.tar.gz"
  fi
  # Stragglers of our own runs (found by the binary's unique path), by pid.
  local pids
  pids=$(pgrep -f -- "$WORK/allreduce" 2>/dev/null || true)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'err "interrupted"; exit 130' INT TERM

# --------------------------------------------------------------------------
# The machine

GPU="?"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi >"$RAW/nvidia-smi.txt" 2>&1 || true
  GPU=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  meta driver "$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)"
  meta compute_mode "$(timeout 30 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -n1)"
else
  warn "nvidia-smi not found"
fi
meta gpu "${GPU:-?}"
meta cpus "$(nproc 2>/dev/null || echo '?')"
log "GPU: ${GPU:-?}, $(nproc 2>/dev/null || echo '?') cores"

# --------------------------------------------------------------------------
# The plugin

PLUGIN_SO=""
for cand in "$BUILD_DIR/.libs/libnccl-net-collx.so" "$BUILD_DIR/libnccl-net-collx.so" \
            "$BUILD_DIR/lib/libnccl-net-collx.so"; do
  if [ -f "$cand" ]; then PLUGIN_SO=$(cd "$(dirname "$cand")" && pwd)/$(basename "$cand"); break; fi
done
PLUGIN_VERSION="?"
if [ -f "$BUILD_DIR/config.h" ]; then
  PLUGIN_VERSION=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$BUILD_DIR/config.h" | head -n1)
fi
if [ -n "$PLUGIN_SO" ]; then
  PLUGIN_DIR=$(dirname "$PLUGIN_SO")
  log "plugin: $PLUGIN_SO (version ${PLUGIN_VERSION:-?})"
  ldd "$PLUGIN_SO" >"$RAW/plugin-ldd.txt" 2>&1 || true
  if grep -q 'not found' "$RAW/plugin-ldd.txt"; then
    warn "the plugin has unresolved libraries:"; grep 'not found' "$RAW/plugin-ldd.txt" >&2
  fi
  if [ -x "$BUILD_DIR/collx-info" ]; then
    COLLX_IFNAME=lo timeout 30 "$BUILD_DIR/collx-info" >"$RAW/collx-info.txt" 2>&1 || true
  fi
else
  PLUGIN_DIR=""
  err "no libnccl-net-collx.so under $BUILD_DIR (.libs/); the collx runs will be skipped"
fi
meta plugin "${PLUGIN_VERSION:-?} (${PLUGIN_SO:-not found})"

# --------------------------------------------------------------------------
# CUDA and NCCL

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUDA_INC=$CUDA_HOME/include
CUDA_LIB=""
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib"; do
  if ls "$d"/libcudart.so* >/dev/null 2>&1; then CUDA_LIB=$d; break; fi
done
[ -f "$CUDA_INC/cuda_runtime.h" ] || { err "no cuda_runtime.h in $CUDA_INC (set CUDA_HOME)"; exit 2; }
[ -n "$CUDA_LIB" ] || { err "no libcudart.so under $CUDA_HOME (set CUDA_HOME)"; exit 2; }

# nccl.h and libnccl: NCCL_HOME first, then the system, then CUDA's tree,
# then the pip wheel; a header is paired with the library beside it first.
PYNCCL=""
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  PYNCCL=$("$py" -c 'import os, nvidia.nccl as m; print(os.path.dirname(m.__file__) if m.__file__ else list(m.__path__)[0])' 2>/dev/null) && break
done
NCCL_INC=""; NCCL_LIB=""
pairs=()
[ -n "${NCCL_HOME:-}" ] && pairs+=("$NCCL_HOME/include:$NCCL_HOME/lib" "$NCCL_HOME/include:$NCCL_HOME/lib64")
pairs+=("/usr/include:/usr/lib/x86_64-linux-gnu" "$CUDA_HOME/include:$CUDA_HOME/lib64"
        "$CUDA_HOME/include:$CUDA_HOME/lib" "/usr/local/include:/usr/local/lib")
[ -n "$PYNCCL" ] && pairs+=("$PYNCCL/include:$PYNCCL/lib")
for p in "${pairs[@]}"; do
  i=${p%%:*}; l=${p#*:}
  if [ -f "$i/nccl.h" ] && ls "$l"/libnccl.so* >/dev/null 2>&1; then NCCL_INC=$i; NCCL_LIB=$l; break; fi
done
if [ -z "$NCCL_INC" ]; then
  for p in "${pairs[@]}"; do i=${p%%:*}; [ -z "$NCCL_INC" ] && [ -f "$i/nccl.h" ] && NCCL_INC=$i; done
  for p in "${pairs[@]}"; do l=${p#*:}; [ -z "$NCCL_LIB" ] && ls "$l"/libnccl.so* >/dev/null 2>&1 && NCCL_LIB=$l; done
fi
if [ -z "$NCCL_INC" ] || [ -z "$NCCL_LIB" ]; then
  err "NCCL not found (nccl.h: ${NCCL_INC:-none}, libnccl: ${NCCL_LIB:-none}); set NCCL_HOME"
  exit 2
fi
if [ -e "$NCCL_LIB/libnccl.so" ]; then NCCL_LINK=-lnccl; else NCCL_LINK=-l:libnccl.so.2; fi
NCCL_HDR_VER=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]/{v=v (v?".":"") $3} END{print v}' "$NCCL_INC/nccl.h")
log "NCCL: nccl.h $NCCL_HDR_VER in $NCCL_INC, library in $NCCL_LIB; CUDA: $CUDA_HOME"
meta nccl_header "$NCCL_HDR_VER ($NCCL_INC/nccl.h)"
meta nccl_lib "$NCCL_LIB"

# --------------------------------------------------------------------------
# Build: with MPI when mpicc is there, and always the MPI-less fallback.

SRC=$SCRIPT_DIR/allreduce.c
BIN_MPI=$WORK/allreduce
BIN_LOCAL=$WORK/allreduce-nompi
CFLAGS_B=(-O2 -std=gnu11 -Wall -I"$NCCL_INC" -I"$CUDA_INC")
# shellcheck disable=SC2054  # the commas belong to -Wl,-rpath
LIBS_B=(-L"$NCCL_LIB" -L"$CUDA_LIB" "$NCCL_LINK" -lcudart -Wl,-rpath,"$NCCL_LIB:$CUDA_LIB")
: >"$RAW/build.log"
HAVE_MPI=0; HAVE_LOCAL=0
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
  echo "+ mpicc ${CFLAGS_B[*]} $SRC -o $BIN_MPI ${LIBS_B[*]}" >>"$RAW/build.log"
  if mpicc "${CFLAGS_B[@]}" "$SRC" -o "$BIN_MPI" "${LIBS_B[@]}" >>"$RAW/build.log" 2>&1; then
    HAVE_MPI=1
  else
    err "building with mpicc failed:"; tail -n 20 "$RAW/build.log" >&2
  fi
  meta mpi "$(mpirun --version 2>/dev/null | head -n1)"
else
  warn "mpicc/mpirun not found: ranks will be started without MPI"
fi
CC_B=${CC:-cc}
command -v "$CC_B" >/dev/null 2>&1 || CC_B=gcc
echo "+ $CC_B -DBENCH_NO_MPI ${CFLAGS_B[*]} $SRC -o $BIN_LOCAL ${LIBS_B[*]}" >>"$RAW/build.log"
if "$CC_B" -DBENCH_NO_MPI "${CFLAGS_B[@]}" "$SRC" -o "$BIN_LOCAL" "${LIBS_B[@]}" >>"$RAW/build.log" 2>&1; then
  HAVE_LOCAL=1
else
  warn "building the MPI-less fallback failed (see raw/build.log)"
fi
if [ $HAVE_MPI = 0 ] && [ $HAVE_LOCAL = 0 ]; then
  err "could not build bench/allreduce.c:"; tail -n 30 "$RAW/build.log" >&2
  exit 2
fi

export LD_LIBRARY_PATH="$NCCL_LIB:$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Each rank poses as its own host: NCCL_HOSTID from the rank, and its own
# NCCL debug file.
WRAP=$WORK/rankwrap.sh
cat >"$WRAP" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${BENCH_RANK:-0}}}}
NCCL_HOSTID="bench-host-$r"
export NCCL_HOSTID
if [ -n "${BENCH_NCCL_LOG_PREFIX:-}" ]; then
  NCCL_DEBUG_FILE="$BENCH_NCCL_LOG_PREFIX.rank$r.log"
  export NCCL_DEBUG_FILE
fi
exec "$@"
EOF
chmod +x "$WRAP"

# --------------------------------------------------------------------------
# MPS: without it the ranks' kernels only time-slice the GPU.

MPS_STATE=off
if [ "${USE_MPS:-1}" = 0 ]; then
  MPS_STATE="off (USE_MPS=0)"
elif command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  mkdir -p "$MPS_DIR/pipe" "$MPS_DIR/log"
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  # A daemon left by an earlier run of this script, on the same pipe dir.
  echo quit | timeout 15 nvidia-cuda-mps-control >/dev/null 2>&1 && sleep 1
  if timeout 30 nvidia-cuda-mps-control -d >"$RAW/mps-start.txt" 2>&1; then
    MPS_STARTED=1; MPS_STATE=on
    log "MPS started (pipe dir $CUDA_MPS_PIPE_DIRECTORY)"
  else
    MPS_STATE="off (nvidia-cuda-mps-control -d failed)"
    warn "could not start MPS: $(cat "$RAW/mps-start.txt")"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
else
  MPS_STATE="off (nvidia-cuda-mps-control not found)"
fi

# Can a process use the GPU (through MPS when it is on)?  If not under MPS,
# try again without it rather than fail every run.
cuda_check() {
  [ $HAVE_LOCAL = 1 ] || return 0
  echo "+ $BIN_LOCAL -C (MPS $MPS_STATE)" >>"$RAW/cuda-check.txt"
  BENCH_RANK=0 BENCH_NRANKS=1 timeout -k 5 90 "$BIN_LOCAL" -C >>"$RAW/cuda-check.txt" 2>&1
}
if ! cuda_check; then
  if [ "$MPS_STATE" = on ]; then
    warn "a CUDA process failed under MPS (raw/cuda-check.txt); going on without MPS:"
    tail -n 3 "$RAW/cuda-check.txt" >&2
    stop_mps
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    MPS_STATE="off (a CUDA process failed under MPS)"
    cuda_check || { err "CUDA does not work here:"; tail -n 5 "$RAW/cuda-check.txt" >&2; exit 2; }
  else
    err "CUDA does not work here:"; tail -n 5 "$RAW/cuda-check.txt" >&2; exit 2
  fi
fi
[ "$MPS_STATE" = on ] || warn "MPS is $MPS_STATE: ranks time-share the GPU, timings are not meaningful"

# --------------------------------------------------------------------------
# Launcher: probe mpirun options with a rank check that needs no GPU.

MPI_BASE=(--allow-run-as-root --oversubscribe --bind-to none)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LAUNCH=local
MPI_CHOSEN=()
if [ "${LAUNCHER:-auto}" != local ] && [ $HAVE_MPI = 1 ]; then
  if [ -n "${MPI_OPTS:-}" ]; then
    read -r -a MPI_CHOSEN <<<"$MPI_OPTS"
    LAUNCH=mpi
  else
    candidates=(
      "--mca pml ob1 --mca btl self,vader,tcp"
      "--mca pml ob1 --mca btl self,vader,tcp --mca plm isolated"
      "--mca pml ob1 --mca btl self,tcp --mca plm isolated"
      "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca plm isolated"
      ""
    )
    : >"$RAW/mpi-probe.txt"
    for c in "${candidates[@]}"; do
      read -r -a opts <<<"$c"
      echo "+ mpirun ${MPI_BASE[*]} -np 2 $c $BIN_MPI -M" >>"$RAW/mpi-probe.txt"
      if timeout -k 5 40 mpirun "${MPI_BASE[@]}" -np 2 "${opts[@]}" "$BIN_MPI" -M \
           >>"$RAW/mpi-probe.txt" 2>&1; then
        MPI_CHOSEN=("${opts[@]}"); LAUNCH=mpi; break
      fi
    done
    if [ $LAUNCH != mpi ]; then
      warn "mpirun failed with every option set tried (raw/mpi-probe.txt):"
      tail -n 15 "$RAW/mpi-probe.txt" >&2
    fi
  fi
fi
if [ $LAUNCH = local ] && [ $HAVE_LOCAL = 0 ]; then
  err "no working launcher (mpirun failed and the MPI-less build failed)"; exit 2
fi
if [ "${LAUNCHER:-auto}" = mpi ] && [ $LAUNCH != mpi ]; then
  err "LAUNCHER=mpi but mpirun does not work here"; exit 2
fi
if [ $LAUNCH = mpi ]; then
  log "launcher: mpirun ${MPI_BASE[*]} ${MPI_CHOSEN[*]}"
  meta launcher "mpirun ${MPI_BASE[*]} ${MPI_CHOSEN[*]}"
else
  log "launcher: local (one background process per rank, id through a file)"
  meta launcher "local processes (no MPI)"
fi
meta mps "$MPS_STATE"

# --------------------------------------------------------------------------
# One run

STATUS=$RAW/status.tsv
printf '#name\tnranks\tconfig\tstatus\trc\tvalid\tnet_lines\tother_lines\trows\tseconds\tnote\n' >"$STATUS"
FAILED_RUNS=0

# run_one NRANKS CONFIG
run_one() {
  local n=$1 cfg=$2 name="${1}r-$2"
  local out=$RAW/$name.out errf=$RAW/$name.err prefix=$RAW/$name.nccl
  local expect envs=() note="" rc=0 status="" kv
  rm -f "$prefix".rank*.log "$out" "$errf"

  envs=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=${BENCH_NCCL_SUBSYS:-INIT,ENV,NET}"
        NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo COLLX_IFNAME=lo NCCL_IB_DISABLE=1
        "BENCH_NCCL_LOG_PREFIX=$prefix")
  case "$cfg" in
    collx)
      expect=$COLLX_NET_NAME
      envs+=(NCCL_NET_PLUGIN=collx "NCCL_NET=$COLLX_NET_NAME"
             "LD_LIBRARY_PATH=$PLUGIN_DIR:$LD_LIBRARY_PATH")
      for kv in ${COLLX_EXTRA_ENV:-}; do envs+=("$kv"); done ;;
    socket)
      expect=Socket
      envs+=(NCCL_NET=Socket) ;;
    socket-tuned)
      expect=Socket
      envs+=(NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4) ;;
  esac
  for kv in ${BENCH_EXTRA_ENV:-}; do envs+=("$kv"); done
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && envs+=("CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY" "CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY")

  local now left tmo
  now=$(date +%s); left=$((TOTAL_BUDGET - (now - T_START)))
  if [ "$cfg" = collx ] && [ -z "$PLUGIN_SO" ]; then
    status=SKIPPED; note="plugin .so not found"
  elif [ $left -lt 30 ]; then
    status=SKIPPED; note="time budget (TOTAL_BUDGET=$TOTAL_BUDGET s) spent"
  fi
  if [ -n "$status" ]; then
    warn "$name: $status ($note)"
    printf '%s\t%s\t%s\t%s\t\tno\t0\t0\t0\t0\t%s\n' "$name" "$n" "$cfg" "$status" "$note" >>"$STATUS"
    FAILED_RUNS=$((FAILED_RUNS + 1))
    return
  fi
  tmo=$RUN_TIMEOUT; [ $left -lt $tmo ] && tmo=$left

  printf '%s\n' "${envs[@]}" >"$RAW/$name.env"
  log "run $name (timeout ${tmo}s): ${envs[*]//BENCH_NCCL_LOG_PREFIX=*/}"
  local t0=$SECONDS
  if [ $LAUNCH = mpi ]; then
    local cmd=(timeout -k 15 "$tmo" mpirun "${MPI_BASE[@]}" -np "$n" "${MPI_CHOSEN[@]}")
    for kv in "${envs[@]}"; do cmd+=(-x "${kv%%=*}"); done
    cmd+=("$WRAP" "$BIN_MPI" "${ARGS[@]}")
    echo "+ ${cmd[*]}" >"$errf"
    env "${envs[@]}" "${cmd[@]}" >"$out" 2>>"$errf"
    rc=$?
  else
    local idf=$WORK/$name.id r pids=() o c
    rm -f "$idf"
    echo "+ local launch: $n x $WRAP $BIN_LOCAL ${ARGS[*]}" >"$errf"
    for ((r = 0; r < n; r++)); do
      o=$out; [ $r -gt 0 ] && o=$RAW/$name.rank$r.out
      env "${envs[@]}" BENCH_RANK=$r BENCH_NRANKS=$n BENCH_ID_FILE="$idf" \
        timeout -k 15 "$tmo" "$WRAP" "$BIN_LOCAL" "${ARGS[@]}" >"$o" 2>>"$errf" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do
      wait "$p"; c=$?
      [ $c -ne 0 ] && [ $rc -eq 0 ] && rc=$c
    done
  fi
  local secs=$((SECONDS - t0))
  # Anything of ours still alive after a timeout goes now, by pid.
  local left_pids
  left_pids=$(pgrep -f -- "$WORK/allreduce" 2>/dev/null || true)
  if [ -n "$left_pids" ]; then kill -9 $left_pids 2>/dev/null; sleep 1; fi

  # Which network carried the traffic: NCCL logs every connection as
  # "... [send] via NET/<name>/<dev>".
  local net_lines=0 other_lines=0 valid=no
  if ls "$prefix".rank*.log >/dev/null 2>&1; then
    net_lines=$(cat "$prefix".rank*.log | grep -c "via NET/$expect/" || true)
    other_lines=$(cat "$prefix".rank*.log | grep -E '\] via ' | grep -vc "via NET/$expect/" || true)
  fi
  [ "$net_lines" -gt 0 ] && [ "$other_lines" -eq 0 ] && valid=yes
  local result rows
  result=$(sed -n 's/^# result: *//p' "$out" 2>/dev/null | head -n1)
  rows=$(grep -cE '^ *[0-9]+ ' "$out" 2>/dev/null || true)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT
  elif [ "$result" = OK ] && [ $rc -eq 0 ]; then status=OK
  elif [ "$result" = OK ]; then status="OK(exit-rc=$rc)"; note="results complete, nonzero exit"
  elif [ "$result" = WRONG ]; then status=WRONG
  else status="FAILED(rc=$rc)"
  fi
  [ $valid = no ] && note="${note:+$note; }no 'via NET/$expect/' in the NCCL log (or other transports seen)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$n" "$cfg" "$status" "$rc" \
    "$valid" "$net_lines" "$other_lines" "${rows:-0}" "$secs" "$note" >>"$STATUS"
  log "$name: $status, ${rows:-0} sizes, ${secs}s, via NET/$expect lines: $net_lines, other: $other_lines -> $( [ $valid = yes ] && echo valid || echo INVALID)"
  if [ "$status" != OK ] || [ $valid = no ]; then
    FAILED_RUNS=$((FAILED_RUNS + 1))
    warn "$name: last lines of stderr:"
    tail -n 12 "$errf" >&2
    if ls "$prefix".rank*.log >/dev/null 2>&1; then
      warn "$name: NCCL warnings and network lines:"
      cat "$prefix".rank*.log | grep -E 'NCCL WARN|collx.*(WARN|error)' | head -n 10 >&2
      cat "$prefix".rank*.log | grep -E 'NET/Plugin|Using network|via NET' | head -n 6 >&2
    fi
  fi
}

# --------------------------------------------------------------------------
# All runs

for n in $RANKS; do
  for cfg in $CONFIGS; do
    run_one "$n" "$cfg"
    if [ "$MPS_STATE" = on ] && [ ! -f "$RAW/mps-servers.txt" ]; then
      echo get_server_list | timeout 10 nvidia-cuda-mps-control >"$RAW/mps-servers.txt" 2>&1 || true
    fi
  done
done

# --------------------------------------------------------------------------
# Tables, plot, summary; pack the raw files; copy to OUT_DIR.

stop_mps
[ -d "$MPS_DIR/log" ] && cp "$MPS_DIR"/log/*.log "$RAW"/ 2>/dev/null
if [ -s "$RAW/mps-servers.txt" ]; then
  meta mps "$MPS_STATE, server pid(s) seen: $(tr '\n' ' ' <"$RAW/mps-servers.txt")"
fi
meta nccl "$(sed -n 's/^# nccl_version [0-9]* (\([0-9.]*\)).*/\1/p' "$RAW"/*.out 2>/dev/null | head -n1)"

# The sizes the runs were asked for, so that a missing one counts as missing.
SIZES=""
if [[ " ${ARGS[*]} " =~ " -l "([^ ]+) ]]; then
  for s in ${BASH_REMATCH[1]//,/ }; do
    v=${s%[bB]}; m=1
    case "$v" in *[kK]) m=1024; v=${v%?} ;; *[mM]) m=$((1 << 20)); v=${v%?} ;; *[gG]) m=$((1 << 30)); v=${v%?} ;; esac
    SIZES+="${SIZES:+,}$((v * m))"
  done
fi

PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  command -v "$p" >/dev/null 2>&1 || continue
  if "$p" -c 'import matplotlib' >/dev/null 2>&1; then PY=$p; break; fi
  [ -z "$PY" ] && PY=$p
done
if [ -n "$PY" ]; then
  "$PY" "$SCRIPT_DIR/plot.py" --raw "$RAW" --out "$RESULTS_DIR" --sizes "$SIZES" \
    || err "plot.py failed"
else
  err "no python3: table.md, busbw.png and summary.txt not written"
fi

# The plugin's close-time statistics (INFO, NET): how many sends found the
# receiver's clear-to-send missing at their first isend, per collx run.
# Many such sends mean the CTS is on the critical path (bench/NOTES.md, 8).
cts_stats() {
  local name logs
  for logs in "$RAW"/*r-collx.nccl.rank0.log; do
    [ -f "$logs" ] || continue
    name=$(basename "$logs" .nccl.rank0.log)
    cat "$RAW/$name".nccl.rank*.log 2>/dev/null | awk -v n="$name" '
      /NET\/collx : send connection to .* closed:/ {
        for (i = 1; i <= NF; i++) {
          if ($i == "messages,") m += $(i - 1)
          if ($i == "sends" && $(i + 1) == "found") w += $(i - 1)
          if ($i == "eager," && $(i + 1) != "") { e += $(i - 1); x += $(i + 1) }
          if ($i == "CTS_WANTED") q += $(i - 1)
        }
        c++
      }
      END { if (c) printf "%s: %d send connections closed, %d sends, %d (%.1f%%) found no CTS at their first isend; %d eager, %d of them before their CTS; %d CTS_WANTED\n",
                          n, c, m, w, m ? 100.0 * w / m : 0, e, x, q }'
  done
}
if [ -f "$RESULTS_DIR/summary.txt" ]; then
  stats=$(cts_stats)
  [ -n "$stats" ] && printf '\ncollx send statistics (from the plugin'"'"'s close-time INFO lines):\n%s\n' "$stats" \
    >>"$RESULTS_DIR/summary.txt"
fi

# Keep every raw file reasonably small before packing (head and tail kept).
for f in "$RAW"/*; do
  [ -f "$f" ] || continue
  if [ "$(stat -c %s "$f")" -gt 4194304 ]; then
    { head -c 1048576 "$f"; printf '\n\n[... cut by run.sh ...]\n\n'; tail -c 1048576 "$f"; } >"$f.cut" && mv "$f.cut" "$f"
  fi
done
tar -czf "$RESULTS_DIR/raw.tar.gz" -C "$RESULTS_DIR" raw || err "packing raw/ failed"

FINISHED=1
if [ -n "${OUT_DIR:-}" ]; then
  mkdir -p "$OUT_DIR" && for f in table.md busbw.png summary.txt raw.tar.gz; do
    [ -f "$RESULTS_DIR/$f" ] && cp "$RESULTS_DIR/$f" "$OUT_DIR/"
  done
  log "copied table.md, busbw.png, summary.txt, raw.tar.gz to $OUT_DIR"
fi

echo
[ -f "$RESULTS_DIR/table.md" ] && cat "$RESULTS_DIR/table.md"
echo
[ -f "$RESULTS_DIR/summary.txt" ] && cat "$RESULTS_DIR/summary.txt"
log "done in $(( $(date +%s) - T_START ))s; results in $RESULTS_DIR"
[ $FAILED_RUNS -eq 0 ] && exit 0
exit 1
