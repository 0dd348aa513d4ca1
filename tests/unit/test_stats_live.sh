#!/bin/sh
# The live counters of a running job, read from outside (collx-info
# --stats), with collx-perf --self as the job:
#   1. mid-transfer, every data stream of the busy send connection shows
#      more bytes at a second look 2 s after the first (the watchdog reads
#      tcp_info once a second), and so does the connection;
#   2. after a clean exit no page of either process is left in /dev/shm;
#   3. pages of processes killed mid-transfer (SIGKILL) are removed by the
#      next start of collx on the node (here collx-info listing devices);
#   4. with COLLX_STATS=0 a running job has no page.
# Needs python3 (JSON) and a writable /dev/shm; exit 77 (skip) otherwise.
# Run from the build directory.
perf=./collx-perf info=./collx-info
[ -x "$perf" ] && [ -x "$info" ] || { echo "FAIL: collx-perf or collx-info not built"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: needs python3"; exit 77; }
[ -w /dev/shm ] || { echo "SKIP: /dev/shm is not writable"; exit 77; }
unset COLLX_STATS
# Other tests' collx processes (make -j) sweep the pages of dead processes
# too: one that starts between section 3's look and its collx-info leaves
# that nothing to remove and nothing to say.  As root the test runs with a
# /dev/shm of its own, where only its own processes look.
if [ -z "${COLLX_STATS_PRIVATE_SHM:-}" ] && [ "$(id -u)" -eq 0 ] &&
  unshare --mount --propagation private sh -c 'mount -t tmpfs none /dev/shm' 2>/dev/null; then
  COLLX_STATS_PRIVATE_SHM=1 exec unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o mode=1777 collx-shm /dev/shm && exec sh "$0"' "$0"
fi
[ -n "${COLLX_STATS_PRIVATE_SHM:-}" ] && echo "# with a /dev/shm of its own"
# Under a sanitizer (the CI's stages set COLLX_FAULTS_SCALE) everything is
# several times slower: the runs last longer and the looks wait longer.
scale=${COLLX_FAULTS_SCALE:-1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/collx-stats.XXXXXX") || exit 99
trap 'kill -9 $perf_pid $(cat "$tmp/pids" 2>/dev/null) 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The pids of collx-perf processes ($1: the parent) that have a page.
pages_of() {
  for f in /dev/shm/collx-*.stats; do
    [ -e "$f" ] || continue
    p=${f#/dev/shm/collx-}; p=${p%.stats}
    [ "$p" = "$1" ] || [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$1" ] && echo "$p"
  done
}

# Wait up to 5 s for pages of $1 and its child; their pids in $tmp/pids.
wait_pages() {
  i=0
  while [ $i -lt $((50 * scale)) ]; do
    pages_of "$1" > "$tmp/pids"
    [ "$(wc -l < "$tmp/pids")" -ge 2 ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# Per stream bytes of the busiest send connection of pid $1: "total s0 s1 ..."
send_bytes() {
  "$info" --stats "$1" --json 2>"$tmp/err" | python3 -c '
import json, sys
p = json.load(sys.stdin)
c = max((c for c in p["conns"] if c["role"] == "send"), key=lambda c: c["bytes"], default=None)
print(" ".join(str(x) for x in ([c["bytes"]] + [s["bytes"] for s in c["streams"]] if c else [])))'
}

# 1 and 2
"$perf" --self -s 4M -d 8 -t $((10 * scale)) > "$tmp/perf1.out" 2>&1 &
perf_pid=$!
if ! wait_pages $perf_pid; then
  fail "no stats pages for collx-perf $perf_pid and its child within 5 s: $(ls /dev/shm)"
else
  sleep $scale
  for p in $(cat "$tmp/pids"); do
    a=$(send_bytes "$p"); [ -n "$a" ] && { sender=$p; break; }
  done
  "$info" --stats "$sender" > "$tmp/text" || fail "collx-info --stats $sender (text) failed"
  grep -q "stream  0 path 0" "$tmp/text" || fail "text form lists no stream: $(cat "$tmp/text")"
  sleep $((2 * scale))
  b=$(send_bytes "$sender")
  echo "# pid $sender send connection, total and per stream bytes: first look $a, $((2 * scale)) s later $b"
  set -- $a; na=$#; set -- $b
  [ -n "$a" ] && [ "$na" -ge 3 ] && [ "$na" -eq $# ] || fail "no send connection with streams in pid ${sender:-?}: '$a' / '$b'"
  python3 -c '
import sys
a = [int(x) for x in sys.argv[1].split()]; b = [int(x) for x in sys.argv[2].split()]
bad = [i for i in range(len(a)) if len(b) != len(a) or not b[i] > a[i]]
sys.exit(1 if bad or not a else 0)' "$a" "$b" || fail "byte counts did not rise everywhere: $a -> $b"
fi
wait $perf_pid || fail "collx-perf exited $?: $(tail -5 "$tmp/perf1.out")"
sleep 0.5
for p in $(cat "$tmp/pids"); do
  [ -e /dev/shm/collx-$p.stats ] && fail "/dev/shm/collx-$p.stats left after a clean exit"
done

# 3
"$perf" --self -s 4M -d 8 -t $((20 * scale)) > "$tmp/perf2.out" 2>&1 &
perf_pid=$!
if ! wait_pages $perf_pid; then
  fail "no stats pages for the second collx-perf"
else
  kill -9 $(cat "$tmp/pids") $perf_pid 2>/dev/null
  wait $perf_pid 2>/dev/null
  sleep 0.2
  left=0
  for p in $(cat "$tmp/pids"); do [ -e /dev/shm/collx-$p.stats ] && left=$((left + 1)); done
  COLLX_IFNAME==lo COLLX_DEBUG=INFO "$info" > "$tmp/info.out" 2>&1
  for p in $(cat "$tmp/pids"); do
    [ -e /dev/shm/collx-$p.stats ] && fail "the page of killed pid $p survived the next start"
  done
  # Without a /dev/shm of its own (not root), another test's collx starting
  # beside this one (make -j) may sweep them first: then there is no INFO
  # line here to look for.
  if [ $left -ge 1 ]; then
    grep -q "stats: removed" "$tmp/info.out" || fail "no INFO line about the removed pages: $(cat "$tmp/info.out")"
  else
    echo "# the killed processes' pages were gone before this start: another collx on the node swept them"
  fi
fi

# 4
COLLX_STATS=0 "$perf" --self -s 4M -d 8 -t $((3 * scale)) > "$tmp/perf3.out" 2>&1 &
perf_pid=$!
sleep $((2 * scale))
[ -n "$(pages_of $perf_pid)" ] && fail "COLLX_STATS=0 and still a page: $(pages_of $perf_pid)"
wait $perf_pid || fail "collx-perf with COLLX_STATS=0 exited $?"

[ $fails -eq 0 ] && echo "PASS: counters rise mid-transfer, nothing left after exit, killed pages swept, COLLX_STATS=0 makes none"
exit $fails
