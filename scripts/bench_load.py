"""Kineto load, side by side: traceread's loader, HTA's TraceAnalysis load, bare ``orjson.loads``.

Each contender runs in its own fresh process on the same file; the table gives MB/s of
uncompressed JSON, wall seconds, CPU seconds (process plus its workers) and peak memory: the
largest RSS of the tree's processes summed over the tree, sampled every 20 ms from
``/proc/PID/statm``. Pages a forked worker shares with its parent count once per process, so the
figure is an upper bound. (PSS from ``smaps_rollup`` would count them once, but reading it takes
the target's memory-map lock: sampling it slowed traceread's 1 GB load by 0.5 s, measured.)

Contenders run interleaved, several times on the small input (medians are shown), each after
``--settle`` seconds of idle: measured, traceread started right after an HTA run was 40% slower
(0.16 s against 0.11 s) while the kernel was still busy with the exited process's memory.

    python scripts/bench_load.py                       # (a) 21 MB param_linear trace, (b) 1 GB scaled
    python scripts/bench_load.py --only small --skip-hta

HTA lives in its own virtual environment beside the repo (``python3 -m venv .venv-hta &&
.venv-hta/bin/pip install traceinsight 'pandas<3'``, or set ``HTA_PYTHON``); it is never a traceread
dependency.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO.parent / "shared" / "traces" / "kineto" / "param_linear_rtx2080ti.json.gz"
BIG = Path(tempfile.gettempdir()) / "traceread-bench" / "param_linear_1gb.json"
HTA_PYTHON = os.environ.get("HTA_PYTHON", str(REPO / ".venv-hta" / "bin" / "python"))

_CPU = """
import resource as _r
def CPU():
    s, c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
"""
TRACEREAD = _CPU + """
import sys, time, json
from traceread.loaders.kineto import load_kineto
t = time.perf_counter()
c0 = CPU()
tr = load_kineto(sys.argv[1])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rows": len(tr.events), "cpu": CPU() - c0}))
"""
ORJSON = _CPU + """
import sys, time, json, gzip
import orjson
t = time.perf_counter()
c0 = CPU()
with open(sys.argv[1], "rb") as fh:
    data = fh.read()
if data[:2] == b"\\x1f\\x8b":
    data = gzip.decompress(data)
