#!/bin/sh
# ./tests/faults/faults with COLLX_PROGRESS=caller (no stream threads: the caller of isend/irecv/test does all socket I/O).
# Run from the build directory.
COLLX_PROGRESS=caller exec ./tests/faults/faults "$@"
