#!/bin/sh
# The short soak of `make check` (SOAK_SECONDS, default 10 s) with
# COLLX_PROGRESS=threads (the device's pool of progress threads reads and writes the sockets).  CI also runs the long one:
# tests/soak/soak --seconds 60.  Run from the build directory.
COLLX_PROGRESS=threads exec ./tests/soak/soak --seconds "${SOAK_SECONDS:-10}" "$@"
