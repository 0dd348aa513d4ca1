#!/bin/sh
# Every conformance case through ncclNetPlugin_v12 (NCCL 2.30), with stream
# threads.  Run from the build directory.
COLLX_PROGRESS=threads exec ./tests/driver/conformance --abi 12 "$@"
