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

from traceread import schema
from traceread.config import Thresholds
from traceread.engine.lanes import API_CATS, HOST_LANES, OP_LANES, EventView, selection_key, subset
from traceread.whatif import sweep
from traceread.whatif.events import stream_waits

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


def _nodes_order(time: np.ndarray, sub: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """The stable order by (time, sub, tie): one stable sort of a packed key (the node lists arrive in
    sorted runs, which a stable sort merges) when the times' span leaves room for it, else a lexsort."""
    if len(time) == 0:
        return np.zeros(0, dtype=np.intp)
    t0, t1 = int(np.min(time)), int(np.max(time))
    if t1 - t0 < np.iinfo(_I64).max // 8:  # sub < 3, tie < 2: six slots per ns
        key = time - t0  # (time - t0) * 6 + sub * 2 + tie, in place
        key *= 6
        key += sub
        key += sub
        key += tie
        return np.argsort(key, kind="stable")
    return np.lexsort((tie, sub, time))


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
    ops = subset(ops, v.device[ops] >= 0)
    launch = v.launch_of(ops) if len(ops) else np.zeros(0, np.int64)
    is_sync = v.flag("sync", calls) if len(calls) else np.zeros(0, bool)

    cs, ce = v.start[calls].astype(_I64, copy=False), v.end[calls].astype(_I64, copy=False)
    os_, oe = v.start[ops].astype(_I64, copy=False), v.end[ops].astype(_I64, copy=False)
    orphan = launch < 0
    steps_t = np.unique(np.asarray(step_points, dtype=_I64))

    # --- host points: call starts, call ends, step points, orphan ops' own times -----------------
    n_calls, n_ops = len(calls), len(ops)
    h_time = np.concatenate([cs, ce, steps_t, os_[orphan]])
    h_end = np.concatenate([np.zeros(n_calls, bool), ce > cs, np.zeros(len(steps_t) + int(orphan.sum()), bool)])
    h_tie = np.concatenate([np.zeros(n_calls, np.int8), np.ones(n_calls, np.int8),
                            np.zeros(len(steps_t) + int(orphan.sum()), np.int8)])
    n_host = len(h_time)
    sync_idx = np.flatnonzero(is_sync)
    ss, se = cs[sync_idx], ce[sync_idx]  # the syncs' own times: the calls' go now (the build's peak is later)
    del cs, ce, is_sync
    # --- all nodes: host points then op starts; sorted once ------------------------------------
    time = np.concatenate([h_time, os_])
    sub = np.concatenate([(~h_end).view(np.int8), np.full(n_ops, 2, np.int8)])  # host: 0 an end, 1 else
    tie = np.concatenate([h_tie, np.zeros(n_ops, np.int8)])
    del h_time, h_end, h_tie  # the build's peak is its node arrays: what is done with goes first
    order = _nodes_order(time, sub, tie)
    del sub, tie
    n = len(order)
    pos = np.empty(n, dtype=SRC)  # node indices as the edges hold them (int32)
    pos[order] = np.arange(n, dtype=SRC)  # pos[i]: node index of unsorted item i
    node_time = time[order]
    del time, order
    # Durations at int32 while every value fits (widened on the first value that does not, _put); rows at
    # int32 in a frame of fewer than 2^31 rows.
    kind = np.full(n, HOST_POINT, dtype=np.int8)
    row = np.full(n, -1, dtype=np.int32 if len(v.start) < 2**31 else _I64)
    kind[pos[n_host:]] = OP_START
    row[pos[:n_host]] = np.concatenate([calls, calls, np.full(len(steps_t), -1), ops[orphan]])
    row[pos[n_host:]] = ops
    dur = _put(np.zeros(n, dtype=np.int32), pos[n_host:], oe - os_)

    host_nodes = np.flatnonzero(kind == HOST_POINT).astype(SRC)  # pos[:n_host] in node order

    # --- GPU ops: launch, stream predecessor, cross-stream wait -------------------------------
    op_node = pos[n_host:].copy()  # not a view: the model keeps it, and pos goes once the indices are read
    launch_point = np.full(n_ops, -1, dtype=SRC)
    if n_calls and (~orphan).any():
        sorter = np.argsort(calls, kind="stable")
        k = np.searchsorted(calls[sorter], launch[~orphan])
        k = np.minimum(k, n_calls - 1)
        found = calls[sorter][k] == launch[~orphan]
        lp = np.where(found, pos[sorter[k]], -1)  # the call's start point (first n_calls host items)
        launch_point[~orphan] = lp
    orphan_points = pos[2 * n_calls + len(steps_t): n_host]
    launch_point[orphan] = orphan_points
    s_start, s_end_node = pos[sync_idx], pos[n_calls + sync_idx]
    step_node = pos[2 * n_calls: 2 * n_calls + len(steps_t)].copy()
    del launch, pos, orphan_points
    ls = np.where(launch_point >= 0, node_time[np.maximum(launch_point, 0)], os_)

    stream_key = (v.device[ops].astype(_I64) << 40) ^ v.tid[ops].astype(_I64)
    by_stream = np.lexsort((op_node, stream_key)).astype(SRC)  # op indices at int32, as node indices are
    prev = np.full(n_ops, -1, dtype=SRC)
    same = stream_key[by_stream[1:]] == stream_key[by_stream[:-1]]
    prev[by_stream[1:][same]] = by_stream[:-1][same]  # op index of the predecessor
    del by_stream, same
    has_prev = prev >= 0
    pe = np.where(has_prev, oe[np.maximum(prev, 0)], np.iinfo(_I64).min // 4)

    lat = os_ - ls
    # A stream was idle before an op when the gap after its predecessor is longer than any turnaround
    # (the same bound that tells turnaround from a wait below): a deep queue's ops are a turnaround apart,
    # and counting them idle would make a deep queue's whole wait the "launch latency".
    idle_before = ~has_prev | (os_ - pe > cfg.whatif_wait_min_ns)
    linked = ~orphan & (launch_point >= 0)
    # kernels on compute lanes, and those of them with a recorded launch (launches_recorded)
    compute = v.lane[ops] == v.lane_codes.get(schema.LANE_GPU_COMPUTE, -99)
    n_compute, n_launched = int(compute.sum()), int((compute & linked).sum())
    del compute
    # Launch latency: the low end of launch-to-start among ops whose stream was idle (the rest queued) and
    # that no op of their device held after their launch (with the host ahead, those start long after it).
    # An op whose launch call did driver work (one call over launch_call_max_ns: a lazy module load in a first
    # launch) waited for that work, not for a launch: no sample either.
    lrow = row[np.maximum(launch_point, 0)]
    driver = linked & (lrow >= 0) & ((v.end[lrow] - v.start[lrow]).astype(_I64) > cfg.launch_call_max_ns)
    per_device = _by_end(v.device[ops], oe)
    fast = lat[linked & idle_before & ~driver & ~_held(per_device, ls, os_, oe)]
    if not len(fast):
        fast = lat[linked & idle_before & ~driver]
    if not len(fast):
        fast = lat[linked & idle_before]
    del lrow, driver
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
    waits_read = stream_waits(v, rank, calls, ops, ls, linked, event_waits)
    recorded_x = _recorded_waits(waits_read.waited, waits_read.source, stream_key, op_node, os_, oe)
    x[recorded_x[0]] = recorded_x[1]
    want = want[x[want] < 0]
    dev = v.device[ops].astype(_I64)
    for d in np.unique(dev[want]) if len(want) else ():  # a loop over devices, not events
        by_end = per_device[int(d)][1]
        ends = oe[by_end]
        q = want[dev[want] == d]
        k0 = np.searchsorted(ends, os_[q], side="right") - 1
        for back in (0, 1):  # the last op to end before the start; on the same stream, the one before
            left = x[q] < 0
            k = k0 - back
            cand = by_end[np.clip(k, 0, max(len(by_end) - 1, 0))]
            ok = left & (k >= 0) & (cand != q) & (stream_key[cand] != stream_key[q])
            ok &= (oe[cand] > explained[q]) & (op_node[cand] < op_node[q])
            x[q[ok]] = cand[ok]
    has_x = x >= 0
    unexplained = want[~has_x[want]]
    external = waits_read.held_ops[np.isin(waits_read.held_ops, unexplained)]
    # what the waits needed goes before the calibration's arrays come (the build's peak on a big rank)
    del per_device, stream_key, lat, idle_before, linked, explained, dev, fast, queued, gap

    # The edges (the model's largest arrays, (n, 3) each) are made once the waits are found: beside the ops'
    # temporaries of the waits they would be the build's peak. Delays at int32 while every
    # value fits (widened on the first value that does not, _put). The waits' freed temporaries can go back
    # first (``between``): the edges are mapped afresh (larger than a thread's heap), not made of them.
    between()
    src = np.full((n, 3), -1, dtype=SRC)
    delay = np.zeros((n, 3), dtype=np.int32)
    # Host clock: each host point after the previous one by the measured interval.
    if len(host_nodes) > 1:
        src[host_nodes[1:], 0] = host_nodes[:-1]
        delay = _put(delay, (host_nodes[1:], 0), np.diff(node_time[host_nodes]))

    # Calibrate: nominal delays clipped to the measured start, the binding edge gets the measured one; a
    # slice of ops at a time (a dozen op-length int64 temporaries at once were the build's peak).
    big = np.iinfo(_I64).min // 4
    for lo in range(0, n_ops, _CALIBRATE_SLICE):
        sl = slice(lo, lo + _CALIBRATE_SLICE)
        o, lp, hp, hx, xs = os_[sl], launch_point[sl], has_prev[sl], has_x[sl], x[sl]
        t_l = np.where(lp >= 0, ls[sl], big)
        t_p = np.where(hp, pe[sl], big)
        t_x = np.where(hx, oe[np.maximum(xs, 0)], big)
        d_l = np.minimum(d_launch, o - t_l)
        d_p = np.minimum(d_turn, o - t_p)
        d_x = np.minimum(d_turn, o - t_x)
        # The binding edge: the first of the three to reach furthest (argmax's tie rule), without stacking them.
        r_l, r_p, r_x = t_l + d_l, t_p + d_p, t_x + d_x
        bind = np.where(r_p > r_l, np.where(r_x > r_p, 2, 1), np.where(r_x > r_l, 2, 0))
        del r_l, r_p, r_x
        d_l = np.where(bind == 0, o - t_l, d_l)
        d_p = np.where(bind == 1, o - t_p, d_p)
        d_x = np.where(bind == 2, o - t_x, d_x)
        nodes = op_node[sl]
        src[nodes, 0] = lp
        delay = _put(delay, (nodes, 0), np.where(lp >= 0, d_l, 0))
        src[nodes, 1] = np.where(hp, op_node[np.maximum(prev[sl], 0)], -1)
        delay = _put(delay, (nodes, 1), np.where(hp, d_p, 0))
        src[nodes, 2] = np.where(hx, op_node[np.maximum(xs, 0)], -1)
        delay = _put(delay, (nodes, 2), np.where(hx, d_x, 0))
        del t_l, t_p, t_x, d_l, d_p, d_x, bind
    del prev, has_prev, pe, x

    # --- host syncs: return when the waited op ends ---------------------------------------------
    w = _waited(os_, oe, ls, ss, se, cfg.sync_drain_tolerance_ns)
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

    # Edges must point backward in the sweep (ties of zero-length events): drop the rest. Only op starts'
    # and sync ends can hold one (the host clock links each host point to the one before it).
    held = np.concatenate([op_node, s_end_node])  # disjoint: op starts are no host points
    forward = src[held] >= held[:, None]
    bad = (held.astype(_I64)[:, None] * 3 + np.arange(3))[forward] if forward.any() else np.zeros(0, _I64)
    dropped = len(bad)
    src.reshape(-1)[bad] = -1
    op_dev = v.device[ops].astype(np.int32)
    return RankModel(
        rank=rank, time=node_time, kind=kind, src=src, delay=delay, dur=dur, row=row,
        host_nodes=host_nodes, op_nodes=op_node, sync_end=s_end_node, sync_wait_slot_delay=np.minimum(d_sync, d_h),
        launch_point=launch_point, device=op_dev, lane=v.lane[ops],
        nominal={"launch_latency_ns": d_launch, "stream_turnaround_ns": d_turn, "sync_cost_ns": d_sync,
                 "sync_return_ns": d_ret},
        step_time=steps_t, step_node=step_node,
        dropped_edges=dropped, inferred_waits=int(has_x.sum()) - len(recorded_x[0]), recorded_waits=len(recorded_x[0]),
        unexplained_waits=len(unexplained), unexplained_wait_ns=int(slack[unexplained].sum()),
        stream_waits=waits_read.read, external_ops=op_node[external].astype(_I64), external_waits=len(external),
        external_wait_ns=int(slack[external].sum()),
        compute_ops=n_compute, compute_ops_launched=n_launched,
    )


def _recorded_waits(waited: np.ndarray, source: np.ndarray, stream_key: np.ndarray, op_node: np.ndarray,
                    os_: np.ndarray, oe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The recorded waits' edges (op indices ``(held, source)``): each pair of another stream whose source ended by
    the held op's start and comes before it in the sweep; an op held by several waits waits for the source that
    ended last."""
    ok = (stream_key[source] != stream_key[waited]) & (op_node[source] < op_node[waited]) & (oe[source] <= os_[waited])
    w, s = waited[ok], source[ok]
    if not len(w):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((oe[s], w))
    w, s = w[order], s[order]
    last = np.concatenate((w[1:] != w[:-1], [True]))
    return w[last], s[last]


def _put(a: np.ndarray, index: Any, values: np.ndarray) -> np.ndarray:
    """``a[index] = values`` (int64 ns), on ``a`` widened to int64 first when it is int32 and a value does not
    fit: the array to keep using."""
    if a.dtype != _I64 and not sweep.fits(values, a.dtype):
        a = a.astype(_I64)
    a[index] = values
    return a


def _by_end(dev: np.ndarray, oe: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device: its ops (indices), and the same ordered by end (stable)."""
    out = {}
    for d in np.unique(dev):  # a loop over devices, not events
        mine = np.flatnonzero(dev == d).astype(SRC)
        out[int(d)] = (mine, mine[np.argsort(oe[mine], kind="stable")])
    return out


def _held(per_device: dict[int, tuple[np.ndarray, np.ndarray]], ls: np.ndarray, os_: np.ndarray,
          oe: np.ndarray) -> np.ndarray:
    """Per op: an op of its device (any stream) ended after its launch and before its start: the op may
    have waited for it, so its launch-to-start is no sample of the launch latency."""
    out = np.zeros(len(os_), dtype=bool)
    for mine, by_end in per_device.values():  # the devices' ops are disjoint: each writes its own once
        k0 = np.searchsorted(oe[by_end], os_[mine], side="right") - 1
        launched = ls[mine]
        hit = np.zeros(len(mine), dtype=bool)
        for back in (0, 1):  # the last op to end before the start (the one before when that is itself)
            k = k0 - back
            cand = by_end[np.clip(k, 0, max(len(by_end) - 1, 0))]
            hit |= (k >= 0) & (cand != mine) & (oe[cand] > launched)
        out[mine] = hit
    return out


def _waited(os_: np.ndarray, oe: np.ndarray, ls: np.ndarray, ss: np.ndarray, se: np.ndarray,
            tol: int) -> np.ndarray:
    """Per sync ``[ss, se]``: the op (index) that ended last at or before ``se + tol`` among ops that
    started before ``se`` and were launched at or before ``ss``; -1 when none."""
    if len(os_) == 0 or len(ss) == 0:
        return np.full(len(ss), -1, dtype=_I64)
    by_end = np.argsort(oe, kind="stable")
    ends = oe[by_end]
    # An op launched after the sync began cannot be what it waited for: take the running latest op
    # among those launched by then. Ops ordered by end; keep, per prefix, the op with the latest end
    # whose launch precedes the sync: approximated by stepping back over late launches (few).
    k = np.searchsorted(ends, se + tol, side="right") - 1
    out = np.full(len(ss), -1, dtype=_I64)
    for _ in range(4):  # a blocking copy's own op, a few concurrent launches from other threads
        ok = k >= 0
        cand = by_end[np.maximum(k, 0)]
        good = ok & (ls[cand] <= ss) & (os_[cand] < se) & (out < 0)
        out[good] = cand[good]
        k = np.where(good | ~ok, -1, k - 1)
        if not (k >= 0).any():
            break
    return out


def assumptions() -> tuple[str, ...]:
    """The dependencies every replay assumes (module doc)."""
    return ASSUMPTIONS


def steps_points(steps: pd.DataFrame, rank: int) -> np.ndarray:
    """The host times a replay must carry for the steps of ``rank`` (their host starts and ends)."""
    s = steps[steps["rank"] == rank]
    return np.unique(np.concatenate([s["cpu_start_ns"].to_numpy(_I64), s["cpu_end_ns"].to_numpy(_I64)]))
