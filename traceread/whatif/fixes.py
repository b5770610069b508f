"""Fixes as transformations of a rank's dependency model, one per lever of the report.

(The data-starved and launch-bound planners live in :mod:`traceread.whatif.loading` and
:mod:`traceread.whatif.graphs`, the sync-stall and comm-bound ones in :mod:`traceread.whatif.waits`.) Each lever reads the recorded times once and returns a :class:`Plan`: the durations, delays and edges
it changes, on the nodes it touches; :func:`apply_plan` applies it to a replay's :class:`Edges` (the
model's arrays, each copied on its first write), and the sweep moves everything downstream. A plan is
made once per rank and fix and serves the fix's own replay and the "all" replay alike. What each assumes (docs/whatif.md):

* ``data-starved``: the training thread's data loading (``enumerate(DataLoader)#...`` ranges on the threads
  that launch GPU work) and the host time of gaps the rule judged host input work take no host time; pageable batch copies cost what pinned ones do; the batch copies holding gaps are
  prefetched (nothing waits for them, but they take the bus as they did in the trace);
* ``launch-bound``: the work is captured in CUDA graphs: the dispatch between one kernel launch and the
  next on the same thread (dense launches; elsewhere the time inside operators and runtime calls) shrinks to
  ``whatif_graph_node_ns``; data loading and driver work (one CUDA call over ``launch_call_max_ns``) stay;
* ``sync-stall``: the host syncs inside sync-stall gaps return without waiting (their own cost), and a graph
  break's host re-entry goes with them;
* ``comm-bound``: communication fully overlapped (nothing waits on it, each collective keeps its length), or
  ``factor``x faster;
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
from traceread.engine.lanes import EventView
from traceread.host_calls import INPUT_WORK
from traceread.vocabulary import ONE_TIME_COST, PIPELINE_BUBBLE
from traceread.whatif.model import OP_START, RankModel, rank_host
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


@dataclass(frozen=True)
class Bus:
    """Issue 42's bus-bound batch: the host-to-device copies inside data-starved gaps of evidence kind ``bus-bound``
    carry ``factor`` x fewer bytes (a smaller dtype, cropping or decoding on the GPU), so each crosses the link
    ``factor`` x faster; everything else, their order on the stream included, stays. Hiding the copies behind
    compute instead (a side stream, a batch ahead) is the data-starved fix's prefetch."""

    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", bounds.factor(self.factor, "factor of the bus-bound copies"))

    def label(self) -> str:
        return f"{BUS_BOUND}={self.factor:g}"


@dataclass(frozen=True)
class CommFree:
    """A rank's own step for the job's straggler lever (``WhatIf.own_steps``): nothing waits for communication and
    each collective's exposed part (no other GPU op of its device running: a wait for the other ranks) takes no
    time. Not a user's fix: ``comm-bound`` keeps each collective's length (the transfer still runs)."""

    def label(self) -> str:
        return "comm-free"


Lever = Fix | Scale | HostSlowdown | Bus | CommFree
# The bus lever's name on the command line and in its row (``--fix bus-bound=F``): the data-starved rule's evidence
# kind for the gaps it acts on (traceread.rules.data_starved.BUS_BOUND)
BUS_BOUND = "bus-bound"


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
    devices: tuple[str, ...] = ()  # the rank's GPU names (graph_constants: the CUDA-graph model's generation)
    # What several plans of this rank's model read, made by the first that asks (Context.shared); one per model
    parts: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # Pieces made ahead (name -> a function giving the piece: the runner makes it on a thread beside the build)
    ahead: dict[str, Callable[[], Any]] = field(default_factory=dict, compare=False, repr=False)

    def shared(self, name: str, make: Callable[[], Any]) -> Any:
        """``make()``, made once for this rank's model under ``name``: a piece two plans read alike (the
        collectives' exposed time, for the comm-bound fix and the rank's own step)."""
        if name not in self.parts:
            self.parts[name] = make()
        return self.parts[name]

    def taken(self, name: str, make: Callable[[], Any]) -> Any:
        """The piece made ahead under ``name``, taken (not kept: a second ask makes it again), else ``make()``:
        a piece one plan reads that needs only the rank's events (the CUDA-graph plan's host side)."""
        return self.ahead.pop(name, make)()

    def settled(self) -> None:
        """Every piece made ahead and not asked for is waited for and dropped (its thread ends here)."""
        while self.ahead:
            self.ahead.popitem()[1]()


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
    if isinstance(fix, Bus):
        from traceread.whatif.loading import plan_bus_bytes  # (that module imports this one)

        return plan_bus_bytes(m, fix, ctx)
    if isinstance(fix, CommFree):
        from traceread.whatif.waits import plan_comm_free  # (that module imports this one)

        return plan_comm_free(m, ctx)
    if isinstance(fix, HostSlowdown):
        clock = m.clock_edges()
        from traceread.whatif.loading import loads_data  # the data fix's module imports this one

        if not len(clock) or fix.share <= 0 or not loads_data(m, ctx):
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
        delay = e.delay[nodes, op.slot].astype(_I64)
        delay -= cut
        e.store("delay", (nodes, op.slot), np.maximum(delay, 0, out=delay))
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
    return isinstance(fix, HostSlowdown | Bus) or (isinstance(fix, Fix) and fix.cause in GAP_CLASSES_READ)


