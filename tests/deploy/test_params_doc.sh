#!/bin/sh
# The settings documentation cannot drift from the code: the table between
# the params:begin/params:end markers of doc/params.md (and of README.md,
# which carries the same block) must be exactly what `collx-info --params`
# prints from src/util/params.def.  On a difference, `make params-doc`
# rewrites the blocks.  Run from the build directory; $srcdir is set by the
# test harness.
srcdir=${srcdir:-.}
info=${COLLX_INFO:-./collx-info}
block="$srcdir/tests/deploy/params_block.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/collx-params.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

"$info" --params > "$tmp/code.md" || { echo "FAIL: $info --params exited $?"; exit 1; }
[ -s "$tmp/code.md" ] || { echo "FAIL: $info --params printed nothing"; exit 1; }
rc=0
for f in doc/params.md README.md; do
  path=$srcdir/$f
  if [ ! -f "$path" ]; then
    [ "$f" = doc/params.md ] && { echo "FAIL: $f is missing"; rc=1; }
    continue
  fi
  if ! sh "$block" has "$path"; then
    if [ "$f" = doc/params.md ]; then echo "FAIL: $f has no params:begin/params:end block"; rc=1
    else echo "note: $f has no params block; not checked"; fi
    continue
  fi
  sh "$block" extract "$path" > "$tmp/doc.md"
  if cmp -s "$tmp/code.md" "$tmp/doc.md"; then
    echo "PASS: $f matches collx-info --params ($(grep -c '^| `COLLX_' "$tmp/code.md") settings)"
  else
    echo "FAIL: $f differs from collx-info --params (run 'make params-doc'):"
    diff -u "$tmp/doc.md" "$tmp/code.md" | sed 's/^/  /'
    rc=1
  fi
done
exit $rc
