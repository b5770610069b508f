"""The data-starved fix (``traceread.causes``' record names :func:`plan_data_starved`): it removes the host input work
the data-starved rule found, and only that (docs/whatif.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.engine.lanes import EventView
from traceread.vocabulary import DATA_STARVED
from traceread.whatif.fixes import (
    _DUR_DIV,
    _DUR_MIN,
    _FREE,
    _REWIRE,
    BUS_BOUND,
    Bus,
    Context,
    Fix,
    Plan,
    _host_ranges,
    _launching_tids,
    _Op,
    _ops,
    _shrink_host,
    gap_union,
)
from traceread.whatif.model import RankModel, rank_calls, rank_host

_I64 = np.int64


def plan_data_starved(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """The host input work the data-starved rule found goes: the training thread's data loading (its DataLoader
    ranges), the host time in gaps the rule judged host input work (the batch built on the training thread: its
    runtime calls stay), pageable batch copies made pinned and asynchronous, and the batch copies holding
    data-starved gaps prefetched (:func:`_prefetched_batch_copies`). A frame whose name only looks like input
    work (``host_calls.INPUT_WORK``: ``__getitem__``, ``preprocess``) goes only inside those gaps: the rule reads
    the name of a gap's frame, and the same names elsewhere are indexing and set-up (``os.environ[...]``, a
    Triton kernel's ``[grid]`` launch)."""
    v = ctx.view
    rows = v.rows(*rank_host(m.rank))
    loading = _dataloader_rows(v, rows)
    us, ue = _host_ranges(v, m.rank, _launching_tids(m, v), loading, rows) if loading.any() else \
        (np.zeros(0, _I64), np.zeros(0, _I64))
    hs, he = _host_input_time(m, ctx)
    if len(hs):
        us, ue = intervals.union(np.concatenate((us, hs)), np.concatenate((ue, he)))
    shrink = _shrink_host(m, us, ue, 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor)
    return _ops(shrink, *_pinned_batch_copies(m, ctx), *_prefetched_batch_copies(m, ctx))


def loads_data(m: RankModel, ctx: Context) -> bool:
    """Whether the rank's training thread loads data (what loader workers would take over)."""
    v = ctx.view
    rows = v.rows(*rank_host(m.rank))
    return bool(_dataloader_rows(v, rows).any()) or bool(len(_host_input_time(m, ctx)[0]))


def _dataloader_rows(v: EventView, rows: np.ndarray) -> np.ndarray:
    """Bool per row of ``rows``: a DataLoader range (``v.flag("dataloader", rows)``; no lookup per row where no
    name of the trace is one)."""
    if not v.name_flags["dataloader"].any():
        return np.zeros(len(rows), dtype=bool)
    return v.flag("dataloader", rows)


# The evidence kind of a data-starved gap held by input work on the training thread (traceread.rules.data_starved)
_HOST_INPUT = "host-input"


