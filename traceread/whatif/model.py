"""The dependency model of one rank's trace: nodes in causal order, each with up to three incoming edges.

A *node* is a host time point (the start or end of a CUDA runtime/driver call, a step boundary) or
the start of a GPU op (kernel, copy, memset). Nodes are sorted by recorded time (ends before starts
at equal times, host points before GPU starts), which is a topological order: every edge points from
an earlier node to a later one. A node's replayed time is the latest ``end of source + delay`` over
its edges (:mod:`traceread.whatif.sweep`); a GPU op's end is its start plus its duration.

Edges, by slot:

* host point: slot 0 is the previous host point of the rank (the *host clock*: the measured time
  between two host points is kept as host "think time", so Python overhead and data loading are in
  the model as measured). A host synchronization's end instead has slot 0 = its own start (the
  call's cost when it does not wait) and slot 1 = the GPU op it waited for (the return latency).
* GPU op: slot 0 = its launch call's start (launch latency, by correlation), slot 1 = the previous
  op on its stream, slot 2 = an op on another stream of the device it waited for (inferred, below).

Delays are calibrated so that the model replays the trace exactly as recorded: each edge gets a
nominal delay (the trace's median launch latency, stream turnaround, sync cost and return), clipped
so no edge is later than the measured start, and the edge that bound in the measurement (the latest
``source + nominal delay``) gets the measured delay. A fix then changes durations or delays, or drops
edges, and the sweep moves everything downstream.

Assumptions (what a trace cannot say, listed in every result by :func:`assumptions`):

* the host threads of a rank share one clock (their calls keep their recorded order): a thread
  waiting on another thread (autograd's backward thread, a loader queue) is not recorded;
* a host sync waits for the GPU op that ended last before it returned (stream/event ids are not read);
* a GPU op that started later than its launch and its stream allow waited for the op of another
  stream of its device that ended last before it, unless a stream wait whose event the trace identifies
  held it (Kineto's ``Stream Wait Event`` ids, :mod:`traceread.whatif.events`): that wait's edge is the
  recorded one, whatever the timing says;
* a GPU op with no recorded launch keeps its place on the host clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import API_CATS, HOST_LANES, OP_LANES, EventView, selection_key, subset
from traceread.whatif import sweep
from traceread.whatif.events import recorded_edges, stream_waits, sync_waited

HOST_POINT, OP_START = 0, 1
_I64 = np.int64
_CALIBRATE_SLICE = 1 << 18  # ops per pass of the calibration (bounds its temporaries: a dozen int64 of this length)
SRC = sweep.SRC  # edge sources (node indices) as int32: half of int64's bytes in the model and the sweep

# Nominal delays when the trace has none to measure them from (ns).
_FALLBACK_LAUNCH_NS = 5_000
_FALLBACK_TURNAROUND_NS = 1_000
_FALLBACK_SYNC_NS = 5_000
_FALLBACK_RETURN_NS = 2_000

ASSUMPTIONS = (
    "host threads of a rank share one clock: calls keep their recorded order (waits between threads are not recorded)",
    "a host sync waits for the GPU op that ended last before it returned (stream and event ids are not read)",
    "a GPU op that started later than its launch and its stream allow waited for the op of another stream that "
    "ended last before it, unless a stream wait whose event the trace identifies held it (then for the op that "
    "event marks)",
    "a GPU op with no recorded launch keeps its place on the host clock",
    "ranks are replayed one by one: a collective's wait for the other ranks is kept as measured",
)


@dataclass
class RankModel:
    """One rank's dependency model (module doc). Node arrays are in sweep order. Node indices, frame rows,
    delays and durations are int32 while every value fits (delays and durations widen to int64 on the first
    value that does not): those arrays then take half of int64's bytes."""

    rank: int
    time: np.ndarray  # recorded time of each node, ns
    kind: np.ndarray  # HOST_POINT or OP_START
    src: np.ndarray  # (n, 3) source node per edge slot (SRC), -1 none
    delay: np.ndarray  # (n, 3) edge delays, ns (int32, or int64 when one does not fit)
    dur: np.ndarray  # op duration (0 for host points)
    row: np.ndarray  # frame row of the node's event (host call or GPU op), -1 for step boundaries
    host_nodes: np.ndarray  # host point nodes in chain order
    op_nodes: np.ndarray  # op nodes
    sync_end: np.ndarray  # node of each host sync's end
    sync_wait_slot_delay: np.ndarray  # nominal non-waiting cost of each sync (slot 0 delay when freed)
    launch_point: np.ndarray  # per op node: its launch call's start node (-1 none)
    device: np.ndarray  # per op node: device
    lane: np.ndarray  # per op node: lane code
    step_time: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted step points
    step_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their nodes
    nominal: dict[str, int] = field(default_factory=dict)
    dropped_edges: int = 0
    inferred_waits: int = 0  # cross-stream waits inferred from timing
    recorded_waits: int = 0  # cross-stream waits from the trace's stream-wait calls (traceread.whatif.events)
    # GPU ops that started later than their launch and stream allow with no recorded op to have waited
    # for (another process, work issued before the capture): the wait stays on the binding edge as measured
    unexplained_waits: int = 0
    unexplained_wait_ns: int = 0
    # Stream-wait calls read, and the op nodes (among the unexplained) held by a wait on an event recorded before
    # the capture, with their waits in all: external waits (traceread.whatif.events)
    stream_waits: int = 0
    external_ops: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    external_waits: int = 0  # len(external_ops), kept once the arrays are released
    external_wait_ns: int = 0
    # Kernels on compute lanes, and those of them whose launch call the trace records (the launch-bound fix's scope)
    compute_ops: int = 0
    compute_ops_launched: int = 0
    _clock: np.ndarray | None = field(default=None, repr=False, compare=False)

    def clock_edges(self) -> np.ndarray:
        """Host points with a slot-0 edge (the host clock, a sync's own cost): what host-time fixes shrink.
        Fixes never drop these edges, so the model's are every replay's (computed once)."""
        if self._clock is None:  # host_nodes are the HOST_POINT nodes, ascending: a gather, not a pass over all
            self._clock = self.host_nodes[self.src[self.host_nodes, 0] >= 0]
        return self._clock


