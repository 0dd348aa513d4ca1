# Unit tests: plain programs that exit 0 on success and print one line per
# failed check; test_devices.sh drives collx-info from the build directory.
# Most link the lowest layer library that holds what they test.
check_PROGRAMS += tests/unit/test_ifmatch tests/unit/test_params
TESTS += tests/unit/test_ifmatch tests/unit/test_params tests/unit/test_devices.sh
EXTRA_DIST += tests/unit/test_devices.sh

tests_unit_test_ifmatch_SOURCES = tests/unit/test_ifmatch.c
tests_unit_test_ifmatch_LDADD = libcollx-util.la

tests_unit_test_params_SOURCES = tests/unit/test_params.c
tests_unit_test_params_LDADD = libcollx-util.la

check_PROGRAMS += tests/unit/test_handle tests/unit/test_stripe
TESTS += tests/unit/test_handle tests/unit/test_stripe
tests_unit_test_handle_SOURCES = tests/unit/test_handle.c
tests_unit_test_handle_LDADD = libcollx-tcp.la
tests_unit_test_stripe_SOURCES = tests/unit/test_stripe.c
tests_unit_test_stripe_LDADD = libcollx-tcp.la
TESTS += tests/unit/test_exports.sh
EXTRA_DIST += tests/unit/test_exports.sh

# test_tune: the tuning policy (src/tune/) on hand-made cost tables.
# test_tuner_plugin: the built plugin's ncclTunerPlugin_v4, dlopened as NCCL
# does, through init, getCollInfo and destroy.
check_PROGRAMS += tests/unit/test_tune tests/unit/test_tuner_plugin
TESTS += tests/unit/test_tune tests/unit/test_tuner_plugin
tests_unit_test_tune_SOURCES = tests/unit/test_tune.c
tests_unit_test_tune_LDADD = libcollx-core.la
tests_unit_test_tuner_plugin_SOURCES = tests/unit/test_tuner_plugin.c
tests_unit_test_tuner_plugin_LDADD = -ldl

# test_nstreams: the stream count COLLX_NSTREAMS=0 picks, and the launcher
# variables that say how many ranks share the node.
check_PROGRAMS += tests/unit/test_nstreams
TESTS += tests/unit/test_nstreams
tests_unit_test_nstreams_SOURCES = tests/unit/test_nstreams.c
tests_unit_test_nstreams_LDADD = libcollx-topo.la

# test_sock: a connect that lands on itself counts as refused; a write up to
# a byte limit stops there.
check_PROGRAMS += tests/unit/test_sock
TESTS += tests/unit/test_sock
tests_unit_test_sock_SOURCES = tests/unit/test_sock.c
tests_unit_test_sock_LDADD = libcollx-tcp.la
EXTRA_DIST += tests/common/check.h

# test_timeline: the message timeline that -DCOLLX_TIMELINE builds record
# (src/util/timeline.c, built here with the flag on).
check_PROGRAMS += tests/unit/test_timeline
TESTS += tests/unit/test_timeline
tests_unit_test_timeline_SOURCES = tests/unit/test_timeline.c src/util/timeline.c
tests_unit_test_timeline_CPPFLAGS = $(AM_CPPFLAGS) -DCOLLX_TIMELINE

# test_peer_finished: when a closed peer fails a posted receive.
check_PROGRAMS += tests/unit/test_peer_finished
TESTS += tests/unit/test_peer_finished
tests_unit_test_peer_finished_SOURCES = tests/unit/test_peer_finished.c
tests_unit_test_peer_finished_LDADD = libcollx-tcp.la

# test_context: per-communicator contexts (ncclNet v11/v12) over loopback:
# the traffic class on both ends' sockets, the stream count from
# setNetAttr's hints, finalize closing what was left open.
check_PROGRAMS += tests/unit/test_context
TESTS += tests/unit/test_context
tests_unit_test_context_SOURCES = tests/unit/test_context.c
tests_unit_test_context_LDADD = libcollx-core.la

