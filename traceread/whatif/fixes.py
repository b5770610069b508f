"""Fixes as transformations of a rank's dependency model, one per lever of the report.

Each transformation takes the model's edge arrays (copies) and changes durations, delays or edges;
the sweep then moves everything downstream. What each assumes (docs/whatif.md):

* ``data-starved``: the training thread's data loading (``enumerate(DataLoader)#...`` ranges and
  input-work frames on the threads that launch GPU work) takes no host time;
* ``launch-bound``: the work is captured in CUDA graphs: the host time from one kernel launch to the
  next launch on the same thread shrinks to ``whatif_graph_node_ns``;
* ``sync-stall``: the host syncs inside sync-stall gaps return without waiting (their own cost);
* ``comm-bound``: communication kernels fully overlapped (nothing waits on them), or ``factor``x faster;
* ``one-time-cost``: the host time inside one-time-cost gaps is absent;
* ``pipeline-bubble``: the bubble shrinks ``whatif_bubble_factor``x (interleaved 1F1B): the time of
  every wait and p2p kernel inside bubble gaps, and the host time there, shrinks by that factor;
* ``memory-bound``: memory-bound kernels ``whatif_memory_factor``x faster (fusion);
* a ``Scale`` (``--scale PATTERN=FACTOR``): GPU ops and host ranges whose name matches, ``factor``x faster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import intervals, kernel_classes, schema
from traceread.config import Thresholds
from traceread.host_calls import INPUT_WORK, LAUNCH
from traceread.lanes import API_CATS, HOST_LANES, EventView, subset
from traceread.vocabulary import (
    COMM_BOUND,
    DATA_STARVED,
    LAUNCH_BOUND,
    MEMORY_BOUND,
    ONE_TIME_COST,
    PIPELINE_BUBBLE,
    SYNC_STALL,
)
from traceread.whatif.model import HOST_POINT, OP_START, RankModel

# The levers a fix can name, in the report's order of gap classes, then the busy lever.
FIX_CAUSES: tuple[str, ...] = (LAUNCH_BOUND, COMM_BOUND, DATA_STARVED, PIPELINE_BUBBLE, SYNC_STALL, ONE_TIME_COST,
                               MEMORY_BOUND)
_I64 = np.int64


@dataclass(frozen=True)
class Fix:
    """A lever to pull: ``cause`` (one of :data:`FIX_CAUSES`) and an optional speed-up factor."""

    cause: str
    factor: float | None = None

    def label(self) -> str:
        return self.cause if self.factor is None else f"{self.cause}={self.factor:g}"


@dataclass(frozen=True)
class Scale:
    """Custom scaling: GPU ops and host ranges whose name matches ``pattern`` (case-insensitive
    regex), ``factor``x faster."""

    pattern: str
    factor: float

    def label(self) -> str:
        return f"{self.pattern}={self.factor:g}"


@dataclass
class Edges:
    """The mutable part of a model a fix changes (copies of the model's arrays)."""

    src: np.ndarray
    delay: np.ndarray
    dur: np.ndarray

    @staticmethod
    def of(m: RankModel) -> Edges:
        return Edges(m.src.copy(), m.delay.copy(), m.dur.copy())


@dataclass(frozen=True)
class Context:
    """What fixes read besides the model: the frame view, the rank's classified gaps, thresholds."""

    view: EventView
    gaps: pd.DataFrame  # this trace's gaps with ``class`` (may be empty)
    cfg: Thresholds
    copies: pd.DataFrame | None = None  # the trace's ``copy_args`` side table (row, copy_kind, src_kind)


def apply(m: RankModel, e: Edges, fix: Fix | Scale, ctx: Context) -> None:
    """Transform ``e`` (in place) as ``fix`` says."""
    if isinstance(fix, Scale):
        _scale(m, e, fix, ctx)
        return
    fn = _FIXES.get(fix.cause)
    if fn is None:
        raise ValueError(f"unknown fix {fix.cause!r}; known: {', '.join(FIX_CAUSES)}")
    fn(m, e, fix, ctx)


# --- helpers ------------------------------------------------------------------------------------------

def _shrink_host(m: RankModel, e: Edges, us: np.ndarray, ue: np.ndarray, frac: float) -> None:
    """Host time inside the union ``(us, ue)`` shrinks by ``frac`` (1: absent) on the host clock."""
    if len(us) == 0:
        return
    nodes = np.flatnonzero((m.kind == HOST_POINT) & (e.src[:, 0] >= 0))
    a, b = m.time[e.src[nodes, 0]], m.time[nodes]
    cut = (intervals.overlap_with_union(np.minimum(a, b), b, us, ue) * frac).astype(_I64)
    e.delay[nodes, 0] = np.maximum(e.delay[nodes, 0] - cut, 0)


def _gap_union(ctx: Context, m: RankModel, cls: str) -> tuple[np.ndarray, np.ndarray]:
    g = ctx.gaps
    if g.empty or "class" not in g.columns:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    g = g[(g["class"] == cls) & (g["rank"] == m.rank)]
    return intervals.union(g["start_ns"].to_numpy(_I64), g["end_ns"].to_numpy(_I64))


def _launching_tids(m: RankModel, v: EventView) -> np.ndarray:
    rows = m.row[m.launch_point[m.launch_point >= 0]]
    rows = rows[rows >= 0]
    return np.unique(v.tid[rows]) if len(rows) else np.zeros(0, _I64)


def _host_ranges(v: EventView, rank: int, tids: np.ndarray, hit: np.ndarray, rows: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    keep = rows[hit & np.isin(v.tid[rows], tids)]
    return intervals.union(v.start[keep].astype(_I64), v.end[keep].astype(_I64))


# --- the levers -----------------------------------------------------------------------------------------

def _data_starved(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    v = ctx.view
    rows = v.rows(HOST_LANES, rank=m.rank)
    hit = v.flag("dataloader", rows) | v.map_names(rows, lambda names: np.array(
        [bool(INPUT_WORK.search(str(n))) for n in names], dtype=bool))
    us, ue = _host_ranges(v, m.rank, _launching_tids(m, v), hit, rows)
    _shrink_host(m, e, us, ue, 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor)
    _pinned_batch_copies(m, e, ctx)


def _pinned_batch_copies(m: RankModel, e: Edges, ctx: Context) -> None:
    """The batch's pageable HtoD copies inside data-starved gaps cost what the trace's pinned HtoD
    copies cost (their median), and the host does not wait for them (``non_blocking=True``)."""
    c = ctx.copies
    if c is None or c.empty:
        return
    memcpy = ctx.view.lane_codes.get(schema.LANE_MEMCPY, -99)
    nodes = m.op_nodes[m.lane == memcpy]
    if not len(nodes):
        return
    rows = m.row[nodes]
    side = c.set_index("row")
    kind = side["copy_kind"].astype(str).reindex(rows).to_numpy()
    src_kind = side["src_kind"].astype(str).reindex(rows).to_numpy()
    htod = kind == "HtoD"
    pinned = htod & (src_kind == "Pinned")
    if not pinned.any():
        return
    us, ue = _gap_union(ctx, m, DATA_STARVED)
    start, end = m.time[nodes], m.time[nodes] + m.dur[nodes]
    slow = htod & (src_kind == "Pageable") & (intervals.overlap_with_union(start, end, us, ue) > 0)
    e.dur[nodes[slow]] = np.minimum(e.dur[nodes[slow]], int(np.median(m.dur[nodes[pinned]])))
    waits = np.isin(e.src[m.sync_end, 1], nodes[slow])
    freed = m.sync_end[waits]
    e.src[freed, 1] = -1
    e.delay[freed, 0] = m.sync_wait_slot_delay[waits]


def _launch_bound(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    v = ctx.view
    api_codes = [v.cat_codes[c] for c in API_CATS if c in v.cat_codes]
    rows = v.rows((schema.LANE_CPU_THREAD,), rank=m.rank)
    calls = subset(rows, np.isin(v.cat[rows], api_codes))
    if len(calls) < 2:
        return
    order = np.lexsort((v.start[calls], v.tid[calls]))
    calls = calls[order]
    is_launch = v.map_names(calls, lambda names: np.array([bool(LAUNCH.match(str(n))) for n in names], dtype=bool))
    pair = (v.tid[calls[1:]] == v.tid[calls[:-1]]) & is_launch[1:] & is_launch[:-1]
    node_ns = ctx.cfg.whatif_graph_node_ns if fix.factor is None else 0
    a = v.start[calls[:-1]][pair].astype(_I64) + node_ns
    b = v.start[calls[1:]][pair].astype(_I64)
    ok = b > a
    us, ue = intervals.union(a[ok], b[ok])
    _shrink_host(m, e, us, ue, 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor)


def _sync_stall(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    us, ue = _gap_union(ctx, m, SYNC_STALL)
    ends = m.sync_end
    if len(us) == 0 or len(ends) == 0:
        return
    starts = m.time[m.src[ends, 0]]
    inside = intervals.overlap_with_union(starts, m.time[ends], us, ue) > 0
    freed = ends[inside]
    e.src[freed, 1] = -1
    e.delay[freed, 0] = m.sync_wait_slot_delay[inside]


def _comm_bound(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    nodes = m.op_nodes[m.lane == code]
    e.dur[nodes] = 0 if fix.factor is None else (e.dur[nodes] / fix.factor).astype(_I64)


def _one_time(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    us, ue = _gap_union(ctx, m, ONE_TIME_COST)
    _shrink_host(m, e, us, ue, 1.0)


def _pipeline_bubble(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    factor = fix.factor if fix.factor is not None else ctx.cfg.whatif_bubble_factor
    frac = 1.0 - 1.0 / factor
    us, ue = _gap_union(ctx, m, PIPELINE_BUBBLE)
    if len(us) == 0:
        return
    # Every wait inside the bubble (an edge's span, a p2p kernel's time, the host there) shrinks.
    for slot in range(3):
        nodes = np.flatnonzero(e.src[:, slot] >= 0)
        s = e.src[nodes, slot]
        a = m.time[s] + m.dur[s]
        b = m.time[nodes]
        cut = (intervals.overlap_with_union(np.minimum(a, b), b, us, ue) * frac).astype(_I64)
        e.delay[nodes, slot] = np.maximum(e.delay[nodes, slot] - cut, 0)
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    comm = m.op_nodes[m.lane == code]
    cut = (intervals.overlap_with_union(m.time[comm], m.time[comm] + m.dur[comm], us, ue) * frac).astype(_I64)
    e.dur[comm] = np.maximum(e.dur[comm] - cut, 0)


def memory_bound_ops(m: RankModel, v: EventView) -> np.ndarray:
    """Op nodes of memory-bound kernels (a kernel class that is neither compute-bound nor unknown)."""
    compute = v.lane_codes.get(schema.LANE_GPU_COMPUTE, -99)
    nodes = m.op_nodes[m.lane == compute]
    rows = m.row[nodes]
    graph = v.cat[rows] == v.cat_codes.get(schema.CAT_GRAPH, -99)
    cls = v.map_names(rows, lambda names: np.asarray(kernel_classes.classify(np.asarray(names, dtype=object))))
    mem = ~kernel_classes.is_compute_bound_class(cls) & (cls != kernel_classes.CLS_OTHER) & ~graph
    return nodes[mem]


def _memory_bound(m: RankModel, e: Edges, fix: Fix, ctx: Context) -> None:
    factor = fix.factor if fix.factor is not None else ctx.cfg.whatif_memory_factor
    nodes = memory_bound_ops(m, ctx.view)
    e.dur[nodes] = (e.dur[nodes] / factor).astype(_I64)


def _scale(m: RankModel, e: Edges, fix: Scale, ctx: Context) -> None:
    v = ctx.view
    rx = re.compile(fix.pattern, re.IGNORECASE)

    def match(names: np.ndarray) -> np.ndarray:
        return np.array([bool(rx.search(str(n))) for n in names], dtype=bool)

    ops = m.op_nodes
    hit = v.map_names(m.row[ops], match) if len(ops) else np.zeros(0, bool)
    e.dur[ops[hit]] = (e.dur[ops[hit]] / fix.factor).astype(_I64)
    rows = v.rows(HOST_LANES, rank=m.rank)
    if len(rows):
        hit_rows = v.map_names(rows, match)
        us, ue = intervals.union(v.start[rows[hit_rows]].astype(_I64), v.end[rows[hit_rows]].astype(_I64))
        _shrink_host(m, e, us, ue, 1.0 - 1.0 / fix.factor)


_FIXES = {DATA_STARVED: _data_starved, LAUNCH_BOUND: _launch_bound, SYNC_STALL: _sync_stall,
          COMM_BOUND: _comm_bound, ONE_TIME_COST: _one_time, PIPELINE_BUBBLE: _pipeline_bubble,
          MEMORY_BOUND: _memory_bound}

__all__ = ["FIX_CAUSES", "Fix", "Scale", "Edges", "Context", "apply", "memory_bound_ops", "OP_START"]
