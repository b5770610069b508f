"""Benchmark: ``traceread scan`` on a generated tree, side by side in one run.

    .venv/bin/python scripts/bench_scan.py                       # 500 traces, 0.1-20 MB
    .venv/bin/python scripts/bench_scan.py --traces 120 --max-mb 8 --workdir /tmp/bench-scan

* The tree (under ``--workdir``, kept between runs; ``--fresh`` rebuilds it) holds ``--traces``
  trace files of both formats: Kineto JSON (plain and gzipped) and nsys SQLite exports, file sizes
  log-spaced from 0.1 MB to ``--max-mb``, in jobs of 1, 2 or 4 ranks, plus a few broken files
  (truncated, corrupt gzip, empty, a JSON that is not a trace, a plain SQLite file). Files are
  copies of a handful of generated templates (``tracesynth.planted``: generating every file
  afresh would take longer than the benchmark), one directory per job.
* Contenders, each a fresh ``traceread scan --no-cache`` process into its own output directory:
  ``--workers 1``, ``--workers 2`` and ``--dask local`` (a 2-worker LocalCluster); then the re-scan
  of the unchanged tree into the ``--workers 2`` output (cache hits only).
* Baseline for the per-trace overhead: in one process, for every trace file, the work of a
  single-trace ``traceread analyze`` (load with one decoder, analyse, JSON and Markdown rendered),
  timed per file and summed. Overhead = ``--workers 1`` wall time / that sum - 1 (it includes the
  scan's start-up, discovery, hashing, writing reports, jobs, parquet and index).
* Peak RSS: the whole process tree of each contender (the scan and its workers, their PSS summed
  so that pages a forked worker shares with the parent count once; sampled every 0.5 s with
  psutil), against the bound: the peak of the largest file's ``traceread analyze``
  in its own process times the workers, plus the parent (the ``--workers 2`` scan process's own
  peak; it holds index rows and one result at a time, never a frame).
* ``--tiny N``: the scale point instead: N tiny Kineto traces (copies of two 2-rank templates of 3 steps, ~30 KB each,
  one job of 2 ranks per directory), scanned once (``--workers 2 --no-cache``) in a process that
  reports its own peak RSS (``ru_maxrss``: the parent alone, its workers not counted), and the size
  of ``traces.parquet``, its footer (Parquet's serialized file metadata) and its row groups.
  ``--replay``: the same scan with the analyses replaced (a worker analyses one file of each name and
  hands the parent copies of that result, its report files and cache parts written per file): the
  parent's work (jobs, tables, index, cache) is the scan's own, at a fraction of the CPU time.
* Load average (1/5/15 min) at the start and the end: on a shared machine the figures are only
  comparable within one run. ``--json PATH`` writes every figure (``summary``: speed-up, overhead,
  re-scan wall and in-process time, RSS against its bound, load; ``table``: the contenders' rows).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINETO_MB_PER_STEP = 0.28  # one planted rank-step of Kineto JSON (measured on the generator)
NSYS_MB_PER_STEP = 0.047  # the same in an nsys export


def _sizes(max_mb: float, n: int = 6) -> list[float]:
    lo = math.log(0.1)
    return [round(math.exp(lo + (math.log(max_mb) - lo) * i / (n - 1)), 2) for i in range(n)]


def build_tree(root: str, traces: int, max_mb: float, seed: int = 0) -> dict:
    """Write the tree; returns what it holds."""
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.nsys_writer import write_nsys
    from tracesynth.planted import PlantSpec, plant

    tpl = os.path.join(root, "_templates")
    os.makedirs(tpl, exist_ok=True)
    sizes = _sizes(max_mb)
    kineto: dict[float, list[str]] = {}
    nsys: dict[float, str] = {}
    for i, mb in enumerate(sizes):
        gz = mb < 0.3  # the smallest files: gzipped JSON (a 2-step trace is ~0.6 MB of text)
        steps = max(2, round((mb * (6 if gz else 1)) / KINETO_MB_PER_STEP))
        p = plant(PlantSpec(seed=seed + i, ranks=4, steps=steps))
        files = write_kineto(p.scenario, os.path.join(tpl, f"k{i}.rank{{rank}}.pt.trace.json"))
        if gz:
            for f in files:
                with open(f, "rb") as src, gzip.open(f + ".gz", "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst)
                os.unlink(f)
            files = [f + ".gz" for f in files]
        kineto[mb] = files
        one = plant(PlantSpec(seed=seed + 100 + i, ranks=1, steps=max(2, round(mb / NSYS_MB_PER_STEP))))
        nsys[mb] = write_nsys(one.scenario, os.path.join(tpl, f"n{i}.sqlite"))
    tree = os.path.join(root, "tree")
    os.makedirs(tree)
    weights = [3, 3, 2, 2, 1, 1][: len(sizes)]
    pick = [mb for mb, w in zip(sizes, weights, strict=True) for _ in range(w)]
    made, job, total_bytes = 0, 0, 0
    while made < traces:
        mb = pick[job % len(pick)]
        d = os.path.join(tree, f"cluster{job % 5}", f"job{job:03d}")
        os.makedirs(d)
        if job % 3 == 2:  # an nsys export of one rank
            dst = os.path.join(d, "profile.sqlite")
            shutil.copyfile(nsys[mb], dst)
            made += 1
        else:
            ranks = min((1, 2, 4)[job % 3 + (job // 3) % 2], traces - made)
            for r in range(ranks):
                src = kineto[mb][r]
                dst = os.path.join(d, os.path.basename(src).replace(f"k{sizes.index(mb)}.", "train."))
                shutil.copyfile(src, dst)
            made += ranks
        job += 1
    broken = os.path.join(tree, "broken")
    os.makedirs(broken)
    good = kineto[sizes[1]][0]
    with open(good, "rb") as fh:
        data = fh.read()
    with open(os.path.join(broken, "crashed.json.tmp"), "wb") as fh:
        fh.write(data[: len(data) // 2])
    with open(os.path.join(broken, "corrupt.json.gz"), "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00" + os.urandom(4096))
    open(os.path.join(broken, "empty.pt.trace.json"), "wb").close()
    with open(os.path.join(broken, "config.json"), "w") as fh:
        json.dump({"lr": 3e-4}, fh)
    conn = sqlite3.connect(os.path.join(broken, "metrics.sqlite"))
    conn.execute("CREATE TABLE loss (step INT, value REAL)")
    conn.commit()
    conn.close()
    files = [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs]
    total_bytes = sum(os.path.getsize(f) for f in files)
    return {"traces": made, "jobs": job, "files": len(files), "bytes": total_bytes, "sizes_mb": sizes}


def _memory(p) -> int:  # noqa: ANN001 - a psutil.Process
    """PSS where the kernel gives it (pages shared by forked workers and their parent counted once,
    split between them), else RSS (which would count the shared imports once per process)."""
    try:
        return p.memory_full_info().pss
    except (AttributeError, OSError):
        return p.memory_info().rss


# PSS costs the kernel a walk of every page table (~6 ms for a 650 MB worker): sampled every 20 ms,
# the sampler took a third of a core and slowed a 2-worker scan of 200 traces from 77 s to 105 s
PSS_EVERY_S = 0.5


def run(cmd: list[str]) -> dict:
    """Run ``cmd``; wall time, CPU seconds of its whole tree (rusage of the child, which includes the
    workers it reaped) and the peak memory of the process tree (PSS summed, sampled every ``PSS_EVERY_S``)."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, own, ps = 0, 0, psutil.Process(proc.pid)
    next_sample = 0.0
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() < next_sample:
            time.sleep(0.02)
            continue
        next_sample = time.perf_counter() + PSS_EVERY_S
        rss = 0
        try:
            for p in [ps] + ps.children(recursive=True):
                try:
                    m = _memory(p)
                except psutil.Error:
                    continue
                rss += m
                if p.pid == ps.pid:
                    own = max(own, m)
        except psutil.Error:
            pass
        peak = max(peak, rss)
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = proc.stdout.read(), proc.stderr.read()
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss": peak, "parent_peak_rss": own,
            "rc": proc.returncode,
            "stdout": out.strip(), "stderr": err.strip()[-500:]}


