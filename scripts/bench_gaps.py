"""Benchmark the interval engine (steps + gaps + overlaps + totals) and compare with HTA.

    python scripts/bench_gaps.py                  # 1M, 4M, 10M kernels + HTA side by side at 1M
    python scripts/bench_gaps.py --sizes 1M --no-hta

Each measurement runs in its own process (peak RSS is per process):

* engine: builds, in process, a frame of N GPU kernels with one ``cudaLaunchKernel`` each
  (a launch-bound-ish single-GPU run: kernels queue behind their launches, about a quarter of
  kernel boundaries leave a gap, one ProfilerStep per 2,000 kernels), then times find_steps,
  find_gaps and step_totals. Loading is excluded.
* at 1M it also writes the same trace as Kineto JSON (tracesynth.kineto_writer) and times,
  end to end, ``traceread.load`` + steps + gaps against HTA's ``TraceAnalysis`` load +
  ``get_idle_time_breakdown`` (HTA runs from its own venv, ``.venv-hta`` in the repo, or ``HTA_PYTHON``).

Only the standard library is imported at top level: the HTA child process has no traceread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth

HTA_PYTHON = os.environ.get("HTA_PYTHON", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-hta", "bin", "python"))
KERNELS_PER_STEP = 2_000


def _rss_gb() -> float:
    """Peak RSS of this process or of its largest (joined) child, e.g. a loader worker."""
    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024**2


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its joined children (loader workers)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def _size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * mult)


def synth_arrays(n: int, seed: int = 0) -> dict:
    """Kernel and launch timelines (int64 ns) for n kernels, vectorized."""
    import numpy as np

    rng = np.random.default_rng(seed)
    gap = rng.integers(2_000, 8_000, n)
    gap[rng.random(n) < 0.002] += 200_000  # occasional host stall
    l_start = np.cumsum(gap)
    l_end = l_start + rng.integers(1_500, 4_000, n)
    dur = rng.integers(500, 8_000, n)
    # Kernels run in launch order: start_i = max(launch_end_i + 1us, end_{i-1}); a max-plus
    # recurrence solved with a cumulative maximum.
    d_cum = np.cumsum(dur)
    earliest = l_end + 1_000
    m = np.maximum.accumulate(earliest - (d_cum - dur))
    k_end = d_cum + m
    k_start = k_end - dur
    del gap, d_cum, earliest, m
    stream = np.where(rng.random(n) < 0.7, 7, 8)
    names = np.where(rng.random(n) < 0.5, 0, 1)  # 0: gemm, 1: elementwise
    first = np.arange(0, n, KERNELS_PER_STEP)
    s_start = l_start[first]
    s_end = np.append(l_start[first[1:]], l_end[-1])
    return dict(l_start=l_start, l_end=l_end, k_start=k_start, k_end=k_end, stream=stream, names=names,
                s_start=s_start, s_end=s_end)


KERNEL_NAMES = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "vectorized_elementwise_kernel"]


def build_trace(n: int):
    """The synthetic trace as a traceread Trace (in process, no file), built column by column so
    the frame is the only large allocation left when the engine starts."""
    import numpy as np
    import pandas as pd

    from traceread import schema
    from traceread.trace import Trace, TraceMeta

    a = synth_arrays(n)
    ns = len(a["s_start"])
    total = 2 * n + ns

    def col(dtype, k, launch, step):
        out = np.empty(total, dtype=dtype)
        out[:n], out[n:2 * n], out[2 * n:] = k, launch, step
        return out

    def catcol(codes, categories):
        return pd.Categorical.from_codes(codes, categories=categories)

    lanes, cats = list(schema.LANES), list(schema.CATEGORIES)
    names = KERNEL_NAMES + ["cudaLaunchKernel"] + [f"ProfilerStep#{i}" for i in range(ns)]
    corr = np.arange(1, n + 1, dtype=np.int64)
    columns = {
        "trace": lambda: catcol(np.zeros(total, np.int8), ["bench"]),
        "rank": lambda: np.zeros(total, np.int32),
        "lane": lambda: catcol(col(np.int8, lanes.index(schema.LANE_GPU_COMPUTE), lanes.index(schema.LANE_CPU_THREAD),
                                   lanes.index(schema.LANE_CPU_ANNOTATION)), lanes),
        "device": lambda: col(np.int32, 0, -1, -1),
        "stream": lambda: col(np.int64, a["stream"], -1, -1),
        "pid": lambda: col(np.int64, 0, 4242, 4242),
        "tid": lambda: col(np.int64, a["stream"], 4243, 4243),
        "name": lambda: catcol(col(np.int32, a["names"], 2, 3 + np.arange(ns)), names),
        "category": lambda: catcol(col(np.int8, cats.index(schema.CAT_KERNEL), cats.index(schema.CAT_RUNTIME),
                                       cats.index(schema.CAT_USER_ANNOTATION)), cats),
        "raw_category": lambda: catcol(col(np.int8, 0, 1, 2), ["kernel", "cuda_runtime", "user_annotation"]),
        "start_ns": lambda: col(np.int64, a.pop("k_start"), a.pop("l_start"), a["s_start"]),
        "end_ns": lambda: col(np.int64, a.pop("k_end"), a.pop("l_end"), a["s_end"]),
        "correlation": lambda: col(np.int64, corr, corr, -1),
        "external_id": lambda: np.full(total, -1, np.int64),
    }
    ev = pd.DataFrame(index=pd.RangeIndex(total))
    for name, make in columns.items():  # one column at a time: no consolidated block copies
        ev[name] = make()
    a.clear()  # the frame now owns the only copies
    schema.validate(ev)
    meta = TraceMeta(path="bench", format="kineto", generation="synthetic", time_base=schema.TIME_RELATIVE)
    return Trace(ev, meta, {})


def run_engine(n: int) -> dict:
    from traceread.config import Thresholds
    from traceread.engine.gaps import find_gaps, step_totals
    from traceread.engine.steps import find_steps

    t0 = time.perf_counter()
    trace = build_trace(n)
    build_s = time.perf_counter() - t0
    rss_frame = _rss_gb()
    cfg = Thresholds()
    c0 = _cpu_s()
    t0 = time.perf_counter()
    steps = find_steps(trace, cfg).steps
    t1 = time.perf_counter()
    gaps = find_gaps(trace, steps)
    t2 = time.perf_counter()
    step_totals(steps, gaps)
    t3 = time.perf_counter()
    return dict(n=n, rows=len(trace.events), build_s=build_s, steps_s=t1 - t0, gaps_s=t2 - t1,
                totals_s=t3 - t2, engine_s=t3 - t0, engine_cpu_s=_cpu_s() - c0, n_steps=len(steps), n_gaps=len(gaps),
                idle_ns=int(steps["idle_ns"].sum()), rss_frame_gb=rss_frame, rss_peak_gb=_rss_gb())


def write_kineto(n: int, path: str) -> dict:
    from tracesynth.kineto_writer import write_kineto as write
    from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario

    a = synth_arrays(n)
    rank = Rank(rank=0, pid=4242, devices=[0])
    ks, ke, st, nm = (a[k].tolist() for k in ("k_start", "k_end", "stream", "names"))
    ls, le = a["l_start"].tolist(), a["l_end"].tolist()
    rank.kernels = [Kernel(0, st[i], KERNEL_NAMES[nm[i]], ks[i], ke[i], i + 1) for i in range(n)]
    rank.host_calls = [HostCall(4243, "cudaLaunchKernel", ls[i], le[i], i + 1) for i in range(n)]
    rank.host_ranges = [HostRange(4243, f"ProfilerStep#{i}", s, e)
                        for i, (s, e) in enumerate(zip(a["s_start"].tolist(), a["s_end"].tolist(), strict=True))]
    write(Scenario([rank], world_size=1), path)
    return dict(bytes=os.path.getsize(path))


def run_traceread_e2e(path: str) -> dict:
    import traceread
    from traceread.config import Thresholds
    from traceread.engine.gaps import find_gaps
    from traceread.engine.steps import find_steps

    c0 = _cpu_s()
    t0 = time.perf_counter()
    trace = traceread.load(path)
    t1 = time.perf_counter()
    steps = find_steps(trace, Thresholds()).steps
    gaps = find_gaps(trace, steps)
    t2 = time.perf_counter()
    return dict(load_s=t1 - t0, analyse_s=t2 - t1, total_s=t2 - t0, cpu_s=_cpu_s() - c0, n_gaps=len(gaps),
                idle_ns=int(steps["idle_ns"].sum()), rss_peak_gb=_rss_gb())


def run_hta(path: str) -> dict:
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    c0 = _cpu_s()
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=os.path.dirname(path))
    t1 = time.perf_counter()
    ta.get_idle_time_breakdown(ranks=[0], visualize=False)
    t2 = time.perf_counter()
    return dict(load_s=t1 - t0, analyse_s=t2 - t1, total_s=t2 - t0, cpu_s=_cpu_s() - c0,
                rss_peak_gb=_rss_gb())


def _child(args: list[str], python: str = sys.executable) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([python, os.path.abspath(__file__), *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1M,4M,10M")
    p.add_argument("--no-hta", action="store_true")
    p.add_argument("--hta-size", default="1M", help="kernels in the Kineto file compared with HTA")
    p.add_argument("--child", nargs=2, metavar=("MODE", "ARG"), help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.child:
        mode, arg = ns.child
        res = {"engine": lambda: run_engine(int(arg)), "write": lambda: write_kineto(int(arg), ns.path),
               "traceread": lambda: run_traceread_e2e(arg), "hta": lambda: run_hta(arg)}[mode]()
        print(json.dumps(res))
        return 0

    print("## interval engine alone (steps + gaps + overlaps + totals; frame built in process)\n")
    print("| kernels | rows | steps | gaps | engine s (CPU s) | steps s | gaps s | totals s | peak RSS GB (frame alone) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in ns.sizes.split(","):
        r = _child(["--child", "engine", str(_size(size))])
        if "error" in r:
            print(f"| {size} | error: {r['error']} |")
            continue
        print(f"| {r['n']:,} | {r['rows']:,} | {r['n_steps']:,} | {r['n_gaps']:,} | {r['engine_s']:.2f} ({r['engine_cpu_s']:.2f}) | "
              f"{r['steps_s']:.2f} | {r['gaps_s']:.2f} | {r['totals_s']:.2f} | "
              f"{r['rss_peak_gb']:.2f} ({r['rss_frame_gb']:.2f}) |", flush=True)
    if ns.no_hta:
        return 0
    n = _size(ns.hta_size)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rank0.pt.trace.json")
        w = _child(["--child", "write", str(n), "--path", path])
        if "error" in w:
            print(f"\nwriting the Kineto file failed: {w['error']}")
            return 1
        tr = _child(["--child", "traceread", path])
        hta = _child(["--child", "hta", path], python=HTA_PYTHON)
    print(f"\n## end to end at {n:,} kernels: Kineto JSON of {w['bytes'] / 1e6:.0f} MB, load + idle analysis\n")
    print("| tool | load s | analysis s | total s | CPU s | peak RSS GB |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, r in (("traceread (load + steps + gaps)", tr), ("HTA (TraceAnalysis + idle time breakdown)", hta)):
        if "error" in r:
            print(f"| {label} | error: {r['error']} | | | | |")
        else:
            print(f"| {label} | {r['load_s']:.1f} | {r['analyse_s']:.1f} | {r['total_s']:.1f} | {r['cpu_s']:.1f} | "
                  f"{r['rss_peak_gb']:.2f} |")
    if "error" not in tr and "error" not in hta:
        print(f"\ntraceread is {hta['total_s'] / tr['total_s']:.1f}x faster end to end "
              f"({hta['cpu_s'] / tr['cpu_s']:.1f}x less CPU time).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
