#!/bin/sh
# ./tests/faults/faults with COLLX_PROGRESS=threads (the device's pool of progress threads reads and writes the sockets).
# Run from the build directory.
COLLX_PROGRESS=threads exec ./tests/faults/faults "$@"
