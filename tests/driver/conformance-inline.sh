#!/bin/sh
# ./tests/driver/conformance with stream threads and COLLX_INLINE_RECV=1 (the
# caller reads small chunks itself while the threads stay parked).
# Run from the build directory.
COLLX_PROGRESS=threads COLLX_INLINE_RECV=1 exec ./tests/driver/conformance "$@"
