# Tools: collx-info (devices, settings, placement plan) and collx-perf
# (bandwidth/latency, the no-GPU ring all-reduce demo and --comms K, many
# send/receive pairs in one process, through the plugin's
# exported table, loaded by the test harness's tests/harness/net.c; one file
# per section of the tool in tools/perf/).
bin_PROGRAMS += collx-info collx-perf
collx_info_SOURCES = tools/collx-info.c tools/stats_view.c tools/stats_view.h
collx_info_LDADD = libcollx-core.la
collx_perf_SOURCES = tools/perf/perf.h tools/perf/main.c tools/perf/state.c tools/perf/util.c \
	tools/perf/plugin.c tools/perf/sockets.c tools/perf/peer.c tools/perf/server.c tools/perf/client.c \
	tools/perf/ring.c tools/perf/comms.c tests/harness/net.c tests/harness/net.h
collx_perf_LDADD = -ldl -lpthread -lm
# Its own object names: net.c is also in the harness's libtool library.
collx_perf_CFLAGS = $(AM_CFLAGS)
