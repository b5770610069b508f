"""Time the what-if replay (every fix, and all at once) on a 1M-kernel generated trace, beside ``analyze``.

    .venv/bin/python scripts/bench_whatif.py [--sizes 1M] [--repeat 1]

Each size runs in its own process (peak RSS is per process). The trace is bench_gaps.py's: N kernels
with one ``cudaLaunchKernel`` each on two streams, one ProfilerStep per 2,000 kernels, built in
memory (loading excluded). Reported: ``analyze`` (the whole diagnosis, which includes the default
replay), then ``predict`` alone (model build + 9 replays: unfixed, each of the 7 levers, all), the
compiled sweep's share, and peak RSS after each.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import bench_gaps


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def run(n: int) -> dict:
    from traceread.runner import analyze
    from traceread.whatif import predict

    trace = bench_gaps.build_trace(n)
    rss_frame = _rss_gb()
    t0 = time.perf_counter()
    a = analyze([trace])
    t1 = time.perf_counter()
    rss_analyze = _rss_gb()
    w = predict([trace], a.steps, a.gaps, a.cfg)
    t2 = time.perf_counter()
    assert w is not None
    return dict(kernels=n, rows=len(trace.events), analyze_s=round(t1 - t0, 2), whatif_s=round(t2 - t1, 2),
                replay_error=w.replay_error, rss_frame_gb=round(rss_frame, 2), rss_analyze_gb=round(rss_analyze, 2),
                rss_whatif_gb=round(_rss_gb(), 2),
                all_fixed_saving=w.all_fixed.saving_share if w.all_fixed is not None else None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1M")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(run(args.child)))
        return 0
    print("| kernels | analyze s | whatif s (9 replays) | replay error | RSS frame GB | after analyze | after whatif |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in args.sizes.split(","):
        n = bench_gaps._size(size)
        out = subprocess.run([sys.executable, __file__, "--child", str(n)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['kernels']:,} | {r['analyze_s']} | {r['whatif_s']} | {r['replay_error']:+.2%} | "
              f"{r['rss_frame_gb']} | {r['rss_analyze_gb']} | {r['rss_whatif_gb']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
