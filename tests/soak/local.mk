# Soak: 64 comms x 32 requests in flight, 8 threads per process, mixed sizes
# with every byte verified; VmRSS, threads and descriptors must stay flat and
# come back after close + dlclose.  `make check` runs 10 s (SOAK_SECONDS);
# the long run is tests/soak/soak --seconds 60 (.ci/sanitizers.sh does it).
check_PROGRAMS += tests/soak/soak
tests_soak_soak_SOURCES = tests/soak/soak.c tests/common/proc.h tests/common/sanitized.h
tests_soak_soak_LDADD = tests/harness/libcollx-harness.la -ldl -lpthread
TESTS += tests/soak/soak-check-threads.sh tests/soak/soak-check-caller.sh tests/soak/soak-check-inline.sh
EXTRA_DIST += tests/soak/soak-check-threads.sh tests/soak/soak-check-caller.sh tests/soak/soak-check-inline.sh
