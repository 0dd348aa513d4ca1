# The test harness: the plugin loaded through any ncclNet version's table,
# the case runner (processes, deadlines, the bootstrap channel of named
# flags), connections and flows of verified messages.  The conformance
# driver, the fault tests and the soak link it; collx-perf (installed) links
# the plugin loader, net.c, on its own.
noinst_LTLIBRARIES += tests/harness/libcollx-harness.la
tests_harness_libcollx_harness_la_SOURCES = \
	tests/harness/harness.h \
	tests/harness/net.c tests/harness/net.h \
	tests/harness/prof.c tests/harness/prof.h \
	tests/harness/case.c tests/harness/case.h \
	tests/harness/drive.c tests/harness/drive.h \
	tests/harness/flow.c tests/harness/flow.h \
	tests/harness/verify.c tests/harness/verify.h
tests_harness_libcollx_harness_la_LIBADD = -ldl -lpthread
