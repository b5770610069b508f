"""Kineto load, side by side: traceread (compiled scanner, and msgspec fallback forced), HTA's
TraceAnalysis load, bare ``orjson.loads``, and the whole ``traceread info`` process.

Each contender runs in its own fresh process on the same file. The table gives, from inside the
process after its imports, the load's seconds, MB/s of uncompressed JSON and CPU seconds (process
plus its workers); from outside, the whole process's wall seconds and CPU seconds (imports
included: the figure a user waits for); and peak memory: the largest RSS of the tree's processes
summed over the tree, sampled every 20 ms from ``/proc/PID/statm``. Pages a forked worker shares
with its parent count once per process, so the figure is an upper bound. (PSS from
``smaps_rollup`` would count them once, but reading it takes the target's memory-map lock:
sampling it slowed traceread's 1 GB load by 0.5 s, measured.)

Inputs (made by ``scripts/scale_trace.py`` under ``bench-out/`` when missing; never committed):
(a) the 2021 ResNet-50 trace (integer microseconds, pretty-printed, string tids) scaled to
233 MB, (b) a PyTorch 2.4+ trace with decimal microseconds (``hta_nccl_a100_rank0of2``) scaled to
233 MB, (c) ``param_linear`` scaled to 1 GB, (d) the same gzipped (isal level 1).

Contenders run interleaved, ``--repeat`` times on the 233 MB inputs (medians shown, HTA once), each
after ``--settle`` seconds of idle: measured, traceread started right after an HTA run was 40%
slower while the kernel was still busy with the exited process's memory.

    python scripts/bench_load.py                        # all four inputs (HTA skipped on 1 GB)
    python scripts/bench_load.py --only a b --skip-hta

``--baseline-python PY`` adds the same traceread contenders run by another interpreter whose
``traceread`` is an earlier commit (e.g. ``git worktree add ../base REV``, a venv there with
``pip install -e .``: its compiled scanner is built in place), so a refactor is measured side by side
with what it replaced, in one run.

HTA lives in its own virtual environment beside the repo (``python3 -m venv .venv-hta &&
.venv-hta/bin/pip install traceinsight 'pandas<3'``, or set ``HTA_PYTHON``); it is never a traceread
dependency.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctree import process_tree, rss_bytes

REPO = Path(__file__).resolve().parent.parent
KINETO = REPO.parent / "shared" / "traces" / "kineto"
OUT = REPO / "bench-out"  # ignored by git
# key: (label, source trace, JSON MB, gzipped)
INPUTS = {
    "a": ("(a) resnet50 int", KINETO / "kineto2021_resnet50_13streams.pt.trace.json.gz", 233, False),
    "b": ("(b) nccl decimal", KINETO / "hta_nccl_a100_rank0of2.json.gz", 233, False),
    "c": ("(c) param 1 GB", KINETO / "param_linear_rtx2080ti.json.gz", 1024, False),
    "d": ("(d) param 1 GB gz", KINETO / "param_linear_rtx2080ti.json.gz", 1024, True),
}
HTA_PYTHON = os.environ.get("HTA_PYTHON", str(REPO / ".venv-hta" / "bin" / "python"))

_CPU = """
import resource as _r
def CPU():
    s, c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
