"""Sanity notes on one trace's GPU activity: what a reader should know before trusting the numbers.

Real traces are merged, re-exported and cut; the analysis still runs on them, but the report says
when the input looks odd: GPU activities recorded twice, kernels that overlap on one stream (a stream
runs its kernels one after another, so an overlap means skewed clocks or two captures merged), and
holes in the GPU timeline long enough to be a clock jump. Vectorized over the frame; notes only,
the frame is never changed (side tables refer to its rows by position).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema
from traceread.config import Thresholds
from traceread.host_calls import LAUNCH, calls_matching
from traceread.note import OVERLAPPING_KERNELS, REPEATED_GPU_ACTIVITY, TIMELINE_HOLES, Note
from traceread.printable import printable
from traceread.trace import Trace

# The raw Kineto category of CUPTI range-profiler records (hardware counters per kernel range).
PROFILER_RANGE_CATEGORY = "cuda_profiler_range"

_KEY = ["rank", "lane", "device", "stream", "start_ns", "end_ns", "name", "correlation"]


def sanity_notes(trace: Trace, cfg: Thresholds) -> list[Note]:
    """Notes (as data: ``traceread.render.notes`` words them) about duplicated, overlapping or time-jumping
    GPU activity."""
    ev = trace.events
    lane = ev["lane"]
    if not isinstance(lane.dtype, pd.CategoricalDtype):  # (a frame made by hand)
        lane = lane.astype("category")
    codes = lane.cat.codes.to_numpy()
    rows = np.flatnonzero(_on_lanes(lane, codes, schema.GPU_LANES))
    if len(rows) == 0:
        return []
    notes: list[Note] = []
    start_ns, end_ns = ev["start_ns"].to_numpy()[rows], ev["end_ns"].to_numpy()[rows]
    order = np.argsort(start_ns, kind="stable")  # read by the repeat check and the hole check
    repeat = _repeats(ev, rows, start_ns, order)
    dup = int(repeat.sum())
    if dup:
        notes.append(Note.of(REPEATED_GPU_ACTIVITY, count=dup))
    # The compute kernels, each once (a repeat of a compute row is one: the lane is in the key).
    once = ~repeat
    once &= _code_table(lane, (schema.LANE_GPU_COMPUTE,)).take(codes[rows])  # the GPU rows' lanes, not every row's
    by_start = order[once[order]]  # the compute kernels' rows in start order (stable), as positions in rows
    n = _overlaps(ev, rows[once], start_ns[once], end_ns[once], (np.cumsum(once) - 1)[by_start])
    if n:
        notes.append(Note.of(OVERLAPPING_KERNELS, count=n))
    t = start_ns[order]
    e = np.maximum.accumulate(end_ns[order])  # latest end so far, in start order
    if len(t) > 1:
        holes = t[1:] - e[:-1]
        big = holes >= cfg.clock_jump_min_ns
        if big.any():
            notes.append(Note.of(TIMELINE_HOLES, count=int(big.sum()), min_ns=cfg.clock_jump_min_ns,
                                 longest_ns=int(holes[big].max())))
    return notes


def _code_table(lane: pd.Series, lanes: tuple[str, ...]) -> np.ndarray:
    """Bool per category code of the categorical ``lane`` (its last entry answers for -1, a missing lane): is it
    one of ``lanes``. Read by code: ``isin`` on the categorical, or a string comparison, costs a pass over
    strings or a hash per row."""
    cats = lane.cat.categories
    table = np.zeros(len(cats) + 1, dtype=bool)
    for name in lanes:
        if name in cats:
            table[cats.get_loc(name)] = True
    return table


def _on_lanes(lane: pd.Series, codes: np.ndarray, lanes: tuple[str, ...]) -> np.ndarray:
    """Bool per row of the categorical ``lane`` (``codes``: its codes): is it on one of ``lanes``. When their
    codes are consecutive (the schema lists the GPU lanes together), one unsigned comparison per row (a missing
    lane's -1 reads as the largest value); else a lookup per row."""
    table = _code_table(lane, lanes)
    wanted = np.flatnonzero(table[:-1])
    if len(wanted) == 0 or int(wanted[-1]) - int(wanted[0]) + 1 != len(wanted) or codes.dtype.kind != "i":
        return table.take(codes)
    unsigned = codes.view(np.dtype(f"u{codes.dtype.itemsize}"))
    return (unsigned - unsigned.dtype.type(wanted[0])) <= unsigned.dtype.type(wanted[-1] - wanted[0])


def _overlaps(ev: pd.DataFrame, kr: np.ndarray, start: np.ndarray, end: np.ndarray,
              by_start: np.ndarray | None = None) -> int:
    """Kernels (rows ``kr``) that start before the running maximum of earlier ends on their stream.
    ``by_start``: ``np.argsort(start, kind="stable")`` when the caller has it."""
    if len(kr) < 2:
        return 0
    rank, device, stream = (ev[c].to_numpy()[kr] for c in ("rank", "device", "stream"))
    o, key = _stream_order_key(rank, device, stream, start, by_start)
    start, end = start[o], end[o]
    if key is not None:  # one code per (rank, device, stream): neighbours on one stream share it
        key = key[o]
        same = key[1:] == key[:-1]
    else:
        rank, device, stream = rank[o], device[o], stream[o]
        same = (rank[1:] == rank[:-1]) & (device[1:] == device[:-1]) & (stream[1:] == stream[:-1])
    del key, rank, device, stream
    if (same & (end[1:] < end[:-1])).any():
        # Running maximum of earlier ends within each stream: a start before it is an overlap.
        grp = np.cumsum(np.r_[True, ~same])
        prev_end = _running_max_by_run(end, grp)[:-1]
    else:  # no end falls back within a stream: the running maximum is the previous end
        prev_end = end[:-1]
    # compared as floats, as the running maximum's shifted (float) column always was
    return int((same & (start[1:].astype(np.float64) < prev_end.astype(np.float64))).sum())


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``pd.factorize(values, sort=True)``'s codes and number of distinct values: for integers of a small range
    (ranks, devices, streams) by one table over the range instead of a hash table."""
    v = np.asarray(values)
    if len(v) and v.dtype.kind in "iu":
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < _CODE_TABLE_MAX:
            present = np.zeros(hi - lo + 1, dtype=bool)
            shifted = v.astype(np.int64, copy=False)
            if lo:
                shifted = shifted - lo
            present[shifted] = True
            table = np.cumsum(present, dtype=np.int64) - 1
            return table[shifted], int(table[-1]) + 1
    codes, uniques = pd.factorize(v, sort=True)
    return codes, len(uniques)


# The widest range of integers :func:`_sorted_codes` numbers by a table (wider: a hash table).
_CODE_TABLE_MAX = 1 << 20


def _running_max_by_run(values: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The running maximum of integer ``values`` within each run of equal, non-decreasing ``run`` numbers
    (pandas' ``groupby(run).cummax()`` of contiguous groups): one accumulate over the values lifted by their
    run's number times their span, so that no maximum carries into the next run; pandas' group-by where
    that lift would overflow int64."""
    v = np.asarray(values)
    if len(v) == 0 or v.dtype.kind not in "iu":
        return pd.Series(values).groupby(run).cummax().to_numpy()
    lo, hi = int(v.min()), int(v.max())
    span = hi - lo + 1
    if span * (int(run[-1]) + 1) >= 2**62:
        return pd.Series(values).groupby(run).cummax().to_numpy()
    lift = run.astype(np.int64) * span
    out = np.maximum.accumulate(v.astype(np.int64) - lo + lift)
    out -= lift
    out += lo
    return out.astype(v.dtype, copy=False)


def _stream_order(rank: np.ndarray, device: np.ndarray, stream: np.ndarray, start: np.ndarray,
                  by_start: np.ndarray | None) -> np.ndarray:
    """``np.lexsort((start, stream, device, rank))``: ties keep the frame's order. Made as a stable sort
    by start, then a stable sort by the stream's code (few streams: a small integer key, which numpy
    sorts in one linear pass) instead of four passes over 64-bit keys."""
    return _stream_order_key(rank, device, stream, start, by_start)[0]


def _stream_order_key(rank: np.ndarray, device: np.ndarray, stream: np.ndarray, start: np.ndarray,
                      by_start: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`_stream_order` and the int16 code of each row's (rank, device, stream) it sorted by (None where
    the streams are too many for one: then it is ``np.lexsort``'s order)."""
    codes = [_sorted_codes(c) for c in (rank, device, stream)]
    sizes = [max(n, 1) for _, n in codes]
    if sizes[0] * sizes[1] * sizes[2] >= 2**15:
        return np.lexsort((start, stream, device, rank)), None
    key = ((codes[0][0] * sizes[1] + codes[1][0]) * sizes[2] + codes[2][0]).astype(np.int16)
    if by_start is None:
        by_start = np.argsort(start, kind="stable")
    return by_start[np.argsort(key[by_start], kind="stable")], key


def _repeats(ev: pd.DataFrame, rows: np.ndarray, start_ns: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Bool per row of ``rows``: an earlier one has the same ``_KEY`` (pandas' ``duplicated``). The
    start time is in the key, so only rows sharing their start with another are compared on the
    whole key (few: factorizing every column of every GPU row is costly on a large trace)."""
    out = np.zeros(len(rows), dtype=bool)
    t = start_ns[order]
    tie = np.zeros(len(t), dtype=bool)
    eq = t[1:] == t[:-1]
    tie[1:] |= eq
    tie[:-1] |= eq
    cand = np.sort(order[tie])  # in row order, so "earlier" is as in the frame
    if len(cand):
        sub = pd.DataFrame({c: ev[c].iloc[rows[cand]].reset_index(drop=True) for c in _KEY})
        out[cand] = sub.duplicated().to_numpy()
    return out


def missing_gpu_activity(trace: Trace) -> str:
    """Why a trace with no kernel, copy or memset record has none, from evidence in the file: a
    counter-only capture (CUPTI range-profiler records), a file cut before its GPU records, kernel
    records lost (launch calls, and flow events, but no activity records), or a CPU-only capture
    (no launch call at all). '' when the trace holds a kernel (one whose only GPU records are copies and
    memsets: ``metrics.copies.data_movement_only`` says what they hold)."""
    ev = trace.events
    if has_kernels(trace):
        return ""
    api = ev[(ev["lane"] == schema.LANE_CPU_THREAD) & ev["category"].isin((schema.CAT_RUNTIME, schema.CAT_DRIVER))]
    launches = int(calls_matching(api["name"], LAUNCH).sum()) if len(api) else 0
    raw = [str(c).lower() for c in trace.meta.extra.get("raw_categories", ())]
    ranges = int((ev["category"].astype(str).to_numpy() == schema.CAT_OTHER).sum()) \
        if PROFILER_RANGE_CATEGORY in raw else 0
    if ranges:
        return (f"a counter-only capture: {ranges} CUPTI range-profiler records (`{PROFILER_RANGE_CATEGORY}`, hardware "
                "counters per range) and no kernel, copy or memset record; the range profiler replaces the "
                "activity trace, so there are no GPU timings to diagnose: profile again without counters "
                "(no `profiler_metrics`) for the timeline")
    flows = int(trace.meta.extra.get("non_row_events", 0) or 0) - int(trace.meta.extra.get("counter_events", 0) or 0)
    linked = f" and {flows} flow events linking them to GPU work" if flows else ""
    if launches and trace.meta.truncated:
        return (f"the file is truncated: {launches} launch calls{linked} survive but no kernel, copy or memset "
                "record does (the cut came before the GPU records, which Kineto writes after the host events); "
                "no GPU timings to diagnose: use a complete file")
    if trace.meta.truncated:
        return ("the file is truncated: no kernel, copy or memset record survives before the cut (Kineto writes "
                "the GPU records after the host events, so a cut file loses them first); no GPU timings to "
                "diagnose: use a complete file")
    if launches:
        return (f"kernel records lost: {launches} launch calls{linked}, but not one kernel, copy or memset record: "
                "the GPU activity was not written (the profiler stopped before its activity buffers were "
                "flushed, or they overflowed); profile again, synchronizing before the profiler stops")
    if len(api):
        # CUDA was traced (runtime/driver calls are there): the question is not whether it was enabled
        top = api["name"].astype(str).value_counts().head(3)
        held = ", ".join(f"{printable(str(n))} x{c}" for n, c in top.items())
        return (f"CUDA was traced but no GPU work was issued: {len(api)} CUDA runtime/driver calls ({held}) and not "
                "one launch call, kernel, copy or memset record: the model ran on the CPU (tensors never moved to the "
                "GPU), or nothing was issued to the GPU in this window; nothing on a GPU to diagnose")
    return ("a CPU-only capture: no CUDA record at all (no kernel, copy or memset record, and not one launch call "
            "or other CUDA runtime call); was `ProfilerActivity.CUDA` enabled (or `--trace=cuda` for nsys)?")


# The lanes of GPU work a compute-idle analysis is about: kernels (compute or communication) and whole
# CUDA graphs. Copies, memsets and sync records alone leave no compute to be idle between.
KERNEL_LANES = (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM)


def has_kernels(trace: Trace) -> bool:
    """The trace holds at least one kernel or graph record (on a compute or communication lane)."""
    lane = trace.events["lane"]
    if not isinstance(lane.dtype, pd.CategoricalDtype):  # (a frame made by hand)
        return bool(lane.isin(KERNEL_LANES).any())
    return bool(_on_lanes(lane, lane.cat.codes.to_numpy(), KERNEL_LANES).any())
