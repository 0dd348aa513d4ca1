#!/usr/bin/env python3
"""Tables, plot and target check for collx's all-reduce benchmark.

run.sh calls this once all runs are done:

    plot.py --raw RESULTS/raw --out RESULTS

It reads, from the raw directory:
  status.tsv            one line per run (written by run.sh)
  meta.txt              "key: value" lines about the machine and the build
  <N>r-<config>.out     rank 0's output of bench/allreduce for each run

and writes into the output directory:
  table.md              one table per rank count, collx against NCCL's Socket
  busbw.png             bus bandwidth and time per size, every run
  summary.txt           per-run status and PASS/FAIL for each target

Only Python 3 and matplotlib (for the PNG; without it the tables and the
summary are still written).
"""

import argparse
import math
import os
import sys

CONFIGS = [
    ("collx", "collx"),
    ("socket", "Socket default"),
    ("socket-tuned", "Socket tuned"),
]
LABEL = dict(CONFIGS)
COLOR = {"collx": "tab:blue", "socket": "tab:orange", "socket-tuned": "tab:green"}
STYLE = ["-", "--", ":", "-."]
MARK = ["o", "s", "^", "D"]

MIB = 1 << 20
TARGET_MIN, TARGET_MAX = 16 * MIB, 512 * MIB  # the bandwidth targets' size range
BW_RATIO = 2.0                                 # collx busbw >= 2x Socket's
LAT_SIZE, LAT_RATIO = 8, 0.8                   # collx 8 B time <= 0.8x Socket's


# --------------------------------------------------------------------------
# Reading

def read_status(raw):
    """status.tsv: a header line naming the columns, then one run a line."""
    path = os.path.join(raw, "status.tsv")
    runs = []
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    if not lines:
        return runs
    names = lines[0].lstrip("#").split("\t")
    for line in lines[1:]:
        vals = line.split("\t")
        vals += [""] * (len(names) - len(vals))
        runs.append(dict(zip(names, vals)))
    return runs


def read_meta(raw):
    meta = {}
    path = os.path.join(raw, "meta.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    meta[k.strip()] = v.strip()
    return meta


def to_num(s):
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return None


def parse_out(path):
    """Rank 0's output: '# columns:' names the fields of the data lines."""
    res = {"rows": {}, "nccl": None, "result": None}
    if not os.path.exists(path):
        return res
    cols = None
    with open(path, errors="replace") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith("#"):
                body = s.lstrip("#").strip()
                if body.startswith("columns:"):
                    cols = body[len("columns:"):].split()
                elif body.startswith("nccl_version"):
                    parts = body.split()
                    if len(parts) >= 3:
                        res["nccl"] = parts[2].strip("()")
                elif body.startswith("result:"):
                    res["result"] = body.split(":", 1)[1].strip()
                continue
            if cols is None:
                continue
            fields = s.split()
            if len(fields) != len(cols):
                continue
            vals = [to_num(x) for x in fields]
            if any(v is None for v in vals):
                continue
            row = dict(zip(cols, vals))
            res["rows"][int(row["size_B"])] = row
    return res


# --------------------------------------------------------------------------
# Formatting

def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def fmt_num(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


def fmt_ratio(v):
    return "-" if v is None else "%.2fx" % v


# --------------------------------------------------------------------------

class Run:
    def __init__(self, st, raw):
        self.name = st.get("name", "")
        self.nranks = int(st.get("nranks") or 0)
        self.config = st.get("config", "")
        self.status = st.get("status", "?")
        self.valid = st.get("valid", "no") == "yes"
        self.note = st.get("note", "")
        self.st = st
        out = parse_out(os.path.join(raw, self.name + ".out"))
        self.rows = out["rows"]
        self.nccl = out["nccl"]
        self.result = out["result"]

    def good_row(self, size):
        """The row for size if it may be compared: valid run, right result."""
        if not self.valid:
            return None
        r = self.rows.get(size)
        if r is None or r.get("wrong", 0) != 0:
            return None
        return r

    def mark(self):
        if self.status.startswith("SKIPPED") or self.valid:
            return ""
        return " (invalid: net not verified)"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def cell(run, size, key):
    if run is None:
        return "-"
    r = run.rows.get(size)
    if r is None:
        return "-"
    s = fmt_num(r.get(key))
    if r.get("wrong", 0):
        s += " (WRONG)"
    elif not run.valid:
        s += "*"
    return s


def build_table(runs_by, ranks, meta):
    out = []
    out.append("# collx all-reduce benchmark")
    out.append("")
    for k in ("date", "gpu", "driver", "nccl", "plugin", "mps", "launcher", "mode", "args", "env"):
        if meta.get(k):
            out.append("- %s: %s" % (k, meta[k]))
    out.append("- busbw = algbw * 2(n-1)/n, GB = 1e9 bytes; time = per all-reduce, max over ranks")
    out.append("- cpu s/GB = CPU seconds of the whole processes (getrusage RUSAGE_SELF, user+sys,"
               " summed over ranks) per GB moved, GB moved = size * 2(n-1)/n * nranks per"
               " all-reduce")
    out.append("- `*` after a value: that run's log did not show the expected `via NET/<name>`"
               " (invalid, not used in the targets); `(WRONG)`: wrong results at that size")
    out.append("")
    for n in ranks:
        c = runs_by.get((n, "collx"))
        d = runs_by.get((n, "socket"))
        t = runs_by.get((n, "socket-tuned"))
        out.append("## %d ranks" % n)
        out.append("")
        for cfg, label in CONFIGS:
            r = runs_by.get((n, cfg))
            if r is None:
                out.append("- %s: not run" % label)
            else:
                out.append("- %s: %s%s%s" % (label, r.status, r.mark(),
                                             (" - " + r.note) if r.note else ""))
        lat = []
        for cfg, label in CONFIGS:
            r = runs_by.get((n, cfg))
            v = r.rows.get(LAT_SIZE) if r else None
            lat.append("%s %s us" % (label, fmt_num(v["time_us"]) if v else "-"))
        out.append("- 8 B time: " + ", ".join(lat))
        out.append("")
        sizes = sorted(set().union(*[set(r.rows) for r in (c, d, t) if r is not None]))
        if not sizes:
            out.append("(no data)")
            out.append("")
            continue
        out.append("| size | busbw collx | busbw sock | busbw sock-tuned | collx/sock |"
                   " collx/tuned | time collx (us) | time sock (us) | time tuned (us) |"
                   " cpu s/GB collx | cpu s/GB sock | cpu s/GB tuned |")
        out.append("|" + "---:|" * 12)
        for s in sizes:
            bc = c.good_row(s) if c else None
            bd = d.good_row(s) if d else None
            bt = t.good_row(s) if t else None
            rd = ratio(bc and bc["busbw_GBps"], bd and bd["busbw_GBps"])
            rt = ratio(bc and bc["busbw_GBps"], bt and bt["busbw_GBps"])
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                fmt_size(s),
                cell(c, s, "busbw_GBps"), cell(d, s, "busbw_GBps"), cell(t, s, "busbw_GBps"),
                fmt_ratio(rd), fmt_ratio(rt),
                cell(c, s, "time_us"), cell(d, s, "time_us"), cell(t, s, "time_us"),
                cell(c, s, "cpu_s_per_GB"), cell(d, s, "cpu_s_per_GB"),
                cell(t, s, "cpu_s_per_GB")))
        out.append("")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# Targets

