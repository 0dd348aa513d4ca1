#!/bin/sh
# What a deb or an rpm installs, in one comparable form: one line per file or
# link, "MODE PATH" or "MODE PATH -> TARGET", sorted, directories left out,
# the library directory written LIBDIR (Debian's /usr/lib/<triplet> and the
# rpm's /usr/lib64), and the files only the packaging brings left out
# (Debian's copyright and changelogs, lintian overrides, rpm's build-id links).
# A shared library's mode is written "lib": Debian installs them 0644,
# Fedora's rpm 0755, and the loader maps either.
#
#   pkg_files.sh deb FILE.deb...            the list of the debs together
#   pkg_files.sh rpm FILE.rpm...            the list of the rpms together
#   pkg_files.sh compare "DEBS" "RPMS"      exit 1 and print the difference
#                                           when the two lists differ
# Needs dpkg-deb for debs and rpm for rpms.
set -eu

normalise() {
  sed -E -e 's#^([^ ]+) /usr/lib/[^/]+-linux-gnu[^/]*/#\1 LIBDIR/#' -e 's#^([^ ]+) /usr/lib64/#\1 LIBDIR/#' \
      -e 's#^-[rwx-]{9} (LIBDIR/[^ ]+\.so)$#lib \1#' |
    grep -Ev '^[^ ]+ /usr/share/doc/[^/]+/(copyright|changelog(\.Debian)?\.gz)$|^[^ ]+ /usr/share/lintian/|^[^ ]+ /usr/lib/\.build-id(/|$)' |
    LC_ALL=C sort
}

deb_list() {
  for f in "$@"; do
    [ -f "$f" ] || { echo "pkg_files.sh: no such deb: $f" >&2; exit 2; }
    # -rw-r--r-- root/root 1234 2026-12-05 08:00 ./usr/bin/x [-> target]
    dpkg-deb -c "$f" | awk '$1 !~ /^d/ { p = $6; sub(/^\./, "", p); print $1, p ($7 == "->" ? " -> " $8 : "") }' ||
      { echo "pkg_files.sh: dpkg-deb -c $f failed" >&2; exit 2; }
  done | normalise
}

rpm_list() {
  for f in "$@"; do
    [ -f "$f" ] || { echo "pkg_files.sh: no such rpm: $f" >&2; exit 2; }
    rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES} %{FILELINKTOS}\n]' "$f" |
      awk '$1 !~ /^d/ { print $1, $2 ($3 != "" ? " -> " $3 : "") }' ||
      { echo "pkg_files.sh: rpm -qp $f failed" >&2; exit 2; }
  done | normalise
}

case "${1:-}" in
  deb) shift; deb_list "$@" ;;
  rpm) shift; rpm_list "$@" ;;
  compare)
    [ $# -eq 3 ] || { echo "usage: pkg_files.sh compare \"DEBS\" \"RPMS\"" >&2; exit 2; }
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/collx-pkgfiles.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086 # lists of package files are words on purpose
    deb_list $2 > "$tmp/deb"
    # shellcheck disable=SC2086
    rpm_list $3 > "$tmp/rpm"
    if [ ! -s "$tmp/deb" ] || [ ! -s "$tmp/rpm" ]; then
      echo "pkg_files.sh: an empty list (deb: $(wc -l < "$tmp/deb") lines, rpm: $(wc -l < "$tmp/rpm"))" >&2
      exit 1
    fi
    if ! diff -u --label deb "$tmp/deb" --label rpm "$tmp/rpm"; then
      echo "pkg_files.sh: the debs and the rpms install different files (- deb only, + rpm only)" >&2
      exit 1
    fi
    echo "pkg_files.sh: the same $(wc -l < "$tmp/deb") files and links in the debs and the rpms"
    ;;
  *) echo "usage: pkg_files.sh deb|rpm FILE... | compare \"DEBS\" \"RPMS\"" >&2; exit 2 ;;
esac