BASELINE = r"""
import io, json, os, sys, time
from traceread.runner import analyze
from traceread.runner import load
from traceread.render import jsonout, markdown
times = {}
for path in sys.argv[1:]:
    t0 = time.perf_counter()
    try:
        a = analyze([load(path, decoders=1)])
        jsonout.dumps(a); markdown.render(a, io.StringIO())
    except Exception as exc:
        continue
    times[path] = time.perf_counter() - t0
print(json.dumps(times))
"""


TINY_SCAN = r"""
import json, resource, sys
from traceread.cli import main
if sys.argv[4] == "replay":
    import copy, os
    from traceread.scan import pool
    from traceread.scan.work import _write_parts, content_hash, run_task, trace_id, write_report_files
    templates = {}

    def replayed(task, settings, outdir=None):  # a worker: the first file of each name analysed, then copied
        name = os.path.basename(task.path)
        if name not in templates:
            templates[name] = run_task(task, settings)  # its bytes travel in the outcome
        t = templates[name]
        o = copy.copy(t)
        o.rel, o.path, o.content_hash = task.rel, task.path, content_hash(task.path)
        o.trace_id, o.row = trace_id(task.rel, o.content_hash), {**t.row, "path": task.rel}
        if outdir is not None:
            write_report_files(outdir, o)
            _write_parts(outdir, o)
        return o

    pool.run_task = replayed
rc = main(["scan", sys.argv[1], "--out", sys.argv[2], "--workers", sys.argv[3], "--no-cache"])
print(json.dumps({"rc": rc, "parent_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def build_tiny_tree(root: str, traces: int, per_dir: int = 2) -> str:
    """``traces`` tiny Kineto files under ``root/tree``: a 2-rank job of 3 steps per directory."""
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.planted import PlantSpec, plant

    tpl = os.path.join(root, "_templates")
    os.makedirs(tpl, exist_ok=True)
    files = write_kineto(plant(PlantSpec(seed=7, ranks=per_dir, steps=3, weights={})).scenario,  # ~30 KB each
                         os.path.join(tpl, "train.rank{rank}.pt.trace.json"))
    base = b'"baseTimeNanoseconds": 1735632360000000000'
    data = []
    for f in files:
        with open(f, "rb") as fh:
            data.append(fh.read())
        assert base in data[-1]
    tree = os.path.join(root, "tree")
    for i in range(0, traces, per_dir):
        d = os.path.join(tree, f"group{i // 1000:03d}", f"job{i:05d}")
        os.makedirs(d)
        # each job at its own time (as real runs are): its rows' epoch times differ, as their values would
        epoch = f'"baseTimeNanoseconds": {1735632360000000000 + i * 1_000_003_789}'.encode()
        for src, text in zip(files[: min(per_dir, traces - i)], data, strict=False):
            with open(os.path.join(d, os.path.basename(src)), "wb") as fh:
                fh.write(text.replace(base, epoch, 1))
    return tree


def _run_watched(cmd: list[str], out: str, every_s: float = 30.0) -> dict:
    """Run the scan; every ``every_s`` print the reports written so far and the scan process's own peak
    RSS so far (VmHWM: the parent alone), so that a run cut short still says where it stood."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        try:
            proc.wait(timeout=every_s)
            break
        except subprocess.TimeoutExpired:
            hwm = ""
            try:
                with open(f"/proc/{proc.pid}/status") as fh:
                    hwm = next(line.split(None, 1)[1].strip() for line in fh if line.startswith("VmHWM"))
            except (OSError, StopIteration):
                pass
            try:
                written = len(os.listdir(os.path.join(out, "traces"))) // 2
            except OSError:
                written = 0
            print(f"  {time.perf_counter() - t0:,.0f} s: {written} traces written, parent peak so far {hwm}",
                  flush=True)
    stdout, stderr = proc.communicate()
    return {"wall_s": time.perf_counter() - t0, "rc": proc.returncode, "stdout": stdout, "stderr": stderr[-500:],
            "parent_peak_rss": 0}