def launches_recorded(m: RankModel, cfg: Thresholds) -> bool:
    """Whether the trace records the launch of at least ``whatif_launch_linked_min`` of the rank's kernels (or the
    rank has none). Where it does not (an XLA trace that records only its copies' calls), the host time before a
    kernel cannot be told to be its dispatch rather than the host's other work (the launch-bound rule's "the
    next launch is not recorded"), and the CUDA-graph fix would remove whatever host time precedes it."""
    return m.compute_ops == 0 or m.compute_ops_launched >= cfg.whatif_launch_linked_min * m.compute_ops


def _median(values: np.ndarray, fallback: int) -> int:
    return int(np.median(values)) if len(values) else fallback


def _nodes_order(time: np.ndarray, st: np.ndarray) -> np.ndarray:
    """The stable order by (time, st): one stable sort of a packed key (the node lists arrive in
    sorted runs, which a stable sort merges) when the times' span leaves room for it, else a lexsort."""
    if len(time) == 0:
        return np.zeros(0, dtype=np.intp)
    t0, t1 = int(np.min(time)), int(np.max(time))
    if t1 - t0 < np.iinfo(_I64).max // 8:  # st < 6: six slots per ns
        key = time - t0  # (time - t0) * 6 + st, in place
        key *= 6
        key += st
        return np.argsort(key, kind="stable")
    return np.lexsort((st, time))


def rank_calls(rank: int) -> tuple[Any, ...]:
    """The :meth:`EventView.rows` arguments of the rank's CUDA API calls (the model's host calls)."""
    return (schema.LANE_CPU_THREAD,), API_CATS, rank


def rank_ops(rank: int) -> tuple[Any, ...]:
    """The :meth:`EventView.rows` arguments of the rank's GPU ops (the model's op nodes)."""
    return OP_LANES, None, rank


def rank_host(rank: int) -> tuple[Any, ...]:
    """The :meth:`EventView.rows` arguments of the rank's host ranges (what host-time fixes search)."""
    return HOST_LANES, None, rank


