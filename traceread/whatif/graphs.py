"""The launch-bound fix (``traceread.causes``' record names :func:`plan_launch_bound`): CUDA graphs remove the dispatch
between launches, and only that, and run the kernels as a graph does (docs/whatif.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import EventView
from traceread.rules.host_stall import quiet_stretches
from traceread.whatif.fixes import (
    _SHRINK,
    Context,
    Fix,
    Plan,
    _host_ranges,
    _loading_rows,
    _Op,
    _ops,
    _shrink_host,
)
from traceread.whatif.graph_constants import gap_constant, launch_constant
from traceread.whatif.model import RankModel, launches_recorded, rank_calls, rank_host

_I64 = np.int64


def plan_launch_bound(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """CUDA graphs remove the dispatch between launches, and only that: the host time from one launch to the
    next on a thread (less ``whatif_graph_node_ns``) where launches follow each other densely (at most
    ``launch_max_ns_per_launch`` apart, the rule's dense dispatch), and elsewhere the part of it inside the
    framework's operators and runtime calls (operator overhead). Host time that is not dispatch stays: data
    loading (the data-starved fix's), driver work (one CUDA call longer than ``launch_call_max_ns``: lazy module
    loading, context set-up) and a long quiet stretch no operator covers. The classified gaps are not read (the
    fix is planned beside the rules): one-time work in warm-up steps is outside the steady median anyway.
    Nothing is planned on a rank whose kernels' launches the trace mostly does not record
    (:func:`launches_recorded`)."""
    if not launches_recorded(m, ctx.cfg):
        return _ops()
    us, ue = dispatch_union(m, fix, ctx)
    ctx.between()
    frac = 1.0 if fix.factor is None else 1.0 - 1.0 / fix.factor
    graph = _graph_gaps(m, us, ue, ctx) if fix.factor is None else ()
    return _ops(_shrink_host(m, us, ue, frac), *graph)


def graph_launch_cost(m: RankModel, ctx: Context) -> tuple[int, str]:
    """What a graph launch adds before its first kernel (ns) and where it comes from, where the trace holds graph
    launches ("trace"): the median time from a launch call's start to its graph's first kernel, over the launches
    whose first kernel did not queue behind its stream (the GPU was ready for it). The call's own length is no
    latency: a ``hipGraphLaunch`` holds the host while it enqueues every node (1.6 ms for a graph of 544 kernels)
    and the first kernel starts long before it returns. Where every graph's first kernel queued (the trace shows
    no latency), the median launch call, the host's own cost of a launch ("trace"). Without graph launches: the
    GPU generation's sourced figure ("<generation> constant: <source>", :mod:`traceread.whatif.graph_constants`),
    else ``whatif_graph_launch_ns`` ("constant"; a value the user set comes first)."""
    return _launch_cost(m, ctx, _graph_launch_calls(ctx.view, m.rank))


def _launch_cost(m: RankModel, ctx: Context, graph: np.ndarray) -> tuple[int, str]:
    """:func:`graph_launch_cost` of the rank's graph launch calls ``graph``."""
    v = ctx.view
    if not len(graph):
        return launch_constant(ctx.cfg, ctx.devices)
    has = m.launch_point >= 0
    ops, lp = m.op_nodes[has], m.launch_point[has]
    mine = np.isin(m.row[lp], graph)
    ops, lp = ops[mine], lp[mine]
    if len(ops):
        order = np.lexsort((m.time[ops], lp))
        ops, lp = ops[order], lp[order]
        head = np.concatenate(([True], lp[1:] != lp[:-1]))
        first, at = ops[head], lp[head]  # each launch's first kernel
        prev = m.src[first, 1].astype(_I64)
        p = np.maximum(prev, 0)
        ready = (prev < 0) | (m.time[p] + m.dur[p] <= m.time[at])  # its stream was done by the launch
        latency = (m.time[first] - m.time[at]).astype(_I64)[ready]
        if len(latency):
            return int(np.median(np.maximum(latency, 0))), "trace"
    return int(np.median((v.end[graph] - v.start[graph]).astype(_I64))), "trace"


