#!/bin/sh
# Install what building and testing collx needs and this machine lacks, so
# that the README's commands work on a bare Debian or Ubuntu machine:
#   ./install-deps.sh         build needs (compiler, autotools, hwloc)
#   ./install-deps.sh test    also what `make test` uses (network namespaces,
#                             nftables, Lmod)
#   ./install-deps.sh ci      also the sanitizer, valgrind and fuzz stages and
#                             the packages stage (.ci/packages.sh: dpkg-dev,
#                             debhelper, lintian, rpm)
# Installs nothing when everything is present.  Needs root (or sudo) only
# when something is missing; otherwise names what to install and fails.
set -eu

build="build-essential autoconf automake libtool pkg-config libhwloc-dev hwloc libhwloc-plugins"
# libhwloc-plugins: hwloc's full XML reader (libxml2), which the plugin loads
# through hwloc's add-ons; without it hwloc's minimal parser refuses exports
# with comments (tests/topo/test_rtld_local).
test_pkgs="$build iproute2 procps nftables lmod python3"
ci_pkgs="$test_pkgs clang libclang-rt-14-dev valgrind dpkg-dev debhelper lintian rpm"

case "${1:-build}" in
  build) want=$build ;;
  test) want=$test_pkgs ;;
  ci) want=$ci_pkgs ;;
  *) echo "install-deps: unknown set '$1' (build, test or ci)" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  # Not Debian-like: check the few things the build cannot do without.
  for tool in cc make autoreconf libtoolize pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || { echo "install-deps: '$tool' not found; install it with your package manager" >&2; exit 1; }
  done
  pkg-config --exists hwloc || { echo "install-deps: hwloc 2.x development files not found (pkg-config hwloc)" >&2; exit 1; }
  exit 0
fi

missing=
for p in $want; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in *" installed") ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo -n"
else
  echo "install-deps: missing:$missing" >&2
  echo "install-deps: as root, run: apt-get update && apt-get install -y --no-install-recommends$missing" >&2
  exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # package lists are words on purpose
if ! { $as_root apt-get update -qq && $as_root apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; then
  echo "install-deps: apt-get install of$missing failed" >&2
  exit 1
fi
