#!/usr/bin/env bash
# CI stage "packages": the deb and the rpm built, checked, and the deb
# installed and purged on this machine (doc/deploy.md).
#
#   .ci/packages.sh            # as root (or with sudo), from anywhere
#
#  1. `dpkg-buildpackage -us -uc -b` in a copy of the tree (the files git
#     knows, committed or not).
#  2. In that built tree: `make dist` makes collx-VERSION.tar.gz, which must
#     carry collx.spec and debian/; debian/changelog must name configure.ac's
#     version; the conformance driver and test_abi_versions are built.
#  3. `rpmbuild -tb --nodeps` on the tarball (--nodeps: Debian's rpm
#     database knows none of the build dependencies); ldconfig scriptlets.
#  4. lintian without errors; hardening (RELRO, BIND_NOW, PIE) in the deb;
#     no .la in any package; the debs' and the rpms' file lists the same
#     (tests/deploy/pkg_files.sh).
#  5. `apt-get install ./collx_*.deb ./collx-default-plugin_*.deb`, then,
#     in an environment without LD_LIBRARY_PATH: the library found by the
#     names NCCL dlopens (libnccl-net-collx.so for NCCL_NET_PLUGIN=collx,
#     libnccl-net.so with NCCL_NET_PLUGIN unset) through
#     tests/deploy/test_abi_versions, the conformance driver against it,
#     `collx-perf --ranks 4` from /usr/bin, `module load collx` through Lmod.
#     Before the install the same lookup must fail, so that it is the
#     package that is found.
#  6. `apt-get purge`: no file of the packages left, the lookup fails again,
#     the machine's package list as before.  If the stage stops between 5
#     and 6, an exit trap purges what it installed.
#
# Prints "packages: N passed, N failed (T s)" and, last, "N passed, N failed";
# exit status 1 when anything failed.  Work and logs under $COLLX_PKG_WORK
# (default _build/packages).  Knob: JOBS (make -j, default 2).
# Needs (install-deps.sh ci): dpkg-dev, debhelper, lintian, rpm, lmod.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
work=${COLLX_PKG_WORK:-$top/_build/packages}
jobs=${JOBS:-2}
t_all=$(date +%s)
# ok, fail, skip, check (tests/deploy/check_lib.sh)
# shellcheck source=tests/deploy/check_lib.sh
. "$top/tests/deploy/check_lib.sh"