def check_bw(runs_by, n, ref, expected_sizes):
    """collx busbw >= BW_RATIO x ref's at every size in the target range."""
    c = runs_by.get((n, "collx"))
    r = runs_by.get((n, ref))
    sizes = [s for s in expected_sizes if TARGET_MIN <= s <= TARGET_MAX]
    if c is not None:
        sizes = sorted(set(sizes) | {s for s in c.rows if TARGET_MIN <= s <= TARGET_MAX})
    if not sizes:
        return "NODATA", "no size in 16 MiB..512 MiB"
    worst, missing, fails = None, [], []
    for s in sizes:
        a = c.good_row(s) if c else None
        b = r.good_row(s) if r else None
        q = ratio(a and a["busbw_GBps"], b and b["busbw_GBps"])
        if q is None:
            missing.append(fmt_size(s))
            continue
        if worst is None or q < worst[0]:
            worst = (q, s)
        if q < BW_RATIO:
            fails.append("%s %.2fx" % (fmt_size(s), q))
    detail = []
    if worst:
        detail.append("lowest %.2fx at %s" % (worst[0], fmt_size(worst[1])))
    if fails:
        detail.append("below %.1fx: %s" % (BW_RATIO, ", ".join(fails)))
    if missing:
        detail.append("no valid data: %s" % ", ".join(missing))
    verdict = "FAIL" if fails else ("NODATA" if missing else "PASS")
    return verdict, "; ".join(detail)


def check_lat(runs_by, n, ref):
    c = runs_by.get((n, "collx"))
    r = runs_by.get((n, ref))
    a = c.good_row(LAT_SIZE) if c else None
    b = r.good_row(LAT_SIZE) if r else None
    q = ratio(a and a["time_us"], b and b["time_us"])
    if q is None:
        return "NODATA", "no valid 8 B time for both"
    detail = "collx %.1f us, %s %.1f us: %.2fx" % (a["time_us"], LABEL[ref], b["time_us"], q)
    return ("PASS" if q <= LAT_RATIO else "FAIL"), detail


