# Sourced by the deployment checks (tests/deploy/test_install.sh,
# .ci/packages.sh): count what passed, failed and was skipped.
#   check DESCRIPTION COMMAND...   ok when COMMAND succeeds, FAIL otherwise
#   ok/fail/skip DESCRIPTION       record one result
#   finish                         print "N passed, N failed, N skipped" and
#                                  exit 1 when anything failed
# shellcheck shell=bash
passed=0 failed=0 skipped=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
skip() { echo "skip: $*"; skipped=$((skipped + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
finish() {
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit $?
}
