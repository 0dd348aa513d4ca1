# Tools: collx-info (devices, settings, placement plan) and collx-perf
# (bandwidth/latency and the no-GPU ring all-reduce demo, through the plugin's
# exported table).
bin_PROGRAMS += collx-info collx-perf
collx_info_SOURCES = tools/collx-info.c
collx_info_LDADD = libcollx-core.la
collx_perf_SOURCES = tools/collx-perf.c
collx_perf_LDADD = -ldl -lpthread -lm
