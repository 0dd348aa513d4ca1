#!/usr/bin/env python3
"""Where a proxy step's time goes, from NCCL's example-profiler traces.

    bench/profiler/steps.py TRACE.json...

For each trace file (one rank of one communicator): the algorithm, protocol
and channel count of its collectives, then every span kind (b/e pairs of
one name and id) with its count and median / mean / 90th percentile in us.
The NET spans are NCCL's proxy-step phases (SendGpuWait: the GPU has not
filled the step's buffer yet; SendPeerWait: the peer's buffer is not free;
SendWait and RecvWait: from the net plugin's isend/irecv to its test()
saying done; RecvFlushWait, RecvGpuWait: after the data arrived); the
NET_SOCK spans are the plugin's own events (op 0 send, 1 receive, by
size), so the network's share of a step reads directly beside the rest.
"""
import collections
import json
import re
import statistics
import sys


def events(path):
    """The example profiler's JSON is not strict (bare hex and enum names,
    a trailing comma); read it line by line and keep what parses."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            line = re.sub(r":\s*(0x[0-9a-fA-F]+|[A-Za-z_][A-Za-z0-9_]*)\s*([,}])", r': "\1"\2', line)
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def spans(evs):
    open_, got = {}, collections.defaultdict(list)
    for e in evs:
        key = (e.get("name"), e.get("cat"), e.get("id"))
        if e.get("ph") == "b":
            open_[key] = e
        elif e.get("ph") == "e" and key in open_:
            b = open_.pop(key)
            kind = (e["cat"], e["name"])
            if e["cat"] == "NET_SOCK":
                a = b.get("args", {})
                kind = ("NET_SOCK", "op%s %s B" % (a.get("op"), a.get("size")))
            got[kind].append(float(e["ts"]) - float(b["ts"]))
    return got


def main(paths):
    for path in paths:
        evs = events(path)
        algos = collections.Counter(
            "%s/%s/%sch" % (e["args"].get("Algorithm"), e["args"].get("Protocol"), e["args"].get("nChannels"))
            for e in evs if e.get("cat") == "COLL" and e.get("ph") == "b" and "args" in e)
        print("== %s: %s" % (path, ", ".join("%d x %s" % (n, a) for a, n in algos.items())))
        got = spans(evs)
        for kind in sorted(got, key=lambda k: (k[0] not in ("NET", "NET_SOCK"), k)):
            v = sorted(got[kind])
            if kind[0] not in ("NET", "NET_SOCK", "PROXY") or len(v) < 5:
                continue
            print("  %-9s %-24s n=%5d  median %8.1f  mean %8.1f  p90 %8.1f" % (
                kind[0], kind[1], len(v), statistics.median(v), statistics.mean(v), v[int(len(v) * 0.9)]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