def build_summary(runs, runs_by, ranks, meta, expected_sizes):
    out = ["collx all-reduce benchmark: summary"]
    for k in ("date", "gpu", "driver", "nccl", "plugin", "mps", "launcher", "mode", "args", "env",
              "results"):
        if meta.get(k):
            out.append("  %-9s %s" % (k + ":", meta[k]))
    out.append("")
    out.append("runs (status, network check from the NCCL_DEBUG=INFO log, data rows, seconds):")
    all_ok = True
    for r in runs:
        ok = r.valid and r.result == "OK"
        all_ok = all_ok and ok
        out.append("  %-16s %-22s %-8s via-NET-lines %-4s other %-4s rows %-3d %5ss%s" % (
            r.name, r.status, "valid" if r.valid else "INVALID", r.st.get("net_lines", "?"),
            r.st.get("other_lines", "?"), len(r.rows), r.st.get("seconds", "?"),
            ("  " + r.note) if r.note else ""))
    if not runs:
        all_ok = False
        out.append("  (none)")
    out.append("")
    out.append("targets:")
    verdicts = []

    def add(name, v, detail):
        verdicts.append(v)
        out.append("  [%s] %s%s" % (v, name, ("  (" + detail + ")") if detail else ""))

    add("every run valid (via NET/<expected> in its log) and every result right",
        "PASS" if all_ok else "FAIL", "" if all_ok else "see runs above")
    for n in ranks:
        add("busbw >= %.0fx Socket tuned, 16 MiB..512 MiB, %d ranks" % (BW_RATIO, n),
            *check_bw(runs_by, n, "socket-tuned", expected_sizes))
        add("busbw >= %.0fx Socket default, 16 MiB..512 MiB, %d ranks" % (BW_RATIO, n),
            *check_bw(runs_by, n, "socket", expected_sizes))
        add("8 B time <= %.1fx Socket default, %d ranks" % (LAT_RATIO, n),
            *check_lat(runs_by, n, "socket"))
        add("8 B time <= %.1fx Socket tuned, %d ranks" % (LAT_RATIO, n),
            *check_lat(runs_by, n, "socket-tuned"))
    overall = "PASS" if all(v == "PASS" for v in verdicts) else "FAIL"
    out.append("")
    out.append("overall: %s (%d of %d targets pass)" % (
        overall, sum(v == "PASS" for v in verdicts), len(verdicts)))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# Plot

def plot(runs, ranks, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator
    except Exception as e:  # keep the tables even without matplotlib
        sys.stderr.write("plot.py: no matplotlib (%s); busbw.png not written\n" % e)
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))

    def size_label(x, _pos):
        x = int(round(x))
        for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
            if x >= div:
                return "%d%s" % (x // div, unit)
        return "%d" % x

    drawn = 0
    for r in runs:
        if not r.rows:
            continue
        i = ranks.index(r.nranks) if r.nranks in ranks else 0
        xs = sorted(r.rows)
        bw = [r.rows[s]["busbw_GBps"] for s in xs]
        tm = [r.rows[s]["time_us"] for s in xs]
        label = "%s, %d ranks%s" % (LABEL.get(r.config, r.config), r.nranks,
                                    "" if r.valid else " (invalid)")
        kw = dict(color=COLOR.get(r.config, "gray"), linestyle=STYLE[i % len(STYLE)],
                  marker=MARK[i % len(MARK)], markersize=3, linewidth=1.5,
                  alpha=1.0 if r.valid else 0.35, label=label)
        ax1.plot(xs, bw, **kw)
        ax2.plot(xs, tm, **kw)
        drawn += 1
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
    ax1.axvspan(TARGET_MIN, TARGET_MAX, color="gray", alpha=0.08, label="target range")
    ax1.set_ylabel("bus bandwidth (GB/s)")
    ax1.set_title("all-reduce bus bandwidth (float sum)")
    ax1.set_ylim(bottom=0)
    ax2.set_yscale("log")
    ax2.set_ylabel("time per all-reduce (us)")
    ax2.set_title("all-reduce time")
    if drawn:
        ax1.legend(fontsize=8, loc="upper left")
    else:
        ax1.text(0.5, 0.5, "no data", transform=ax1.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True, help="directory with status.tsv, meta.txt, *.out")
    ap.add_argument("--out", required=True, help="directory for table.md, busbw.png, summary.txt")
    ap.add_argument("--sizes", default="",
                    help="comma-separated sizes (bytes) the runs were asked for; a target size"
                         " missing from a run then counts as missing data")
    args = ap.parse_args()

    meta = read_meta(args.raw)
    runs = [Run(st, args.raw) for st in read_status(args.raw)]
    ranks = sorted({r.nranks for r in runs})
    runs_by = {(r.nranks, r.config): r for r in runs}
    if not meta.get("nccl"):
        for r in runs:
            if r.nccl:
                meta["nccl"] = r.nccl
                break
    expected = [int(x) for x in args.sizes.split(",") if x.strip().isdigit()]

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(build_table(runs_by, ranks, meta))
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(build_summary(runs, runs_by, ranks, meta, expected))
    plot(runs, ranks, os.path.join(args.out, "busbw.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
