#!/usr/bin/env python3
"""Tables, summary and plots of a bench/nccl-tests.sh results directory.

Reads RAW/status.tsv (one run a line), RAW/meta.txt and each run's
RAW/<coll>-<n>r-<config>.out (nccl-tests' output), and writes into OUT:

  <coll>.md     per collective: busbw and time of collx, Socket and Socket
                tuned per size and rank count, collx / the better Socket
  tables.md     the same tables, all collectives, one file
  summary.md    every run (status, network check, ncclNet table loaded), the
                lowest collx / better-Socket ratio at 16-512 MiB per
                collective and rank count against the 2x target, and what
                NCCL logged about the plugin (raw/plugin-lines.txt)
  <coll>.png    busbw against size per collective, and busbw.png with every
                collective in one figure (only when matplotlib is there:
                the tables do not need it)

Values are nccl-tests' out-of-place columns; busbw is nccl-tests' bus
bandwidth for that collective (GB/s, 1e9 bytes).  Only valid runs (the
expected network in NCCL's log) with no wrong element enter the ratios.
"""
import argparse
import os
import sys

# The reading of run.sh's results directories, shared with plot.py.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import fmt_size, read_meta, read_status  # noqa: E402

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "sendrecv", "alltoall"]
CONFIGS = [("collx", "collx"), ("socket", "Socket"), ("socket-tuned", "Socket tuned")]
TARGET_MIN, TARGET_MAX = 16 << 20, 512 << 20
TARGET_RATIO = 2.0
COLOR = {"collx": "tab:red", "socket": "tab:blue", "socket-tuned": "tab:green"}
STYLE = ["-", "--", ":", "-."]


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


def parse_out(path):
    """nccl-tests' data lines: size count type redop root, then time algbw
    busbw #wrong out of place, the same in place."""
    rows, version = {}, None
    if not os.path.exists(path):
        return rows, version
    with open(path, errors="replace") as f:
        for line in f:
            s = line.split()
            if not s:
                continue
            if s[0] == "#":
                if "nccl-library=" in line:
                    version = line.split("nccl-library=")[1].split()[0]
                continue
            if len(s) < 13 or not s[0].isdigit():
                continue
            t, bw, wrong = num(s[5]), num(s[7]), num(s[8])
            if t is None or bw is None:
                continue
            wrong_in = num(s[12])
            rows[int(s[0])] = {"time_us": t, "busbw": bw,
                               "wrong": (wrong or 0) + (wrong_in or 0)}
    return rows, version


class Run:
    def __init__(self, st, raw):
        self.st = st
        self.name = st.get("name", "")
        self.coll = st.get("coll", "")
        self.nranks = int(st.get("nranks") or 0)
        self.config = st.get("config", "")
        self.status = st.get("status", "?")
        self.valid = st.get("valid") == "yes"
        self.rows, self.version = parse_out(os.path.join(raw, self.name + ".out"))

    def good(self, size):
        if not self.valid or self.status != "OK":
            return None
        r = self.rows.get(size)
        return r if r and r["wrong"] == 0 else None


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    return "%.0f" % v if a >= 100 else "%.1f" % v if a >= 10 else "%.2f" % v if a >= 0.01 else "%.3g" % v


def cell(run, size, key):
    if run is None or size not in run.rows:
        return "-"
    r = run.rows[size]
    s = fmt(r[key])
    if r["wrong"]:
        s += " (WRONG)"
    elif not run.valid or run.status != "OK":
        s += "*"
    return s


def better_socket(runs_by, coll, n, size):
    """The larger busbw of Socket and Socket tuned at size, with its label."""
    best = None
    for cfg, label in CONFIGS[1:]:
        r = runs_by.get((coll, n, cfg))
        g = r.good(size) if r else None
        if g and (best is None or g["busbw"] > best[0]):
            best = (g["busbw"], label)
    return best


def ratio_at(runs_by, coll, n, size):
    c = runs_by.get((coll, n, "collx"))
    g = c.good(size) if c else None
    b = better_socket(runs_by, coll, n, size)
    if not g or not b or b[0] <= 0:
        return None
    return g["busbw"] / b[0]


def coll_table(runs_by, coll, ranks):
    out = ["## %s" % coll, ""]
    for n in ranks:
        runs = [runs_by.get((coll, n, cfg)) for cfg, _ in CONFIGS]
        sizes = sorted(set().union(*[set(r.rows) for r in runs if r]))
        out.append("### %d ranks" % n)
        out.append("")
        for (cfg, label), r in zip(CONFIGS, runs):
            out.append("- %s: %s" % (label, "not run" if r is None else "%s%s%s" % (
                r.status, "" if r.valid else " (invalid: network not verified)",
                (", ncclNet " + r.st["net_table"]) if r.st.get("net_table") else "")))
        out.append("")
        if not sizes:
            out.append("(no data)")
            out.append("")
            continue
        out.append("| size | busbw collx | busbw Socket | busbw Socket tuned | collx / better Socket |"
                   " time collx (us) | time Socket (us) | time tuned (us) |")
        out.append("|" + "---:|" * 8)
        for s in sizes:
            q = ratio_at(runs_by, coll, n, s)
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                fmt_size(s), cell(runs[0], s, "busbw"), cell(runs[1], s, "busbw"),
                cell(runs[2], s, "busbw"), "-" if q is None else "%.2fx" % q,
                cell(runs[0], s, "time_us"), cell(runs[1], s, "time_us"), cell(runs[2], s, "time_us")))
        out.append("")
    return out