def gap_union(ctx: Context, m: RankModel, cls: str) -> tuple[np.ndarray, np.ndarray]:
    g = ctx.gaps
    if g.empty or "class" not in g.columns:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    g = g[(g["class"] == cls) & (g["rank"] == m.rank)]
    return intervals.union(g["start_ns"].to_numpy(_I64), g["end_ns"].to_numpy(_I64))


def _loading_rows(v: EventView, rows: np.ndarray, codes: np.ndarray | None = None) -> np.ndarray:
    """Bool per host row: data loading (``enumerate(DataLoader)#...``, input-work frames). Whether a row is
    data loading is a property of its name: one table per name, one lookup per row. ``codes``: the rows' name
    codes, when the caller has them."""
    codes = v.name[rows] if codes is None else codes  # -1 (missing) indexes the trailing ''
    if len(v.names) <= len(codes) >> 10:  # few names for many rows: every name matched, no pass to find the rows'
        used = np.arange(len(v.names))
    else:
        seen = np.zeros(len(v.names), dtype=bool)
        seen[codes] = True
        used = np.flatnonzero(seen)
    loading = v.name_flags["dataloader"].copy()
    loading[used] |= np.array([bool(INPUT_WORK.search(str(n))) for n in v.names[used]], dtype=bool)
    if not loading[used].any():  # no row's name is data loading: no lookup per row
        return np.zeros(len(codes), dtype=bool)
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

def plan_one_time(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """The one-time work in one-time-cost gaps is absent: the host time there, and the wait of a GPU op for a
    launch that spent it (lazy module loading inside a first ``cudaLaunchKernel``), down to the nominal launch
    latency."""
    us, ue = gap_union(ctx, m, ONE_TIME_COST)
    return _ops(_shrink_host(m, us, ue, 1.0), *_shrink_launch_waits(m, us, ue))


def _shrink_launch_waits(m: RankModel, us: np.ndarray, ue: np.ndarray) -> list[_Op | None]:
    """Each op's launch edge (slot 0) shrinks by the part of its span, launch start to op start, inside the union,
    but not below the nominal launch latency: a launch that held the op for one-time work no longer does. The
    model's launch edge leaves the launch call's start, so a launch that loaded its module while its stream was
    still busy held the op through the edge that bound in the calibration, its stream's or another stream's (the
    measured delay past that op's end): those edges of the same ops shrink alike, to the nominal turnaround."""
    if not len(us):
        return []
    has = m.launch_point >= 0
    nodes, src = m.op_nodes[has], m.launch_point[has]
    ok = m.src[nodes, 0] == src  # the launch edge is still slot 0's (the model's own)
    nodes, src = nodes[ok], src[ok]
    over = _overlap(m.time[src].astype(_I64, copy=False), m.time[nodes].astype(_I64, copy=False), us, ue)
    hit = np.flatnonzero(over > 0)  # (nothing to cut elsewhere)
    held = nodes[hit]  # launched before or inside one-time work and started after it
    room = np.maximum(m.delay[held, 0].astype(_I64) - int(m.nominal.get("launch_latency_ns", 0)), 0)
    cut = np.minimum(over[hit], room)
    keep = cut > 0
    out: list[_Op | None] = [_Op(_SHRINK, held[keep], cut[keep], 0) if keep.any() else None]
    turn = int(m.nominal.get("stream_turnaround_ns", 0))
    for slot in (1, 2):
        n = held[m.src[held, slot] >= 0]
        s = m.src[n, slot]
        done = (m.time[s] + m.dur[s]).astype(_I64)
        start = m.time[n].astype(_I64)
        cut = np.minimum(intervals.overlap_with_union(np.minimum(done, start), start, us, ue),
                         np.maximum(m.delay[n, slot].astype(_I64) - turn, 0))
        keep = cut > 0
        out.append(_Op(_SHRINK, n[keep], cut[keep], slot) if keep.any() else None)
    return out


def _overlap(qs: np.ndarray, qe: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """``intervals.overlap_with_union(qs, qe, us, ue)``, measured only for the queries the union meets (a few
    stretches of one-time work against every launch): the first member ending after a query's start must start
    before its end. A query ending before it starts (clock skew) measures a negative length: it is measured too."""
    out = np.zeros(len(qs), dtype=_I64)
    if not len(us) or not len(qs):
        return out
    j = np.minimum(np.searchsorted(ue, qs, side="right"), len(us) - 1)
    meet = np.flatnonzero(((ue[j] > qs) & (us[j] < qe)) | (qe < qs))
    del j
    out[meet] = intervals.overlap_with_union(qs[meet], qe[meet], us, ue)
    return out


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


__all__ = ["FIX_CAUSES", "Fix", "Scale", "HostSlowdown", "Bus", "BUS_BOUND", "CommFree", "Lever", "Edges", "Context", "Plan", "Planner", "plan", "planner", "apply",
           "apply_plan", "gap_union", "memory_bound_ops", "OP_START", "GAP_CLASSES_READ", "reads_gaps", "plan_one_time", "plan_pipeline_bubble",
           "plan_memory_bound"]
