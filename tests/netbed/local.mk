# The cluster in a box: hosts as network namespaces with rate-limited veth
# NICs (tests/netbed/netbed.sh, also used by bench/netbed.sh).
# test_netbed.sh: the bed's life, collx across its hosts, unequal NICs.
# test_failover.sh: a member lost and coming back.  test_degraded.sh: a
# slow member of a merged device.  Root only (77 otherwise).
TESTS += tests/netbed/test_netbed.sh tests/netbed/test_failover.sh tests/netbed/test_degraded.sh
EXTRA_DIST += tests/netbed/netbed.sh tests/netbed/test_netbed.sh tests/netbed/test_failover.sh \
	tests/netbed/test_degraded.sh
