#!/bin/sh
# The layer order of src/ (doc/design.md), checked on the includes:
#   plugin -> core (with tune) -> transport -> topo -> util
# A file may include headers of its own layer and of the layers below, never
# above; core and plugin include the transport interface
# (transport/transport.h) and no transport's own directory.  The link
# checks in src/layers.mk catch the calls an include check cannot see.
src="${srcdir:-.}/src"
fail=0
if [ -z "$(find "$src" -name '*.c' 2>/dev/null | head -n 1)" ]; then
  echo "FAIL: no C sources under $src (srcdir=${srcdir:-unset})"
  exit 1
fi

rank() {
  case "$1" in
    plugin) echo 5 ;;
    core | tune) echo 4 ;;
    transport) echo 3 ;;
    topo) echo 2 ;;
    util) echo 1 ;;
    *) echo 0 ;; # not a layer: include/collx, config.h, same-directory headers
  esac
}

for f in $(find "$src" -name '*.[ch]' | sort); do
  rel=${f#"$src"/}
  layer=${rel%%/*}
  mine=$(rank "$layer")
  [ "$mine" -gt 0 ] || continue
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    top=${inc%%/*}
    [ "$top" != "$inc" ] || continue
    theirs=$(rank "$top")
    if [ "$theirs" -gt "$mine" ]; then
      echo "FAIL: src/$rel ($layer) includes \"$inc\" from the $top layer above it"
      fail=1
    fi
    case "$layer:$inc" in
      transport:*) ;;
      *:transport/transport.h) ;;
      *:transport/*)
        echo "FAIL: src/$rel ($layer) includes \"$inc\", a transport's internals (use transport/transport.h)"
        fail=1 ;;
    esac
  done
done
[ "$fail" -eq 0 ] && echo "layers: every include in src/ points down the layer order"
exit "$fail"
