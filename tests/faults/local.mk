# Fault tests: a peer killed, frozen or cut off mid-transfer, a rank idle for
# 3 x COLLX_TIMEOUT, stray clients on accept, garbage handles, API misuse,
# close with requests in flight + dlclose.  Like the conformance driver it
# dlopens the built plugin; it prints "N passed, N failed, N skipped".
# One case: tests/faults/faults --case stray-clients; list: --list.
check_PROGRAMS += tests/faults/faults
tests_faults_faults_SOURCES = tests/faults/faults.c tests/faults/faults.h \
	tests/common/shell.h tests/faults/cases_peer.c tests/faults/cases_idle.c tests/faults/cases_setup.c tests/faults/cases_args.c \
	tests/common/cases.h tests/common/cases_misuse.c tests/common/cases_strays.c tests/common/proc.h
tests_faults_faults_LDADD = tests/harness/libcollx-harness.la -ldl -lpthread
TESTS += tests/faults/faults-threads.sh tests/faults/faults-caller.sh
EXTRA_DIST += tests/faults/faults-threads.sh tests/faults/faults-caller.sh
