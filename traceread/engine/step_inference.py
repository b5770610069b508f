"""Steps inferred when a trace has no step markers: a repeating host range, else the kernel period.

Without ``ProfilerStep#N``, ``Optimizer.step#``/``enumerate(DataLoader)#`` markers or
``--step-range`` the whole capture would be one step and two runs could not be compared per
iteration. A training loop repeats, and the repetition is visible two ways:

1. **An NVTX range / user annotation** (``inferred:nvtx:<name>``): a range name that occurs
   at least ``step_infer_min_steps`` times per rank without overlapping itself and whose
   occurrences hold at least ``step_infer_min_cover`` of the kernel launches between its first start
   and last end (so ``forward`` alone, which leaves out backward, is not taken); or, seen fewer
   times, a single range (an inference engine's ``execute_...`` around one forward) or ranges
   numbered as iterations (``step[3]``, ``iteration_12``: grouped under their name with the numbers
   taken out, ``host_calls.numbered_stem``) that hold ``step_infer_min_cover`` of all the rank's
   launches. The profiler's own ``PyTorch Profiler (N)`` range is never one. Of those, the one
   with the longest occurrences wins (the outermost loop). Step k runs from occurrence k's start to
   occurrence k+1's start (what runs between two iterations belongs to one); the last one to its
   start plus the median period, or the rank's last event if sooner (never before its range ends);
   a single range is one step from its first launch to its end (with no iteration before it, a
   block ahead of its first launch waits on work from before the capture), taken only when the kernel
   sequence repeats (its period is then the pass's repeated layers, named in a note) -- a single
   range around a whole program with no repetition leaves the GPU span as the step.
2. **The kernel period** (``inferred:kernel-period``): on the rank's busiest GPU the sequence of
   compute-kernel names (as integer codes) is periodic with the loop. Candidate periods are the
   spacings of kernels that occur once per period (the mode of the gaps between a name's
   occurrences); a candidate is kept when at least ``step_infer_min_match`` of kernels have the same
   name one period later (vectorized comparison of the code array with itself shifted), and the
   longest kept period that still repeats ``step_infer_min_steps`` times is the step. The phase
   is the one that fits the most whole periods, on a tie the kernel after the longest median idle
   gap (where iterations usually meet: data loading, optimizer, host work). Steps are whole periods;
   kernels before the first and after the last are left out. Host bounds are the launch calls.
   A period is never a layer of a longer unit: a unit seen only twice wins over it when the kernels
   that break the short period recur one unit later (two passes of a layered model); and whole
   periods bracketed by fewer than one period of kernels that never occur in them (embedding before,
   head and sampling after) are one pass with repeated layers: no step is inferred (one step, the
   GPU span, with :func:`layers_note` saying so).

Both return host step frames for :mod:`traceread.engine.steps`, which extends them onto devices as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import schema
from traceread.config import Thresholds
from traceread.engine.lanes import EventView
from traceread.host_calls import PROFILER_RANGE_RE, numbered_stem
from traceread.note import (
    ITERATION_RANGES,
    KERNEL_PERIOD,
    REPEATED_LAYERS,
    REPEATING_RANGE,
    SINGLE_RANGE_STEP,
    Note,
)

SOURCE_NVTX_PREFIX = "inferred:nvtx:"
SOURCE_KERNEL_PERIOD = "inferred:kernel-period"


@dataclass(frozen=True)
class Inferred:
    host: pd.DataFrame  # rank, step, cpu_start_ns, cpu_end_ns
    source: str
    note: Note  # how the steps were found, as data (worded by traceread.render.notes)
    gpu_time: bool = False  # bounds are GPU times: assign GPU work to steps by its own start, not its launch


def _frame(rank, step, start, end) -> pd.DataFrame:
    return pd.DataFrame({"rank": np.asarray(rank, dtype=np.int32), "step": np.asarray(step, dtype=np.int64),
                         "cpu_start_ns": np.asarray(start, dtype=np.int64),
                         "cpu_end_ns": np.asarray(end, dtype=np.int64)})


def _launch_times(v: EventView, rank: int) -> np.ndarray:
    """Sorted host start times of the rank's launches (GPU start where a kernel has no launch)."""
    ops = v.rows((schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM), rank=rank)
    launch = v.launch_of(ops)
    return np.sort(np.where(launch >= 0, v.start[np.maximum(launch, 0)], v.start[ops]), kind="stable")  # nearly in order