def tiny(args: argparse.Namespace) -> None:
    """The scale point: the parent's peak RSS and traces.parquet's footer on ``args.tiny`` tiny traces."""
    import pyarrow.parquet as pq

    work = os.path.join(args.workdir, f"tiny{args.tiny}")
    tree = os.path.join(work, "tree")
    if args.fresh or not os.path.isdir(tree):
        shutil.rmtree(work, ignore_errors=True)
        build_tiny_tree(work, args.tiny)
    out = os.path.join(work, "out-replay" if args.replay else "out")
    shutil.rmtree(out, ignore_errors=True)
    r = _run_watched([sys.executable, "-c", TINY_SCAN, tree, out, str(args.workers),
                      "replay" if args.replay else "analyse"], out)
    got = json.loads(r["stdout"].splitlines()[-1])
    path = os.path.join(out, "traces.parquet")
    meta = pq.ParquetFile(path).metadata
    size, footer = os.path.getsize(path), meta.serialized_size
    with open(os.path.join(out, "index.json")) as fh:
        analysed = len(json.load(fh)["traces"])
    summary = {"traces": args.tiny, "analysed": analysed, "rc": got["rc"], "wall_s": r["wall_s"],
               "parent_peak_rss_mb": got["parent_maxrss_kb"] / 1024,
               "traces_parquet_bytes": size, "footer_bytes": footer, "footer_share": footer / size,
               "row_groups": meta.num_row_groups, "rows": meta.num_rows,
               "load_end": os.getloadavg()}
    print(f"{args.tiny} tiny traces ({analysed} analysed, rc {got['rc']}) in {r['wall_s']:.0f} s: parent peak RSS "
          f"{summary['parent_peak_rss_mb']:,.0f} MB (target < 400); traces.parquet {size:,} bytes, footer "
          f"{footer:,} ({100 * footer / size:.2f}%, target < 5%), {meta.num_row_groups} row groups of "
          f"{meta.num_rows} rows; load average at the end {_load(summary['load_end'])}")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(summary, fh, indent=2)


