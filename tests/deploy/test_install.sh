#!/bin/bash
# An installation used the way a cluster user uses it.  From the build
# directory (where `make check` runs it):
#
#  1. `make install DESTDIR=STAGE prefix=/opt/collx/VERSION`: every file lands
#     under STAGE, the generated files name /opt/collx/VERSION and never
#     STAGE, no template placeholder is left; `make uninstall` empties STAGE.
#  2. `make install prefix=TMP/opt/collx/VERSION`: the layout (library, tools,
#     header, pkg-config file, module files, docs, and libnccl-net.so exactly
#     when configured with --enable-nccl-net-symlink); pkg-config's libdir.
#  3. `module use TMP/.../share/modulefiles; module load collx` through Lmod
#     (the .lua file), through Lmod again with only the Tcl file, and through
#     Environment Modules' modulecmd.tcl (the Tcl file) where it is
#     installed: LD_LIBRARY_PATH, PATH and NCCL_NET_PLUGIN point at the
#     installation, `collx-info --version` and `COLLX_IFNAME==lo collx-info`
#     run from PATH, and the plugin loads by the name NCCL derives from
#     NCCL_NET_PLUGIN (libnccl-net-collx.so, found through LD_LIBRARY_PATH)
#     and passes tests/deploy/test_abi_versions; `module unload` undoes it.
#  4. `make uninstall prefix=...` leaves no file behind.
#
# Exit 77 (skip) when neither Lmod nor Environment Modules is installed.
# The sub-makes run without the parent make's MAKEFLAGS, so they never see
# its jobserver, targets or command-line variables.  Overrides for odd
# installations: COLLX_TEST_LMOD_INIT (Lmod's init/bash),
# COLLX_TEST_MODULECMD (Environment Modules' modulecmd.tcl).
set -u
builddir=$PWD
make_cmd=${MAKE:-make}

# ok, fail, skip, check, finish
. "$(dirname "$0")/check_lib.sh"

# ---- What is installed here ------------------------------------------------
lmod_init=
for f in "${COLLX_TEST_LMOD_INIT:-}" "${LMOD_PKG:+$LMOD_PKG/init/bash}" \
         /usr/share/lmod/lmod/init/bash /opt/apps/lmod/lmod/init/bash /usr/share/lmod/init/bash; do
  [ -n "$f" ] && [ -f "$f" ] && { lmod_init=$f; break; }
done
modulecmd=
for f in "${COLLX_TEST_MODULECMD:-}" "${MODULES_CMD:-}" /usr/lib/x86_64-linux-gnu/modulecmd.tcl \
         /usr/lib/modulecmd.tcl /usr/share/modules/libexec/modulecmd.tcl \
         /usr/libexec/modulecmd.tcl "$(command -v modulecmd.tcl 2>/dev/null)"; do
  case $f in *modulecmd.tcl) [ -f "$f" ] && { modulecmd=$f; break; } ;; esac
done
if [ -z "$lmod_init" ] && [ -z "$modulecmd" ]; then
  echo "SKIP: neither Lmod nor Environment Modules is installed (apt-get install lmod)"
  exit 77
fi
tclsh=$(command -v tclsh 2>/dev/null || true)
echo "Lmod: ${lmod_init:-not installed}"
echo "Environment Modules: ${modulecmd:-not installed}"

[ -x ./collx-info ] || { echo "FAIL: ./collx-info not built; run from the build directory"; exit 1; }
version=$(./collx-info --version | sed -n '1s/^collx //p')
[ -n "$version" ] || { echo "FAIL: collx-info --version printed no version"; exit 1; }
abi_test=$builddir/tests/deploy/test_abi_versions

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collx-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
submake() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES -u GNUMAKEFLAGS \
    "$make_cmd" -C "$builddir" "$@"
}

