#!/bin/sh
# The floors of the TCP transport (src/transport/tcp/floors), checked on
# the symbols of the built objects: no file uses a symbol defined by a
# file on a floor above its own, or by a sibling on its floor outside its
# chain.  Then the same check on two planted violations, which must be
# caught: the check cannot pass by finding nothing.
srcdir=${srcdir:-.}
floors=$srcdir/src/transport/tcp/floors
objdir=src/transport/tcp/.libs
[ -d "$objdir" ] || objdir=src/transport/tcp
fail=0

[ -f "$floors" ] || { echo "FAIL: no floors file at $floors"; exit 1; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 77; }

# "file floor chain position" for each file of a floors list.
placements() {
  grep -v '^#' "$1" | grep . | awk '{
    floor = NR
    for (i = 2; i <= NF; i++) {
      n = split($i, chain, "<")
      for (j = 1; j <= n; j++) print chain[j], floor, NR "." i, j
    }
  }'
}

# Print each use of a symbol that the floors in list $1 forbid, as
# "user -> definer: symbol"; the objects are those of $objdir.
violations() {
  placements "$1" > "$tmp/places"
  : > "$tmp/syms"
  for f in $(awk '{print $1}' "$tmp/places"); do
    o=$objdir/$f.o
    [ -f "$o" ] || { echo "missing object $o"; continue; }
    nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 {print "D", $3, f}' >> "$tmp/syms"
    nm -u "$o" | awk -v f="$f" '{print "U", $NF, f}' >> "$tmp/syms"
  done
  awk 'FNR == NR {floor[$1] = $2; chain[$1] = $3; pos[$1] = $4; next}
       $1 == "D" {def[$2] = $3; next}
       {sym[++n] = $2; user[n] = $3}
       END {
         for (i = 1; i <= n; i++) {
           u = user[i]; d = def[sym[i]]
           if (d == "" || d == u) continue
           if (floor[d] < floor[u] || (floor[d] == floor[u] && chain[d] == chain[u] && pos[d] < pos[u])) continue
           print u " -> " d ": " sym[i]
         }
       }' "$tmp/places" "$tmp/syms"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every source file stands on a floor, and every file named exists.
for c in "$srcdir"/src/transport/tcp/*.c; do
  f=$(basename "$c" .c)
  placements "$floors" | awk -v f="$f" '$1 == f {found = 1} END {exit !found}' ||
    { echo "FAIL: src/transport/tcp/$f.c stands on no floor of $floors"; fail=1; }
done
for f in $(placements "$floors" | awk '{print $1}'); do
  [ -f "$srcdir/src/transport/tcp/$f.c" ] || { echo "FAIL: the floors name $f, which has no source"; fail=1; }
done

found=$(violations "$floors")
if [ -n "$found" ]; then
  echo "$found" | sed 's/^/FAIL: a call against the floors: /'
  fail=1
fi

# Planted: the control channel declared on the floor of the pure modules,
# below the base it calls, and the receive role's reader chained after the
# send role (siblings it must not reach).
sed 's/^\(pure: .*\)/\1 ctrl/; s/^ctrl: ctrl$/ctrl:/' "$floors" > "$tmp/planted1"
case "$(violations "$tmp/planted1")" in
  *"ctrl -> base: tcp_comm_fail"*) ;;
  *) echo "FAIL: the control channel put below the base was not caught"; fail=1 ;;
esac
# A sibling plant: recv's symbols used by a file placed in send's chain.
awk '/^roles:/ {print "roles: recv_entry<recv_ctrl send_ctrl<send<recv"; next} {print}' "$floors" > "$tmp/planted2"
case "$(violations "$tmp/planted2")" in
  *"recv -> recv_ctrl:"*) ;;
  *) echo "FAIL: a file using a sibling outside its chain was not caught"; fail=1 ;;
esac

[ "$fail" -eq 0 ] && echo "floors: every call in the TCP transport goes down its floors ($(placements "$floors" | wc -l) files)"
exit "$fail"
