"""Fixes as transformations of a rank's dependency model, one per lever of the report.

Each lever reads the recorded times once and returns a :class:`Plan`: the durations, delays and edges
it changes, on the nodes it touches; :func:`apply_plan` applies it to a replay's :class:`Edges` (the
model's arrays, each copied on its first write), and the sweep moves everything downstream. A plan is
made once per rank and fix and serves the fix's own replay and the "all" replay alike. What each assumes (docs/whatif.md):

* ``data-starved``: the training thread's data loading (``enumerate(DataLoader)#...`` ranges and
  input-work frames on the threads that launch GPU work) and the host time of gaps the rule judged host input
  work take no host time; pageable batch copies cost what pinned ones do; the batch copies holding gaps are
  prefetched (nothing waits for them, but they take the bus one after another);
* ``launch-bound``: the work is captured in CUDA graphs: the dispatch between one kernel launch and the
  next on the same thread (dense launches; elsewhere the time inside operators and runtime calls) shrinks to
  ``whatif_graph_node_ns``; data loading and driver work (one CUDA call over ``launch_call_max_ns``) stay;
* ``sync-stall``: the host syncs inside sync-stall gaps return without waiting (their own cost);
* ``comm-bound``: communication kernels fully overlapped (nothing waits on them), or ``factor``x faster;
* ``one-time-cost``: the host time inside one-time-cost gaps is absent, and so is a GPU op's wait for a launch
  that did one-time work there (lazy module loading in a first launch);
* ``pipeline-bubble``: the bubble shrinks ``whatif_bubble_factor``x (interleaved 1F1B): the time of
  every wait and p2p kernel inside bubble gaps, and the host time there, shrinks by that factor;
* ``memory-bound``: memory-bound kernels ``whatif_memory_factor``x faster (fusion);
* a ``Scale`` (``--scale PATTERN=FACTOR``): GPU ops and host ranges whose name matches, ``factor``x faster.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from traceread import bounds, causes, intervals, kernel_classes, schema
from traceread.config import Thresholds
from traceread.engine.lanes import API_CATS, EventView
from traceread.host_calls import INPUT_WORK
from traceread.vocabulary import DATA_STARVED, ONE_TIME_COST, PIPELINE_BUBBLE, SYNC_STALL
from traceread.whatif.model import OP_START, RankModel, rank_calls, rank_host
from traceread.whatif.sweep import fits, host_cut

# The levers a fix can name: the causes whose record names a planner (traceread.causes), in report order.
FIX_CAUSES: tuple[str, ...] = tuple(c.name for c in causes.fixes())
_I64 = np.int64


@dataclass(frozen=True)
class Fix:
    """A lever to pull: ``cause`` (one of :data:`FIX_CAUSES`) and an optional speed-up factor."""

    cause: str
    factor: float | None = None

    def __post_init__(self) -> None:  # the API's Fix as the CLI's: a factor in bounds' range
        if self.factor is not None:
            object.__setattr__(self, "factor", bounds.factor(self.factor, f"factor of {self.cause}"))

    def label(self) -> str:
        return self.cause if self.factor is None else f"{self.cause}={self.factor:g}"


@dataclass(frozen=True)
class Scale:
    """Custom scaling: GPU ops and host ranges whose name matches ``pattern`` (case-insensitive
    regex), ``factor``x faster."""

    pattern: str
    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", bounds.factor(self.factor, f"factor of {self.pattern!r}"))

    def label(self) -> str:
        return f"{self.pattern}={self.factor:g}"


@dataclass(frozen=True)
class HostSlowdown:
    """Every host-clock interval of a rank ``share`` longer (the far end of a prediction's interval where the fix moves
    work to other host processes or threads, which then compete with the training thread: docs/whatif.md)."""

    share: float

    def label(self) -> str:
        return f"host+{self.share:.1%}"


Lever = Fix | Scale | HostSlowdown


@dataclass
class Edges:
    """The part of a model a fix changes: the model's own arrays until a fix writes one, which then
    gets its copy (:meth:`writable`), so a fix that changes durations only never copies the edges."""

    src: np.ndarray
    delay: np.ndarray
    dur: np.ndarray
    owned: set[str] = field(default_factory=set, repr=False)
    # Arrays to copy into, by name, kept by the caller from one replay to the next (one Edges at a time)
    scratch: dict[str, np.ndarray] | None = field(default=None, repr=False)

    @staticmethod
    def of(m: RankModel, scratch: dict[str, np.ndarray] | None = None) -> Edges:
        return Edges(m.src, m.delay, m.dur, scratch=scratch)

    def writable(self, name: str) -> np.ndarray:
        """The array ``name`` (``src``, ``delay`` or ``dur``), copied on the first call (into ``scratch``'s
        array of that name when it has the shape and dtype)."""
        if name not in self.owned:
            a = getattr(self, name)
            buf = self.scratch.get(name) if self.scratch is not None else None
            if buf is not None and buf.shape == a.shape and buf.dtype == a.dtype:
                np.copyto(buf, a)
            else:
                buf = a.copy()
                if self.scratch is not None:
                    self.scratch[name] = buf
            setattr(self, name, buf)
            self.owned.add(name)
        out: np.ndarray = getattr(self, name)
        return out

    def store(self, name: str, index: Any, values: np.ndarray | int) -> None:
        """``name[index] = values`` (ns, computed in int64) on the writable copy, widened to int64 first when
        the model kept the array at int32 (``traceread.whatif.model._put``) and a value does not fit."""
        out = self.writable(name)
        if out.dtype != _I64 and not fits(values, out.dtype):
            out = out.astype(_I64)
            setattr(self, name, out)
        out[index] = values


@dataclass(frozen=True)
class Context:
    """What fixes read besides the model: the frame view, the rank's classified gaps, thresholds."""

    view: EventView
    gaps: pd.DataFrame  # this trace's gaps: ``class``, ``rank``, ``start_ns``, ``end_ns`` at least (may be empty)
    cfg: Thresholds
    copies: pd.DataFrame | None = None  # the trace's ``copy_args`` side table (row, copy_kind, src_kind)
    between: Callable[[], None] = lambda: None  # called between a plan's pieces (the runner's heap trim)


