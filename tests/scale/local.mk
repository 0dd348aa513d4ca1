# Scale (issue 15): 256 send/receive pairs in one process, in every progress
# mode (caller, threads; SCALE_MODES to choose), every byte verified;
# plugin threads <= COLLX_NTHREADS (default 4) + the watchdog (caller: the
# watchdog only), <= 2 descriptors and <= 64 KiB resident per comm, nothing
# left after close.  One mode: tests/scale/test_many_comms --case many-comms-threads
#
# Alone: make check TESTS=tests/scale/many-comms.test
check_PROGRAMS += tests/scale/test_many_comms
tests_scale_test_many_comms_SOURCES = tests/scale/test_many_comms.c tests/common/proc.h tests/common/sanitized.h
tests_scale_test_many_comms_LDADD = tests/harness/libcollx-harness.la -ldl -lpthread
EXTRA_DIST += tests/scale/many-comms.test
TESTS += tests/scale/many-comms.test
