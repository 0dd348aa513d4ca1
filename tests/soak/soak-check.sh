#!/bin/sh
# `make check` runs a short soak (SOAK_SECONDS, default 10 s); CI runs the
# full one: tests/soak/soak --seconds 60.  Run from the build directory.
exec ./tests/soak/soak --seconds "${SOAK_SECONDS:-10}"
