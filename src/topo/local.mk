# The topo layer, libcollx-topo.la (over util): hwloc loading and NIC
# queries (topo.c), the pure placement planner (plan.c, merge.c; the stream
# count policy in streams.c), pinning and NIC-local memory for this process
# (bind.c), GPU locality with the CUDA driver opened at run time (gpu.c), and
# the text/JSON printers (print.c).  dlopen comes from configure's -ldl check.
libcollx_topo_la_SOURCES = \
	src/topo/topo.h src/topo/topo_internal.h \
	src/topo/topo.c \
	src/topo/plan.c src/topo/merge.c src/topo/streams.c \
	src/topo/bind.c src/topo/serial.c \
	src/topo/gpu.c \
	src/topo/print.c
libcollx_topo_la_LIBADD = libcollx-util.la $(HWLOC_LDFLAGS) $(HWLOC_LIBS) -lpthread