# What a step of a plan does to its nodes (``values``: per node, or one value):
_SHRINK = "shrink"  # delay[slot] -= values, not below 0 (where the edge is still there)
_DUR_MIN = "dur_min"  # duration at most ``values``
_DUR_ZERO = "dur_zero"  # duration 0
_DUR_DIV = "dur_div"  # duration / factor
_DUR_CUT = "dur_cut"  # duration -= values, not below 0
_FREE = "free"  # a sync stops waiting (slot 1 dropped) and costs ``values``; ``waiting``: only one still waiting
_SLOT_SCALE = "slot_scale"  # ``slot``'s delay (as it is when applied: after the fixes before it) times ``factor``
_REWIRE = "rewire"  # ``slot``'s edge comes from ``values`` (node indices) with the delays ``delays``


@dataclass(frozen=True)
class _Op:
    kind: str
    nodes: np.ndarray
    values: np.ndarray | int | None = None
    slot: int = 0
    factor: float = 1.0
    waiting: bool = False
    delays: np.ndarray | None = None  # _REWIRE: the new edges' delays, per node


@dataclass(frozen=True)
class Plan:
    """A fix's changes to one rank's model, in the order the fix makes them (steps with no node left out).
    Each step reads the durations and delays it changes at the time it is applied, so plans applied one
    after another are the fixes made one after another."""

    ops: tuple[_Op, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.ops


def _plan(*ops: _Op) -> Plan:
    return Plan(tuple(op for op in ops if len(op.nodes)))


def plan(m: RankModel, fix: Lever, ctx: Context) -> Plan:
    """What ``fix`` changes in ``m`` (module doc)."""
    if isinstance(fix, Scale):
        return _scale(m, fix, ctx)
    if isinstance(fix, HostSlowdown):
        clock = m.clock_edges()
        if not len(clock) or fix.share <= 0 or not _loads_data(m, ctx):
            return Plan()  # no loading to move to workers: nothing competes with the training thread
        return _ops(_Op(_SLOT_SCALE, clock, slot=0, factor=1.0 + fix.share))
    cause = causes.find(fix.cause)
    if cause is None or cause.fix is None:
        raise ValueError(f"unknown fix {fix.cause!r}; known: {', '.join(FIX_CAUSES)}")
    return planner(cause)(m, fix, ctx)


Planner = Callable[[RankModel, "Fix", Context], Plan]


def planner(cause: causes.Cause) -> Planner:
    """The planner a cause record names (``module:function``; resolved here, in the what-if's layer)."""
    module, _, name = str(cause.fix).partition(":")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise TypeError(f"cause {cause.name!r}: its fix {cause.fix} is not a function")
    return cast(Planner, fn)


def apply_plan(e: Edges, p: Plan) -> None:
    """Make the changes of ``p`` to ``e`` (in place), a slice of each step's nodes at a time (a step's nodes are
    distinct, so no slice reads what another wrote): the launch-bound fix shrinks millions of delays, whose int64
    temporaries all at once would add to the peak beside the replay's copies."""
    for op in p.ops:
        for lo in range(0, len(op.nodes), _APPLY_SLICE):
            _apply_op(e, op, slice(lo, lo + _APPLY_SLICE))


_APPLY_SLICE = 1 << 18  # nodes of a plan's step applied at a time (bounds its temporaries)


def _apply_op(e: Edges, op: _Op, sl: slice) -> None:
    """Make the change of ``op`` to the nodes ``op.nodes[sl]`` (its per-node values sliced alike)."""
    nodes = op.nodes[sl]
    if op.kind == _SHRINK:
        cut = _part(op.values, sl)
        if op.slot:  # an earlier fix may have dropped this edge (a freed sync): nothing left to shrink
            live = e.src[nodes, op.slot] >= 0
            nodes, cut = nodes[live], np.asarray(cut)[live]
        e.store("delay", (nodes, op.slot), np.maximum(e.delay[nodes, op.slot].astype(_I64) - cut, 0))
    elif op.kind == _SLOT_SCALE:
        now = e.delay[nodes, op.slot].astype(_I64)
        e.store("delay", (nodes, op.slot), np.where(now > 0, (now * op.factor).astype(_I64), now))
    elif op.kind == _REWIRE:
        e.writable("src")[nodes, op.slot] = np.asarray(_part(op.values, sl))
        e.store("delay", (nodes, op.slot), np.asarray(_part(op.delays, sl)))
    elif op.kind == _FREE:
        values = _part(op.values, sl)
        if op.waiting:
            live = e.src[nodes, 1] >= 0
            nodes, values = nodes[live], np.asarray(values)[live]
        e.writable("src")[nodes, 1] = -1
        e.store("delay", (nodes, 0), np.asarray(values))
    else:
        dur = e.dur[nodes].astype(_I64)  # int64 arithmetic whatever the model keeps them in
        if op.kind == _DUR_ZERO:
            dur[:] = 0
        elif op.kind == _DUR_DIV:
            scaled = dur / op.factor
            if len(scaled) and scaled.max() >= 2.0**62:  # a slow-down past int64 would wrap (bounds.FACTOR_MIN)
                raise bounds.BadValue(f"a factor of {op.factor:g} makes an op last {scaled.max():.3g} ns, "
                                      "past what int64 nanoseconds hold")
            dur = scaled.astype(_I64)
        elif op.kind == _DUR_MIN:
            dur = np.minimum(dur, np.asarray(_part(op.values, sl)))
        elif op.kind == _DUR_CUT:
            dur = np.maximum(dur - _part(op.values, sl), 0)
        else:
            raise ValueError(f"unknown plan step {op.kind!r}")
        e.store("dur", nodes, dur)


def _part(values: Any, sl: slice) -> Any:
    """A step's values for the nodes ``sl``: per node (sliced), or one value for all."""
    return values[sl] if isinstance(values, np.ndarray) and values.ndim else values


def apply(m: RankModel, e: Edges, fix: Lever, ctx: Context) -> None:
    """Transform ``e`` (in place) as ``fix`` says."""
    apply_plan(e, plan(m, fix, ctx))


# --- helpers ------------------------------------------------------------------------------------------

def _shrink_slot(m: RankModel, nodes: np.ndarray, slot: int, cut: np.ndarray) -> _Op:
    """Shrink ``slot``'s delay of ``nodes`` by ``cut``. Nodes with nothing to cut are left out, unless their
    recorded delay is negative (clock skew), which shrinking raises to 0 as it did before."""
    keep = (cut != 0) | (m.delay[nodes, slot] < 0)
    return _Op(_SHRINK, nodes[keep], cut[keep], slot)


def _shrink_host(m: RankModel, us: np.ndarray, ue: np.ndarray, frac: float) -> _Op | None:
    """Host time inside the union ``(us, ue)`` shrinks by ``frac`` (1: absent) on the host clock."""
    if len(us) == 0:
        return None
    nodes, cut = host_cut(m.time, m.src, m.delay, m.clock_edges(), us, ue, frac)
    if len(cut) and fits(cut, np.int32):  # the plan is kept through the rank's replays: int32 halves it
        cut = cut.astype(np.int32)  # (applied in int64 arithmetic, as any width is)
    return _Op(_SHRINK, nodes, cut, 0)


def _ops(*ops: _Op | None) -> Plan:
    return _plan(*(op for op in ops if op is not None))


# The gap classes a fix reads (gap_union): a unit keeps only these rows of its trace's gaps.
GAP_CLASSES_READ: tuple[str, ...] = tuple(c.name for c in causes.fixes() if c.fix_reads_gaps)


def reads_gaps(fix: Lever) -> bool:
    """Whether planning ``fix`` reads the classified gaps (``Context.gaps``): the others are planned and
    replayed before the rules have classified them (``whatif.predict_staged``)."""
    return isinstance(fix, HostSlowdown) or (isinstance(fix, Fix) and fix.cause in GAP_CLASSES_READ)


def gap_union(ctx: Context, m: RankModel, cls: str) -> tuple[np.ndarray, np.ndarray]:
    g = ctx.gaps
    if g.empty or "class" not in g.columns:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    g = g[(g["class"] == cls) & (g["rank"] == m.rank)]
    return intervals.union(g["start_ns"].to_numpy(_I64), g["end_ns"].to_numpy(_I64))


def _loading_rows(v: EventView, rows: np.ndarray) -> np.ndarray:
    """Bool per host row: data loading (``enumerate(DataLoader)#...``, input-work frames). Whether a row is
    data loading is a property of its name: one table per name, one lookup per row."""
    codes = v.name[rows]  # -1 (missing) indexes the trailing ''
    seen = np.zeros(len(v.names), dtype=bool)
    seen[codes] = True
    used = np.flatnonzero(seen)
    loading = v.name_flags["dataloader"].copy()
    loading[used] |= np.array([bool(INPUT_WORK.search(str(n))) for n in v.names[used]], dtype=bool)
    return np.asarray(loading[codes], dtype=bool)


def _launching_tids(m: RankModel, v: EventView) -> np.ndarray:
    rows = m.row[m.launch_point[m.launch_point >= 0]]
    rows = rows[rows >= 0]
    return np.unique(v.tid[rows]) if len(rows) else np.zeros(0, _I64)


def _host_ranges(v: EventView, rank: int, tids: np.ndarray, hit: np.ndarray, rows: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    sel = rows[hit]  # the hits first: the thread test then runs on a few rows, not on every host row
    keep = sel[np.isin(v.tid[sel], tids)]
    return intervals.union(v.start[keep].astype(_I64), v.end[keep].astype(_I64))


# --- the levers -----------------------------------------------------------------------------------------

def plan_data_starved(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """The host input work the data-starved rule found goes: the training thread's data loading (DataLoader
    ranges, input-work frames), the host time in gaps the rule judged host input work (the batch built on the
    training thread: its runtime calls stay), pageable batch copies made pinned and asynchronous, and the
    batch copies holding data-starved gaps prefetched (:func:`_prefetched_batch_copies`)."""
    v = ctx.view
    rows = v.rows(*rank_host(m.rank))
    loading = _loading_rows(v, rows)
    us, ue = _host_ranges(v, m.rank, _launching_tids(m, v), loading, rows) if loading.any() else \
        (np.zeros(0, _I64), np.zeros(0, _I64))
    hs, he = _host_input_time(m, ctx)
    if len(hs):
        us, ue = intervals.union(np.concatenate((us, hs)), np.concatenate((ue, he)))
    shrink = _shrink_host(m, us, ue, 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor)
    return _ops(shrink, *_pinned_batch_copies(m, ctx), *_prefetched_batch_copies(m, ctx))


def _loads_data(m: RankModel, ctx: Context) -> bool:
    """Whether the rank's training thread loads data (what loader workers would take over)."""
    v = ctx.view
    rows = v.rows(*rank_host(m.rank))
    return bool(_loading_rows(v, rows).any()) or bool(len(_host_input_time(m, ctx)[0]))


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
    side = c.set_index("row")
    kind = side["copy_kind"].astype(str).reindex(rows).to_numpy()
    src_kind = side["src_kind"].astype(str).reindex(rows).to_numpy()
    htod = kind == "HtoD"
    pinned = htod & (src_kind == "Pinned")
    if not pinned.any():
        return ()
    us, ue = gap_union(ctx, m, DATA_STARVED)
    start, end = m.time[nodes], m.time[nodes] + m.dur[nodes]
    slow = htod & (src_kind == "Pageable") & (intervals.overlap_with_union(start, end, us, ue) > 0)
    waits = np.isin(m.src[m.sync_end, 1], nodes[slow])
    return (_Op(_DUR_MIN, nodes[slow], int(np.median(m.dur[nodes[pinned]]))),
            _Op(_FREE, m.sync_end[waits], m.sync_wait_slot_delay[waits], waiting=True))


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
    copies still take the bus one after another (each waits for the one before it), so a run whose step is the
    bus's time stays at it."""
    memcpy = ctx.view.lane_codes.get(schema.LANE_MEMCPY, -99)
    c = ctx.copies
    nodes = m.op_nodes[m.lane == memcpy]
    if c is None or c.empty or not len(nodes):
        return ()
    side = c.set_index("row")
    htod = side["copy_kind"].astype(str).reindex(m.row[nodes]).to_numpy() == "HtoD"
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
    # The bus: each batch copy after the one before it (its free slot 2; slot 1 keeps its stream order)
    prev, cur = batch[:-1], batch[1:]
    free = m.src[cur, 2] < 0
    ops.append(_Op(_REWIRE, cur[free], prev[free].astype(m.src.dtype), 2, delays=np.zeros(int(free.sum()), _I64)))
    waits = np.isin(m.src[m.sync_end, 1], batch)
    ops.append(_Op(_FREE, m.sync_end[waits], m.sync_wait_slot_delay[waits], waiting=True))
    return tuple(ops)


def plan_launch_bound(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """CUDA graphs remove the dispatch between launches, and only that: the host time from one launch to the
    next on a thread (less ``whatif_graph_node_ns``) where launches follow each other densely (at most
    ``launch_max_ns_per_launch`` apart, the rule's dense dispatch), and elsewhere the part of it inside the
    framework's operators and runtime calls (operator overhead). Host time that is not dispatch stays: data
    loading (the data-starved fix's), driver work (one CUDA call longer than ``launch_call_max_ns``: lazy module
    loading, context set-up) and a long quiet stretch no operator covers. The classified gaps are not read (the
    fix is planned beside the rules): one-time work in warm-up steps is outside the steady median anyway."""
    us, ue = _dispatch_union(m, fix, ctx)
    ctx.between()
    frac = 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor
    graph = _graph_gaps(m, us, ue, ctx) if fix.factor is None else ()
    return _ops(_shrink_host(m, us, ue, frac), *graph)


def graph_launch_cost(m: RankModel, ctx: Context) -> tuple[int, str]:
    """What a graph launch adds before its first kernel (ns) and where it comes from: the median ``cudaGraphLaunch``
    call where the trace holds one, else ``whatif_graph_launch_ns``."""
    v = ctx.view
    calls = v.rows(*rank_calls(m.rank))
    graph = calls[_graph_launches(v, calls)] if len(calls) else calls
    if len(graph):
        return int(np.median((v.end[graph] - v.start[graph]).astype(_I64))), "trace"
    return int(ctx.cfg.whatif_graph_launch_ns), "constant"


def _graph_launches(v: EventView, calls: np.ndarray) -> np.ndarray:
    return np.asarray(v.map_names(calls, lambda names: np.array([bool(_GRAPH_LAUNCH.search(str(n))) for n in names],
                                                                dtype=bool)), dtype=bool)


def graph_kernel_gap(m: RankModel, ctx: Context) -> tuple[int, str]:
    """The gap between two kernels of one replayed CUDA graph (ns) and where it comes from: the median gap between
    consecutive kernels of one graph launch where the trace holds at least ``_GRAPH_GAPS_MIN`` of them, else
    ``whatif_graph_kernel_gap_ns`` (docs/whatif.md gives its source)."""
    v = ctx.view
    calls = v.rows(*rank_calls(m.rank))
    graph = calls[_graph_launches(v, calls)] if len(calls) else calls
    if len(graph):
        has = m.launch_point >= 0
        ops, lp = m.op_nodes[has], m.launch_point[has]
        launched = np.isin(m.row[lp], graph)
        ops, lp = ops[launched], lp[launched]
        order = np.lexsort((m.time[ops], lp))
        ops, lp = ops[order], lp[order]
        same = lp[1:] == lp[:-1]
        gaps = (m.time[ops[1:]] - (m.time[ops[:-1]] + m.dur[ops[:-1]]))[same]
        gaps = gaps[gaps >= 0]
        if len(gaps) >= _GRAPH_GAPS_MIN:
            return int(np.median(gaps)), "trace"
    return int(ctx.cfg.whatif_graph_kernel_gap_ns), "constant"


_GRAPH_GAPS_MIN = 16  # in-graph gaps the trace must hold for its own median to replace the constant
_GRAPH_LAUNCH = re.compile(r"(?i)(cuda|hip|cu)GraphLaunch")


def _graph_gaps(m: RankModel, us: np.ndarray, ue: np.ndarray, ctx: Context) -> tuple[_Op, ...]:
    """Kernels launched inside the dispatch CUDA graphs remove run as a graph runs them: each follows the kernel
    before it on its stream after the in-graph gap (:func:`graph_kernel_gap`), not the eager turnaround, and the
    first of each stretch (one graph) waits for the graph's launch (:func:`graph_launch_cost`)."""
    if not len(us):
        return ()
    has = m.launch_point >= 0
    ops, lp = m.op_nodes[has], m.launch_point[has]
    t = m.time[lp].astype(_I64)
    i = np.searchsorted(us, t, side="right") - 1
    inside = (i >= 0) & (t <= ue[np.maximum(i, 0)])  # a launch at a dispatch stretch's end is the graph's too
    # One graph a stretch of dispatch: the union's pieces a node's host cost apart (the holes the cut leaves between
    # consecutive launches) belong to one stretch
    bridge = 2 * int(ctx.cfg.whatif_graph_node_ns) + 1
    run = np.concatenate(([0], np.cumsum(us[1:] - ue[:-1] > bridge)))
    ops, lp, t, i = ops[inside], lp[inside], t[inside], run[i[inside]]
    order = np.lexsort((t, i))
    head = np.concatenate(([True], i[order][1:] != i[order][:-1])) if len(ops) else np.zeros(0, bool)
    first, first_lp = ops[order][head], lp[order][head]
    first = first[m.src[first, 0] == first_lp]  # the launch edge is still slot 0's
    ops = ops[m.src[ops, 1] >= 0]
    gap, _ = graph_kernel_gap(m, ctx)
    # Only the eager turnaround becomes the in-graph gap: a longer stream delay holds a wait the graph keeps
    turnaround = int(m.nominal.get("stream_turnaround_ns", 0))
    cut = np.maximum(np.minimum(m.delay[ops, 1].astype(_I64), turnaround) - gap, 0)
    keep = cut > 0
    launch, _ = graph_launch_cost(m, ctx)
    out = [_Op(_SHRINK, ops[keep], cut[keep], 1)] if keep.any() else []
    if len(first) and launch > 0:  # a negative cut lengthens the launch edge
        out.append(_Op(_SHRINK, first, np.full(len(first), -launch, _I64), 0))
    return tuple(out)


def _dispatch_union(m: RankModel, fix: Fix, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The host time a CUDA graph removes (:func:`plan_launch_bound`), as a sorted disjoint union."""
    v, cfg = ctx.view, ctx.cfg
    none = np.zeros(0, _I64), np.zeros(0, _I64)
    calls = v.rows(*rank_calls(m.rank))  # the model's own (cached)
    if len(calls) < 2:
        return none
    tid, start = v.tid[calls], v.start[calls]
    if not intervals.is_sorted(start):
        calls = calls[np.lexsort((start, tid))]
    elif np.min(tid) != np.max(tid):  # in time order already: a stable sort by thread (radix, on thread ranks)
        rank_of, _ = pd.factorize(tid, sort=True)
        calls = calls[np.argsort(rank_of.astype(np.uint16) if np.max(rank_of) < 2**16 else rank_of, kind="stable")]
    del tid, start  # the fix is planned beside the model and a replay's copies: what is done with goes first
    is_launch = v.flag("launch", calls)  # host_calls.LAUNCH, matched once per name
    pair = (v.tid[calls[1:]] == v.tid[calls[:-1]]) & is_launch[1:] & is_launch[:-1]
    tids = np.unique(v.tid[calls[is_launch]]) if is_launch.any() else np.zeros(0, _I64)
    # One CUDA call longer than launch_call_max_ns is driver work (lazy module load, context set-up), not dispatch
    long_call = (v.end[calls] - v.start[calls]).astype(_I64) > cfg.launch_call_max_ns
    ls, le = intervals.union(v.start[calls[long_call]].astype(_I64), v.end[calls[long_call]].astype(_I64))
    node_ns = cfg.whatif_graph_node_ns if fix.factor is None else 0
    a = v.start[calls[:-1][pair]].astype(_I64, copy=False) + node_ns
    b = v.start[calls[1:][pair]].astype(_I64, copy=False)
    del calls, is_launch, pair
    ok = b > a
    if not ok.all():
        a, b = a[ok], b[ok]
    del ok
    dense = (b - a) <= cfg.launch_max_ns_per_launch - node_ns
    ds, de = intervals.union_of_own(a[dense], b[dense])
    ss, se = intervals.union_of_own(a[~dense], b[~dense])
    del a, b, dense
    if len(ss):  # a long stretch between two launches: only the part inside operators and runtime calls
        os_, oe = _operator_union(m, v, tids)
        _, _, ss, se = intervals.intersect(ss, se, os_, oe)
        ds, de = intervals.union(np.concatenate((ds, ss)), np.concatenate((de, se)))
    # Not dispatch: data loading on the launching threads, long driver calls
    rows = v.rows(*rank_host(m.rank))
    loading = _loading_rows(v, rows)
    fs, fe = _host_ranges(v, m.rank, tids, loading, rows)
    xs, xe = intervals.union(np.concatenate((fs, ls)), np.concatenate((fe, le)))
    if len(xs) and len(ds):
        _, ds, de = intervals.complement_in_windows(xs, xe, ds, de)
    return ds, de


def _operator_union(m: RankModel, v: EventView, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host time inside framework operators and runtime/driver calls on the launching threads."""
    rows = v.rows((schema.LANE_CPU_THREAD,), (schema.CAT_CPU_OP, *API_CATS), m.rank)
    rows = rows[np.isin(v.tid[rows], tids)]
    return intervals.union(v.start[rows].astype(_I64), v.end[rows].astype(_I64))


def plan_sync_stall(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    us, ue = gap_union(ctx, m, SYNC_STALL)
    ends = m.sync_end
    if len(us) == 0 or len(ends) == 0:
        return Plan()
    starts = m.time[m.src[ends, 0]]
    inside = intervals.overlap_with_union(starts, m.time[ends], us, ue) > 0
    return _ops(_Op(_FREE, ends[inside], m.sync_wait_slot_delay[inside]))


def plan_comm_bound(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    nodes = m.op_nodes[m.lane == code]
    return _ops(_Op(_DUR_ZERO, nodes) if fix.factor is None else _Op(_DUR_DIV, nodes, factor=fix.factor))


def plan_one_time(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """The one-time work in one-time-cost gaps is absent: the host time there, and the wait of a GPU op for a
    launch that spent it (lazy module loading inside a first ``cudaLaunchKernel``), down to the nominal launch
    latency."""
    us, ue = gap_union(ctx, m, ONE_TIME_COST)
    return _ops(_shrink_host(m, us, ue, 1.0), _shrink_launch_waits(m, us, ue))


def _shrink_launch_waits(m: RankModel, us: np.ndarray, ue: np.ndarray) -> _Op | None:
    """Each op's launch edge (slot 0) shrinks by the part of its span, launch start to op start, inside the union,
    but not below the nominal launch latency: a launch that held the op for one-time work no longer does."""
    if not len(us):
        return None
    has = m.launch_point >= 0
    nodes, src = m.op_nodes[has], m.launch_point[has]
    ok = m.src[nodes, 0] == src  # the launch edge is still slot 0's (the model's own)
    nodes, src = nodes[ok], src[ok]
    over = intervals.overlap_with_union(m.time[src].astype(_I64), m.time[nodes].astype(_I64), us, ue)
    room = np.maximum(m.delay[nodes, 0].astype(_I64) - int(m.nominal.get("launch_latency_ns", 0)), 0)
    cut = np.minimum(over, room)
    keep = cut > 0
    return _Op(_SHRINK, nodes[keep], cut[keep], 0) if keep.any() else None


def plan_pipeline_bubble(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    factor = fix.factor if fix.factor is not None else ctx.cfg.whatif_bubble_factor
    frac = 1.0 - 1.0 / factor
    us, ue = gap_union(ctx, m, PIPELINE_BUBBLE)
    if len(us) == 0:
        return Plan()
    # Every wait inside the bubble (an edge's span, a p2p kernel's time, the host there) shrinks.
    ops = []
    for slot in range(3):
        nodes = np.flatnonzero(m.src[:, slot] >= 0)
        s = m.src[nodes, slot]
        a = m.time[s] + m.dur[s]
        b = m.time[nodes]
        ops.append(_shrink_slot(m, nodes, slot, (intervals.overlap_with_union(np.minimum(a, b), b, us, ue)
                                                 * frac).astype(_I64)))
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    comm = m.op_nodes[m.lane == code]
    cut = (intervals.overlap_with_union(m.time[comm], m.time[comm] + m.dur[comm], us, ue) * frac).astype(_I64)
    keep = (cut != 0) | (m.dur[comm] < 0)  # as for delays: nothing to cut, nothing changes
    ops.append(_Op(_DUR_CUT, comm[keep], cut[keep]))
    return _ops(*ops)


def memory_bound_ops(m: RankModel, v: EventView) -> np.ndarray:
    """Op nodes of memory-bound kernels (a kernel class that is neither compute-bound nor unknown)."""
    compute = v.lane_codes.get(schema.LANE_GPU_COMPUTE, -99)
    nodes = m.op_nodes[m.lane == compute]
    rows = m.row[nodes]
    graph = v.cat[rows] == v.cat_codes.get(schema.CAT_GRAPH, -99)

    def is_memory_bound(names: np.ndarray) -> np.ndarray:
        cls = np.asarray(kernel_classes.classify(np.asarray(names, dtype=object)))
        return ~kernel_classes.is_compute_bound_class(cls) & (cls != kernel_classes.CLS_OTHER)

    # Judged once per distinct name, then a flag per kernel (a class text per kernel, and the membership test
    # of millions of texts, would be the replay's peak on a large export)
    mem = v.map_names(rows, is_memory_bound) & ~graph
    return nodes[mem]


def plan_memory_bound(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    factor = fix.factor if fix.factor is not None else ctx.cfg.whatif_memory_factor
    return _ops(_Op(_DUR_DIV, memory_bound_ops(m, ctx.view), factor=factor))


def _scale(m: RankModel, fix: Scale, ctx: Context) -> Plan:
    v = ctx.view
    what = f"--scale {fix.pattern}"
    rx = bounds.user_pattern(fix.pattern, what, re.IGNORECASE)  # the API's Scale too

    def match(names: np.ndarray) -> np.ndarray:  # bounded: first 16 KiB of each name, a time budget
        return np.array(bounds.search_names(rx, names, what), dtype=bool)

    ops = m.op_nodes
    hit = v.map_names(m.row[ops], match) if len(ops) else np.zeros(0, bool)
    scaled = _Op(_DUR_DIV, ops[hit], factor=fix.factor)
    rows = v.rows(*rank_host(m.rank))
    if not len(rows):
        return _ops(scaled)
    hit_rows = v.map_names(rows, match)
    us, ue = intervals.union(v.start[rows[hit_rows]].astype(_I64), v.end[rows[hit_rows]].astype(_I64))
    return _ops(scaled, _shrink_host(m, us, ue, 1.0 - 1.0 / fix.factor))


__all__ = ["FIX_CAUSES", "Fix", "Scale", "HostSlowdown", "Lever", "Edges", "Context", "Plan", "Planner", "plan", "planner", "apply",
           "apply_plan", "gap_union", "memory_bound_ops", "OP_START", "GAP_CLASSES_READ", "reads_gaps", "plan_data_starved",
           "plan_launch_bound", "plan_sync_stall", "plan_comm_bound", "plan_one_time", "plan_pipeline_bubble",
           "plan_memory_bound"]
