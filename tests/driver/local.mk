# Conformance driver: dlopens the built plugin (it does not link it) and
# drives it through ncclNetPlugin_v8 the way NCCL's proxy thread does.
# Run one case: tests/driver/conformance --case grouped; list: --list.
check_PROGRAMS += tests/driver/conformance
tests_driver_conformance_SOURCES = tests/driver/conformance.c tests/common/proc.h tests/common/net_compat.h
tests_driver_conformance_LDADD = -ldl -lpthread
# Every case runs with stream threads, with the caller doing the I/O
# (COLLX_PROGRESS=caller), and with COLLX_INLINE_RECV=1.
TESTS += tests/driver/conformance-threads.sh tests/driver/conformance-caller.sh tests/driver/conformance-inline.sh
EXTRA_DIST += tests/driver/conformance-threads.sh tests/driver/conformance-caller.sh tests/driver/conformance-inline.sh
# ... and through ncclNetPlugin_v11 and _v12 (COLLX_DRIVER_NET_VERSION).
TESTS += tests/driver/conformance-v11.sh tests/driver/conformance-v12.sh
EXTRA_DIST += tests/driver/conformance-v11.sh tests/driver/conformance-v12.sh
