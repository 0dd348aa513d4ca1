# Conformance driver: dlopens the built plugin (it does not link it) and
# drives it through its ncclNet table the way NCCL's proxy thread does.
# Run one case: tests/driver/conformance --case grouped; list: --list.
# The cases it shares with the fault tests live in tests/common/.
check_PROGRAMS += tests/driver/conformance
tests_driver_conformance_SOURCES = tests/driver/conformance.c tests/driver/driver.c tests/driver/driver.h \
	tests/driver/cases_basic.c tests/driver/cases_window.c tests/driver/cases_eager.c \
	tests/common/cases.h tests/common/cases_misuse.c tests/common/cases_strays.c tests/common/proc.h
tests_driver_conformance_LDADD = tests/harness/libcollx-harness.la -ldl -lpthread -lm
# Every case runs with stream threads, with the caller doing the I/O
# (COLLX_PROGRESS=caller), and with COLLX_INLINE_RECV=1.
TESTS += tests/driver/conformance-threads.sh tests/driver/conformance-caller.sh tests/driver/conformance-inline.sh
# The calls whose shape changes between versions, through the v7, v9 and
# v10 tables too.
TESTS += tests/driver/conformance-abi.sh
EXTRA_DIST += tests/driver/conformance-abi.sh
EXTRA_DIST += tests/driver/conformance-threads.sh tests/driver/conformance-caller.sh tests/driver/conformance-inline.sh
# ... and every case through ncclNetPlugin_v11 and _v12 (contexts, finalize).
TESTS += tests/driver/conformance-v11.sh tests/driver/conformance-v12.sh
EXTRA_DIST += tests/driver/conformance-v11.sh tests/driver/conformance-v12.sh