"""
TRACEREAD = _CPU + """
import sys, time, json
from traceread.runner import load  # the loader with the runner's threads and forks beside it, as commands load
t = time.perf_counter()
c0 = CPU()
tr = load(sys.argv[1])
dt = time.perf_counter() - t
share = tr.meta.extra["kineto_decoder"]["scanner_share"]
print(json.dumps({"seconds": dt, "rows": len(tr.events), "cpu": CPU() - c0, "scanner_share": share}))
"""
INFO = "from traceread.cli import run; run()"  # what the traceread command runs; argv: info PATH (whole process timed)
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


def run(python: str, code: str, args: list[str], timeout: float, max_mb: float, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh process; load time/CPU from inside (when it prints them), the whole
    process's wall and CPU from outside, memory sampled from outside.

    The run is stopped past ``timeout`` seconds or ``max_mb`` of memory (a shared machine).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    # ``python -c`` imports from its working folder first: run where PYTHONPATH points (a baseline's checkout).
    proc = subprocess.Popen([python, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=env["PYTHONPATH"], env=env)
    peak_tree = peak_main = 0
    while proc.poll() is None:
        tree = [rss_bytes(p) // 1024 for p in process_tree(proc.pid)]
        peak_tree = max(peak_tree, sum(tree))
        peak_main = max(peak_main, tree[0] if tree else 0)
        if time.monotonic() - start > timeout:
            proc.kill()
            proc.wait()
            return {"error": f"stopped after {timeout:.0f} s (peak {peak_tree / 1024:,.0f} MB so far)"}
        if peak_tree / 1024 > max_mb:
            for p in process_tree(proc.pid):
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            proc.wait()
            return {"error": f"stopped at {peak_tree / 1024:,.0f} MB after {time.monotonic() - start:.0f} s "
                             f"(memory cap --max-mb)"}
        time.sleep(0.02)
    out, err = proc.communicate()
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return {"error": (err.decode().strip().splitlines() or ["failed"])[-1][:120]}
    try:
        res = json.loads(out.decode().strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        res = {"seconds": None, "cpu": None, "rows": None}  # a command's own output (traceread info)
    res["process_s"] = wall
    res["process_cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
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
          repeat: int, settle: float, info: bool, baseline: str | None = None,
          baseline_dir: str = "") -> list[tuple[str, dict]]:
    """Each contender ``repeat`` times (HTA once), interleaved (a noisy spell hits all alike).

    Seconds and CPU are the medians; ``range`` is the fastest and slowest run; memory the peak.
    """
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="hta-bench-") as d:
        os.symlink(path.resolve(), Path(d) / path.name)
        contenders = [("traceread scanner", sys.executable, TRACEREAD, [str(path)], {"TRACEREAD_NO_SCANNER": ""}),
                      ("traceread msgspec", sys.executable, TRACEREAD, [str(path)], {"TRACEREAD_NO_SCANNER": "1"})]
        if info:
            contenders.append(("traceread info", sys.executable, INFO, ["info", str(path)], {}))
        if baseline:  # the same contenders run by the baseline's interpreter (its own traceread)
            root = {"PYTHONPATH": str(Path(baseline_dir).parent)}
            contenders.append(("baseline scanner", baseline, TRACEREAD, [str(path)], {**root, "TRACEREAD_NO_SCANNER": ""}))
            if info:
                contenders.append(("baseline info", baseline, INFO, ["info", str(path)], root))
        if hta_python:
            contenders.append(("HTA TraceAnalysis", hta_python, HTA, [str(path), d], {}))
        contenders.append(("orjson.loads", sys.executable, ORJSON, [str(path)], {}))
        for k in range(repeat):
            for name, python, code, argv, env in contenders:
                if runs.get(name) and "error" in runs[name][-1] or (name.startswith("HTA") and k):
                    continue
                time.sleep(settle)  # the previous process's exit work (freeing, compaction) is done
                runs.setdefault(name, []).append(run(python, code, argv, timeout, max_mb, env))
                print(f"  {name}: {_brief(runs[name][-1])}", file=sys.stderr)
    rows = []
    for name, results in runs.items():
        ok = [r for r in results if "error" not in r]
        if not ok:
            rows.append((name, results[-1]))
            continue
        inner = sorted(r["seconds"] for r in ok if r["seconds"] is not None)
        outer = sorted(r["process_s"] for r in ok)
        rows.append((name, {
            "seconds": statistics.median(inner) if inner else None, "range": (inner[0], inner[-1]) if inner else (outer[0], outer[-1]),
            "runs": len(ok), "cpu": statistics.median(r["cpu"] for r in ok) if inner else None,
            "process_s": statistics.median(outer), "process_range": (outer[0], outer[-1]),
            "process_cpu": statistics.median(r["process_cpu"] for r in ok), "rows": ok[0]["rows"],
            "peak_tree_mb": max(r["peak_tree_mb"] for r in ok),
        }))
    return rows


def _brief(r: dict) -> str:
    if "error" in r:
        return r["error"]
    inner = f"load {r['seconds']:.2f} s, " if r.get("seconds") is not None else ""
    if "scanner_share" in r:
        inner += f"scanner took {r['scanner_share']:.0%} of the JSON, "
    return f"{inner}process {r['process_s']:.2f} s, peak {r['peak_tree_mb']:,.0f} MB"


def make_input(key: str) -> Path:
    """The benchmark input ``key`` (see INPUTS), made under bench-out/ when missing."""
    _, src, mb, gz = INPUTS[key]
    stem = src.name.split(".")[0]
    plain = OUT / f"{stem}_{mb}mb.json"
    if not plain.exists():
        if not src.exists():
            raise SystemExit(f"{src} not found (needs ../shared/traces)")
        subprocess.run([sys.executable, str(REPO / "scripts" / "scale_trace.py"), str(src), str(plain),
                        "--size-mb", str(mb)], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    if not gz:
        return plain
    packed = plain.with_suffix(".json.gz")
    if not packed.exists():
        from isal import igzip

        tmp = packed.with_suffix(".part")
        with open(plain, "rb") as fin, igzip.open(tmp, "wb", compresslevel=1) as fout:
            while block := fin.read(16 << 20):
                fout.write(block)
        os.replace(tmp, packed)
    return packed


def machine_state() -> str:
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    return f"cores: {os.cpu_count()}  load average (1, 5, 15 min): {load}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=sorted(INPUTS), default=sorted(INPUTS))
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--hta-big", action="store_true", help="also run HTA on the 1 GB inputs (minutes, ~5 GB)")
    ap.add_argument("--hta-python", default=HTA_PYTHON)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--max-mb", type=float, default=12_000, help="stop a contender past this memory")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender on the 233 MB inputs")
    ap.add_argument("--repeat-big", type=int, default=1, help="runs per contender on the 1 GB inputs")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of idle before each run")
    ap.add_argument("--baseline-python", help="a Python whose traceread is an earlier commit, run side by side")
    args = ap.parse_args()
    baseline = args.baseline_python
    where = ""
    if baseline:
        where = subprocess.run([baseline, "-c", "import traceread, os; print(os.path.dirname(traceread.__file__))"],
                               capture_output=True, text=True, check=True, cwd="/",
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout.strip()
        if Path(where).resolve() == (REPO / "traceread").resolve():
            raise SystemExit(f"--baseline-python {baseline}: imports this checkout's traceread, not a baseline")
        compileall.compile_dir(where, quiet=1)
        rev = subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        print(f"baseline: {where} at {rev.stdout.strip() or '?'}")

    hta = None if args.skip_hta else args.hta_python
    if hta:
        version = hta_version(hta)
        print(f"HTA: traceinsight {version}" if version else f"HTA: not importable with {hta}; skipped")
        hta = hta if version else None
    paths = {key: make_input(key) for key in args.only}
    # An installed package has its bytecode compiled (pip does it); a checkout run under
    # PYTHONDONTWRITEBYTECODE (set on this machine) would compile traceread's modules again in
    # every process timed. HTA's and orjson's own packages are installed, hence compiled.
    compileall.compile_dir(str(REPO / "traceread"), quiet=1)
    print(f"before: {machine_state()}")
    header = f"{'input':<18} {'JSON MB':>7} {'contender':<18} {'load s':>7} {'range':>11} {'MB/s':>5} " \
             f"{'CPU s':>6} {'proc s':>7} {'proc CPU':>8} {'peak MB':>7} {'x JSON':>6} {'rows':>10}"
    lines = [header, "-" * len(header)]
    notes = []
    for key in args.only:
        label, _, mb, _ = INPUTS[key]
        path = paths[key]
        size = json_size(path)
        big = mb > 500
        results = bench(path, hta if (not big or args.hta_big) else None, args.timeout, args.max_mb,
                        args.repeat_big if big else args.repeat, args.settle, info=not big,
                                baseline=baseline, baseline_dir=where if baseline else "")
        got = dict(results)
        for name, r in results:
            if "error" in r:
                lines.append(f"{label:<18} {size / 1e6:7.0f} {name:<18} {r['error']}")
                continue
            load = f"{r['seconds']:7.2f}" if r["seconds"] is not None else f"{'':>7}"
            speed = f"{size / 1e6 / r['seconds']:5.0f}" if r["seconds"] else f"{'':>5}"
            cpu = f"{r['cpu']:6.2f}" if r["cpu"] is not None else f"{'':>6}"
            lo, hi = r["range"][0], r["range"][-1]
            spread = f"{lo:.2f}-{hi:.2f}" if r["runs"] > 1 else ""
            lines.append(f"{label:<18} {size / 1e6:7.0f} {name:<18} {load} {spread:>11} {speed} {cpu} "
                         f"{r['process_s']:7.2f} {r['process_cpu']:8.2f} {r['peak_tree_mb']:7.0f} "
                         f"{r['peak_tree_mb'] * 2**20 / size:6.2f} {r['rows'] or '':>10}")
        info = got.get("traceread info", {})
        if "process_s" in info:
            for other in ("orjson.loads", "HTA TraceAnalysis"):
                if "process_s" in got.get(other, {}):
                    notes.append(f"{label}: whole `traceread info` process {got[other]['process_s'] / info['process_s']:.1f}x "
                                 f"faster than the {other} process")
        for now, then in (("traceread scanner", "baseline scanner"), ("traceread info", "baseline info")):
            a, b = got.get(now, {}), got.get(then, {})
            key = "seconds" if a.get("seconds") else "process_s"
            if a.get(key) and b.get(key):
                notes.append(f"{label}: {now} {a[key]:.2f} s vs {then} {b[key]:.2f} s ({a[key] / b[key] - 1:+.1%}); "
                             f"peak {a['peak_tree_mb']:,.0f} vs {b['peak_tree_mb']:,.0f} MB")
        if hta is not None and not big and "seconds" in got.get("HTA TraceAnalysis", {}):
            fast = got.get("traceread scanner", {})
            if fast.get("seconds"):
                notes.append(f"{label}: traceread load {got['HTA TraceAnalysis']['seconds'] / fast['seconds']:.1f}x HTA's")
    print("\n".join(lines))
    print("(load s, CPU s: inside the process after imports, medians; proc s, proc CPU: the whole process "
          "from outside; peak: the largest seen)")
    print("\n".join(notes))
    print(f"after: {machine_state()}")


if __name__ == "__main__":
    main()
