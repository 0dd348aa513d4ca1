# Liveness tests (issue 17): end to end through the core API (src/core/core.h)
# with forked processes; each program runs its cases in both progress modes
# and prints one PASS/FAIL/SKIP line per case and mode.  One case:
#   tests/liveness/test_clock --case clock-step --mode caller
EXTRA_DIST += tests/liveness/lv.h

# test_clock: a wall-clock step does not stall the watchdog.
check_PROGRAMS += tests/liveness/test_clock
TESTS += tests/liveness/test_clock
tests_liveness_test_clock_SOURCES = tests/liveness/test_clock.c
tests_liveness_test_clock_LDADD = libcollx-core.la

# test_setup: getrandom failing, the watchdog not starting, abandoned connects.
check_PROGRAMS += tests/liveness/test_setup
TESTS += tests/liveness/test_setup
tests_liveness_test_setup_SOURCES = tests/liveness/test_setup.c
tests_liveness_test_setup_LDADD = libcollx-core.la -ldl

# test_frozen: a frozen sender behind an unread eager message is found out;
# a live one is not.
check_PROGRAMS += tests/liveness/test_frozen
TESTS += tests/liveness/test_frozen
tests_liveness_test_frozen_SOURCES = tests/liveness/test_frozen.c
tests_liveness_test_frozen_LDADD = libcollx-core.la

# test_connect: a slow connector, a flooded listening port.
check_PROGRAMS += tests/liveness/test_connect
TESTS += tests/liveness/test_connect
tests_liveness_test_connect_SOURCES = tests/liveness/test_connect.c
tests_liveness_test_connect_LDADD = libcollx-core.la

# test_close: closing with unread bytes does not reset the connection.
check_PROGRAMS += tests/liveness/test_close
TESTS += tests/liveness/test_close
tests_liveness_test_close_SOURCES = tests/liveness/test_close.c
tests_liveness_test_close_LDADD = libcollx-core.la

# test_netns: connect deadlines against a listener whose packets nftables
# drops (root, ip netns, nft; skipped otherwise).
check_PROGRAMS += tests/liveness/test_netns
TESTS += tests/liveness/test_netns
tests_liveness_test_netns_SOURCES = tests/liveness/test_netns.c tests/common/shell.h
tests_liveness_test_netns_LDADD = libcollx-core.la

# test_chunks: a fake sender's clashing chunks fail the receive (never
# complete it), with a WARN naming the peer.
check_PROGRAMS += tests/liveness/test_chunks
TESTS += tests/liveness/test_chunks
tests_liveness_test_chunks_SOURCES = tests/liveness/test_chunks.c
tests_liveness_test_chunks_LDADD = libcollx-core.la
