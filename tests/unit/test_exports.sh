#!/bin/sh
# The plugin exports its ncclNetPlugin_v* tables and nothing else: NCCL
# looks them up by name, and any other global symbol could clash with the
# application's.  Run from the build directory.
so=.libs/libnccl-net-collx.so
[ -f "$so" ] || { echo "FAIL: $so not built"; exit 1; }
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^_' | sort)
echo "exported: $syms"
bad=$(echo "$syms" | grep -v '^ncclNetPlugin_v[0-9][0-9]*$' || true)
if [ -n "$bad" ]; then echo "FAIL: unexpected exports: $bad"; exit 1; fi
echo "$syms" | grep -qx 'ncclNetPlugin_v8' || { echo "FAIL: ncclNetPlugin_v8 not exported"; exit 1; }
echo "PASS: only ncclNetPlugin_v* tables exported"
