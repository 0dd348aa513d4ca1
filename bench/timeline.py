#!/usr/bin/env python3
"""Where a small message's time goes, from COLLX_TIMELINE builds.

Usage: bench/timeline.py DIR   (the collx-timeline.<pid> files of one run)

A plugin built with ./configure CPPFLAGS=-DCOLLX_TIMELINE writes, per
process, one line per event: t_ns kind key n (see src/util/timeline.h).
Events of one connection share its key in both processes, and the n-th
eager message sent is the n-th landed, so each message's steps can be
lined up across processes (CLOCK_MONOTONIC is shared on one host).

Printed, in microseconds (median, 10th and 90th percentile, count):
  write       isend to the last byte handed to the socket (the sendmsg)
  to-land     handed to the socket to landed in the receive buffer: the
              kernel's loopback and the wait until the receiver reads
  to-done     landed to test() reporting the receive complete
  turnaround  a receive reported complete to the next isend of the same
              process: what NCCL and the GPU take to send on what arrived
Then, per pair of consecutive events of one process (the first tenth of
each process's events, the warm-up, left out), how long it took from one to
the next: irecv -> irecv-end is what an irecv call costs, for example.
"""
import glob
import os
import sys

ISEND, WRITTEN, IRECV, LANDED, DONE, IRECV_END = 1, 2, 3, 4, 5, 6
NAMES = {ISEND: "isend", WRITTEN: "written", IRECV: "irecv", LANDED: "landed", DONE: "done",
         IRECV_END: "irecv-end"}


def load(directory):
    procs = {}
    for path in glob.glob(os.path.join(directory, "collx-timeline.*")):
        pid = path.rsplit(".", 1)[1]
        rows = []
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                t, kind, key, n = (int(x) for x in line.split())
                rows.append((t, kind, key, n))
        rows.sort()
        procs[pid] = rows
    return procs


def index(procs, kind):
    """(key, n) -> time of the first event of this kind."""
    out = {}
    for rows in procs.values():
        for t, k, key, n in rows:
            if k == kind:
                out.setdefault((key, n), t)
    return out


def spans(start, end):
    return [(end[m] - start[m]) / 1e3 for m in start if m in end]


def turnarounds(procs):
    out = []
    for rows in procs.values():
        pending = None
        for t, kind, _, _ in rows:
            if kind == DONE and pending is None:
                pending = t
            elif kind == ISEND and pending is not None:
                out.append((t - pending) / 1e3)
                pending = None
    return out


def transitions(procs):
    out = {}
    for rows in procs.values():
        rows = rows[len(rows) // 10:]
        for a, b in zip(rows, rows[1:]):
            out.setdefault((a[1], b[1]), []).append((b[0] - a[0]) / 1e3)
    return sorted(out.items(), key=lambda kv: -len(kv[1]))


def summary(name, xs):
    if not xs:
        return f"{name:<24} no samples"
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    return f"{name:<24} median {q(0.5):8.2f}  p10 {q(0.1):8.2f}  p90 {q(0.9):8.2f}  ({len(xs)})"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    procs = load(sys.argv[1])
    if not procs:
        sys.exit(f"no collx-timeline.* files in {sys.argv[1]}")
    isend, written = index(procs, ISEND), index(procs, WRITTEN)
    landed = index(procs, LANDED)
    # The n-th landed message fills receive n when every receive gets one
    # eager message (small all-reduces); done is indexed by receive.
    done = index(procs, DONE)
    print(f"{len(procs)} processes, {len(isend)} eager sends, {len(landed)} landed, {len(done)} receives done")
    print(summary("write", spans(isend, written)))
    print(summary("to-land", spans(written, landed)))
    print(summary("to-done", spans(landed, done)))
    print(summary("turnaround", turnarounds(procs)))
    print("from one event of a process to its next:")
    for (a, b), xs in transitions(procs)[:12]:
        print(summary(f"  {NAMES.get(a, a)} -> {NAMES.get(b, b)}", xs))


if __name__ == "__main__":
    main()