# test_vdevice: virtual devices (makeVDevice) and rail / plane ids, on
# hand-made device tables.
check_PROGRAMS += tests/unit/test_vdevice
TESTS += tests/unit/test_vdevice
tests_unit_test_vdevice_SOURCES = tests/unit/test_vdevice.c
tests_unit_test_vdevice_LDADD = libcollx-core.la

# test_vdevice_live.sh: makeVDevice through the plugin's v12 / v11 tables on
# nine veths in a network namespace (root; skipped otherwise).
check_PROGRAMS += tests/unit/test_vdevice_live
TESTS += tests/unit/test_vdevice_live.sh tests/unit/test_ifskip_live.sh
EXTRA_DIST += tests/unit/test_vdevice_live.sh tests/unit/test_ifskip_live.sh
tests_unit_test_vdevice_live_SOURCES = tests/unit/test_vdevice_live.c
tests_unit_test_vdevice_live_LDADD = -ldl

# test_chunks: the per-buffer chunk rules accept every striping in any
# order and refuse repeats and mixtures.
check_PROGRAMS += tests/unit/test_chunks
TESTS += tests/unit/test_chunks
tests_unit_test_chunks_SOURCES = tests/unit/test_chunks.c
tests_unit_test_chunks_LDADD = libcollx-core.la

# test_pace: a stream's drain-rate estimate, when it is slow, what a slow
# one takes, and when a chunk is through (src/transport/tcp/pace.c).
check_PROGRAMS += tests/unit/test_pace
TESTS += tests/unit/test_pace
tests_unit_test_pace_SOURCES = tests/unit/test_pace.c
tests_unit_test_pace_LDADD = libcollx-tcp.la -lm

# test_match: the matching rules (the sender's cursor over CTS records, the
# early log, where the receiver puts an early message, held CTS records) on
# hand-made sequences.
check_PROGRAMS += tests/unit/test_match
TESTS += tests/unit/test_match
tests_unit_test_match_SOURCES = tests/unit/test_match.c
tests_unit_test_match_LDADD = libcollx-tcp.la

# test_layers.sh: no file includes a header of a layer above its own, and
# core includes no transport's internals (the link half is src/layers.mk).
TESTS += tests/unit/test_layers.sh
EXTRA_DIST += tests/unit/test_layers.sh

# test_floors.sh: inside the TCP transport, no file uses a symbol of a file
# on a floor above it (src/transport/tcp/floors), read from the objects
# with nm; two planted violations must be caught.
TESTS += tests/unit/test_floors.sh
EXTRA_DIST += tests/unit/test_floors.sh src/transport/tcp/floors

# test_engine: the progress engine's event loops over socket pairs.
check_PROGRAMS += tests/unit/test_engine
TESTS += tests/unit/test_engine
tests_unit_test_engine_SOURCES = tests/unit/test_engine.c
tests_unit_test_engine_LDADD = libcollx-tcp.la

# test_rejoin: a lost path's new sockets (rejoin.c) against a raw socket:
# a late hello, a wrong one, none; a new socket the receiver drops.
check_PROGRAMS += tests/unit/test_rejoin
TESTS += tests/unit/test_rejoin
tests_unit_test_rejoin_SOURCES = tests/unit/test_rejoin.c
tests_unit_test_rejoin_LDADD = libcollx-tcp.la

# test_ctrl: the control channel (ctrl.c) alone over loopback socket pairs:
# order on both sockets, partial writes, the switch to the spare at the
# same byte, the other copy dropped, a writer dying with records queued,
# heartbeats, what is owed at unlock, end of stream.
check_PROGRAMS += tests/unit/test_ctrl
TESTS += tests/unit/test_ctrl
tests_unit_test_ctrl_SOURCES = tests/unit/test_ctrl.c
tests_unit_test_ctrl_LDADD = libcollx-tcp.la -ldl