# ---- 1. DESTDIR staging ----------------------------------------------------
stage=$tmp/stage sprefix=/opt/collx/$version
if submake install DESTDIR="$stage" prefix="$sprefix" > "$tmp/stage-install.log" 2>&1; then
  ok "make install DESTDIR=STAGE prefix=$sprefix"
  smod=$stage$sprefix/share/modulefiles/collx
  check "staged files all under STAGE$sprefix" \
    test -z "$(find "$stage" -type f ! -path "$stage$sprefix/*")"
  check "staged module files and collx.pc present" \
    test -f "$smod/$version.lua" -a -f "$smod/$version" -a -f "$stage$sprefix/lib/pkgconfig/collx.pc"
  gen=("$smod/$version.lua" "$smod/$version" "$stage$sprefix/lib/pkgconfig/collx.pc")
  names_prefix() { grep -qF "\"$sprefix/lib\"" "$smod/$version.lua" &&
                   grep -qF "\"$sprefix/lib\"" "$smod/$version" &&
                   grep -qx "libdir=$sprefix/lib" "$stage$sprefix/lib/pkgconfig/collx.pc" &&
                   ! grep -qF "$stage" "${gen[@]}"; }
  check "generated files name $sprefix/lib, never DESTDIR" names_prefix
  check "no @placeholder@ and no \${prefix}/\${exec_prefix} left in generated files" \
    eval '! grep -E "@[a-zA-Z_]+@|[$][{](exec_)?prefix[}]/" "${gen[@]}"'
  if submake uninstall DESTDIR="$stage" prefix="$sprefix" > "$tmp/stage-uninstall.log" 2>&1; then
    check "make uninstall DESTDIR=STAGE leaves no file" test -z "$(find "$stage" -type f -o -type l)"
  else
    fail "make uninstall DESTDIR=STAGE (log follows)"; sed 's/^/  /' "$tmp/stage-uninstall.log"
  fi
else
  fail "make install DESTDIR=STAGE prefix=$sprefix (log follows)"; sed 's/^/  /' "$tmp/stage-install.log"
fi

# ---- 2. Installation into a prefix -------------------------------------------
prefix=$tmp/opt/collx/$version
if ! submake install prefix="$prefix" DESTDIR= > "$tmp/install.log" 2>&1; then
  fail "make install prefix=$prefix (log follows)"; sed 's/^/  /' "$tmp/install.log"
  finish
fi
ok "make install prefix=$prefix"
moddir=$prefix/share/modulefiles
for f in lib/libnccl-net-collx.so bin/collx-info bin/collx-perf include/collx/net_abi.h \
         include/collx/tuner_abi.h \
         lib/pkgconfig/collx.pc "share/modulefiles/collx/$version.lua" \
         "share/modulefiles/collx/$version" share/doc/collx/README.md share/doc/collx/deploy.md \
         share/doc/collx/params.md share/doc/collx/troubleshooting.md; do
  check "installed $f" test -e "$prefix/$f"
done

# --enable-nccl-net-symlink: libnccl-net.so -> libnccl-net-collx.so, or no
# libnccl-net.so at all without it (the default).
if grep -qx 'enable_nccl_net_symlink = yes' Makefile; then
  check "--enable-nccl-net-symlink: lib/libnccl-net.so links to libnccl-net-collx.so" \
    test "$(readlink "$prefix/lib/libnccl-net.so")" = libnccl-net-collx.so
else
  check "no lib/libnccl-net.so without --enable-nccl-net-symlink" \
    test ! -e "$prefix/lib/libnccl-net.so" -a ! -L "$prefix/lib/libnccl-net.so"
fi

if command -v pkg-config > /dev/null 2>&1; then
  pc_libdir=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --variable=libdir collx 2>&1)
  check "pkg-config --variable=libdir collx = $pc_libdir" test "$pc_libdir" = "$prefix/lib"
  pc_version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion collx 2>&1)
  check "pkg-config --modversion collx = $pc_version" test "$pc_version" = "$version"
  pc_plugin=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --variable=plugin collx 2>&1)
  check "pkg-config --variable=plugin collx names the installed library" test -f "$pc_plugin"
else
  skip "pkg-config not installed"
fi

# ---- 3. module load, in a clean environment ----------------------------------
# The probe runs after `module load collx` and records what a job would see.
cat > "$tmp/probe.sh" <<'EOF'
probe() { # probe OUT: the environment and the tools as the module set them up
  local out=$1
  {
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "PATH=$PATH"
    echo "NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-}"
    echo "collx_info=$(command -v collx-info)"
    echo "version_out=$(collx-info --version 2>&1 | tr '\n' '|')"
    COLLX_IFNAME==lo collx-info > "$out.devices" 2>&1
    echo "devices_rc=$?"
    if [ -x "$ABI_TEST" ]; then
      # What NCCL does with NCCL_NET_PLUGIN=collx: dlopen("libnccl-net-collx.so").
      "$ABI_TEST" "libnccl-net-${NCCL_NET_PLUGIN:-}.so" > "$out.abi" 2>&1
      echo "abi_rc=$?"
    fi
  } > "$out"
}
unprobe() { # unprobe OUT: what is left after `module unload collx`
  { echo "NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN-(unset)}"; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; } > "$1"
}
EOF

# run_clean SCRIPT: bash with nothing of this environment but a plain PATH.
run_clean() {
  mkdir -p "$tmp/home"
  env -i HOME="$tmp/home" USER="${USER:-root}" TMPDIR="${TMPDIR:-/tmp}" \
    PATH=/usr/local/bin:/usr/bin:/bin ABI_TEST="$abi_test" PROBE="$tmp/probe.sh" \
    bash --noprofile --norc -c "$1" > "$tmp/run.log" 2>&1
}

value() { sed -n "s/^$2=//p" "$1" | head -n 1; }

# check_loaded LABEL: judge the probe and unprobe files of one module system.
check_loaded() {
  local label=$1 p=$tmp/$1.probe u=$tmp/$1.unload
  if [ ! -s "$p" ]; then fail "$label: module load collx did not complete (output follows)"; sed 's/^/  /' "$tmp/run.log"; return; fi
  local ld path plugin
  ld=$(value "$p" LD_LIBRARY_PATH) path=$(value "$p" PATH) plugin=$(value "$p" NCCL_NET_PLUGIN)
  check "$label: LD_LIBRARY_PATH starts with $prefix/lib" test "${ld%%:*}" = "$prefix/lib"
  check "$label: PATH starts with $prefix/bin" test "${path%%:*}" = "$prefix/bin"
  check "$label: NCCL_NET_PLUGIN=collx" test "$plugin" = collx
  check "$label: collx-info found at $prefix/bin" test "$(value "$p" collx_info)" = "$prefix/bin/collx-info"
  local v
  v=$(value "$p" version_out)
  check "$label: collx-info --version: $v" \
    test "$v" = "collx $version|ncclNet ABI: v12, v11, v10, v9, v8, v7|"
  if [ "$(value "$p" devices_rc)" = 0 ] && grep -Eq '^0 +lo ' "$p.devices"; then
    ok "$label: COLLX_IFNAME==lo collx-info lists device 0, lo"
  else
    fail "$label: COLLX_IFNAME==lo collx-info (exit $(value "$p" devices_rc)):"; sed 's/^/  /' "$p.devices"
  fi
  if [ -n "$(value "$p" abi_rc)" ]; then
    if [ "$(value "$p" abi_rc)" = 0 ]; then
      ok "$label: libnccl-net-collx.so loads through LD_LIBRARY_PATH ($(tail -n 1 "$p.abi" | sed 's/, / \/ /'))"
    else
      fail "$label: libnccl-net-collx.so through LD_LIBRARY_PATH (test_abi_versions exit $(value "$p" abi_rc)):"
      grep -v '^ok' "$p.abi" | sed 's/^/  /; s/\([0-9]*\) passed, /\1 passed \/ /'
    fi
  else
    skip "$label: tests/deploy/test_abi_versions not built"
  fi
  if [ -s "$u" ]; then
    check "$label: module unload collx unsets NCCL_NET_PLUGIN and restores LD_LIBRARY_PATH" \
      test "$(value "$u" NCCL_NET_PLUGIN)" = "(unset)" -a -z "$(value "$u" LD_LIBRARY_PATH)"
  else
    fail "$label: module unload collx did not complete"
  fi
}

if [ -n "$lmod_init" ]; then
  lmod_body=". '$lmod_init' && export MODULEPATH= && . \"\$PROBE\" && module use '%s' &&
    module load collx && probe '%s' && module unload collx && unprobe '%s'"
  # Lmod with both files present: it must pick VERSION.lua.
  # shellcheck disable=SC2059
  run_clean "$(printf "$lmod_body" "$moddir" "$tmp/lmod-lua.probe" "$tmp/lmod-lua.unload") &&
    . '$lmod_init' && export MODULEPATH= && module use '$moddir' && module --location show collx > '$tmp/lmod.where' 2>&1"
  check_loaded lmod-lua
  check "lmod-lua: Lmod picked $version.lua" grep -q "collx/$version.lua\$" "$tmp/lmod.where"
  # Lmod reading the Tcl file alone (tclsh translates it).
  if [ -n "$tclsh" ]; then
    mkdir -p "$tmp/tcl-only/collx" && cp "$moddir/collx/$version" "$tmp/tcl-only/collx/"
    # shellcheck disable=SC2059
    run_clean "$(printf "$lmod_body" "$tmp/tcl-only" "$tmp/lmod-tcl.probe" "$tmp/lmod-tcl.unload")"
    check_loaded lmod-tcl
  else
    skip "lmod-tcl: no tclsh, Lmod cannot read Tcl module files here"
  fi
else
  skip "Lmod not installed: .lua module file not loaded"
fi

if [ -n "$modulecmd" ] && [ -n "$tclsh" ]; then
  # Environment Modules: VERSION (Tcl); it ignores VERSION.lua (no #%Module).
  run_clean "module() { eval \"\$('$tclsh' '$modulecmd' bash \"\$@\")\"; } && . \"\$PROBE\" &&
    module use '$moddir' && module load collx && probe '$tmp/envmod.probe' &&
    module unload collx && unprobe '$tmp/envmod.unload'"
  check_loaded envmod
else
  skip "Environment Modules' modulecmd.tcl not installed: Tcl file not loaded through it"
fi

# ---- 4. Uninstall --------------------------------------------------------------
if submake uninstall prefix="$prefix" DESTDIR= > "$tmp/uninstall.log" 2>&1; then
  left=$(find "$prefix" -type f -o -type l 2>/dev/null)
  check "make uninstall prefix=... leaves no file${left:+ (left: $left)}" test -z "$left"
else
  fail "make uninstall prefix=$prefix (log follows)"; sed 's/^/  /' "$tmp/uninstall.log"
fi
finish
