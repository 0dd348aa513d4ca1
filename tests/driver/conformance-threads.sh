#!/bin/sh
# ./tests/driver/conformance with COLLX_PROGRESS=threads (the device's pool of progress threads reads and writes the sockets).
# Run from the build directory.
COLLX_PROGRESS=threads exec ./tests/driver/conformance "$@"