def selections(rank: int) -> tuple[tuple[Any, ...], ...]:
    """The cache keys of the view's selections a replay of ``rank`` reads (the model's, the fixes'): what the
    analysis keeps of the view's cache once it is done with the rest (:meth:`EventView.keep_selections`)."""
    return tuple(selection_key(*args) for args in (rank_calls(rank), rank_ops(rank), rank_host(rank)))


def forget_selections(v: EventView, rank: int) -> None:
    """Drop the view's cached selections of ``rank``'s replay (:func:`selections`) once its replays have run:
    the analysis kept them for the replay only, and the job section after it holds the rank summaries
    (the selections are row indices of every kernel of the rank). Made again if asked for."""
    v.forget_selections(set(selections(rank)))


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def build(v: EventView, rank: int, step_points: np.ndarray, cfg: Thresholds,
          between: Callable[[], None] = _nothing, event_waits: pd.DataFrame | None = None) -> RankModel:
    """The model of ``rank`` in the view ``v`` (the frame's numpy columns and launch links); ``event_waits``: the
    trace's side table of that name (the recorded stream waits' ids, :mod:`traceread.whatif.events`).

    ``step_points``: recorded host times to carry as host points (step boundaries), so a replay can
    say where they moved.
    """
    calls = v.rows(*rank_calls(rank))  # cached: the launch-bound fix's too
    ops = v.rows(*rank_ops(rank))
    op_dev = v.device[ops]  # gathered once: the stream keys, the devices' orders and the model's column read it
    keep = op_dev >= 0
    ops, op_dev = subset(ops, keep), subset(op_dev, keep).astype(np.int32, copy=False)
    launch = v.launch_of(ops) if len(ops) else np.zeros(0, np.int64)
    # The rows as numpy's indices (intp): each gather of an int32 index array converts it first
    c_at, o_at = calls.astype(np.intp, copy=False), ops.astype(np.intp, copy=False)
    names = v.name[c_at]  # the calls' name codes: the syncs' flag and the stream waits' names read them
    is_sync = v.name_flags["sync"][names] if len(calls) else np.zeros(0, bool)  # (EventView.flag)

    cs, ce = v.start[c_at].astype(_I64, copy=False), v.end[c_at].astype(_I64, copy=False)
    os_, oe = v.start[o_at].astype(_I64, copy=False), v.end[o_at].astype(_I64, copy=False)
    del c_at
    orphan = launch < 0
    n_orphan = int(orphan.sum())
    steps_t = np.unique(np.asarray(step_points, dtype=_I64))

    # --- nodes: host points (call starts, call ends, step points, orphan ops' own times), then op starts;
    # sorted once. ``st``: the tie rank at equal times, 2 * sub + tie (sub: 0 a host point that ends a call
    # longer than 0, 1 another host point, 2 an op start; tie: 1 a call's end)
    n_calls, n_ops, n_steps = len(calls), len(ops), len(steps_t)
    time = np.concatenate([cs, ce, steps_t, os_[orphan], os_])
    n = len(time)
    n_host = n - n_ops
    st = np.full(n, 2, np.int8)
    ends_at = st[n_calls: 2 * n_calls]
    ends_at[:] = ce <= cs
    ends_at *= 2
    ends_at += 1
    st[n_host:] = 4
    sync_idx = np.flatnonzero(is_sync)
    ss, se = cs[sync_idx], ce[sync_idx]  # the syncs' own times: the calls' ends go now (the build's peak is later)
    # An op whose launch call did driver work (one call over launch_call_max_ns: a lazy module load in a first
    # launch) waited for that work, not for a launch (the launch latency's samples, below)
    long_call = ce - cs > cfg.launch_call_max_ns
    del ce, is_sync, ends_at
    order = _nodes_order(time, st)
    del st
    pos = np.empty(n, dtype=np.intp)  # pos[i]: node index of unsorted item i (an index: the scatters below)
    pos[order] = np.arange(n, dtype=np.intp)
    node_time = time[order]
    del time
    # Durations at int32 while every value fits (widened on the first value that does not, _put); rows at
    # int32 in a frame of fewer than 2^31 rows.
    kind = np.full(n, HOST_POINT, dtype=np.int8)
    row = np.full(n, -1, dtype=np.int32 if len(v.start) < 2**31 else _I64)
    op_at = pos[n_host:]
    op_node = op_at.astype(SRC)  # node indices as the edges hold them (int32)
    kind[op_at] = OP_START
    row[pos[:n_calls]] = calls  # each part of the host points at its place (step points keep -1)
    row[pos[n_calls: 2 * n_calls]] = calls
    row[pos[2 * n_calls + n_steps: n_host]] = ops[orphan]
    row[op_at] = ops
    dur = _put(np.zeros(n, dtype=np.int32), op_at, oe - os_)
    del op_at

    host_nodes = np.flatnonzero(kind == HOST_POINT).astype(SRC)  # pos[:n_host] in node order
    by_start = order[np.flatnonzero(kind == OP_START)] - n_host  # op indices by start (the sweep's order)
    del order

    # --- GPU ops: launch, stream predecessor, cross-stream wait -------------------------------
    # Each op's launch point (its launch call's start), launch time (that call's start, else the op's own: an
    # orphan's point is at its start) and whether that call did driver work
    launch_point = np.full(n_ops, -1, dtype=SRC)
    ls = os_.copy()
    driver = np.zeros(n_ops, dtype=bool)
    if n_calls and n_orphan < n_ops:
        # the call of each launch row among the calls (rows ascending, as EventView.rows gives them)
        k = intervals.sorted_positions(calls, subset(launch, ~orphan))
        found = k >= 0
        k = np.maximum(k, 0)
        linked_at = slice(None) if n_orphan == 0 else ~orphan
        launch_point[linked_at] = np.where(found, pos[k], -1)  # the call's start point
        ls[linked_at] = np.where(found, cs[k], ls[linked_at])
        driver[linked_at] = found & long_call[k]
        del k, found
    launch_point[orphan] = pos[2 * n_calls + n_steps: n_host]  # the orphan ops' own points
    s_start, s_end_node = pos[sync_idx].astype(SRC), pos[n_calls + sync_idx].astype(SRC)
    step_node = pos[2 * n_calls: 2 * n_calls + n_steps].astype(SRC)
    del pos, cs, long_call, launch

    stream_key = op_dev.astype(_I64) << 40
    stream_key ^= v.tid[o_at]
    # ops by (stream, node): ``by_start`` holds them by node, the stable sort keeps that within each stream
    by_stream = by_start[np.argsort(stream_key[by_start], kind="stable")].astype(SRC)  # int32, as node indices
    prev = np.full(n_ops, -1, dtype=SRC)
    sk = stream_key[by_stream]
    same = sk[1:] == sk[:-1]
    prev[by_stream[1:][same]] = by_stream[:-1][same]  # op index of the predecessor
    del by_stream, sk, same
    has_prev = prev >= 0
    big = np.iinfo(_I64).min // 4  # "no such edge": a source time no start is near
    pe = np.where(has_prev, oe[np.maximum(prev, 0)], big)

    lat = os_ - ls
    # A stream was idle before an op when the gap after its predecessor is longer than any turnaround
    # (the same bound that tells turnaround from a wait below): a deep queue's ops are a turnaround apart,
    # and counting them idle would make a deep queue's whole wait the "launch latency".
    idle_before = ~has_prev | (os_ - pe > cfg.whatif_wait_min_ns)
    linked = ~orphan & (launch_point >= 0)
    # kernels on compute lanes, and those of them with a recorded launch (launches_recorded)
    op_lane = v.lane[o_at]
    del o_at
    compute = op_lane == v.lane_codes.get(schema.LANE_GPU_COMPUTE, -99)
    n_compute, n_launched = int(compute.sum()), int((compute & linked).sum())
    del compute
    # Launch latency: the low end of launch-to-start among ops whose stream was idle (the rest queued) and
    # that no op of their device held after their launch (with the host ahead, those start long after it).
    # An op whose launch call did driver work waited for that work, not for a launch: no sample either.
    per_device = _by_end(op_dev, oe)
    last_end = _last_ended(per_device, op_dev, os_, by_start)
    fast = lat[linked & idle_before & ~driver & ~_held(per_device, last_end, ls)]
    if not len(fast):
        fast = lat[linked & idle_before & ~driver]
    if not len(fast):
        fast = lat[linked & idle_before]
    del driver, by_start
    d_launch = max(0, int(np.percentile(fast, 10)) if len(fast) else _FALLBACK_LAUNCH_NS)
    # Stream turnaround: the gap between queued ops on a stream; longer gaps are waits, not turnaround.
    queued = has_prev & linked & (lat > 2 * d_launch)
    gap = (os_ - pe)[queued]
    d_turn = max(0, _median(gap[gap <= cfg.whatif_wait_min_ns], _FALLBACK_TURNAROUND_NS))

    # Cross-stream waits: the start is later than launch and stream predecessor explain.
    explained = np.maximum(np.where(launch_point >= 0, ls + np.minimum(d_launch, lat), ls),
                           np.where(has_prev, pe + np.minimum(d_turn, os_ - pe), ls))
    x = np.full(n_ops, -1, dtype=SRC)
    slack = os_ - explained
    want = np.flatnonzero(slack > cfg.whatif_wait_min_ns)
    # The waits the trace records (stream-wait calls and their event records, traceread.whatif.events): each held
    # op waits for the op its event marks, whatever the timing says; the timing inference below is for the rest.
    # An op that waited on an event recorded before the capture waited for work issued before it: an external wait.
    waits_read = stream_waits(v, rank, calls, ops, ls, linked, event_waits, names=names, o_key=stream_key)
    recorded_x = recorded_edges(waits_read.waited, waits_read.source, stream_key, op_node, os_, oe)
    x[recorded_x[0]] = recorded_x[1]
    want = want[x[want] < 0]
    for d in np.unique(op_dev[want]) if len(want) else ():  # a loop over devices, not events
        _, by_end, ends = per_device[int(d)]
        q = want[op_dev[want] == d]
        k0 = last_end[q]
        for back in (0, 1):  # the last op to end before the start; on the same stream, the one before
            left = x[q] < 0
            k = k0 - back
            at = np.clip(k, 0, max(len(by_end) - 1, 0))
            cand = by_end[at]
            ok = left & (k >= 0) & (cand != q) & (stream_key[cand] != stream_key[q])
            ok &= (ends[at] > explained[q]) & (op_node[cand] < op_node[q])
            x[q[ok]] = cand[ok]
    has_x = x >= 0
    unexplained = want[~has_x[want]]
    external = waits_read.held_ops[np.isin(waits_read.held_ops, unexplained)]
    # The syncs' waited ops need only the ops' times: found here, with the devices' orders (one device: all ops')
    w = sync_waited(os_, oe, ls, ss, se, cfg.sync_drain_tolerance_ns, per_device[int(op_dev[0])][1:]
                if len(per_device) == 1 else None)
    # what the waits needed goes before the calibration's arrays come (the build's peak on a big rank)
    del per_device, last_end, stream_key, lat, idle_before, linked, explained, fast, queued, gap, names

    # The edges (the model's largest arrays, (n, 3) each) are made once the waits are found: beside the ops'
    # temporaries of the waits they would be the build's peak. Delays at int32 while every
    # value fits (widened on the first value that does not, _put). The waits' freed temporaries can go back
    # first (``between``): the edges are mapped afresh (larger than a thread's heap), not made of them.
    between()
    src = np.full((n, 3), -1, dtype=SRC)
    delay = np.zeros((n, 3), dtype=np.int32)
    # Host clock: each host point after the previous one by the measured interval.
    if len(host_nodes) > 1:
        at = host_nodes.astype(np.intp)  # (numpy converts an int32 index on each use)
        src[:, 0][at[1:]] = host_nodes[:-1]
        delay = _put(delay, (at[1:], 0), np.diff(node_time[at]))
        del at

    # Calibrate: nominal delays clipped to the measured start, the binding edge gets the measured one; a
    # slice of ops at a time (a dozen op-length int64 temporaries at once were the build's peak).
    dropped = 0
    for lo in range(0, n_ops, _CALIBRATE_SLICE):
        sl = slice(lo, lo + _CALIBRATE_SLICE)
        o, lp, hp, hx, xs = os_[sl], launch_point[sl], has_prev[sl], has_x[sl], x[sl]
        hl = lp >= 0
        t_l = np.where(hl, ls[sl], big)  # (np.where is quick where its mask is nearly all one way, as these are)
        t_p = pe[sl]  # (big where no predecessor)
        t_x = np.where(hx, oe[np.maximum(xs, 0)], big)
        g_l, g_p, g_x = o - t_l, o - t_p, o - t_x  # the measured delays
        d_l, d_p, d_x = np.minimum(d_launch, g_l), np.minimum(d_turn, g_p), np.minimum(d_turn, g_x)
        # The binding edge: the first of the three to reach furthest (argmax's tie rule), without stacking them.
        t_l += d_l  # each edge's reach: its source's time plus its nominal delay
        t_x += d_x
        r_p = t_p + d_p
        p_over_l = r_p > t_l
        bind_l = ~(p_over_l | (t_x > t_l))
        bind_p = p_over_l & ~(t_x > r_p)
        bind_x = ~(bind_l | bind_p)
        del t_l, t_p, t_x, r_p, p_over_l
        # The binding edge's delay is the measured one, an absent edge's 0: products, not np.where, whose
        # branches are slow on mixed masks (the binding edges')
        d_l += (g_l - d_l) * bind_l
        d_l *= hl
        d_p += (g_p - d_p) * bind_p
        d_p *= hp
        d_x += (g_x - d_x) * bind_x
        d_x *= hx
        del g_l, g_p, g_x, bind_l, bind_p, bind_x
        nodes = op_node[sl]
        at = nodes.astype(np.intp)
        # Edges must point backward in the sweep (ties of zero-length events): one that does not is dropped
        # (its delay stays). Only op starts' and sync ends' can (the host clock links each host point to the
        # one before it), and an op's edges are set here only.
        # A cross-stream wait is rare: only the ops that have one are written (the others keep -1 and 0).
        xw = np.flatnonzero(hx)
        for slot, s, d, on in ((0, lp, d_l, at),
                               (1, np.where(hp, op_node[np.maximum(prev[sl], 0)], -1), d_p, at),
                               (2, op_node[xs[xw]], d_x[xw], at[xw])):
            forward = s >= (nodes if slot < 2 else nodes[xw])
            if forward.any():
                dropped += int(forward.sum())
                s = np.where(forward, -1, s)
            src[:, slot][on] = s
            delay = _put(delay, (on, slot), d)
        del d_l, d_p, d_x
    del prev, has_prev, pe, x

    # --- host syncs: return when the waited op ends ---------------------------------------------
    has_w = w >= 0
    we = np.where(has_w, oe[np.maximum(w, 0)], big)
    waiting = has_w & (we > ss)
    d_sync = max(0, _median((se - ss)[has_w & ~waiting], _FALLBACK_SYNC_NS))
    d_ret = max(0, _median((se - we)[waiting], _FALLBACK_RETURN_NS))
    d_h = np.minimum(d_sync, se - ss)
    d_w = np.minimum(d_ret, se - we)
    bind_w = has_w & (we + d_w >= ss + d_h)
    d_h = np.where(bind_w, d_h, se - ss)
    d_w = np.where(bind_w, se - we, d_w)
    w_node = np.where(has_w, op_node[np.maximum(w, 0)], -1)
    ok_order = (s_start < s_end_node) & (se > ss)
    s_end_node, s_start, d_h, d_w, w_node = (a[ok_order] for a in (s_end_node, s_start, d_h, d_w, w_node))
    src[s_end_node, 0] = s_start
    delay = _put(delay, (s_end_node, 0), d_h)
    src[s_end_node, 1] = w_node
    delay = _put(delay, (s_end_node, 1), np.where(w_node >= 0, d_w, 0))

    # The sync ends' forward edges are dropped too (the ops' were, above)
    forward = src[s_end_node] >= s_end_node[:, None]
    if forward.any():
        dropped += int(forward.sum())
        src[s_end_node] = np.where(forward, -1, src[s_end_node])
    return RankModel(
        rank=rank, time=node_time, kind=kind, src=src, delay=delay, dur=dur, row=row,
        host_nodes=host_nodes, op_nodes=op_node, sync_end=s_end_node, sync_wait_slot_delay=np.minimum(d_sync, d_h),
        launch_point=launch_point, device=op_dev, lane=op_lane,
        nominal={"launch_latency_ns": d_launch, "stream_turnaround_ns": d_turn, "sync_cost_ns": d_sync,
                 "sync_return_ns": d_ret},
        step_time=steps_t, step_node=step_node,
        dropped_edges=dropped, inferred_waits=int(has_x.sum()) - len(recorded_x[0]), recorded_waits=len(recorded_x[0]),
        unexplained_waits=len(unexplained), unexplained_wait_ns=int(slack[unexplained].sum()),
        stream_waits=waits_read.read, external_ops=op_node[external].astype(_I64), external_waits=len(external),
        external_wait_ns=int(slack[external].sum()),
        compute_ops=n_compute, compute_ops_launched=n_launched,
    )