# test_cts_backlog: irecv never waits for room on a full control socket;
# the CTS records it could not queue go out later, in order.
check_PROGRAMS += tests/unit/test_cts_backlog
TESTS += tests/unit/test_cts_backlog
tests_unit_test_cts_backlog_SOURCES = tests/unit/test_cts_backlog.c
tests_unit_test_cts_backlog_LDADD = libcollx-tcp.la

# The next three drive a role's own code on a comm over socket pairs, the
# test bed they share (tests/unit/sockbed.c).

# test_lost_notice: a LOST notice whose stream fails under the watchdog's
# heartbeat goes back to be written on another stream.
check_PROGRAMS += tests/unit/test_lost_notice
TESTS += tests/unit/test_lost_notice
tests_unit_test_lost_notice_SOURCES = tests/unit/test_lost_notice.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_lost_notice_LDADD = libcollx-tcp.la

# test_take_back: a stream given up in the middle of a chunk: written
# again for a send still unconfirmed, counted written for a confirmed one.
check_PROGRAMS += tests/unit/test_take_back
TESTS += tests/unit/test_take_back
tests_unit_test_take_back_SOURCES = tests/unit/test_take_back.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_take_back_LDADD = libcollx-tcp.la

# test_lazy_done: the receiver writes a DONE at once, or, for a message
# whose sender keeps a copy, with the next CTS or at the watchdog's tick.
check_PROGRAMS += tests/unit/test_lazy_done
TESTS += tests/unit/test_lazy_done
tests_unit_test_lazy_done_SOURCES = tests/unit/test_lazy_done.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_lazy_done_LDADD = libcollx-tcp.la

# test_second_copy: failover's second copy of a chunk is read aside while
# the stream that claimed the chunk first writes it in place, and goes in
# only once that stream lets go (parked, installed, or dropped).
check_PROGRAMS += tests/unit/test_second_copy
TESTS += tests/unit/test_second_copy
tests_unit_test_second_copy_SOURCES = tests/unit/test_second_copy.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_second_copy_LDADD = libcollx-tcp.la

# test_stats: the live counters' page in /dev/shm (made, read back,
# removed; a planted link not followed; a killed process's page swept).
# test_stats_live.sh: collx-perf mid-transfer read by collx-info --stats.
check_PROGRAMS += tests/unit/test_stats
TESTS += tests/unit/test_stats tests/unit/test_stats_live.sh
EXTRA_DIST += tests/unit/test_stats_live.sh
tests_unit_test_stats_SOURCES = tests/unit/test_stats.c
tests_unit_test_stats_LDADD = libcollx-util.la

# test_caller_pass: with caller progress one isend or test moves at most
# TCP_CALLER_PASS_BYTES each way, over socket pairs with a forced large
# buffer (root; skipped without it)
check_PROGRAMS += tests/unit/test_caller_pass
TESTS += tests/unit/test_caller_pass
tests_unit_test_caller_pass_SOURCES = tests/unit/test_caller_pass.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_caller_pass_LDADD = libcollx-tcp.la

# test_writer_busy: irecv and isend return while another thread holds the
# control channel's writer, and that thread writes what they posted as it
# lets go
check_PROGRAMS += tests/unit/test_writer_busy
TESTS += tests/unit/test_writer_busy
tests_unit_test_writer_busy_SOURCES = tests/unit/test_writer_busy.c tests/unit/sockbed.c tests/unit/sockbed.h
tests_unit_test_writer_busy_LDADD = libcollx-tcp.la

# test_linger: control sockets are closed only once the peer has all they
# carried, and while the watchdog runs that wait is its ticks', not close's
check_PROGRAMS += tests/unit/test_linger
TESTS += tests/unit/test_linger
tests_unit_test_linger_SOURCES = tests/unit/test_linger.c
tests_unit_test_linger_LDADD = libcollx-tcp.la
