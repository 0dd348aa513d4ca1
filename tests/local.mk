# Tests: unit tests of the pieces, and the conformance driver that dlopens
# the built plugin.  tests/run-all.sh runs everything and prints the
# "N passed, N failed" summary.
include tests/harness/local.mk
include tests/unit/local.mk
include tests/driver/local.mk
include tests/topo/local.mk
include tests/deploy/local.mk
include tests/topo/live.mk
include tests/faults/local.mk
include tests/fuzz/local.mk
include tests/soak/local.mk
