#!/bin/sh
# ./tests/faults/faults with COLLX_PROGRESS=threads (a thread per stream reads and writes the sockets).
# Run from the build directory.
COLLX_PROGRESS=threads exec ./tests/faults/faults "$@"