def _put(a: np.ndarray, index: Any, values: np.ndarray) -> np.ndarray:
    """``a[index] = values`` (int64 ns), on ``a`` widened to int64 first when it is int32 and a value does not
    fit: the array to keep using. ``index``: indices, or ``(indices, column)`` of a 2-d ``a``."""
    if a.dtype != _I64:
        if sweep.fits(values, a.dtype):
            values = np.asarray(values).astype(a.dtype, copy=False)  # numpy's casting scatter is slower
        else:
            a = a.astype(_I64)
    if isinstance(index, tuple):  # a column's view, indexed: numpy's 2-d fancy index is slower
        a[:, index[1]][index[0]] = values
    else:
        a[index] = values
    return a


def _by_end(dev: np.ndarray, oe: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per device: its ops (indices), the same ordered by end (stable), and their ends in that order."""
    if len(dev) and dev.min() == dev.max():  # the rank's one device: every op, no pass to find them
        by_end = np.argsort(oe, kind="stable").astype(SRC)
        return {int(dev[0]): (np.arange(len(dev), dtype=SRC), by_end, oe[by_end])}
    out = {}
    for d in np.unique(dev):  # a loop over devices, not events
        mine = np.flatnonzero(dev == d).astype(SRC)
        by_end = mine[np.argsort(oe[mine], kind="stable")]
        out[int(d)] = (mine, by_end, oe[by_end])
    return out


def _last_ended(per_device: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], dev: np.ndarray,
                os_: np.ndarray, by_start: np.ndarray) -> np.ndarray:
    """Per op: the position, among its device's ops by end, of the last to end at or before its start (-1 none).
    ``by_start``: the ops by start, so each device's starts are counted against its ends in one merge pass."""
    out = np.empty(len(os_), dtype=_I64)
    for d, (mine, _, ends) in per_device.items():
        q = by_start if len(mine) == len(os_) else by_start[dev[by_start] == d]
        out[q] = intervals.sorted_count_at_or_before(os_[q], ends) - 1
    return out


def _held(per_device: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], last_end: np.ndarray,
          ls: np.ndarray) -> np.ndarray:
    """Per op: an op of its device (any stream) ended after its launch and before its start: the op may
    have waited for it, so its launch-to-start is no sample of the launch latency. ``last_end``: per op,
    :func:`_last_ended`."""
    out = np.zeros(len(ls), dtype=bool)
    for mine, by_end, ends in per_device.values():  # the devices' ops are disjoint: each writes its own once
        whole = len(mine) == len(ls)  # the rank's one device: its ops are all, in order
        k0, launched = (last_end, ls) if whole else (last_end[mine], ls[mine])
        hit = np.zeros(len(mine), dtype=bool)
        for back in (0, 1):  # the last op to end before the start (the one before when that is itself)
            k = k0 - back
            at = np.clip(k, 0, max(len(by_end) - 1, 0))
            hit |= (k >= 0) & (by_end[at] != mine) & (ends[at] > launched)
        if whole:
            return hit
        out[mine] = hit
    return out


def assumptions() -> tuple[str, ...]:
    """The dependencies every replay assumes (module doc)."""
    return ASSUMPTIONS


def steps_points(steps: pd.DataFrame, rank: int) -> np.ndarray:
    """The host times a replay must carry for the steps of ``rank`` (their host starts and ends)."""
    s = steps[steps["rank"] == rank]
    return np.unique(np.concatenate([s["cpu_start_ns"].to_numpy(_I64), s["cpu_end_ns"].to_numpy(_I64)]))
