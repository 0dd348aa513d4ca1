#!/usr/bin/env python3
"""collx's per-stream events in an NCCL example-profiler trace.

The example profiler prints each proxy step's network events together:
collx's message event (NET_SOCK with sock -1) and then one event per stream
that carried part of it (sock = that stream's socket).  For each trace
file: messages, stream events, streams per message, and the median length
of message and stream events by op (0 send, 1 receive), in microseconds.

    bench/profiler/parts.py TRACE.json...
"""
import json
import re
import statistics
import sys
from collections import Counter, defaultdict

LINE = re.compile(r'^\{.*\},?$')


def events(path):
    begins, out = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not LINE.match(line) or '"NET_SOCK"' not in line:
                continue
            e = json.loads(line.rstrip(','))
            if e["ph"] == "b":
                begins[e["id"]] = e
                out.append(e)
            elif e["ph"] == "e" and e["id"] in begins:
                begins[e["id"]]["dur"] = e["ts"] - begins[e["id"]]["ts"]
    return out


def summary(path):
    evs = events(path)
    per_msg, msg = [], None
    dur = defaultdict(list)
    for e in evs:
        a = e["args"]
        kind = "message" if a["sock"] == -1 else "stream"
        if "dur" in e:
            dur[(kind, a["op"])].append(e["dur"])
        if kind == "message":
            msg = [e, 0]
            per_msg.append(msg)
        elif msg is not None:
            msg[1] += 1
    streams = Counter(n for _, n in per_msg)
    print(f"{path}: {len(per_msg)} messages, {sum(streams[k] * k for k in streams)} stream events")
    print("  streams per message: " + ", ".join(f"{k}: {streams[k]}" for k in sorted(streams)))
    for (kind, op), d in sorted(dur.items()):
        print(f"  {kind} events, op {op} ({'send' if op == 0 else 'receive'}): {len(d)}, "
              f"median {statistics.median(d):.1f} us, max {max(d):.1f} us")


for p in sys.argv[1:]:
    summary(p)