doc = orjson.loads(data)
dt = time.perf_counter() - t
ev = doc if isinstance(doc, list) else doc["traceEvents"]
print(json.dumps({"seconds": dt, "rows": len(ev), "cpu": CPU() - c0}))
"""
HTA = _CPU + """
import sys, time, json, os, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
c0 = CPU()
ta = TraceAnalysis(trace_dir=sys.argv[2])
dt = time.perf_counter() - t
rows = sum(len(ta.t.get_trace(r)) for r in ta.t.get_ranks())
print(json.dumps({"seconds": dt, "rows": rows, "cpu": CPU() - c0}))
"""


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def run(python: str, code: str, args: list[str], timeout: float, max_mb: float) -> dict:
    """Run ``code`` in a fresh process; wall/CPU time from inside, memory sampled from outside.

    The run is stopped past ``timeout`` seconds or ``max_mb`` of memory (a shared machine).
    """
    proc = subprocess.Popen([python, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    peak_tree = peak_main = 0
    start = time.monotonic()
    while proc.poll() is None:
        tree = [_rss_kb(p) for p in _tree(proc.pid)]
        peak_tree = max(peak_tree, sum(tree))
        peak_main = max(peak_main, tree[0] if tree else 0)
        if time.monotonic() - start > timeout:
            proc.kill()
            return {"error": f"stopped after {timeout:.0f} s (peak {peak_tree / 1024:,.0f} MB so far)"}
        if peak_tree / 1024 > max_mb:
            for p in _tree(proc.pid):
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            proc.wait()
            return {"error": f"stopped at {peak_tree / 1024:,.0f} MB after {time.monotonic() - start:.0f} s "
                             f"(memory cap --max-mb)"}
        time.sleep(0.02)
    out, err = proc.communicate()
    if proc.returncode != 0:
        return {"error": (err.decode().strip().splitlines() or ["failed"])[-1][:120]}
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["peak_tree_mb"] = peak_tree / 1024
    res["peak_main_rss_mb"] = peak_main / 1024
    return res


def json_size(path: Path) -> int:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:
            n = 0
            while chunk := fh.read(1 << 24):
                n += len(chunk)
            return n
    return path.stat().st_size


def hta_version(python: str) -> str | None:
    code = "import hta, importlib.metadata as m; print(m.version('traceinsight'))"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def bench(path: Path, hta_python: str | None, timeout: float, max_mb: float,
          repeat: int, settle: float) -> list[tuple[str, dict]]:
    """Each contender ``repeat`` times, interleaved (a noisy spell hits all of them alike).

    Seconds and CPU are the medians; ``range`` is the fastest and slowest run; memory the peak.
    """
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="hta-bench-") as d:
        os.symlink(path.resolve(), Path(d) / path.name)
        contenders = [("traceread", sys.executable, TRACEREAD, [str(path)])]
        if hta_python:
            contenders.append(("HTA TraceAnalysis", hta_python, HTA, [str(path), d]))
        contenders.append(("orjson.loads", sys.executable, ORJSON, [str(path)]))
        for _ in range(repeat):
            for name, python, code, argv in contenders:
                if runs.get(name) and "error" in runs[name][-1]:
                    continue
                time.sleep(settle)  # the previous process's exit work (freeing, compaction) is done
                runs.setdefault(name, []).append(run(python, code, argv, timeout, max_mb))
    rows = []
    for name, results in runs.items():
        ok = [r for r in results if "error" not in r]
        if not ok:
            rows.append((name, results[-1]))
            continue
        secs = sorted(r["seconds"] for r in ok)
        rows.append((name, {
            "seconds": statistics.median(secs), "range": (secs[0], secs[-1]), "runs": len(ok),
            "cpu": statistics.median(r["cpu"] for r in ok), "rows": ok[0]["rows"],
            "peak_tree_mb": max(r["peak_tree_mb"] for r in ok),
        }))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=Path, default=SMALL)
    ap.add_argument("--big", type=Path, default=BIG, help="made by scripts/scale_trace.py if missing")
    ap.add_argument("--big-mb", type=int, default=1024)
    ap.add_argument("--only", choices=["small", "big"], default=None)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--hta-python", default=HTA_PYTHON)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--max-mb", type=float, default=12_000, help="stop a contender past this memory")
    ap.add_argument("--repeat-small", type=int, default=7, help="runs per contender on (a); medians are shown")
    ap.add_argument("--repeat-big", type=int, default=1, help="runs per contender on (b)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of idle before each run")
    args = ap.parse_args()

    hta = None if args.skip_hta else args.hta_python
    if hta:
        version = hta_version(hta)
        print(f"HTA: traceinsight {version}" if version else f"HTA: not importable with {hta}; skipped")
        hta = hta if version else None
    inputs = []
    if args.only != "big":
        inputs.append(("(a) param_linear", args.small, args.repeat_small))
    if args.only != "small":
        if not args.big.exists():
            subprocess.run([sys.executable, str(REPO / "scripts" / "scale_trace.py"), str(args.small),
                            str(args.big), "--size-mb", str(args.big_mb)], check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        inputs.append(("(b) scaled", args.big, args.repeat_big))
    print(f"cores: {os.cpu_count()}  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    header = f"{'input':<18} {'JSON MB':>8} {'loader':<18} {'seconds':>8} {'range':>13} {'MB/s':>7} {'CPU s':>7} " \
             f"{'peak MB':>8} {'x JSON':>6} {'rows':>10}"
    print(header)
    print("-" * len(header))
    print("(seconds and CPU: medians over the runs; range: fastest-slowest; peak: the largest seen)")
    for label, path, repeat in inputs:
        size = json_size(path)
        results = bench(path, hta, args.timeout, args.max_mb, repeat, args.settle)
        base = dict(results).get("HTA TraceAnalysis", {}).get("seconds")
        for name, r in results:
            if "error" in r:
                print(f"{label:<18} {size / 1e6:8.0f} {name:<18} {r['error']}")
                continue
            speed = size / 1e6 / r["seconds"]
            vs = f"  ({base / r['seconds']:.1f}x HTA)" if base and name == "traceread" else ""
            spread = f"{r['range'][0]:.3f}-{r['range'][1]:.3f}" if r["runs"] > 1 else ""
            print(f"{label:<18} {size / 1e6:8.0f} {name:<18} {r['seconds']:8.3f} {spread:>13} {speed:7.0f} "
                  f"{r['cpu']:7.2f} {r['peak_tree_mb']:8.0f} {r['peak_tree_mb'] * 2**20 / size:6.2f} "
                  f"{r['rows']:10,}{vs}")


if __name__ == "__main__":
    main()
