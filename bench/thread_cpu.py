#!/usr/bin/env python3
"""CPU time and context switches of a benchmark's ranks, by thread name.

    bench/thread_cpu.py STOPFILE LABEL [PROCESS_NAME]

Reads /proc/PID/task/*/stat and status of every process named PROCESS_NAME
(default all_reduce_perf) five times a second until STOPFILE exists, keeps
each thread's last reading, then prints one line per thread class (the name
without its trailing digits: cx-p for the progress pool, cx-rx/cx-tx for
the threads of a stream in older builds) with user and system seconds and
voluntary/involuntary context switches, and the host's busy share over the
window.  Start it in the background before a run, touch STOPFILE after.
"""
import os
import re
import sys
import time


def host_busy():
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def sample(proc, last):
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/comm') as f:
                if not f.read().startswith(proc):
                    continue
            tids = os.listdir(f'/proc/{pid}/task')
        except OSError:
            continue
        for t in tids:
            try:
                with open(f'/proc/{pid}/task/{t}/stat') as f:
                    st = f.read()
                with open(f'/proc/{pid}/task/{t}/status') as f:
                    ss = f.read()
            except OSError:
                continue
            name = st[st.index('(') + 1:st.rindex(')')]
            fields = st[st.rindex(')') + 2:].split()
            vol = int(re.search(r'\nvoluntary_ctxt_switches:\s+(\d+)', ss).group(1))
            invol = int(re.search(r'nonvoluntary_ctxt_switches:\s+(\d+)', ss).group(1))
            last[(pid, t)] = (name, int(fields[11]), int(fields[12]), vol, invol)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    stop, label = sys.argv[1], sys.argv[2]
    proc = sys.argv[3] if len(sys.argv) > 3 else 'all_reduce_perf'
    last = {}
    busy0, total0 = host_busy()
    t0 = time.time()
    while not os.path.exists(stop):
        sample(proc, last)
        time.sleep(0.2)
    busy1, total1 = host_busy()
    hz = os.sysconf('SC_CLK_TCK')
    classes = {}
    for name, user, system, vol, invol in last.values():
        k = re.sub(r'[0-9.]+$', '', name)
        if not k.startswith('cx-') and k != proc:
            k = 'other'
        c = classes.setdefault(k, [0, 0, 0, 0, 0])
        for i, x in enumerate((1, user, system, vol, invol)):
            c[i] += x
    print(f'[{label}] window {time.time() - t0:.1f}s host busy {(busy1 - busy0) / max(1, total1 - total0) * 100:.0f}%')
    for k, (n, user, system, vol, invol) in sorted(classes.items()):
        print(f'[{label}]   {k:16s} threads {n:4d} user {user / hz:7.2f}s sys {system / hz:7.2f}s '
              f'vcs {vol:9d} nvcs {invol:8d}')


if __name__ == '__main__':
    main()