end() { # end [REASON]: the stage's lines, then exit
  [ -n "${1:-}" ] && fail "$1"
  echo "packages: $passed passed, $failed failed ($(($(date +%s) - t_all)) s; logs in $work/logs)"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
# show LOG: the end of a log, indented, after a failure.
show() { tail -n "${2:-25}" "$1" | sed 's/^/  | /'; }
step() { echo "== $* ($(($(date +%s) - t_all)) s)"; }

if [ "$(id -u)" -eq 0 ]; then
  as_root=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo -n"
else
  end "installing the deb needs root or password-less sudo"
fi
for tool in dpkg-buildpackage dh lintian rpmbuild dpkg-deb apt-get; do
  command -v "$tool" >/dev/null 2>&1 ||
    end "'$tool' not found: run ./install-deps.sh ci (debhelper, lintian, rpm, dpkg-dev)"
done

rm -rf "$work"
mkdir -p "$work/logs"
logs=$work/logs

# copy_tree DIR: the files git knows (committed or not), as .ci/sanitizers.sh copies them.
copy_tree() {
  git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "packages: $top is not a git checkout: the stage copies the files git knows" >&2; return 1; }
  mkdir -p "$1"
  (cd "$top" && git ls-files -z --cached --others --exclude-standard |
     tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$1"
}

# ---- 1. deb ---------------------------------------------------------------------
step "1. dpkg-buildpackage -us -uc -b"
tree=$work/deb/collx
copy_tree "$tree" || end "copying the tree failed"
if (cd "$tree" && dpkg-buildpackage -us -uc -b -j"$jobs") > "$logs/dpkg-buildpackage.log" 2>&1; then
  ok "dpkg-buildpackage -us -uc -b"
else
  fail "dpkg-buildpackage -us -uc -b (log: $logs/dpkg-buildpackage.log)"; show "$logs/dpkg-buildpackage.log"
fi

# ---- 2. make dist, the test programs ------------------------------------------
# In the tree dpkg-buildpackage configured and built (one build less).
step "2. make dist"
if ! (cd "$tree" && make -j"$jobs" tests/driver/conformance tests/deploy/test_abi_versions && make dist) \
       > "$logs/dist.log" 2>&1; then
  show "$logs/dist.log"
  end "make dist and the test programs in the deb's build tree (log: $logs/dist.log)"
fi
version=$(sed -n "s/^PACKAGE_VERSION = //p" "$tree/Makefile")
tarball=$tree/collx-$version.tar.gz
check "make dist: collx-$version.tar.gz" test -f "$tarball"
tar tzf "$tarball" > "$work/tarball.list"
check "the tarball carries collx.spec (Version: $version)" \
  sh -c "tar xzOf '$tarball' collx-$version/collx.spec | grep -qx 'Version: *$version'"
for f in debian/control debian/rules debian/changelog debian/source/format collx.spec.in; do
  check "the tarball carries $f" grep -qx "collx-$version/$f" "$work/tarball.list"
done
deb_version=$(cd "$tree" && dpkg-parsechangelog -S Version) || deb_version=unreadable
check "debian/changelog's version ($deb_version) is configure.ac's ($version)" \
  test "${deb_version%%-*}" = "$version"

# ---- 3. rpm -------------------------------------------------------------------
step "3. rpmbuild -tb"
mkdir -p "$work/rpmbuild/tmp"
if rpmbuild -tb --nodeps --define "_topdir $work/rpmbuild" --define "_tmppath $work/rpmbuild/tmp" \
     "$tarball" > "$logs/rpmbuild.log" 2>&1; then
  ok "rpmbuild -tb --nodeps collx-$version.tar.gz"
else
  fail "rpmbuild -tb --nodeps collx-$version.tar.gz (log: $logs/rpmbuild.log)"; show "$logs/rpmbuild.log"
fi
rpms=$(find "$work/rpmbuild/RPMS" -name "collx*-$version-*.rpm" 2>/dev/null | sort | tr '\n' ' ')
rpm_main=$(find "$work/rpmbuild/RPMS" -name "collx-$version-*.rpm" 2>/dev/null | head -n 1)
rpm_default=$(find "$work/rpmbuild/RPMS" -name "collx-default-$version-*.rpm" 2>/dev/null | head -n 1)
check "rpms collx and collx-default built" test -n "$rpm_main" -a -n "$rpm_default"
if [ -n "$rpm_main" ]; then
  rpm -qp --scripts "$rpm_main" > "$work/rpm-scripts" 2>&1 || true
  check "rpm collx runs ldconfig after install and removal" \
    sh -c "grep -A1 '^postinstall' '$work/rpm-scripts' | grep -q ldconfig &&
           grep -A1 '^postuninstall' '$work/rpm-scripts' | grep -q ldconfig"
fi

# ---- 4. checks of the packages -----------------------------------------------
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb_main=$work/deb/collx_${deb_version}_$arch.deb
deb_default=$work/deb/collx-default-plugin_${deb_version}_$arch.deb
check "debs collx and collx-default-plugin built" test -f "$deb_main" -a -f "$deb_default"
changes=$work/deb/collx_${deb_version}_$arch.changes
if [ -f "$changes" ]; then
  lintian --fail-on error "$changes" > "$logs/lintian.log" 2>&1 && lrc=0 || lrc=$?
  sed 's/^/  lintian: /' "$logs/lintian.log"
  check "lintian: no errors (exit $lrc; $(grep -c '^W:' "$logs/lintian.log" || true) warnings)" \
    sh -c "[ $lrc -eq 0 ] && ! grep -q '^E:' '$logs/lintian.log'"
else
  fail "lintian: no $changes"
fi
hardened() { # hardened ELF [pie]
  local d l
  d=$(readelf -d "$1" 2>&1) l=$(readelf -lW "$1" 2>&1)
  grep -q GNU_RELRO <<<"$l" && grep -Eq 'BIND_NOW|Flags: .*NOW' <<<"$d" &&
    { [ "${2:-}" != pie ] || grep -q 'Flags: .*PIE' <<<"$d"; }
}
if [ -f "$deb_main" ]; then
  rm -rf "$work/deb/x" && dpkg-deb -x "$deb_main" "$work/deb/x"
  lib=$work/deb/x/usr/lib/$multiarch/libnccl-net-collx.so
  check "the deb's plugin is usr/lib/$multiarch/libnccl-net-collx.so" test -f "$lib"
  check "hardening: the plugin has RELRO and BIND_NOW" hardened "$lib"
  for t in collx-info collx-perf; do
    check "hardening: $t is PIE with RELRO and BIND_NOW" hardened "$work/deb/x/usr/bin/$t" pie
  done
fi
if [ -f "$deb_main" ] && [ -f "$deb_default" ] && [ -n "$rpm_main" ] && [ -n "$rpm_default" ]; then
  # shellcheck disable=SC2086
  "$top/tests/deploy/pkg_files.sh" deb "$deb_main" "$deb_default" > "$work/deb.files"
  # shellcheck disable=SC2086
  "$top/tests/deploy/pkg_files.sh" rpm $rpms > "$work/rpm.files"
  check "no libtool archive (.la) in any package" \
    sh -c "! grep -q '\.la\$' '$work/deb.files' '$work/rpm.files'"
  check "collx-default-plugin and collx-default hold only the libnccl-net.so link" \
    sh -c "[ \"\$('$top/tests/deploy/pkg_files.sh' deb '$deb_default')\" = 'lrwxrwxrwx LIBDIR/libnccl-net.so -> libnccl-net-collx.so' ] &&
           [ \"\$('$top/tests/deploy/pkg_files.sh' rpm '$rpm_default')\" = 'lrwxrwxrwx LIBDIR/libnccl-net.so -> libnccl-net-collx.so' ]"
  "$top/tests/deploy/pkg_files.sh" compare "$deb_main $deb_default" "$rpms" > "$logs/compare.log" 2>&1 && crc=0 || crc=$?
  sed 's/^/  /' "$logs/compare.log"
  check "the rpms install the files the debs install (rpm -qlp against dpkg-deb -c)" test "$crc" -eq 0
else
  fail "file lists not compared: a deb or an rpm is missing"
fi

# ---- 5. install the deb ---------------------------------------------------------
if [ ! -f "$deb_main" ] || [ ! -f "$deb_default" ]; then end "no debs to install"; fi
step "5. apt-get install, run against the installed plugin"
# run_clean CMD...: what a job sees on a node with the package: no
# LD_LIBRARY_PATH, no COLLX_PLUGIN, a plain PATH.
run_clean() { env -i HOME="$work" PATH=/usr/bin:/bin TMPDIR="${TMPDIR:-/tmp}" "$@"; }
abi=$tree/tests/deploy/test_abi_versions
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]; }
for p in collx collx-default-plugin; do
  if installed "$p"; then
    end "$p is already installed on this machine: not touching it (apt-get purge $p, then run again)"
  fi
