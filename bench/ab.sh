#!/usr/bin/env bash
# Two builds of the plugin under nccl-tests, in alternating runs of one call:
# the GPU host's speed moves between sittings by up to 2x, so builds are
# only compared run against neighbouring run.  Each round runs every build
# once, in the order given, through bench/nccl-tests.sh (--configs collx,
# SAMPLE_PROCS=1, so each run also records every rank's threads and
# descriptors); the table gathers bus bandwidth per round and build.
#
#   bench/ab.sh [options] NCCL_TESTS_TARBALL LABEL=PLUGIN_BUILD_DIR[,VAR=value...] ...
#
# A build may carry settings of its own after its directory
# (new8=/tmp/new,COLLX_NTHREADS=8): they join COLLX_EXTRA_ENV for its runs.
#
# Options:
#   --rounds N       rounds (default 2)
#   --ranks "2 4"    rank counts (default "4")
#   --colls "..."    collectives (default all_reduce)
#   --out DIR        where the runs and table.md go (default /tmp/collx-ab)
# Environment: NT_ARGS (default "-b 16M -e 512M -f 2 -n 10 -w 3 -c 1"), RUN_TIMEOUT,
# TOTAL_BUDGET per build and round (default 240), AB_MIN_SIZE (bytes: the
# smallest size in the table, default 16 MiB; sizes below 1 MiB show the
# time in us, larger ones busbw in GB/s), and what nccl-tests.sh reads.
set -u
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=2 RANKS=4 COLLS=all_reduce OUT=/tmp/collx-ab
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=${2:?}; shift ;;
    --ranks) RANKS=${2:?}; shift ;;
    --colls) COLLS=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    -*) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
    *) POS+=("$1") ;;
  esac
  shift
done
[ ${#POS[@]} -ge 3 ] || { echo "ab.sh: a tarball and at least two LABEL=DIR builds are needed" >&2; exit 2; }
TARBALL=${POS[0]}
BUILDS=("${POS[@]:1}")
dir_of() { local d=${1#*=}; echo "${d%%,*}"; }
env_of() { local d=${1#*=}; case "$d" in *,*) echo "${d#*,}" | tr ',' ' ' ;; esac; }
for b in "${BUILDS[@]}"; do
  case "$b" in *=*) [ -d "$(dir_of "$b")" ] || { echo "ab.sh: no build directory $(dir_of "$b")" >&2; exit 2; } ;;
    *) echo "ab.sh: '$b' is not LABEL=DIR" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
export NT_ARGS=${NT_ARGS:--b 16M -e 512M -f 2 -n 10 -w 3 -c 1}
export SAMPLE_PROCS=1 TOTAL_BUDGET=${TOTAL_BUDGET:-240}
rc=0
for r in $(seq 1 "$ROUNDS"); do
  for b in "${BUILDS[@]}"; do
    label=${b%%=*}
    echo "[ab] round $r: $label"
    COLLX_EXTRA_ENV="${COLLX_EXTRA_ENV-COLLX_RAIL_ID=lo=0 COLLX_PLANE_ID=lo=0} $(env_of "$b")" \
      RESULTS_DIR=$OUT/$label-$r "$SCRIPT_DIR/nccl-tests.sh" --configs collx --ranks "$RANKS" --colls "$COLLS" \
      --tag "ab-$label" "$TARBALL" "$(dir_of "$b")" >"$OUT/$label-$r.log" 2>&1 || rc=1
    tail -n 3 "$OUT/$label-$r.log"
  done
done
labels=()
for b in "${BUILDS[@]}"; do labels+=("${b%%=*}"); done
PY=python3
command -v "$PY" >/dev/null 2>&1 || PY=/usr/bin/python3
AB_BENCH_DIR=$SCRIPT_DIR "$PY" - "$OUT" "$ROUNDS" "${labels[@]}" >"$OUT/table.md" <<'PYEOF'
import glob, os, sys
sys.path.insert(0, os.environ.get("AB_BENCH_DIR", ""))
out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
from nt_report import Run, fmt
from plot import read_status, fmt_size
rows, sizes = [], set()
for r in range(1, rounds + 1):
    for label in labels:
        raw = os.path.join(out, "%s-%d" % (label, r), "raw")
        for st in read_status(raw):
            run = Run(st, raw)
            peak = "-"
            vals = []
            for fn in glob.glob(os.path.join(raw, run.name + ".procs.rank*")):
                vals += [l.split() for l in open(fn).read().splitlines() if l.strip()]
            if vals:
                peak = "%d / %d / %d" % tuple(max(int(v[i]) for v in vals) for i in (1, 2, 3))
            rows.append((run.coll, run.nranks, r, label, run, peak))
            sizes.update(s for s in run.rows if run.good(s))
min_size = int(os.environ.get("AB_MIN_SIZE", str(16 << 20)))
sizes = sorted(s for s in sizes if s >= min_size)
# Small sizes are judged by time (latency), large ones by bus bandwidth.
def cell(g, s):
    return fmt(g["time_us"]) + " us" if s < (1 << 20) else fmt(g["busbw"])
print("| collective | ranks | round | build | " + " | ".join(fmt_size(s) for s in sizes) +
      " | threads / cx-* / fds (peak per rank) |")
print("| --- " * (5 + len(sizes)) + "|")
for coll, n, r, label, run, peak in sorted(rows, key=lambda x: (x[0], x[1], x[2])):
    cells = [cell(run.good(s), s) if run.good(s) else "-" for s in sizes]
    print("| %s | %d | %d | %s | %s | %s |" % (coll, n, r, label, " | ".join(cells), peak))
PYEOF
cat "$OUT/table.md"
exit $rc