def _graph_launch_calls(v: EventView, rank: int) -> np.ndarray:
    """The rank's CUDA calls that launch a graph (in row order). Whether a call does is a property of its name:
    each name of the calls is matched once, and the calls are read again only where one matches."""
    calls = v.rows(*rank_calls(rank))
    codes = v.name[calls]  # -1 (missing) indexes the trailing ''
    seen = np.zeros(len(v.names), dtype=bool)
    seen[codes] = True
    used = np.flatnonzero(seen)
    hit = np.zeros(len(v.names), dtype=bool)
    hit[used] = np.array([bool(_GRAPH_LAUNCH.search(str(n))) for n in v.names[used]], dtype=bool)
    return calls[hit[codes]] if hit.any() else calls[:0]


def graph_kernel_gap(m: RankModel, ctx: Context) -> tuple[int, str]:
    """The gap between two kernels of one replayed CUDA graph (ns) and where it comes from: the median gap between
    consecutive kernels of one graph launch where the trace holds at least ``_GRAPH_GAPS_MIN`` of them ("trace"),
    else the GPU generation's sourced figure, else ``whatif_graph_kernel_gap_ns`` (as :func:`graph_launch_cost`;
    docs/whatif.md gives every source)."""
    return _kernel_gap(m, ctx, _graph_launch_calls(ctx.view, m.rank))


def _kernel_gap(m: RankModel, ctx: Context, graph: np.ndarray) -> tuple[int, str]:
    """:func:`graph_kernel_gap` of the rank's graph launch calls ``graph``."""
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
    return gap_constant(ctx.cfg, ctx.devices)


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
    t = m.time[lp].astype(_I64, copy=False)
    i = np.searchsorted(us, t, side="right") - 1
    inside = (i >= 0) & (t <= ue[np.maximum(i, 0)])  # a launch at a dispatch stretch's end is the graph's too
    # One graph a stretch of dispatch: the union's pieces a node's host cost apart (the holes the cut leaves between
    # consecutive launches) belong to one stretch
    bridge = 2 * int(ctx.cfg.whatif_graph_node_ns) + 1
    run = np.concatenate(([0], np.cumsum(us[1:] - ue[:-1] > bridge)))
    ops, lp, t, i = ops[inside], lp[inside], t[inside], run[i[inside]]
    order = np.lexsort((t, i))
    del t
    i = i[order]
    head = order[np.concatenate(([True], i[1:] != i[:-1]))] if len(ops) else order
    del i, order
    first, first_lp = ops[head], lp[head]
    first = first[m.src[first, 0] == first_lp]  # the launch edge is still slot 0's
    ops = ops[m.src[ops, 1] >= 0]
    graph = _graph_launch_calls(ctx.view, m.rank)  # (read by both figures)
    gap, _ = _kernel_gap(m, ctx, graph)
    # Only the eager turnaround becomes the in-graph gap: a longer stream delay holds a wait the graph keeps
    turnaround = int(m.nominal.get("stream_turnaround_ns", 0))
    cut = m.delay[ops, 1].astype(_I64)
    np.minimum(cut, turnaround, out=cut)
    cut -= gap
    np.maximum(cut, 0, out=cut)
    keep = cut > 0
    launch, _ = _launch_cost(m, ctx, graph)
    out = [_Op(_SHRINK, ops[keep], cut[keep], 1)] if keep.any() else []
    if len(first) and launch > 0:  # a negative cut lengthens the launch edge
        out.append(_Op(_SHRINK, first, np.full(len(first), -launch, _I64), 0))
    return tuple(out)