done
dpkg-query -W -f='${Package} ${Version}\n' | sort > "$work/packages.before"
# The paths the debs carry that exist already (/usr, /usr/bin, ...): the
# purge must leave those and remove every other.
for d in "$deb_main" "$deb_default"; do
  dpkg-deb -c "$d" | awk '{ p = $6; sub(/^\./, "", p); sub(/\/$/, "", p); if (p != "") print p }'
done | sort -u > "$work/deb.paths"
while read -r path; do
  if [ -e "$path" ] || [ -L "$path" ]; then echo "$path"; fi
done < "$work/deb.paths" > "$work/existed.before"
if run_clean "$abi" libnccl-net-collx.so > "$logs/before.log" 2>&1; then
  fail "before the install, libnccl-net-collx.so must not be found by the loader (another copy is installed: $(grep -m1 . "$logs/before.log"))"
else
  ok "before the install, dlopen(\"libnccl-net-collx.so\") fails"
fi
purge() {
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $as_root apt-get purge -y collx collx-default-plugin > "$logs/purge.log" 2>&1
}
cleanup() { if installed collx || installed collx-default-plugin; then purge || true; fi; }
trap cleanup EXIT
# shellcheck disable=SC2086
if (cd "$work/deb" && DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y \
      "./$(basename "$deb_main")" "./$(basename "$deb_default")") > "$logs/install.log" 2>&1; then
  ok "apt-get install ./$(basename "$deb_main") ./$(basename "$deb_default")"
else
  fail "apt-get install (log: $logs/install.log)"; show "$logs/install.log"
fi
dpkg -L collx collx-default-plugin 2>/dev/null | grep -vx '/\.' | sort -u > "$work/installed.list" || true
check "dpkg -L lists /usr/lib/$multiarch/libnccl-net-collx.so and libnccl-net.so" \
  sh -c "grep -qx '/usr/lib/$multiarch/libnccl-net-collx.so' '$work/installed.list' &&
         grep -qx '/usr/lib/$multiarch/libnccl-net.so' '$work/installed.list'"
