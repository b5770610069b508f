"""Steps inferred when a trace has no step markers: a repeating host range, else the kernel period.

Without ``ProfilerStep#N``, ``Optimizer.step#``/``enumerate(DataLoader)#`` markers or
``--step-range`` the whole capture would be one step and two runs could not be compared per
iteration. A training loop repeats, and the repetition is visible two ways:

1. **A repeating NVTX range / user annotation** (``inferred:nvtx:<name>``): a range name that occurs
   at least ``step_infer_min_steps`` times per rank without overlapping itself and whose
   occurrences hold at least ``step_infer_min_cover`` of the kernel launches between its first start
   and last end (so ``forward`` alone, which leaves out backward, is not taken). Of those, the one
   with the longest occurrences wins (the outermost loop). Step k runs from occurrence k's start to
   occurrence k+1's start (what runs between two iterations belongs to one); the last one to its
   start plus the median period, or the rank's last event if sooner (never before its range ends).
2. **The kernel period** (``inferred:kernel-period``): on the rank's busiest GPU the sequence of
   compute-kernel names (as integer codes) is periodic with the loop. Candidate periods are the
   spacings of kernels that occur once per period (the mode of the gaps between a name's
   occurrences); a candidate is kept when at least ``step_infer_min_match`` of kernels have the same
   name one period later (vectorized comparison of the code array with itself shifted), and the
   longest kept period that still repeats ``step_infer_min_steps`` times is the step. The phase
   is the one that fits the most whole periods, on a tie the kernel after the longest median idle
   gap (where iterations usually meet: data loading, optimizer, host work). Steps are whole periods;
   kernels before the first and after the last are left out. Host bounds are the launch calls.

Both return host step frames for :mod:`traceread.steps`, which extends them onto devices as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import schema
from traceread.config import Thresholds
from traceread.lanes import EventView

SOURCE_NVTX_PREFIX = "inferred:nvtx:"
SOURCE_KERNEL_PERIOD = "inferred:kernel-period"


@dataclass(frozen=True)
class Inferred:
    host: pd.DataFrame  # rank, step, cpu_start_ns, cpu_end_ns
    source: str
    note: str
    gpu_time: bool = False  # bounds are GPU times: assign GPU work to steps by its own start, not its launch


def _frame(rank, step, start, end) -> pd.DataFrame:
    return pd.DataFrame({"rank": np.asarray(rank, dtype=np.int32), "step": np.asarray(step, dtype=np.int64),
                         "cpu_start_ns": np.asarray(start, dtype=np.int64),
                         "cpu_end_ns": np.asarray(end, dtype=np.int64)})


def _launch_times(v: EventView, rank: int) -> np.ndarray:
    """Sorted host start times of the rank's launches (GPU start where a kernel has no launch)."""
    ops = v.rows((schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM), rank=rank)
    launch = v.launch_of(ops)
    return np.sort(np.where(launch >= 0, v.start[np.maximum(launch, 0)], v.start[ops]))


def from_repeating_range(v: EventView, cfg: Thresholds) -> Inferred | None:
    """Steps from the best repeating host range of every rank (see module docstring), or None."""
    host = v.rows((schema.LANE_CPU_ANNOTATION,))
    if not len(host):
        return None
    df = pd.DataFrame({"rank": v.rank[host], "code": v.name[host], "s": v.start[host], "e": v.end[host]})
    df = df.sort_values(["rank", "code", "s"], kind="stable")
    grp = df.groupby(["rank", "code"], sort=False)
    prev_end = grp["e"].shift()
    stats = pd.DataFrame({"n": grp.size(), "overlap": (df["s"] < prev_end).groupby([df["rank"], df["code"]]).sum(),
                          "first": grp["s"].min(), "last": grp["e"].max(), "dur": (df["e"] - df["s"]).groupby(
                              [df["rank"], df["code"]]).median()})
    stats = stats[(stats["n"] >= cfg.step_infer_min_steps) & (stats["overlap"] == 0)]
    chosen: dict[int, int] = {}
    for (rank, code), st in stats.sort_values("dur", ascending=False).iterrows():
        if rank in chosen:
            continue
        launches = _launch_times(v, int(rank))
        window = launches[(launches >= st["first"]) & (launches < st["last"])]
        if not len(window):
            continue
        occ = df[(df["rank"] == rank) & (df["code"] == code)]
        inside = np.searchsorted(occ["s"].to_numpy(), window, side="right") - 1
        ok = (inside >= 0) & (window < occ["e"].to_numpy()[np.maximum(inside, 0)])
        if ok.mean() >= cfg.step_infer_min_cover:
            chosen[int(rank)] = int(code)
    if not chosen or len({v.names[c] for c in chosen.values()}) != 1:
        return None  # ranks that disagree on the loop's range: not one job's step
    name = str(v.names[next(iter(chosen.values()))])
    parts = []
    for rank, code in chosen.items():
        occ = df[(df["rank"] == rank) & (df["code"] == code)]
        s, e = occ["s"].to_numpy(), occ["e"].to_numpy()
        # The last step gets what follows its range too, up to one typical period (or the trace's end).
        rank_end = int(v.end[v.rank == rank].max())
        last_end = max(int(e[-1]), min(int(s[-1] + np.median(np.diff(s))), rank_end))
        ends = np.concatenate([s[1:], [last_end]])
        parts.append(_frame(np.full(len(s), rank), np.arange(len(s)), s, ends))
    host_df = pd.concat(parts, ignore_index=True)
    n = int(host_df.groupby("rank").size().min())
    note = (f"No step markers: steps inferred from the repeating NVTX range / annotation {name!r} "
            f"({n} or more per rank, holding at least {cfg.step_infer_min_cover:.0%} of the kernel launches "
            "between its first and last occurrence); each step runs to the next occurrence's start, the last "
            "one period long.")
    return Inferred(host_df, SOURCE_NVTX_PREFIX + name, note)


