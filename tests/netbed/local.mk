# The cluster in a box: hosts as network namespaces with rate-limited veth
# NICs (tests/netbed/netbed.sh, also used by bench/netbed.sh).
# test_netbed.sh: the bed's life, collx across its hosts, unequal NICs.
# test_failover.sh: a member lost and coming back.  test_degraded.sh: a
# slow member of a merged device.  Root only (77 otherwise).
# test_failover.sh is the suite's longest test by far: it comes first, and
# tests/local.mk includes this file first, so that with `make -j2 check`
# the rest of the suite runs beside it.
TESTS += tests/netbed/test_failover.sh tests/netbed/test_netbed.sh tests/netbed/test_degraded.sh
EXTRA_DIST += tests/netbed/netbed.sh tests/netbed/test_netbed.sh tests/netbed/test_failover.sh \
	tests/netbed/test_degraded.sh