def tables_only(args: argparse.Namespace) -> None:
    """The parquet writer alone at scale: one tiny trace analysed (scan.work.run_task), then its index row
    and rows appended ``args.table_rows`` times under distinct trace ids, paths, jobs and epochs, as the
    scan's parent appends them; the footer share of each table and this process's peak RSS."""
    import resource

    import pyarrow.parquet as pq

    from traceread.scan.tables import TableWriter
    from traceread.scan.work import Settings, Task, run_task

    work = os.path.join(args.workdir, "tables-only")
    shutil.rmtree(work, ignore_errors=True)
    tree = build_tiny_tree(work, 2)
    path = next(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    st = os.stat(path)
    o = run_task(Task(path=path, rel="job/train.rank0.pt.trace.json", kind="kineto", size=st.st_size,
                      mtime_ns=st.st_mtime_ns, inode=st.st_ino), Settings())
    assert o.status == "ok" and o.tables is not None, o.problem
    t0 = time.perf_counter()
    w = TableWriter(work)
    for i in range(args.table_rows):
        row = {**o.row, "path": f"group{i // 1000:03d}/job{i:05d}/train.rank0.pt.trace.json",
               "epoch_offset_ns": 1735632360000000000 + i * 1_000_003_789}
        w.add(f"group{i // 1000:03d}__job{i:05d}__train.rank0.pt.trace.json-{i:08x}", f"group{i // 1000:03d}/job{i:05d}",
              row, o.tables)
    counts = w.commit()
    print(f"{args.table_rows} traces' rows appended in {time.perf_counter() - t0:.1f} s; peak RSS of this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    for name in ("gaps", "steps", "traces"):
        f = os.path.join(work, f"{name}.parquet")
        meta = pq.ParquetFile(f).metadata
        size = os.path.getsize(f)
        print(f"  {name}.parquet: {counts[name]:,} rows, {size:,} bytes, footer {meta.serialized_size:,} "
              f"({100 * meta.serialized_size / size:.2f}%), {meta.num_row_groups} row groups")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=500)
    ap.add_argument("--max-mb", type=float, default=20.0)
    ap.add_argument("--workdir", default=os.path.join(REPO, "bench-out", "scan"))
    ap.add_argument("--fresh", action="store_true", help="rebuild the tree")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--json", dest="json_path")
    ap.add_argument("--tiny", type=int, default=0, metavar="N", help="the scale point: N tiny traces (see above)")
    ap.add_argument("--workers", type=int, default=2, help="--workers of the --tiny scan")
    ap.add_argument("--replay", action="store_true",
                    help="--tiny with the parent's work only: each worker analyses the first file of each name and "
                         "returns copies of that result for the others (under their own paths and ids)")
    ap.add_argument("--table-rows", type=int, default=0, metavar="N",
                    help="the parquet writer alone: one tiny trace's rows appended N times (see tables_only)")
    args = ap.parse_args()
    if args.table_rows:
        tables_only(args)
        return
    if args.tiny:
        tiny(args)
        return
    tree = os.path.join(args.workdir, "tree")
    meta_path = os.path.join(args.workdir, "tree.json")
    if args.fresh or not os.path.exists(meta_path):
        shutil.rmtree(args.workdir, ignore_errors=True)
        t0 = time.perf_counter()
        meta = build_tree(args.workdir, args.traces, args.max_mb)
        meta["build_s"] = time.perf_counter() - t0
        with open(meta_path, "w") as fh:
            json.dump(meta, fh)
    with open(meta_path) as fh:
        meta = json.load(fh)
    exe = os.path.join(os.path.dirname(sys.executable), "traceread")
    mb = meta["bytes"] / 1e6
    load_start = os.getloadavg()
    print(f"tree: {meta['traces']} traces in {meta['jobs']} jobs + broken files, {meta['files']} files, "
          f"{mb:,.0f} MB, sizes {meta['sizes_mb']} MB; load average {_load(load_start)} on "
          f"{os.cpu_count()} cores", flush=True)
    results = {}
    contenders = [("--workers 1", ["--workers", "1"]), ("--workers 2", ["--workers", "2"])]
    if not args.no_dask:
        contenders.append(("--dask local (2 workers)", ["--workers", "2", "--dask", "local"]))
    for name, extra in contenders:
        out = os.path.join(args.workdir, "out-" + name.split()[0].strip("-") + extra[1])
        shutil.rmtree(out, ignore_errors=True)
        r = run([exe, "scan", tree, "--out", out, "--no-cache", *extra])
        results[name] = r
        print(f"{name}: {r['wall_s']:.1f} s, rc {r['rc']}: {r['stdout'] or r['stderr']}", flush=True)
    rescan_out = os.path.join(args.workdir, "out-workers2")
    r = run([exe, "scan", tree, "--out", rescan_out, "--workers", "2"])
    results["re-scan (unchanged, --workers 2)"] = r
    with open(os.path.join(rescan_out, "index.json")) as fh:
        index = json.load(fh)
    rescan_inside = index["scan"]["seconds"]
    print(f"re-scan: {r['wall_s']:.2f} s: {r['stdout']}", flush=True)

    paths = [os.path.join(tree, t["path"]) for t in index["traces"]]
    base = run([sys.executable, "-c", BASELINE, *paths])
    per_file = json.loads(base["stdout"])
    baseline_s, baseline_cpu = sum(per_file.values()), base["cpu_s"]
    largest = max(paths, key=os.path.getsize)
    single = run([exe, "analyze", largest, "--json", os.devnull, "-o", os.devnull])
    w1, w2 = results["--workers 1"]["wall_s"], results["--workers 2"]["wall_s"]
    n = meta["traces"]
    rows = []
    print()
    print("| contender | wall s | CPU s (process tree) | traces/s | MB/s | peak RSS MB (process tree) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in list(results.items()) + [("single-trace analysis of each file (one process, one decoder; "
                                             "wall = sum of per-file times)", {**base, "wall_s": baseline_s})]:
        row = {"contender": name, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "traces_per_s": n / r["wall_s"],
               "mb_per_s": mb / r["wall_s"], "peak_rss_mb": r["peak_rss"] / 2**20}
        rows.append(row)
        print(f"| {name} | {row['wall_s']:.2f} | {row['cpu_s']:.2f} | {row['traces_per_s']:.1f} | "
              f"{row['mb_per_s']:.1f} | {row['peak_rss_mb']:,.0f} |")
    c1 = results["--workers 1"]["cpu_s"]
    # the parent alone: the --workers 2 scan process itself (its workers not counted)
    parent_rss = results["--workers 2"]["parent_peak_rss"]
    bound = 2 * single["peak_rss"] + parent_rss
    summary = {
        "speedup_workers2": w1 / w2, "speedup_target": 1.8,
        "overhead_wall": w1 / baseline_s - 1, "overhead_cpu": c1 / baseline_cpu - 1, "overhead_target": 0.10,
        "rescan_wall_s": results["re-scan (unchanged, --workers 2)"]["wall_s"], "rescan_inside_s": rescan_inside,
        "rescan_target_s": 3.0,
        "largest_bytes": os.path.getsize(largest), "single_peak_rss_mb": single["peak_rss"] / 2**20,
        "parent_peak_rss_mb": parent_rss / 2**20, "workers2_peak_rss_mb": results["--workers 2"]["peak_rss"] / 2**20,
        "rss_bound_mb": bound / 2**20, "load_start": load_start, "load_end": os.getloadavg(),
        "cores": os.cpu_count(),
    }
    print()
    print(f"--workers 2 / --workers 1 speed-up: {summary['speedup_workers2']:.2f}x (target >= 1.8x)")
    print(f"per-trace overhead of --workers 1 over the analyses alone: wall {100 * summary['overhead_wall']:.1f}%, "
          f"CPU {100 * summary['overhead_cpu']:.1f}% (both processes import traceread once; target < 10%)")
    print(f"re-scan of the unchanged tree: {summary['rescan_wall_s']:.2f} s wall, {rescan_inside:.2f} s inside the "
          "scan (the rest is the interpreter and imports; target < 3 s)")
    print(f"peak RSS: largest single analysis ({summary['largest_bytes'] / 1e6:.1f} MB file) "
          f"{summary['single_peak_rss_mb']:,.0f} MB; --workers 2 tree {summary['workers2_peak_rss_mb']:,.0f} MB; "
          f"bound 2 x single + parent ({summary['parent_peak_rss_mb']:,.0f} MB, the scan process alone) = "
          f"{summary['rss_bound_mb']:,.0f} MB: {'within' if summary['workers2_peak_rss_mb'] <= summary['rss_bound_mb'] else 'OVER'}")
    print(f"load average: {_load(load_start)} at the start, {_load(summary['load_end'])} at the end, "
          f"on {os.cpu_count()} cores")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump({"tree": meta, "results": results, "table": rows, "summary": summary,
                       "baseline_s": baseline_s, "baseline_cpu_s": baseline_cpu, "single_peak_rss": single["peak_rss"],
                       "largest_bytes": os.path.getsize(largest)}, fh, indent=2)


def _load(avg: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in avg) + " (1/5/15 min)"


if __name__ == "__main__":
    main()
