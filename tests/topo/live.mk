# Live-machine placement checks (issue 3), on this host rather than on
# topology files.  test_live_affinity: the plugin's stream threads, found by
# name in /proc/self/task, are pinned where the plan says (auto, off, a CPU
# list).  test_veth_merge.sh: root only (77 otherwise); two network
# namespaces joined by two veth pairs, collx-perf between them, and the
# per-interface byte counters show a merged device striping over its members
# (explicit COLLX_MERGE and COLLX_MERGE=auto with tests/topo/veth-topo.xml).
check_PROGRAMS += tests/topo/test_live_affinity
TESTS += tests/topo/test_live_affinity tests/topo/test_veth_merge.sh
EXTRA_DIST += tests/topo/test_veth_merge.sh tests/topo/veth-topo.xml

tests_topo_test_live_affinity_SOURCES = tests/topo/test_live_affinity.c
tests_topo_test_live_affinity_LDADD = libcollx-core.la $(HWLOC_LDFLAGS) $(HWLOC_LIBS) -lpthread

check_PROGRAMS += tests/topo/test_rtld_local
TESTS += tests/topo/test_rtld_local
tests_topo_test_rtld_local_SOURCES = tests/topo/test_rtld_local.c
tests_topo_test_rtld_local_LDADD = -ldl