if run_clean /usr/bin/collx-info --version > "$logs/collx-info.log" 2>&1 &&
   grep -qx "collx $version" "$logs/collx-info.log"; then
  ok "/usr/bin/collx-info --version: collx $version"
else
  fail "/usr/bin/collx-info --version"; show "$logs/collx-info.log"
fi
for name in libnccl-net-collx.so libnccl-net.so; do
  if run_clean "$abi" "$name" > "$logs/abi-$name.log" 2>&1; then
    ok "dlopen(\"$name\") with no LD_LIBRARY_PATH: $(tail -n 1 "$logs/abi-$name.log")"
  else
    fail "dlopen(\"$name\") with no LD_LIBRARY_PATH (test_abi_versions):"; grep -v '^ok' "$logs/abi-$name.log" | sed 's/^/  /'
  fi
done
t0=$(date +%s)
if (cd "$tree" && run_clean ./tests/driver/conformance libnccl-net-collx.so) > "$logs/conformance.log" 2>&1; then
  ok "conformance driver against the installed plugin: $(tail -n 1 "$logs/conformance.log") ($(($(date +%s) - t0)) s)"
else
  fail "conformance driver against the installed plugin (log: $logs/conformance.log)"
  grep -E '^(FAIL|TIMEOUT)|passed, ' "$logs/conformance.log" | sed 's/^/  /'
fi
t0=$(date +%s)
if run_clean /usr/bin/collx-perf --ranks 4 > "$logs/collx-perf.log" 2>&1 &&
   grep -q 'correct at every size' "$logs/collx-perf.log"; then
  ok "/usr/bin/collx-perf --ranks 4: correct at every size ($(($(date +%s) - t0)) s)"
else
  fail "/usr/bin/collx-perf --ranks 4 (log: $logs/collx-perf.log)"; show "$logs/collx-perf.log" 10
fi
check "collx-perf loaded /usr/lib/$multiarch/libnccl-net-collx.so" \
  grep -Eq "^ Plugin +: \"collx\" +/usr/lib/$multiarch/libnccl-net-collx.so\$" "$logs/collx-perf.log"
lmod_init=/usr/share/lmod/lmod/init/bash
if [ -f "$lmod_init" ]; then
  run_clean bash --noprofile --norc -c ". $lmod_init && export MODULEPATH= && module use /usr/share/modulefiles &&
      module load collx && echo \"NCCL_NET_PLUGIN=\${NCCL_NET_PLUGIN:-}\" && echo \"LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-}\" &&
      echo \"PATH=\$PATH\"" > "$logs/module.log" 2>&1 || true
  check "module load collx (Lmod): NCCL_NET_PLUGIN=collx, LD_LIBRARY_PATH and PATH untouched" \
    sh -c "grep -qx NCCL_NET_PLUGIN=collx '$logs/module.log' && grep -qx LD_LIBRARY_PATH= '$logs/module.log' &&
           grep -qx PATH=/usr/bin:/bin '$logs/module.log'"
else
  skip "Lmod not installed: module file not loaded"
fi

# ---- 6. purge -------------------------------------------------------------------
step "6. apt-get purge"
if purge; then ok "apt-get purge collx collx-default-plugin"; else fail "apt-get purge (log: $logs/purge.log)"; show "$logs/purge.log"; fi
check "dpkg knows neither package any more" \
  sh -c "! dpkg-query -W -f='\${Status}\n' collx collx-default-plugin 2>/dev/null | grep -q 'installed\|config-files'"
left=
while read -r path; do
  [ -e "$path" ] || [ -L "$path" ] || continue
  grep -qxF "$path" "$work/existed.before" && continue
  left="$left $path"
done < <(sort -u "$work/installed.list" "$work/deb.paths")
check "nothing of the packages left (${left:-none of the $(wc -l < "$work/deb.paths") paths the debs carry but the ones there before}${left:+ left})" test -z "$left"
if run_clean "$abi" libnccl-net-collx.so > "$logs/after.log" 2>&1; then
  fail "after the purge, libnccl-net-collx.so is still found by the loader"
else
  ok "after the purge, dlopen(\"libnccl-net-collx.so\") fails"
fi
dpkg-query -W -f='${Package} ${Version}\n' | sort > "$work/packages.after"
if diff "$work/packages.before" "$work/packages.after" > "$logs/packages.diff"; then
  ok "the machine's package list is as before the install"
else
  fail "the package list changed:"; sed 's/^/  /' "$logs/packages.diff"
fi
trap - EXIT
end
