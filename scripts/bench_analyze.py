"""Time ``traceread analyze`` end to end on the largest real traces, beside the raw decode it builds on.

For the largest trace of each format in ../shared/traces (or the paths given), each row runs in its
own fresh process, best of ``--repeat`` runs, and reports wall time and peak RSS:

* ``load``: ``traceread.load`` alone (the decode every analysis pays; the baseline);
* ``analyze``: ``traceread analyze TRACE -o report.md``;
* ``analyze (all outputs)``: plus ``--json``, ``--plot`` and ``--perfetto``.

    .venv/bin/python scripts/bench_analyze.py [--repeat 3] [TRACE ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEREAD_SHARED", REPO.parent / "shared")) / "traces"

_LOAD = "import sys, traceread; traceread.load(sys.argv[1])"
_ANALYZE = "import sys; from traceread.cli import main; sys.exit(main(sys.argv[1:]))"
_RSS = ("import resource, runpy, sys; code = sys.argv.pop(1); sys.argv[0] = 'bench';\n"
        "try:\n    exec(code)\nfinally:\n"
        "    print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def largest_per_format() -> list[Path]:
    out = []
    for sub in ("kineto", "nsys"):
        files = [p for p in (SHARED / sub).glob("*") if p.is_file()] if (SHARED / sub).is_dir() else []
        if files:
            out.append(max(files, key=lambda p: p.stat().st_size))
    return out


def run(code: str, args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``code`` run in a fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _RSS, code, *args], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"failed: {args}\n{proc.stderr[-2000:]}")
    rss = next((float(line.split()[1]) / 1024 for line in proc.stderr.splitlines() if line.startswith("RSS ")), 0.0)
    return wall, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", help="traces to time (default: the largest of each format in ../shared)")
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    traces = [Path(t) for t in opts.traces] or largest_per_format()
    if not traces:
        raise SystemExit(f"no traces given and none found under {SHARED}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for trace in traces:
            t = str(trace)
            md = os.path.join(tmp, "r.md")
            cases = [
                ("load (raw decode)", _LOAD, [t]),
                ("analyze", _ANALYZE, ["analyze", t, "-o", md]),
                ("analyze (all outputs)", _ANALYZE, ["analyze", t, "-o", md, "--json", os.path.join(tmp, "r.json"),
                                                     "--plot", os.path.join(tmp, "t.png"),
                                                     "--perfetto", os.path.join(tmp, "t.pftrace")]),
            ]
            for label, code, args in cases:
                best = min((run(code, args) for _ in range(opts.repeat)), key=lambda r: r[0])
                rows.append((trace.name, f"{trace.stat().st_size / 2**20:.1f}", label, *best))
    print(f"| trace | MiB | command | wall s (best of {opts.repeat}) | peak RSS MiB |")
    print("|---|---:|---|---:|---:|")
    for name, size, label, wall, rss in rows:
        print(f"| {name} | {size} | {label} | {wall:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