def header(meta, title):
    out = ["# " + title, ""]
    for k in ("date", "host", "nccl", "nccl_tests", "plugin", "mps", "launcher", "args", "env"):
        if meta.get(k):
            out.append("- %s: %s" % (k, meta[k]))
    out.append("- values: nccl-tests out-of-place time and bus bandwidth (GB/s = 1e9 B/s);"
               " `*`: the run's log did not show the expected network, or the run did not"
               " finish OK (not used in ratios)")
    out.append("")
    return out


def target_rows(runs_by, colls, ranks):
    rows, verdicts = [], []
    for coll in colls:
        for n in ranks:
            c = runs_by.get((coll, n, "collx"))
            sizes = sorted(s for s in (c.rows if c else {}) if TARGET_MIN <= s <= TARGET_MAX)
            qs = [(ratio_at(runs_by, coll, n, s), s) for s in sizes]
            have = [(q, s) for q, s in qs if q is not None]
            missing = [fmt_size(s) for q, s in qs if q is None]
            if not have:
                v, detail = "NODATA", "no valid pair of runs at 16-512 MiB"
            else:
                low = min(have)
                below = [fmt_size(s) for q, s in have if q < TARGET_RATIO]
                v = "FAIL" if below else ("NODATA" if missing else "PASS")
                detail = "lowest %.2fx at %s; highest %.2fx" % (low[0], fmt_size(low[1]), max(have)[0])
                if below:
                    detail += "; below %.0fx at %s" % (TARGET_RATIO, ", ".join(below))
                if missing:
                    detail += "; no valid data at %s" % ", ".join(missing)
            verdicts.append(v)
            rows.append("| %s | %d | %s | %s |" % (coll, n, v, detail))
    return rows, verdicts


def summary(runs, runs_by, colls, ranks, meta, raw):
    out = header(meta, "nccl-tests through collx: summary")
    out.append("## Runs")
    out.append("")
    out.append("| run | status | network check | via NET lines | other | sizes | seconds | ncclNet table | note |")
    out.append("|---|---|---|---:|---:|---:|---:|---|---|")
    for r in runs:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r.name, r.status, "valid" if r.valid else "INVALID", r.st.get("net_lines", ""),
            r.st.get("other_lines", ""), len(r.rows), r.st.get("seconds", ""),
            r.st.get("net_table", "") or "-", r.st.get("note", "")))
    out.append("")
    out.append("## collx against the better Socket (busbw), 16-512 MiB: target >= %.0fx" % TARGET_RATIO)
    out.append("")
    out.append("| collective | ranks | verdict | detail |")
    out.append("|---|---:|---|---|")
    rows, verdicts = target_rows(runs_by, colls, ranks)
    out += rows
    out.append("")
    out.append("overall: %s (%d of %d pass)" % (
        "PASS" if verdicts and all(v == "PASS" for v in verdicts) else "FAIL",
        sum(v == "PASS" for v in verdicts), len(verdicts)))
    lines = os.path.join(raw, "plugin-lines.txt")
    if os.path.exists(lines):
        out.append("")
        out.append("## What NCCL logged about the plugin (rank 0 of the first collx run)")
        out.append("")
        out.append("```")
        with open(lines, errors="replace") as f:
            out += [l.rstrip("\n") for l in f][:40]
        out.append("```")
    return out


def plot(runs_by, colls, ranks, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # the tables do not need it
        sys.stderr.write("nt_report.py: no matplotlib (%s); no plots written\n" % e)
        return

    def draw(ax, coll):
        drawn = 0
        for i, n in enumerate(ranks):
            for cfg, label in CONFIGS:
                r = runs_by.get((coll, n, cfg))
                if not r or not r.rows:
                    continue
                xs = sorted(r.rows)
                ax.plot(xs, [r.rows[s]["busbw"] for s in xs], color=COLOR[cfg],
                        linestyle=STYLE[i % len(STYLE)], marker=".", markersize=3,
                        alpha=1.0 if r.valid and r.status == "OK" else 0.35,
                        label="%s, %d ranks" % (label, n))
                drawn += 1
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(coll)
        ax.set_ylim(bottom=0)
        ax.axvspan(TARGET_MIN, TARGET_MAX, color="gray", alpha=0.08)
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.legend(fontsize=7, loc="upper left")

    for coll in colls:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw(ax, coll)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, coll + ".png"), dpi=100)
        plt.close(fig)
    cols = 3
    nrows = (len(colls) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.2 * nrows), squeeze=False)
    for k, coll in enumerate(colls):
        draw(axes[k // cols][k % cols], coll)
    for k in range(len(colls), nrows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "busbw.png"), dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    meta = read_meta(args.raw)
    runs = [Run(st, args.raw) for st in read_status(args.raw)]
    runs.sort(key=lambda r: (COLLS.index(r.coll) if r.coll in COLLS else 99, r.nranks, r.config))
    runs_by = {(r.coll, r.nranks, r.config): r for r in runs}
    colls = [c for c in COLLS if any(r.coll == c for r in runs)]
    ranks = sorted({r.nranks for r in runs})
    version = next((r.version for r in runs if r.version), None)
    if version and "nccl" in meta:
        meta["nccl"] += " (library code %s, from nccl-tests)" % version
    os.makedirs(args.out, exist_ok=True)
    allt = header(meta, "nccl-tests through collx")
    for coll in colls:
        t = coll_table(runs_by, coll, ranks)
        with open(os.path.join(args.out, coll + ".md"), "w") as f:
            f.write("\n".join(header(meta, "nccl-tests through collx: " + coll) + t[2:]) + "\n")
        allt += t
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write("\n".join(allt) + "\n")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(summary(runs, runs_by, colls, ranks, meta, args.raw)) + "\n")
    try:
        plot(runs_by, colls, ranks, args.out)
    except Exception as e:  # a plot is not worth losing the tables over
        sys.stderr.write("nt_report.py: plotting failed: %s\n" % e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
