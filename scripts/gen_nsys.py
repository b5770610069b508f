"""Write schema-faithful Nsight Systems SQLite exports.

Two modes:

* ``--example``: the planted multi-rank example scenario (tracesynth.nsys_example: several
  GPUs as processes, NCCL on a comm stream, NVTX steps, memcpy/memset, syncs, a whole-graph
  replay, OS runtime calls), written in the chosen schema generation(s).
* ``--kernels N``: a large export for benchmarks, N kernel rows plus one ``cudaLaunchKernel_v7000``
  runtime row each, split over ``--ranks`` processes, with planted idle gaps and ProfilerStep NVTX
  ranges. Built from numpy columns (no per-event Python objects), so 5M kernels fit in memory.

    python scripts/gen_nsys.py --example --schema both --out /tmp/example_{schema}.sqlite
    python scripts/gen_nsys.py --kernels 5000000 --out /tmp/big.sqlite
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth
from tracesynth.nsys_example import GEMM, NCCL, example_scenario
from tracesynth.nsys_writer import (
    GpuSpec,
    StringTable,
    global_pid,
    global_tid,
    short_name,
    write_nsys,
    write_nsys_columns,
)

K = "CUPTI_ACTIVITY_KIND_"
_NAMES = [GEMM, NCCL] + [f"void at::native::elementwise_kernel_{i}<128, 4>(int, float*)" for i in range(30)] + \
    [f"triton_poi_fused_add_mul_{i}" for i in range(10)]


def big_columns(n_kernels: int, n_ranks: int = 2, seed: int = 0, steps_every: int = 20_000):
    """Column arrays of a large export: (tables, strings, processes, gpus)."""
    rng = np.random.default_rng(seed)
    strings = StringTable()
    name_ids = np.array([strings.id(n) for n in _NAMES], dtype=np.int64)
    short_ids = np.array([strings.id(short_name(n)) for n in _NAMES], dtype=np.int64)
    launch_id = strings.id("cudaLaunchKernel_v7000")
    acc: dict[str, dict[str, list[np.ndarray]]] = {}

    def add(table: str, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            acc.setdefault(table, {}).setdefault(k, []).append(v)

    per = [n_kernels // n_ranks + (1 if r < n_kernels % n_ranks else 0) for r in range(n_ranks)]
    processes, gpus = [], []
    for r, m in enumerate(per):
        pid = 52_000 + r
        processes.append((pid, "python3"))
        gpus.append(GpuSpec(id=r, pids=[pid]))
        which = rng.integers(2, len(_NAMES), m)
        which[::7] = 0  # GEMMs
        is_comm = np.zeros(m, dtype=bool)
        is_comm[::50] = True
        which[is_comm] = 1
        dur = rng.integers(2_000, 40_000, m)
        gap = rng.integers(500, 3_000, m)
        planted = rng.random(m) < 0.004  # planted idle gaps, 0.05-3 ms
        gap[planted] = rng.integers(50_000, 3_000_000, int(planted.sum()))
        start = 1_000_000_000 + np.cumsum(gap + np.roll(dur, 1) * (np.arange(m) > 0))
        end = start + dur
        corr = np.arange(1, m + 1, dtype=np.int64)  # restarts per process, as CUPTI's do
        gp = np.full(m, global_pid(pid), dtype=np.int64)
        add(K + "KERNEL", start=start, end=end, deviceId=np.full(m, r), contextId=np.full(m, 1),
            streamId=np.where(is_comm, 13, 7), correlationId=corr, globalPid=gp, demangledName=name_ids[which],
            shortName=short_ids[which], registersPerThread=np.full(m, 64), gridX=np.full(m, 132),
            gridY=np.ones(m, dtype=np.int64), gridZ=np.ones(m, dtype=np.int64), blockX=np.full(m, 256),
            blockY=np.ones(m, dtype=np.int64), blockZ=np.ones(m, dtype=np.int64), gridId=corr)
        lstart = start - rng.integers(4_000, 20_000, m)
        lstart = np.maximum.accumulate(lstart)
        add(K + "RUNTIME", start=lstart, end=lstart + rng.integers(1_500, 4_000, m), eventClass=np.zeros(m, np.int64),
            globalTid=np.full(m, global_tid(pid, pid), dtype=np.int64), correlationId=corr,
            nameId=np.full(m, launch_id), returnValue=np.zeros(m, np.int64))
        bounds = np.arange(0, m, steps_every)
        s_start = lstart[bounds] - 1_000
        s_end = np.append(s_start[1:] - 1, end[-1])
        k = len(bounds)
        add("NVTX_EVENTS", start=s_start, end=s_end, eventType=np.full(k, 59),
            text=np.array([f"ProfilerStep#{i}" for i in range(k)], dtype=object),
            globalTid=np.full(k, global_tid(pid, pid), dtype=np.int64), domainId=np.zeros(k, np.int64))
    tables = {t: {c: np.concatenate(v) for c, v in cols.items()} for t, cols in acc.items()}
    return tables, strings, processes, gpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output path; '{schema}' is replaced by the generation")
    ap.add_argument("--schema", default="2026", choices=["2026", "2022", "both"])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--example", action="store_true", help="the planted multi-rank example scenario")
    mode.add_argument("--kernels", type=int, help="large export with this many kernels (+ runtime rows)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    schemas = ["2026", "2022"] if args.schema == "both" else [args.schema]
    for schema in schemas:
        out = args.out.replace("{schema}", schema)
        t0 = time.perf_counter()
        if args.example:
            write_nsys(example_scenario(n_ranks=args.ranks), out, schema=schema)
        else:
            tables, strings, processes, gpus = big_columns(args.kernels, args.ranks, args.seed)
            write_nsys_columns(out, tables=tables, strings=strings, schema=schema, processes=processes,
                               gpus=gpus, origin_epoch_ns=1_735_632_360_000_000_000)
        print(f"wrote {out} ({schema}) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
