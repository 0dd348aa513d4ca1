#!/bin/sh
# ./tests/driver/conformance through ncclNetPlugin_v11 (tests/common/net_compat.h),
# with stream threads.  Run from the build directory.
COLLX_DRIVER_NET_VERSION=11 COLLX_PROGRESS=threads exec ./tests/driver/conformance "$@"