@dataclass(frozen=True)
class DispatchHost:
    """A rank's host side of the CUDA-graph plan (:func:`dispatch_union`), which no fix factor changes: made by the
    runner beside the model's build (:data:`DISPATCH_HOST`), else where the plan asks for it."""

    prev: np.ndarray  # per pair of consecutive launch calls on one thread: the first one's start
    next: np.ndarray  # and the second one's
    ops_start: np.ndarray  # operators and runtime calls on the launching threads (union; empty when no pair
    ops_end: np.ndarray  # is further apart than a dense dispatch, launch_max_ns_per_launch)
    not_start: np.ndarray  # host time that is not dispatch: data loading, driver work, the host's own work
    not_end: np.ndarray


# Context.taken's name of a rank's DispatchHost
DISPATCH_HOST = "dispatch-host"


def dispatch_union(m: RankModel, fix: Fix, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The host time a CUDA graph removes (:func:`plan_launch_bound`), as a sorted disjoint union."""
    cfg = ctx.cfg
    host = ctx.taken(DISPATCH_HOST, lambda: dispatch_host(ctx.view, m.rank, cfg))
    if host is None:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    node_ns = cfg.whatif_graph_node_ns if fix.factor is None else 0
    a = host.prev + node_ns
    b = host.next
    ok = b > a
    if not ok.all():
        a, b = a[ok], b[ok]
    del ok
    dense = (b - a) <= cfg.launch_max_ns_per_launch - node_ns
    ds, de = intervals.union_of_own(a[dense], b[dense])
    ss, se = intervals.union_of_own(a[~dense], b[~dense])
    del a, b, dense
    if len(ss):  # a long stretch between two launches: only the part inside operators and runtime calls
        # (the stretches are few, the operators many: each stretch searches the operators, not each operator the
        # stretches)
        _, _, ss, se = intervals.intersect(host.ops_start, host.ops_end, ss, se)
        ds, de = _union_runs([ds, ss], [de, se])
    # Not dispatch: data loading on the launching threads, long driver calls, the host's own work
    if len(host.not_start) and len(ds):
        _, ds, de = intervals.complement_in_windows(host.not_start, host.not_end, ds, de)
    return ds, de


def dispatch_host(v: EventView, rank: int, cfg: Thresholds) -> DispatchHost | None:
    """``rank``'s :class:`DispatchHost` in the view ``v`` (None: fewer than two CUDA calls)."""
    calls = v.rows(*rank_calls(rank))  # the model's own (cached)
    if len(calls) < 2:
        return None
    calls, tid, start = _by_thread(v, calls)
    end = v.end[calls]
    codes = v.name[calls]
    is_launch = v.name_flags["launch"][codes]  # host_calls.LAUNCH, matched once per name
    pair = (tid[1:] == tid[:-1]) & is_launch[1:] & is_launch[:-1]
    launch_tid = tid[is_launch]  # (sorted: the calls are by thread)
    tids = launch_tid[np.concatenate(([True], launch_tid[1:] != launch_tid[:-1]))] if len(launch_tid) else \
        np.zeros(0, _I64)
    # One CUDA call longer than launch_call_max_ns is driver work (lazy module load, context set-up), not dispatch
    long_call = np.subtract(end, start, dtype=_I64) > cfg.launch_call_max_ns
    ls, le = intervals.union(start[long_call], end[long_call])
    prev = start[:-1][pair].astype(_I64, copy=False)
    nxt = start[1:][pair].astype(_I64, copy=False)
    del launch_tid, long_call, pair
    # Each launching thread's calls: a run of the sorted calls, in start order; its launches and syncs among them
    lo, hi = np.searchsorted(tid, tids, side="left"), np.searchsorted(tid, tids, side="right")
    point = is_launch | v.name_flags["sync"][codes]
    del tid, codes, is_launch  # the fix is planned beside the model and a replay's copies: what is done with goes first
    threads = [_ThreadCalls(start[a:b], end[a:b], start[a:b][point[a:b]])
               for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
    del calls, start, end, point
    rows = v.rows(*rank_host(rank))
    row_tid, names, cats = v.tid[rows], v.name[rows], v.cat[rows]
    loading = _loading_rows(v, rows, names)
    fs, fe = _host_ranges(v, rank, tids, loading, rows) if loading.any() else (np.zeros(0, _I64), np.zeros(0, _I64))
    del loading
    # The operators' union is read where a pair of launches is further apart than a dense dispatch (whether a stretch
    # is dense reads no factor: (next - (prev + node)) <= max - node is next - prev <= max)
    sparse = bool(((nxt - prev) > cfg.launch_max_ns_per_launch).any())
    frame = _frames(v, cats, names)
    op = cats == v.cat_codes.get(schema.CAT_CPU_OP, -99) if sparse else None
    del names, cats
    # Each launching thread's host frames, and its operators where the union is read (in row order: a thread's rows
    # are in start order, nearly)
    frames, ops = [], []
    for t in tids.tolist():  # launching threads are few
        mine = row_tid == t
        frames.append(rows[frame & mine])
        if op is not None:
            ops.append(rows[op & mine])
    del row_tid, frame, op
    os_, oe = _operator_union(v, ops, threads) if sparse else (np.zeros(0, _I64), np.zeros(0, _I64))
    del ops
    ws, we = _host_work(v, cfg, frames, threads)
    del frames
    xs, xe = intervals.union(np.concatenate((fs, ls, *ws)), np.concatenate((fe, le, *we)))
    return DispatchHost(prev, nxt, os_, oe, xs, xe)


@dataclass(frozen=True)
class _ThreadCalls:
    """One launching thread's CUDA calls in start order: their starts and ends, and the starts of its launches and
    syncs."""

    start: np.ndarray
    end: np.ndarray
    points: np.ndarray


def _by_thread(v: EventView, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``calls`` sorted by thread, then start (stable), with their threads and starts."""
    tid, start = v.tid[calls], v.start[calls]
    if not intervals.is_sorted(start):
        order = np.lexsort((start, tid))
    elif np.min(tid) != np.max(tid):  # in time order already: a stable sort by thread (radix, on thread ranks)
        rank_of, _ = pd.factorize(tid, sort=True)
        order = np.argsort(rank_of.astype(np.uint16) if np.max(rank_of) < 2**16 else rank_of, kind="stable")
    else:
        return calls, tid, start
    return calls[order], tid[order], start[order]


def _frames(v: EventView, cats: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Bool per host row of categories ``cats`` and name codes ``names``: a host frame (``_FRAME_CATS``), not a
    step or data-loader marker (they hold everything)."""
    wanted = np.zeros(len(v.cat_codes) + 1, dtype=bool)  # (as EventView.in_cats: the last entry answers for -1)
    wanted[[v.cat_codes[c] for c in _FRAME_CATS if c in v.cat_codes]] = True
    frame = wanted[cats]
    marker = v.name_flags["dataloader"] | (v.step_number >= 0)  # per name code: a loader or step marker
    frame &= ~marker[names]
    return frame


def _host_work(v: EventView, cfg: Thresholds, frames: list[np.ndarray], threads: list[_ThreadCalls]
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The host's own work on the launching threads, which CUDA graphs do not remove, as pieces (their union is it),
    from per thread its host frames (rows, in row order; :func:`_frames`) and its calls: every stretch of at least
    ``host_stall_min_ns`` inside an operator with no host frame or CUDA call beginning or ending inside (compiling,
    recording, computing on the host: dispatch records a child every few microseconds), and every host frame
    longer than ``launch_max_ns_per_launch`` (one op's eager dispatch) with no launch or sync call starting inside
    it (logging, metrics, host math). The step and data-loader markers hold everything and count as neither."""
    op_cat = v.cat_codes.get(schema.CAT_CPU_OP, -99)
    out_s, out_e = [np.zeros(0, _I64)], [np.zeros(0, _I64)]
    for h, c in zip(frames, threads, strict=True):  # launching threads are few
        hs, he = v.start[h].astype(_I64, copy=False), v.end[h].astype(_I64, copy=False)
        # child-free stretches inside an operator: consecutive boundaries of the thread's frames and calls far apart
        # (found as the rule finds them; one before the thread's first frame lies in no operator; the calls in start
        # order, which it searches by the windows' ends)
        order = None if intervals.is_sorted(hs) else np.argsort(hs, kind="stable")
        qs, qe = quiet_stretches(hs if order is None else hs[order], he if order is None else he[order],
                                 c.start.astype(_I64, copy=False), c.end.astype(_I64, copy=False),
                                 cfg.host_stall_min_ns)
        if len(qs):  # its middle inside an operator (the thread's in start order: one compiled pass)
            by_start = h if order is None else h[order]
            mid = qs + (qe - qs) // 2
            inside = intervals.rows_covered(v.start, v.end, by_start[v.cat[by_start] == op_cat], mid, mid + 1) > 0
            qs, qe = qs[inside], qe[inside]
        out_s.append(qs)
        out_e.append(qe)
        # launch-free frames longer than one op's dispatch (the launches and syncs in start order)
        long = (he - hs) > cfg.launch_max_ns_per_launch
        fs, fe = hs[long], he[long]
        p = c.points.astype(_I64, copy=False)
        j = np.searchsorted(p, fs, side="left")
        free = (j == len(p)) | (p[np.minimum(j, max(len(p) - 1, 0))] >= fe) if len(p) else np.ones(len(fs), bool)
        out_s.append(fs[free])
        out_e.append(fe[free])
    return out_s, out_e


# The categories of host frames: Python frames, CPU operators, user ranges (not runtime calls)
_FRAME_CATS = (schema.CAT_PYTHON, schema.CAT_CPU_OP, schema.CAT_USER_ANNOTATION)


def _operator_union(v: EventView, ops: list[np.ndarray], threads: list[_ThreadCalls]) -> tuple[np.ndarray, np.ndarray]:
    """Host time inside framework operators and runtime/driver calls on the launching threads: the union of each
    one's CPU operators (``ops``: its rows of that category, in row order, which is nearly its start order) and
    its calls (``threads``)."""
    cpu = v.lane_codes.get(schema.LANE_CPU_THREAD, -99)
    starts, ends = [], []
    for rows, c in zip(ops, threads, strict=True):
        rows = rows[v.lane[rows] == cpu]
        us, ue = intervals.rows_union(v.start, v.end, rows)  # (sorted by start: one compiled pass, else a sort)
        starts += [us, c.start.astype(_I64, copy=False)]
        ends += [ue, c.end.astype(_I64, copy=False)]
    return _union_runs(starts, ends)


def _union_runs(starts: list[np.ndarray], ends: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``intervals.union`` of the pieces ``(starts[i], ends[i])`` (int64), each nearly sorted by start and by end
    (a union, or a thread's calls in start order). The union's holes are where as many intervals have ended as
    have started: with the starts and the ends each sorted on their own (a few sorted runs, which a stable sort
    merges; no order of the intervals to carry), from the k-th end to the (k+1)-th start where that start lies
    beyond it (the k intervals ending first all start before their ends)."""
    s, e = np.concatenate(starts), np.concatenate(ends)
    keep = e > s  # zero-length intervals cover no time
    if not keep.all():
        s, e = s[keep], e[keep]
    del keep
    if not len(s):
        return s, e
    s.sort(kind="stable")
    e.sort(kind="stable")
    new = np.empty(len(s), dtype=bool)
    new[:1] = True
    np.greater(s[1:], e[:-1], out=new[1:])
    first = np.flatnonzero(new)
    del new
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], e[last]


__all__ = ["plan_launch_bound", "graph_kernel_gap", "graph_launch_cost", "dispatch_union", "dispatch_host", "DispatchHost",
           "DISPATCH_HOST"]
