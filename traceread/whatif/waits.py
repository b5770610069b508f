"""The levers that take waits out (``traceread.causes``' records name them): ``sync-stall`` (the syncs in its gaps,
and the host re-entry a graph break forces) and ``comm-bound`` (nothing waits for communication). docs/whatif.md
says what each assumes."""

from __future__ import annotations

import numpy as np

from traceread import intervals, schema
from traceread.engine.lanes import EventView
from traceread.host_calls import GRAPH_LAUNCH, KERNEL_LAUNCH
from traceread.vocabulary import SYNC_STALL
from traceread.whatif.fixes import (
    _DUR_CUT,
    _DUR_DIV,
    _FREE,
    _REWIRE,
    Context,
    Fix,
    Plan,
    _Op,
    _ops,
    _shrink_host,
    gap_union,
)
from traceread.whatif.model import RankModel, rank_calls

_I64 = np.int64


def plan_sync_stall(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """The syncs inside sync-stall gaps return without waiting (their own cost); where such a sync split two
    captured regions (a graph break: ``.item()`` between two CUDA-graph replays), the host's re-entry the break
    forced goes too: the host time from the sync's return to the end of the next graph launch (eager Python, the
    next region's lookup and guards, its launch), as one region replaying both graphs would not spend it."""
    us, ue = gap_union(ctx, m, SYNC_STALL)
    ends = m.sync_end
    if len(us) == 0 or len(ends) == 0:
        return Plan()
    starts = m.time[m.src[ends, 0]]
    inside = intervals.overlap_with_union(starts, m.time[ends], us, ue) > 0
    bs, be = _graph_breaks(m, ends[inside], ctx.view)
    return _ops(_Op(_FREE, ends[inside], m.sync_wait_slot_delay[inside]), _shrink_host(m, bs, be, 1.0))


def _graph_breaks(m: RankModel, ends: np.ndarray, v: EventView) -> tuple[np.ndarray, np.ndarray]:
    """Per sync (its end node in ``ends``) whose thread's last kernel or graph launch before it and first after it
    are both graph launches: the host stretch from its return to that next launch's end, as a union."""
    none = np.zeros(0, _I64), np.zeros(0, _I64)
    rows = m.row[ends]
    rows = rows[rows >= 0]
    if not len(rows):
        return none
    calls = v.rows(*rank_calls(m.rank))
    graph = v.map_names(calls, lambda n: np.array([bool(GRAPH_LAUNCH.match(str(x))) for x in n], dtype=bool))
    if not graph.any():
        return none
    kernel = v.map_names(calls, lambda n: np.array([bool(KERNEL_LAUNCH.match(str(x))) for x in n], dtype=bool))
    launches, graph = calls[graph | kernel], graph[graph | kernel]
    out_s, out_e = [], []
    for tid in np.unique(v.tid[rows]).tolist():  # threads are few
        mine = v.tid[launches] == tid
        ls, le, lg = v.start[launches[mine]].astype(_I64), v.end[launches[mine]].astype(_I64), graph[mine]
        order = np.argsort(ls, kind="stable")
        ls, le, lg = ls[order], le[order], lg[order]
        sr = rows[v.tid[rows] == tid]
        s0, s1 = v.start[sr].astype(_I64), v.end[sr].astype(_I64)
        before = np.searchsorted(ls, s0, side="left") - 1
        after = np.searchsorted(ls, s1, side="left")
        ok = (before >= 0) & (after < len(ls))
        ok[ok] &= lg[before[ok]] & lg[after[ok]]
        out_s.append(s1[ok])
        out_e.append(le[after[ok]])
    if not out_s:
        return none
    return intervals.union(np.concatenate(out_s), np.concatenate(out_e))


def plan_comm_bound(m: RankModel, fix: Fix, ctx: Context) -> Plan:
    """Communication fully overlapped: nothing waits for it, and each collective keeps its length (the transfer
    still runs). A GPU op that waited for one on another stream no longer does; a host sync that waited for one
    waits for the other GPU work still running when it began (the op of another lane that ended last before it
    returned), else returns at its own cost. A collective that started when an op of another stream let it (its
    trigger: a gradient bucket ready) and that the device's other work did not cover (exposed: the rank waited
    for the other ranks to reach it) keeps its length from that trigger: its end is the other ranks' arrival,
    which moves with the job's compute as every rank makes the fix, not with the queue of its own stream, so it
    does not queue behind the collective before it (one queued there in the trace still does).
    ``comm-bound=F``: the kernels F x faster, every wait kept."""
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    is_comm = m.lane == code
    nodes = m.op_nodes[is_comm]
    if fix.factor is not None:
        return _ops(_Op(_DUR_DIV, nodes, factor=fix.factor))
    if not len(nodes):
        return Plan()
    exposed = ctx.shared("comm_exposed", lambda: _exposed(m, is_comm))
    triggered = (exposed > 0) & _binds(m, nodes, 2) & ~_binds(m, nodes, 1)
    lone = nodes[triggered]
    return _ops(_Op(_REWIRE, lone, np.full(len(lone), -1, _I64), slot=1, delays=np.zeros(len(lone), _I64)),
                *ctx.shared("comm_unwaited", lambda: _unwaited(m, is_comm)))


def plan_comm_free(m: RankModel, ctx: Context) -> Plan:
    """A rank's own step (:class:`~traceread.whatif.fixes.CommFree`): nothing waits for communication (as
    :func:`plan_comm_bound`) and each collective's exposed part (no other GPU op of its device running) goes, its
    overlapped part staying on the communication stream."""
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    is_comm = m.lane == code
    nodes = m.op_nodes[is_comm]
    if not len(nodes):
        return Plan()
    exposed = ctx.shared("comm_exposed", lambda: _exposed(m, is_comm))
    keep = exposed > 0
    return _ops(_Op(_DUR_CUT, nodes[keep], exposed[keep]), *ctx.shared("comm_unwaited", lambda: _unwaited(m, is_comm)))


def _binds(m: RankModel, nodes: np.ndarray, slot: int) -> np.ndarray:
    """Per node: its ``slot`` edge reaches its recorded start (the edge that held it in the trace)."""
    s = m.src[nodes, slot]
    at = np.maximum(s, 0)
    return (s >= 0) & (m.time[at].astype(_I64) + m.dur[at] + m.delay[nodes, slot] >= m.time[nodes])


def _exposed(m: RankModel, is_comm: np.ndarray) -> np.ndarray:
    """Per communication op (``m.op_nodes[is_comm]``): its time with no other GPU op of its device running, ns."""
    nodes = m.op_nodes[is_comm]
    exposed = np.zeros(len(nodes), _I64)
    cs, ce = m.time[nodes].astype(_I64), (m.time[nodes] + m.dur[nodes]).astype(_I64)
    c_dev, o_dev = m.device[is_comm], m.device[~is_comm]
    o_nodes = m.op_nodes[~is_comm]
    for dev in np.unique(c_dev).tolist():  # devices of a rank are few
        at, of = c_dev == dev, o_nodes[o_dev == dev]
        us, ue = intervals.union(m.time[of].astype(_I64), (m.time[of] + m.dur[of]).astype(_I64))
        exposed[at] = (ce[at] - cs[at]) - intervals.overlap_with_union(cs[at], ce[at], us, ue)
    return exposed


def _unwaited(m: RankModel, is_comm: np.ndarray) -> tuple[_Op, _Op, _Op]:
    """Nothing waits for communication: the other streams' waits for it go, and a host sync that waited for it
    waits for the other GPU work still running when it began, else returns at its own cost (a shorter collective
    alone would still hold the host until it ends)."""
    nodes = m.op_nodes[is_comm]
    comm = np.zeros(len(m.time), dtype=bool)
    comm[nodes] = True
    waits = np.flatnonzero((m.src[:, 2] >= 0) & comm[np.maximum(m.src[:, 2], 0)])
    waits = waits[~comm[waits]]  # (a collective queued behind another on its own stream takes no time anyway)
    hit = np.flatnonzero((m.src[m.sync_end, 1] >= 0) & comm[np.maximum(m.src[m.sync_end, 1], 0)])
    ends = m.sync_end[hit]
    other = m.op_nodes[~is_comm]
    o_end = (m.time[other] + m.dur[other]).astype(_I64)
    order = np.argsort(o_end, kind="stable")
    other, o_end = other[order], o_end[order]
    k = np.searchsorted(o_end, m.time[ends].astype(_I64), side="right") - 1  # the other op that ended last before
    began = m.time[m.src[ends, 0]].astype(_I64)
    still = (k >= 0) & (o_end[np.maximum(k, 0)] > began)
    free = hit[~still]  # (positions in sync_end)
    rewire = ends[still]
    back = np.full(len(rewire), int(m.nominal.get("sync_return_ns", 0)), _I64)
    return (_Op(_REWIRE, waits, np.full(len(waits), -1, _I64), slot=2, delays=np.zeros(len(waits), _I64)),
            _Op(_REWIRE, rewire, other[k[still]].astype(_I64), slot=1, delays=back),
            _Op(_FREE, m.sync_end[free], m.sync_wait_slot_delay[free]))


__all__ = ["plan_sync_stall", "plan_comm_bound", "plan_comm_free"]