def _range_keys(v: EventView, host: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Per host range: the key its occurrences group under (-1: the profiler's own range), the keys'
    labels (the name, or a numbered iteration's stem) and whether each key is such a stem."""
    uniq, inv = np.unique(v.name[host], return_inverse=True)
    labels: list[str | None] = []
    stems: set[str] = set()
    for c in uniq:
        name = str(v.names[c])
        stem = numbered_stem(name)
        if stem is not None:
            stems.add(stem)
        labels.append(None if PROFILER_RANGE_RE.match(name) else (stem or name))
    keys = sorted({lb for lb in labels if lb is not None})
    index = {lb: i for i, lb in enumerate(keys)}
    key_of = np.array([index[lb] if lb is not None else -1 for lb in labels], dtype=np.int64)
    stemmed = np.array([lb in stems for lb in keys], dtype=bool)
    return key_of[inv], keys, stemmed


def _cover(v: EventView, rank: int, s: np.ndarray, e: np.ndarray, whole_rank: bool) -> float:
    """Fraction of the rank's launches inside the ranges [s, e) (sorted, disjoint): of all of them when
    ``whole_rank``, else of those between the first range's start and the last one's end."""
    launches = _launch_times(v, rank)
    window = launches if whole_rank else launches[(launches >= s[0]) & (launches < e[-1])]
    if not len(window):
        return 0.0
    inside = np.searchsorted(s, window, side="right") - 1
    return float(np.mean((inside >= 0) & (window < e[np.maximum(inside, 0)])))


def _single_bounds(v: EventView, rank: int, s: int, e: int, gpu_time: bool) -> tuple[np.ndarray, np.ndarray]:
    """A single range's step: from its first launch to its end; with ``gpu_time`` (graph replays: one
    launch for many kernels) from the first GPU op it launched to the last one's end."""
    ops = v.rows((schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM), rank=rank)
    launch = v.launch_of(ops)
    at = np.where(launch >= 0, v.start[np.maximum(launch, 0)], v.start[ops])
    mine = ops[(at >= s) & (at < e)]
    if gpu_time:
        s, e = int(v.start[mine].min()), max(e, int(v.end[mine].max()) + 1)
    else:
        s = int(at[(at >= s) & (at < e)].min())
    return np.array([s], dtype=np.int64), np.array([e], dtype=np.int64)


def from_repeating_range(v: EventView, cfg: Thresholds, single: bool = False) -> Inferred | None:
    """Steps from the best host range of every rank (see module docstring), or None.

    ``single``: only ranges seen once per rank (one step each); else ranges repeating under one name,
    or numbered as iterations and seen at least twice."""
    host = v.rows((schema.LANE_CPU_ANNOTATION,))
    if not len(host):
        return None
    key, labels, stemmed = _range_keys(v, host)
    df = pd.DataFrame({"rank": v.rank[host], "code": key, "s": v.start[host], "e": v.end[host]})
    df = df[df["code"] >= 0].sort_values(["rank", "code", "s"], kind="stable")
    grp = df.groupby(["rank", "code"], sort=False)
    prev_end = grp["e"].shift()
    stats = pd.DataFrame({"n": grp.size(), "overlap": (df["s"] < prev_end).groupby([df["rank"], df["code"]]).sum(),
                          "dur": (df["e"] - df["s"]).groupby([df["rank"], df["code"]]).median()})
    # Repeating under one name, or fewer but one range / uniquely numbered iterations: those must hold
    # the rank's work as a whole (a single 'forward' range, without the backward, is not the step).
    codes = stats.index.get_level_values("code").to_numpy()
    wanted = (stats["n"] == 1) if single else (stats["n"] >= cfg.step_infer_min_steps) | (
        stemmed[codes] & (stats["n"] >= 2))
    stats = stats[wanted & (stats["overlap"] == 0)]
    chosen: dict[int, tuple[int, float]] = {}
    for (rank, code), st in stats.sort_values("dur", ascending=False).iterrows():
        if rank in chosen:
            continue
        occ = df[(df["rank"] == rank) & (df["code"] == code)]
        cover = _cover(v, int(rank), occ["s"].to_numpy(), occ["e"].to_numpy(),
                       whole_rank=bool(st["n"] < cfg.step_infer_min_steps))
        if cover >= cfg.step_infer_min_cover:
            chosen[int(rank)] = (int(code), cover)
    if not chosen or len({c for c, _ in chosen.values()}) != 1:
        return None  # ranks that disagree on the loop's range: not one job's step
    code = next(iter(chosen.values()))[0]
    name = labels[code]
    layers = repeated_layers(v, cfg, one_pass_only=False) if single else None
    gpu_time = bool(layers and layers.gpu_time)
    parts = []
    for rank in chosen:
        occ = df[(df["rank"] == rank) & (df["code"] == code)]
        s, e = occ["s"].to_numpy(), occ["e"].to_numpy()
        if single:  # from its first launch: a block before it waits on work from before the capture
            s, e = _single_bounds(v, rank, int(s[0]), int(e[0]), gpu_time)
        # The last step gets what follows its range too, up to one typical period (or the trace's end).
        rank_end = int(v.end[v.rank == rank].max())
        last_end = int(e[-1]) if len(s) < 2 else max(int(e[-1]), min(int(s[-1] + np.median(np.diff(s))), rank_end))
        ends = np.concatenate([s[1:], [last_end]])
        parts.append(_frame(np.full(len(s), rank), np.arange(len(s)), s, ends))
    host_df = pd.concat(parts, ignore_index=True)
    n = int(host_df.groupby("rank").size().min())
    cover = min(c for _, c in chosen.values())
    if single:
        note = Note.of(SINGLE_RANGE_STEP, name=name, cover=float(cover),
                       layers=(layers.repeats, layers.kernels) if layers else None)
    elif stemmed[code]:
        note = Note.of(ITERATION_RANGES, name=name, count=n, cover=float(cover))
    else:
        note = Note.of(REPEATING_RANGE, name=name, count=n, min_cover=cfg.step_infer_min_cover)
    return Inferred(host_df, SOURCE_NVTX_PREFIX + name, note, gpu_time)


def _period(codes: np.ndarray, cfg: Thresholds) -> tuple[int, float, int] | None:
    """The step period of a kernel-name code sequence, its match fraction and the fewest whole
    periods it needs (a longer unit seen only twice: see :func:`_longer_unit`), or None."""
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
    spacings = np.unique(pairs["gap"].to_numpy())
    candidates = spacings[(spacings > 0) & (spacings * cfg.step_infer_min_steps <= n)]
    for p in sorted(candidates.tolist(), reverse=True):
        match = float(np.mean(codes[p:] == codes[:-p]))
        if match >= cfg.step_infer_min_match:
            return _longer_unit(codes, int(p), spacings, cfg) or (int(p), match, cfg.step_infer_min_steps)
    return None


def _longer_unit(codes: np.ndarray, p: int, spacings: np.ndarray, cfg: Thresholds) -> tuple[int, float, int] | None:
    """A unit longer than ``p`` that repeats only twice but explains what ``p`` does not, or None.

    Two passes of a model with repeated layers: the layer repeats often enough to be a period, the
    pass only twice. The pass is the iteration when it repeats as well as the layer does and the
    kernels that break the layer's period (embedding, head, loss, optimizer) recur one pass later;
    a mere multiple of the layer explains none of them."""
    n = len(codes)
    breaks = np.flatnonzero(codes[p:] != codes[:-p])
    for big in sorted(spacings[(spacings > p) & (spacings * cfg.step_infer_min_steps > n)
                               & (2 * spacings <= n)].tolist(), reverse=True):
        match = float(np.mean(codes[big:] == codes[:-big]))
        b = breaks[breaks < n - big]
        if match >= cfg.step_infer_min_match and len(b) and np.mean(codes[b] == codes[b + big]) >= cfg.step_infer_min_match:
            return int(big), match, 2
    return None


def _whole_periods(v: EventView, rows: np.ndarray, cfg: Thresholds) -> tuple[np.ndarray, int, float] | None:
    """First kernel (index into ``rows``) of each whole period, the period and its match; or None."""
    found = _period(v.name[rows].astype(np.int64), cfg)
    if found is None:
        return None
    p, match, fewest = found
    whole = (len(rows) - np.arange(p)) // p  # whole periods per phase
    idle = np.concatenate(([0], v.start[rows][1:] - v.end[rows][:-1]))
    lead = np.array([np.median(idle[ph::p]) for ph in range(p)])
    phase = int(np.lexsort((-lead, -whole))[0])
    k = int(whole[phase])
    if k < fewest:
        return None
    return phase + p * np.arange(k), p, match


def _busiest_rows(v: EventView, comp: np.ndarray, rank: int) -> np.ndarray:
    """The rank's compute kernels on its busiest device, in start order."""
    mine = comp[v.rank[comp] == rank]
    devs, counts = np.unique(v.device[mine], return_counts=True)
    rows = mine[v.device[mine] == devs[np.argmax(counts)]]
    return rows[np.argsort(v.start[rows], kind="stable")]


def _one_pass(codes: np.ndarray, first: np.ndarray, p: int) -> bool:
    """Whole periods bracketed by kernels that never occur in them (embedding before the layers, the
    head and sampling after), fewer than one period of them: one pass whose period is a layer. A loop
    of iterations cut by the capture leaves only a partial iteration outside, made of the unit's own kernels."""
    lo, hi = int(first[0]), int(first[-1]) + p
    outside = np.concatenate([codes[:lo], codes[hi:]])
    return 0 < len(outside) < p and bool(np.isin(outside, codes[lo:hi], invert=True).any())


@dataclass(frozen=True)
class Layers:
    """The repeated layer of one pass: how often it repeats, its kernels, and whether its launches
    are missing or not increasing (one launch for many kernels: CUDA graphs; bounds in GPU time)."""

    repeats: int
    kernels: int
    gpu_time: bool


def _graph_launched(v: EventView, rows: np.ndarray, first: np.ndarray) -> bool:
    launch = v.launch_of(rows)[first]
    return bool((launch < 0).any() or np.any(np.diff(v.start[np.maximum(launch, 0)]) <= 0))


def repeated_layers(v: EventView, cfg: Thresholds, one_pass_only: bool = True) -> Layers | None:
    """The repeated layer of one pass, the most repeats over ranks, or None.

    With ``one_pass_only`` only a sequence that :func:`_one_pass` reads as one pass counts; without it
    (a range already spans the pass) any period does."""
    comp = v.rows((schema.LANE_GPU_COMPUTE,))
    best = None
    for rank in np.unique(v.rank[comp]):
        rows = _busiest_rows(v, comp, int(rank))
        periods = _whole_periods(v, rows, cfg)
        if periods is None:
            continue
        first, p, _ = periods
        if one_pass_only and not _one_pass(v.name[rows].astype(np.int64), first, p):
            continue
        if best is None or len(first) > best.repeats:
            best = Layers(len(first), p, _graph_launched(v, rows, first))
    return best


def layers_note(layers: Layers) -> Note:
    """The report's note for one pass with repeated ``layers`` (worded by ``traceread.render.notes``)."""
    return Note.of(REPEATED_LAYERS, repeats=layers.repeats, kernels=layers.kernels)


def from_kernel_period(v: EventView, cfg: Thresholds) -> Inferred | None:
    """Steps from the period of each rank's kernel sequence (see module docstring), or None."""
    comp = v.rows((schema.LANE_GPU_COMPUTE,))
    if not len(comp):
        return None
    found = []
    for rank in np.unique(v.rank[comp]):
        rows = _busiest_rows(v, comp, int(rank))
        periods = _whole_periods(v, rows, cfg)
        if periods is not None:
            if _one_pass(v.name[rows].astype(np.int64), periods[0], periods[1]):
                return None  # one pass with repeated layers: one step (see layers_note)
            found.append((int(rank), rows, *periods))
    if not found:
        return None
    # Bounds are the launch calls of each period's first kernel; GPU times for every rank when some
    # rank's are missing or not increasing (one launch for many kernels: CUDA graphs).
    launches = {rank: v.launch_of(rows) for rank, rows, *_ in found}
    gpu_time = any(_graph_launched(v, rows, first) for _, rows, first, _, _ in found)
    parts = []
    for rank, rows, first, p, _ in found:
        lr = launches[rank]
        start = v.start[rows] if gpu_time else np.where(lr >= 0, v.start[np.maximum(lr, 0)], v.start[rows])
        end = v.end[rows] if gpu_time else np.where(lr >= 0, v.end[np.maximum(lr, 0)], v.end[rows])
        starts = start[first]
        ends = np.concatenate([starts[1:], [int(end[first[-1]:first[-1] + p].max()) + 1]])
        parts.append(_frame(np.full(len(first), rank), np.arange(len(first)), starts, ends))
    note = Note.of(KERNEL_PERIOD, periods=tuple((r, len(first), int(p), float(m))
                                                 for r, _, first, p, m in found[:4]))
    return Inferred(pd.concat(parts, ignore_index=True), SOURCE_KERNEL_PERIOD, note, gpu_time)
