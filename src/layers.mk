# Layer link checks, built with the plugin: each layer's library, with the
# layers below it that it LIBADDs and nothing else, linked whole into a
# shared object that may leave no symbol undefined.  A call from a layer
# into one above it (transport into core, topo into transport, ...) is
# then an "undefined reference" error of `make`, naming the file and the
# symbol.  tests/unit/test_layers.sh checks the includes the same way.
noinst_LTLIBRARIES += src/layercheck-util.la src/layercheck-topo.la src/layercheck-tcp.la \
	src/layercheck-core.la
LAYERCHECK_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -rpath /nowhere -Wl,--no-undefined
src_layercheck_util_la_SOURCES =
src_layercheck_util_la_LIBADD = libcollx-util.la
src_layercheck_util_la_LDFLAGS = $(LAYERCHECK_LDFLAGS)
src_layercheck_topo_la_SOURCES =
src_layercheck_topo_la_LIBADD = libcollx-topo.la
src_layercheck_topo_la_LDFLAGS = $(LAYERCHECK_LDFLAGS)
src_layercheck_tcp_la_SOURCES =
src_layercheck_tcp_la_LIBADD = libcollx-tcp.la
src_layercheck_tcp_la_LDFLAGS = $(LAYERCHECK_LDFLAGS)
src_layercheck_core_la_SOURCES =
src_layercheck_core_la_LIBADD = libcollx-core.la
src_layercheck_core_la_LDFLAGS = $(LAYERCHECK_LDFLAGS)
