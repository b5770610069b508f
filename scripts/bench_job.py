"""Benchmark: one generated multi-rank job (tracesynth DP x PP), loaded and analysed in one process.

    .venv/bin/python scripts/bench_job.py                      # 64 ranks: DP16 x PP4, Kineto
    .venv/bin/python scripts/bench_job.py --dp 32 --pp 2 --workdir /tmp/bench-job --json out.json

The job's files are written once under ``--workdir`` (kept between runs: the same files for a
baseline and a change; ``--fresh`` rewrites them). The measurement runs in a fresh child process:
load every file, ``traceread.runner.analyze`` (the whole diagnosis with its job section), then the job
analysis alone again (``analyze_job`` over the analysis' own rank summaries). Reported: wall seconds of
each part, the child's CPU seconds (user + system: on a shared machine steadier than wall time), its peak RSS (``ru_maxrss``), and the job's verdict (a sanity check that both runs
read the same job). On a shared machine compare only runs made back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth

_CHILD = r"""
import json, resource, sys, time
from traceread import load
from traceread.analysis import rank_summary
from traceread.ranks import analyze_job, group_jobs, identify
from traceread.runner import analyze
paths = json.loads(sys.argv[1])
t0 = time.perf_counter()
traces = [load(p) for p in paths]
t1 = time.perf_counter()
a = analyze(traces)
t2 = time.perf_counter()
ids = [i for t in a.inputs for i in identify(t)]
sums = [rank_summary(a, i) for i in ids]
t3 = time.perf_counter()
rep = analyze_job(sums, group=group_jobs(ids)[0])
t4 = time.perf_counter()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": ru.ru_utime + ru.ru_stime, "load_s": t1 - t0, "analyze_s": t2 - t1, "job_s": t4 - t3, "total_s": t2 - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "verdict": rep.verdict[:120]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dp", type=int, default=16)
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--fmt", choices=("kineto", "nsys"), default="kineto")
    ap.add_argument("--workdir", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "bench-out", "job"))
    ap.add_argument("--pp-groups", choices=("pair", "pipeline"), default="pair",
                    help="p2p process groups: two-rank pairs (DeepSpeed) or one per pipeline (Megatron-style)")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--json", dest="json_path")
    args = ap.parse_args()
    from tracesynth.dp_pp import DpPpSpec, make_job, write_job

    d = os.path.join(args.workdir, f"dp{args.dp}-pp{args.pp}-s{args.steps}-{args.fmt}"
                     + ("-pipeline" if args.pp_groups == "pipeline" else ""))
    listing = os.path.join(d, "paths.json")
    if args.fresh or not os.path.exists(listing):
        os.makedirs(d, exist_ok=True)
        kw = {"pp_groups": "pipeline"} if args.pp_groups == "pipeline" else {}
        spec = DpPpSpec(dp=args.dp, pp=args.pp, steps=args.steps, slow_rank=args.dp + 1, slow_factor=1.5, seed=1, **kw)
        paths = write_job(make_job(spec), d, fmt=args.fmt)
        with open(listing, "w") as f:
            json.dump(paths, f)
    with open(listing) as f:
        paths = json.load(f)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(paths)], capture_output=True, text=True,
                         check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res.update(ranks=len(paths), child_wall_s=time.perf_counter() - t, load_avg=os.getloadavg())
    print(json.dumps(res, indent=1))
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