def _period(codes: np.ndarray, cfg: Thresholds) -> tuple[int, float] | None:
    """The step period of a kernel-name code sequence and its match fraction, or None."""
    n = len(codes)
    if n < 2 * cfg.step_infer_min_steps:
        return None
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    gaps = np.diff(order)
    same = sorted_codes[1:] == sorted_codes[:-1]
    gaps, owner = gaps[same], sorted_codes[1:][same]
    if not len(gaps):
        return None
    # Per name: its most common spacing (a name once per period recurs exactly one period later).
    pairs = pd.DataFrame({"code": owner, "gap": gaps}).value_counts().reset_index(name="count")
    pairs = pairs.sort_values(["code", "count"], ascending=[True, False]).drop_duplicates("code")
    candidates = np.unique(pairs["gap"].to_numpy())
    candidates = candidates[(candidates > 0) & (candidates * cfg.step_infer_min_steps <= n)]
    best = None
    for p in sorted(candidates.tolist(), reverse=True):
        match = float(np.mean(codes[p:] == codes[:-p]))
        if match >= cfg.step_infer_min_match:
            best = (int(p), match)
            break
    return best


def _whole_periods(v: EventView, rows: np.ndarray, cfg: Thresholds) -> tuple[np.ndarray, int, float] | None:
    """First kernel (index into ``rows``) of each whole period, the period and its match; or None."""
    found = _period(v.name[rows].astype(np.int64), cfg)
    if found is None:
        return None
    p, match = found
    whole = (len(rows) - np.arange(p)) // p  # whole periods per phase
    idle = np.concatenate(([0], v.start[rows][1:] - v.end[rows][:-1]))
    lead = np.array([np.median(idle[ph::p]) for ph in range(p)])
    phase = int(np.lexsort((-lead, -whole))[0])
    k = int(whole[phase])
    if k < cfg.step_infer_min_steps:
        return None
    return phase + p * np.arange(k), p, match


def from_kernel_period(v: EventView, cfg: Thresholds) -> Inferred | None:
    """Steps from the period of each rank's kernel sequence (see module docstring), or None."""
    comp = v.rows((schema.LANE_GPU_COMPUTE,))
    if not len(comp):
        return None
    found = []
    for rank in np.unique(v.rank[comp]):
        mine = comp[v.rank[comp] == rank]
        devs, counts = np.unique(v.device[mine], return_counts=True)
        rows = mine[v.device[mine] == devs[np.argmax(counts)]]
        rows = rows[np.argsort(v.start[rows], kind="stable")]
        periods = _whole_periods(v, rows, cfg)
        if periods is not None:
            found.append((int(rank), rows, *periods))
    if not found:
        return None
    # Bounds are the launch calls of each period's first kernel; GPU times for every rank when some
    # rank's are missing or not increasing (one launch for many kernels: CUDA graphs).
    launches = {rank: v.launch_of(rows) for rank, rows, *_ in found}
    gpu_time = any((launches[r][first] < 0).any() or np.any(np.diff(v.start[launches[r][first]]) <= 0)
                   for r, _, first, _, _ in found)
    parts = []
    for rank, rows, first, p, _ in found:
        lr = launches[rank]
        start = v.start[rows] if gpu_time else np.where(lr >= 0, v.start[np.maximum(lr, 0)], v.start[rows])
        end = v.end[rows] if gpu_time else np.where(lr >= 0, v.end[np.maximum(lr, 0)], v.end[rows])
        starts = start[first]
        ends = np.concatenate([starts[1:], [int(end[first[-1]:first[-1] + p].max()) + 1]])
        parts.append(_frame(np.full(len(first), rank), np.arange(len(first)), starts, ends))
    desc = "; ".join(f"rank {r}: {len(first)} periods of {p} kernels, {m:.0%} recur one period later"
                     for r, _, first, p, m in found[:4])
    note = (f"No step markers: steps inferred from the repeating sequence of kernels ({desc}); kernels "
            "before the first and after the last whole period are left out. This is the longest repeating "
            f"pattern the capture holds: with fewer than {cfg.step_infer_min_steps} iterations captured it "
            "is a repeated layer, not an iteration.")
    return Inferred(pd.concat(parts, ignore_index=True), SOURCE_KERNEL_PERIOD, note, gpu_time)
