#!/bin/sh
# The short soak (SOAK_SECONDS, default 10 s) with stream threads and
# COLLX_INLINE_RECV=1 (the caller reads small chunks itself while the threads
# stay parked).  Run from the build directory.
COLLX_PROGRESS=threads COLLX_INLINE_RECV=1 exec ./tests/soak/soak --seconds "${SOAK_SECONDS:-10}" "$@"
