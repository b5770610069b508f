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
    """Communication fully overlapped: nothing waits for it. A collective's exposed part (no other GPU op of its
    device running) goes, its overlapped part stays on the communication stream; a GPU op that waited for one on
    another stream no longer does; a host sync that waited for one waits for the other GPU work still running when
    it began (the op of another lane that ended last before it returned), else returns at its own cost (a shorter
    collective alone would still hold the host until it ends). ``comm-bound=F``: the kernels F x faster, every
    wait kept."""
    code = ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    is_comm = m.lane == code
    nodes = m.op_nodes[is_comm]
    if fix.factor is not None:
        return _ops(_Op(_DUR_DIV, nodes, factor=fix.factor))
    if not len(nodes):
        return Plan()
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
    # The exposed part of each collective (no other GPU op of its device running) goes; the part overlapped with
    # compute stays and still holds the communication stream
    exposed = np.zeros(len(nodes), _I64)
    cs, ce = m.time[nodes].astype(_I64), (m.time[nodes] + m.dur[nodes]).astype(_I64)
    c_dev, o_dev = m.device[is_comm], m.device[~is_comm]
    o_nodes = m.op_nodes[~is_comm]
    for dev in np.unique(c_dev).tolist():  # devices of a rank are few
        at, of = c_dev == dev, o_nodes[o_dev == dev]
        us, ue = intervals.union(m.time[of].astype(_I64), (m.time[of] + m.dur[of]).astype(_I64))
        exposed[at] = (ce[at] - cs[at]) - intervals.overlap_with_union(cs[at], ce[at], us, ue)
    keep = exposed > 0
    return _ops(_Op(_DUR_CUT, nodes[keep], exposed[keep]),
                _Op(_REWIRE, waits, np.full(len(waits), -1, _I64), slot=2, delays=np.zeros(len(waits), _I64)),
                _Op(_REWIRE, rewire, other[k[still]].astype(_I64), slot=1, delays=back),
                _Op(_FREE, m.sync_end[free], m.sync_wait_slot_delay[free]))


__all__ = ["plan_sync_stall", "plan_comm_bound"]
