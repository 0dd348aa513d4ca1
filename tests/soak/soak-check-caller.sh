#!/bin/sh
# The short soak of `make check` (SOAK_SECONDS, default 10 s) with
# COLLX_PROGRESS=caller (no stream threads: the caller of isend/irecv/test does all socket I/O).  CI also runs the long one:
# tests/soak/soak --seconds 60.  Run from the build directory.
COLLX_PROGRESS=caller exec ./tests/soak/soak --seconds "${SOAK_SECONDS:-10}" "$@"