def _host_input_time(m: RankModel, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The host time of data-starved gaps the rule judged host input work, less the runtime calls there."""
    g = ctx.gaps
    if g.empty or "evidence_kind" not in g.columns or "class" not in g.columns:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    g = g[(g["class"] == DATA_STARVED) & (g["rank"] == m.rank) & (g["evidence_kind"] == _HOST_INPUT)]
    if g.empty:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    gs, ge = intervals.union(g["start_ns"].to_numpy(_I64), g["end_ns"].to_numpy(_I64))
    v = ctx.view
    calls = v.rows(*rank_calls(m.rank))
    cs, ce = intervals.union(v.start[calls].astype(_I64), v.end[calls].astype(_I64))
    _, hs, he = intervals.complement_in_windows(cs, ce, gs, ge)
    return hs, he


def _pinned_batch_copies(m: RankModel, ctx: Context) -> tuple[_Op, ...]:
    """The batch's pageable HtoD copies inside data-starved gaps cost what the trace's pinned HtoD
    copies cost (their median), and the host does not wait for them (``non_blocking=True``)."""
    c = ctx.copies
    if c is None or c.empty:
        return ()
    htod_pinned = (c["copy_kind"] == "HtoD").to_numpy(dtype=bool, na_value=False) & \
        (c["src_kind"] == "Pinned").to_numpy(dtype=bool, na_value=False)
    if not htod_pinned.any():
        return ()  # no pinned HtoD copy in the trace: no cost to give the pageable ones
    memcpy = ctx.view.lane_codes.get(schema.LANE_MEMCPY, -99)
    nodes = m.op_nodes[m.lane == memcpy]
    if not len(nodes):
        return ()
    rows = m.row[nodes]
    htod = _side_is(c, rows, "copy_kind", "HtoD")
    pinned = htod & _side_is(c, rows, "src_kind", "Pinned")
    if not pinned.any():
        return ()
    us, ue = gap_union(ctx, m, DATA_STARVED)
    start, end = m.time[nodes], m.time[nodes] + m.dur[nodes]
    slow = htod & _side_is(c, rows, "src_kind", "Pageable") & (intervals.overlap_with_union(start, end, us, ue) > 0)
    waits = np.isin(m.src[m.sync_end, 1], nodes[slow])
    return (_Op(_DUR_MIN, nodes[slow], int(np.median(m.dur[nodes[pinned]]))),
            _Op(_FREE, m.sync_end[waits], m.sync_wait_slot_delay[waits], waiting=True))


def _side_is(c: pd.DataFrame, rows: np.ndarray, column: str, value: str) -> np.ndarray:
    """Bool per row of ``rows``: the copies' side table ``c`` (one line per row) holds it with ``column`` equal to
    the text ``value`` (``c.set_index("row")[column].astype(str).reindex(rows) == value``): each line of the table
    compared once, and the rows looked up only when one is equal."""
    index = pd.Index(c["row"])
    if not index.is_unique:  # (the reindex raises on its duplicate rows)
        return np.asarray(c.set_index("row")[column].astype(str).reindex(rows).to_numpy() == value, dtype=bool)
    equal = (c[column] == value).to_numpy(dtype=bool, na_value=False)
    if not equal.any():
        return np.zeros(len(rows), dtype=bool)
    at = index.get_indexer(rows)
    return (at >= 0) & equal[np.maximum(at, 0)]


def _copy_held(ctx: Context, m: RankModel) -> tuple[np.ndarray, np.ndarray]:
    """The data-starved gaps the batch copy holds (it covers ``data_loader_cover`` of the gap, more than a
    loader does): a loader-held gap's copy is the loader's to speed up, not the copy's."""
    g = ctx.gaps
    need = ("class", "rank", "start_ns", "end_ns", "memcpy_htod_ns", "dataloader_ns")
    if g.empty or any(c not in g.columns for c in need):
        return np.zeros(0, _I64), np.zeros(0, _I64)
    g = g[(g["class"] == DATA_STARVED) & (g["rank"] == m.rank)]
    dur = (g["end_ns"] - g["start_ns"]).to_numpy(_I64)
    htod, loader = g["memcpy_htod_ns"].to_numpy(_I64), g["dataloader_ns"].to_numpy(_I64)
    held = (htod >= ctx.cfg.data_loader_cover * dur) & (htod > loader)
    return intervals.union(g["start_ns"].to_numpy(_I64)[held], g["end_ns"].to_numpy(_I64)[held])


def _prefetched_batch_copies(m: RankModel, ctx: Context) -> tuple[_Op, ...]:
    """Host-to-device copies holding data-starved gaps (:func:`_copy_held`) are prefetched (``non_blocking=True`` on a side stream,
    issued a batch ahead): the op after each on its stream no longer waits for it, and no host sync does; the
    copies still take the bus as they did (each waits for the copy it followed there: :func:`_bus_predecessors`),
    so a run whose step is the bus's time stays at it."""
    memcpy = ctx.view.lane_codes.get(schema.LANE_MEMCPY, -99)
    c = ctx.copies
    nodes = m.op_nodes[m.lane == memcpy]
    if c is None or c.empty or not len(nodes):
        return ()
    htod = _side_is(c, m.row[nodes], "copy_kind", "HtoD")
    us, ue = _copy_held(ctx, m)
    start, end = m.time[nodes], m.time[nodes] + m.dur[nodes]
    batch = np.sort(nodes[htod & (intervals.overlap_with_union(start, end, us, ue) > 0)])
    if not len(batch):
        return ()
    # The op after a copy on its stream now waits for the op before the copy (the first that is no batch copy)
    before = m.src[:, 1].astype(_I64)
    is_batch = np.zeros(len(m.time), dtype=bool)
    is_batch[batch] = True
    follows = np.flatnonzero((before >= 0) & is_batch[np.maximum(before, 0)] & ~is_batch)
    src = before[follows]
    for _ in range(64):  # a run of batch copies back to back: step over each (pointer jumping)
        more = (src >= 0) & is_batch[np.maximum(src, 0)]
        if not more.any():
            break
        src[more] = before[src[more]]
    turnaround = int(m.nominal.get("stream_turnaround_ns", 0))
    ops = [_Op(_REWIRE, follows, src.astype(m.src.dtype), 1, delays=np.full(len(follows), turnaround, _I64))]
    # The bus: each batch copy after the copy it followed on the bus in the trace (its free slot 2; slot 1 keeps
    # its stream order): the one that ended last by its start. Copies that overlapped in the trace (several copy
    # engines or DMA queues) stay as concurrent as they were; copies one after another stay one after another.
    prev, cur = _bus_predecessors(m, batch)
    free = m.src[cur, 2] < 0
    ops.append(_Op(_REWIRE, cur[free], prev[free].astype(m.src.dtype), 2, delays=np.zeros(int(free.sum()), _I64)))
    waits = np.isin(m.src[m.sync_end, 1], batch)
    ops.append(_Op(_FREE, m.sync_end[waits], m.sync_wait_slot_delay[waits], waiting=True))
    return tuple(ops)


def _bus_predecessors(m: RankModel, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(prev, cur)``: each batch copy ``cur`` with the copy ``prev`` it followed on the bus in the trace, the one
    ending last at or before its start (a copy with none is left out)."""
    start = m.time[batch].astype(_I64)
    end = start + m.dur[batch].astype(_I64)
    by_end = np.lexsort((start, end))  # among equal ends, the later start last: the copy next to the one after
    j = np.searchsorted(end[by_end], start, side="right") - 1
    # a zero-length copy ends at its own start: the one before it in that order is its predecessor
    own = (j >= 0) & (by_end[np.maximum(j, 0)] == np.arange(len(batch)))
    j[own] -= 1
    has = j >= 0
    return batch[by_end[j[has]]], batch[has]


def plan_bus_bytes(m: RankModel, fix: Bus, ctx: Context) -> Plan:
    """The host-to-device copies inside data-starved gaps the rule judged bus-bound, ``fix.factor`` x fewer bytes
    (:class:`~traceread.whatif.fixes.Bus`): their durations divided by it."""
    g, c = ctx.gaps, ctx.copies
    memcpy = ctx.view.lane_codes.get(schema.LANE_MEMCPY, -99)
    nodes = m.op_nodes[m.lane == memcpy]
    if g.empty or "evidence_kind" not in g.columns or c is None or c.empty or not len(nodes):
        return Plan()
    g = g[(g["class"] == DATA_STARVED) & (g["rank"] == m.rank) & (g["evidence_kind"] == BUS_BOUND)]
    if g.empty:
        return Plan()
    us, ue = intervals.union(g["start_ns"].to_numpy(_I64), g["end_ns"].to_numpy(_I64))
    htod = _side_is(c, m.row[nodes], "copy_kind", "HtoD")
    start, end = m.time[nodes], m.time[nodes] + m.dur[nodes]
    hit = nodes[htod & (intervals.overlap_with_union(start, end, us, ue) > 0)]
    return _ops(_Op(_DUR_DIV, hit, factor=fix.factor))


__all__ = ["plan_data_starved", "loads_data", "plan_bus_bytes"]
