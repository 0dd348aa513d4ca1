#!/bin/sh
# The plugin exports exactly its ncclNetPlugin_v12 down to _v7 tables and
# its ncclTunerPlugin_v6 and _v4 tables, and nothing else: NCCL looks them
# up by name (newest first; the tuner in the net plugin's library when
# NCCL_TUNER_PLUGIN is unset), and any other global symbol could clash with
# the application's.  Run from the build directory.
so=.libs/libnccl-net-collx.so
[ -f "$so" ] || { echo "FAIL: $so not built"; exit 1; }
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^_' | sort)
echo "exported:" $syms
want="ncclNetPlugin_v12 ncclNetPlugin_v11 ncclNetPlugin_v10 ncclNetPlugin_v9 ncclNetPlugin_v8
ncclNetPlugin_v7 ncclTunerPlugin_v6 ncclTunerPlugin_v4"
rc=0
for s in $want; do
  echo "$syms" | grep -qx "$s" || { echo "FAIL: $s not exported"; rc=1; }
done
bad=$(echo "$syms" | grep -vx $(for s in $want; do printf ' -e %s' "$s"; done) || true)
if [ -n "$bad" ]; then echo "FAIL: unexpected exports:" $bad; rc=1; fi
[ $rc -eq 0 ] && echo "PASS: exactly ncclNetPlugin_v12 ... _v7, ncclTunerPlugin_v6 and _v4 exported"
exit $rc
