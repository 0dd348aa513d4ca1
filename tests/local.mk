# Tests: unit tests of the chunks, and the programs that dlopen the built
# plugin and drive it (conformance driver, fault tests, soak) through one
# harness, tests/harness.  `make test` prints the "N passed, N failed" summary.
include tests/netbed/local.mk
include tests/harness/local.mk
include tests/unit/local.mk
include tests/driver/local.mk
include tests/topo/local.mk
include tests/deploy/local.mk
include tests/topo/live.mk
include tests/faults/local.mk
include tests/fuzz/local.mk
include tests/soak/local.mk
include tests/liveness/local.mk
include tests/scale/local.mk
