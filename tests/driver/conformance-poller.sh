#!/bin/sh
# ./tests/driver/conformance with stream threads and COLLX_POLLER=on (a thread
# reads the receive connections' control sockets while small messages flow;
# held-cts then checks that it read some).  Run from the build directory.
COLLX_PROGRESS=threads COLLX_POLLER=on exec ./tests/driver/conformance "$@"
