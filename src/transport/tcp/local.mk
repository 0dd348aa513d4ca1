# The TCP transport (libcollx-tcp.la, over topo and util).  Its files stand
# on floors (src/transport/tcp/floors, doc/design.md): each calls only the
# files below it, which tests/unit/test_floors.sh checks on the objects'
# symbols.  Core links it only through libcollx-core.la.
libcollx_tcp_la_SOURCES = \
	src/transport/transport.h \
	src/transport/tcp/sock.c src/transport/tcp/sock.h \
	src/transport/tcp/wire.c src/transport/tcp/wire.h \
	src/transport/tcp/stripe.c src/transport/tcp/stripe.h \
	src/transport/tcp/pace.c src/transport/tcp/pace.h \
	src/transport/tcp/chunks.c src/transport/tcp/chunks.h \
	src/transport/tcp/match.c src/transport/tcp/match.h \
	src/transport/tcp/handle.c src/transport/tcp/handle.h \
	src/transport/tcp/engine.c src/transport/tcp/engine.h \
	src/transport/tcp/base.c src/transport/tcp/base.h src/transport/tcp/tcp.h \
	src/transport/tcp/stats.c src/transport/tcp/stats.h src/transport/tcp/tcpinfo.h \
	src/transport/tcp/linger.c src/transport/tcp/linger.h \
	src/transport/tcp/ctrl.c src/transport/tcp/ctrl.h \
	src/transport/tcp/progress_engine.c src/transport/tcp/progress.h \
	src/transport/tcp/failover.c src/transport/tcp/rejoin.c src/transport/tcp/paths.h \
	src/transport/tcp/watchdog.c src/transport/tcp/watchdog.h \
	src/transport/tcp/recv_entry.c src/transport/tcp/recv_ctrl.c src/transport/tcp/recv.c src/transport/tcp/recv.h \
	src/transport/tcp/send_ctrl.c src/transport/tcp/send.c src/transport/tcp/send.h \
	src/transport/tcp/comm_life.c src/transport/tcp/comm_life.h \
	src/transport/tcp/tcp_setup.c \
	src/transport/tcp/ops.c
libcollx_tcp_la_LIBADD = libcollx-topo.la
