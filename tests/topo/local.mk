# Topology tests.  test_plan: the planner on the real topologies of
# tests/topo/xml (COLLX_TOPO_DIR overrides; the tests find them from
# $srcdir, which automake's harness exports).  test_hwloc_ref.sh: every NIC's
# NUMA nodes and cpuset against hwloc-calc, through collx-topo-dump.
# test_bind: pinning and NIC-local memory on this machine.
# test_info_topology.sh: collx-info --topology/--gpus (text and JSON).
check_PROGRAMS += tests/topo/test_plan tests/topo/test_bind tests/topo/collx-topo-dump
TESTS += tests/topo/test_plan tests/topo/test_hwloc_ref.sh tests/topo/test_bind \
	tests/topo/test_info_topology.sh
EXTRA_DIST += tests/topo/test_hwloc_ref.sh tests/topo/test_info_topology.sh
# hwloc XML exports of real machines (data exported by hwloc, under its
# license beside them): every clone and tarball runs the placement tests.
EXTRA_DIST += tests/topo/xml/README.md tests/topo/xml/COPYING.hwloc \
	tests/topo/xml/16intel64-manyVFs.xml tests/topo/xml/24em64t-2n6c2t-pci.xml \
	tests/topo/xml/96em64t-4n4d3ca2co-pci.xml tests/topo/xml/nvidiaDGX2.xml

tests_topo_test_plan_SOURCES = tests/topo/test_plan.c tests/topo/topo_test.h
tests_topo_test_plan_LDADD = libcollx-topo.la $(HWLOC_LDFLAGS) $(HWLOC_LIBS)

tests_topo_test_bind_SOURCES = tests/topo/test_bind.c tests/topo/topo_test.h
tests_topo_test_bind_LDADD = libcollx-topo.la $(HWLOC_LDFLAGS) $(HWLOC_LIBS) -lpthread

tests_topo_collx_topo_dump_SOURCES = tests/topo/collx-topo-dump.c
tests_topo_collx_topo_dump_LDADD = libcollx-topo.la $(HWLOC_LDFLAGS) $(HWLOC_LIBS)
