#!/bin/sh
# The generated settings table inside a Markdown file, between the lines
# "<!-- params:begin -->" and "<!-- params:end -->".
#
#   params_block.sh extract FILE    print the block
#   params_block.sh replace FILE    replace the block with standard input
#                                   (FILE is rewritten only if it changes)
#   params_block.sh has FILE        exit 0 when FILE has both markers
set -e
mode=$1 file=$2
begin='<!-- params:begin -->' end='<!-- params:end -->'
has() { grep -qxF "$begin" "$file" && grep -qxF "$end" "$file"; }
case $mode in
  has) has ;;
  extract)
    has || { echo "params_block.sh: $file has no $begin ... $end block" >&2; exit 2; }
    awk -v b="$begin" -v e="$end" '$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$file" ;;
  replace)
    has || { echo "params_block.sh: $file has no $begin ... $end block" >&2; exit 2; }
    tmp=$(mktemp "${TMPDIR:-/tmp}/params_block.XXXXXX")
    trap 'rm -f "$tmp" "$tmp.new"' EXIT
    cat > "$tmp"
    awk -v b="$begin" -v e="$end" -v t="$tmp" '
      $0 == e { on = 0 }
      !on { print }
      $0 == b { on = 1; while ((getline l < t) > 0) print l }' "$file" > "$tmp.new"
    cmp -s "$tmp.new" "$file" || cat "$tmp.new" > "$file" ;;
  *) echo "usage: params_block.sh extract|replace|has FILE" >&2; exit 2 ;;
esac
