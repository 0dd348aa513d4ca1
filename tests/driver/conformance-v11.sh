#!/bin/sh
# Every conformance case through ncclNetPlugin_v11 (NCCL 2.28: a context
# per communicator, finalize), with stream threads.  Run from the build
# directory.
COLLX_PROGRESS=threads exec ./tests/driver/conformance --abi 11 "$@"
