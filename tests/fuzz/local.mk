# Fuzzing (clang + libFuzzer), outside `make check`:
#   make fuzz [FUZZ_SECONDS=30] [CLANG=clang]
# builds one libFuzzer target per parser of untrusted bytes, compiling the
# source files under test directly (not through libtool) with
# -fsanitize=fuzzer,address,undefined, generates a small seed corpus in the
# build directory (tests/fuzz/work) and runs each target for FUZZ_SECONDS.
# The last line is "N passed, N failed".  make fuzz-clean removes the work.
FUZZ_SECONDS = 30
CLANG = clang
FUZZ_TARGETS = handle wire_hello wire_welcome wire_ctrl wire_chunk chunks ifmatch
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -include $(top_builddir)/config.h -I$(top_srcdir)/include -I$(top_srcdir)/src
FUZZ_HDRS = $(top_srcdir)/tests/fuzz/fuzz_common.h $(top_srcdir)/include/collx/net_abi.h
FUZZ_WIRE_DEPS = $(top_srcdir)/src/transport/tcp/wire.c $(top_srcdir)/src/transport/tcp/wire.h \
                 $(top_srcdir)/src/transport/transport.h $(top_srcdir)/src/util/netdev.h $(top_srcdir)/src/util/config.h $(FUZZ_HDRS)
FUZZ_BINS = $(FUZZ_TARGETS:%=tests/fuzz/fuzz_%)

EXTRA_DIST += tests/fuzz/fuzz_common.h tests/fuzz/fuzz_handle.c tests/fuzz/fuzz_wire_hello.c \
              tests/fuzz/fuzz_wire_welcome.c tests/fuzz/fuzz_wire_ctrl.c tests/fuzz/fuzz_wire_chunk.c \
              tests/fuzz/fuzz_ifmatch.c tests/fuzz/fuzz_chunks.c tests/fuzz/gen_seeds.c tests/fuzz/run-fuzz.sh
CLEANFILES += $(FUZZ_BINS) tests/fuzz/gen_seeds

tests/fuzz/fuzz_handle: $(top_srcdir)/tests/fuzz/fuzz_handle.c $(top_srcdir)/src/transport/tcp/handle.c \
                        $(top_srcdir)/src/transport/tcp/handle.h $(FUZZ_HDRS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_handle.c $(top_srcdir)/src/transport/tcp/handle.c
tests/fuzz/fuzz_wire_hello: $(top_srcdir)/tests/fuzz/fuzz_wire_hello.c $(FUZZ_WIRE_DEPS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_wire_hello.c $(top_srcdir)/src/transport/tcp/wire.c
tests/fuzz/fuzz_wire_welcome: $(top_srcdir)/tests/fuzz/fuzz_wire_welcome.c $(FUZZ_WIRE_DEPS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_wire_welcome.c $(top_srcdir)/src/transport/tcp/wire.c
tests/fuzz/fuzz_wire_ctrl: $(top_srcdir)/tests/fuzz/fuzz_wire_ctrl.c $(FUZZ_WIRE_DEPS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_wire_ctrl.c $(top_srcdir)/src/transport/tcp/wire.c
tests/fuzz/fuzz_wire_chunk: $(top_srcdir)/tests/fuzz/fuzz_wire_chunk.c $(FUZZ_WIRE_DEPS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_wire_chunk.c $(top_srcdir)/src/transport/tcp/wire.c
tests/fuzz/fuzz_chunks: $(top_srcdir)/tests/fuzz/fuzz_chunks.c $(top_srcdir)/src/transport/tcp/chunks.c \
                        $(top_srcdir)/src/transport/tcp/chunks.h $(FUZZ_HDRS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_chunks.c $(top_srcdir)/src/transport/tcp/chunks.c
tests/fuzz/fuzz_ifmatch: $(top_srcdir)/tests/fuzz/fuzz_ifmatch.c $(top_srcdir)/src/util/ifmatch.c \
                         $(top_srcdir)/src/util/ifmatch.h $(FUZZ_HDRS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_ifmatch.c $(top_srcdir)/src/util/ifmatch.c
tests/fuzz/gen_seeds: $(top_srcdir)/tests/fuzz/gen_seeds.c $(top_srcdir)/src/transport/tcp/handle.c $(FUZZ_WIRE_DEPS)
	@mkdir -p tests/fuzz
	$(AM_V_CC)$(CLANG) -O1 -include $(top_builddir)/config.h -I$(top_srcdir)/include -I$(top_srcdir)/src \
	  -o $@ $(top_srcdir)/tests/fuzz/gen_seeds.c $(top_srcdir)/src/transport/tcp/handle.c

fuzz: $(FUZZ_BINS) tests/fuzz/gen_seeds
	@rm -rf tests/fuzz/work/seeds && mkdir -p tests/fuzz/work && tests/fuzz/gen_seeds tests/fuzz/work/seeds
	@$(SHELL) $(top_srcdir)/tests/fuzz/run-fuzz.sh $(FUZZ_SECONDS) tests/fuzz/work $(FUZZ_TARGETS)
fuzz-clean:
	rm -rf tests/fuzz/work $(FUZZ_BINS) tests/fuzz/gen_seeds
.PHONY: fuzz fuzz-clean
