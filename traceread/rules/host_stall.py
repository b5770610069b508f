"""Long child-free host stretches inside an operator: the host is busy in the op itself, not dispatching.

::

    host     [delta_r2 ..................................... launch]   a TorchScript / compiled function's
                 ^ 146 ms with no child op, no CUDA call: the profiling executor compiles its fusion
    compute  ==k==|..................gap..................|==k==

The launch-bound tell is a dense wall of small dispatch calls. One call of an op that holds the
launching thread for ``host_stall_min_ns`` or more without any recorded child (no CPU op, Python frame,
user range or CUDA runtime/driver call begins or ends inside it) is something else: compilation,
autotuning, graph recording, lazy initialization (the first call), or host work the op does every
time. A stretch is found between consecutive event boundaries of one thread that lies inside a CPU
operator and under no runtime/driver call (a blocking ``cudaDeviceSynchronize`` is a sync, not this).

Whether it recurs decides what it is: stretches inside two or more calls of ops of one name, found
in at least ``allocator_recur_presence`` of a rank's steps when it has two or more, are the op's own
host work (every step, or every call); otherwise (one call, or the first steps only) they are
one-time cost (``one_time_cost``: kind ``host-stall``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import intervals
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.host_calls import DATALOADER_PREFIX, PROFILER_STEP_PREFIX
from traceread.rules._calls import (
    CPU_OPS,
    _cached,
    _only_rank,
    api_calls,
    distinct,
    host_threads,
    name_hits,
    select,
    thread_cpu_ops,
    thread_host_rows,
)
from traceread.rules._columns import Frame, col
from traceread.trace import Trace

# Ops whose quiet is a wait with a rule of its own (a data loader's queue, a collective or point-to-point
# transfer on the host, the step marker), not the op's own host work.
_WAITS = re.compile(r"^(?:" + re.escape(DATALOADER_PREFIX) + "|" + re.escape(PROFILER_STEP_PREFIX) + r")|"
                    r"^(?:_?c10d(?:_functional)?::|nccl:|rccl:|gloo:|mpi:?)|(?i:barrier|all_?reduce|all_?gather|"
                    r"reduce_?scatter|all_?to_?all|broadcast|isend|irecv|^send|^recv|wait_tensor)")


@dataclass(frozen=True)
class Stalls:
    """Every long child-free stretch of a trace: rank, start, end (ns), the outermost op holding it,
    and whether stretches inside ops of that name recur every step (host work) or not (one-time)."""

    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    op: np.ndarray
    recurs: np.ndarray

    def where(self, keep: np.ndarray) -> Stalls:
        return Stalls(self.rank[keep], self.start[keep], self.end[keep], self.op[keep], self.recurs[keep])


def _empty() -> Stalls:
    z = np.zeros(0, np.int64)
    return Stalls(z, z, z, np.zeros(0, object), np.zeros(0, bool))


def stalls(trace: Trace | None, steps: pd.DataFrame | None, cfg: Thresholds) -> Stalls:
    """The trace's long child-free stretches inside CPU ops (module doc), sorted by rank then start; found
    once while the rules' selections are shared (one-time cost and the rules' context both read them)."""
    if trace is None or trace.events.empty:
        return _empty()
    key = ("host_stalls", id(steps), cfg.host_stall_min_ns, cfg.allocator_recur_presence)
    return _cached(trace, key, lambda: _stalls(trace, steps, cfg))


def _stalls(trace: Trace, steps: pd.DataFrame | None, cfg: Thresholds) -> Stalls:
    from traceread.rules.one_time_cost import allocator_recurs  # (one_time_cost reads this module too)

    v = event_view(trace)
    only = _only_rank(trace)  # (one rank, the common case: no selection of every rank's CPU ops)
    out: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for rank in [only] if only is not None else distinct(v.rank[select(trace, CPU_OPS)]):  # ranks, threads: few
        calls = api_calls(trace, rank)
        c_tid = calls.tid
        for tid in host_threads(trace, rank):
            ops, os_, reach = thread_cpu_ops(trace, rank, tid)
            if len(ops) == 0:  # a stretch lies inside a CPU op: a thread without any has none
                continue
            host = thread_host_rows(trace, rank, tid)
            mine = c_tid == tid
            cs, ce = calls.start[mine], calls.end_of(mine)
            qs, qe = quiet_stretches(v.start[host].astype(np.int64, copy=False),
                                     v.end[host].astype(np.int64, copy=False), cs, ce, cfg.host_stall_min_ns)
            if len(qs) == 0:
                continue
            mid = qs + (qe - qs) // 2
            # inside a CPU op: the earliest op still running at the middle (no boundary inside: it spans it)
            first = np.searchsorted(reach, mid, side="left")
            inside = first < np.searchsorted(os_, mid, side="right")
            # under no runtime/driver call of the thread (a blocking call is a sync, not host work)
            if len(cs):
                call_reach = np.maximum.accumulate(ce)
                j = np.searchsorted(cs, mid, side="right") - 1
                inside &= ~((j >= 0) & (call_reach[np.maximum(j, 0)] > mid))
            # the op holding it: the latest started one still running (else the earliest: ops need not nest)
            outer = np.minimum(first, len(ops) - 1)
            last = np.maximum(np.searchsorted(os_, qs, side="right") - 1, 0)
            inner = np.where(v.end[ops[last]].astype(np.int64) > mid, last, outer)
            outer_op, inner_op = ops[outer], ops[inner]
            # waiting, not working: a loader's queue, a collective, the step marker (their own rules)
            other = name_hits(trace, _WAITS)
            inside &= ~other[v.name[outer_op]] & ~other[v.name[inner_op]]
            if not inside.any():
                continue
            inner_name = np.asarray(v.names_of(inner_op), dtype=object)
            out.append((rank, qs[inside], qe[inside], inner_name[inside], inner_op[inside].astype(np.int64)))
    if not out:
        return _empty()
    rank_a = np.concatenate([np.full(len(o[1]), o[0], np.int64) for o in out])
    start = np.concatenate([o[1] for o in out])
    end = np.concatenate([o[2] for o in out])
    op = np.concatenate([o[3] for o in out])
    row = np.concatenate([o[4] for o in out])
    o = np.lexsort((start, rank_a))
    rank_a, start, end, op, row = rank_a[o], start[o], end[o], op[o], row[o]
    recurs = np.zeros(len(start), dtype=bool)
    for rank in distinct(rank_a):
        for name in pd.unique(op[rank_a == rank]).tolist():  # stalling ops are few
            m = (rank_a == rank) & (op == name)
            # several calls stall (one call's stretches are one first call), in enough of the steps
            # when there are steps to tell (a single step: several calls are enough)
            n_calls = len(np.unique(row[m]))
            many_steps = steps is not None and len(_step_count(steps, rank)) >= 2
            recurs[m] = n_calls >= 2 and (not many_steps or allocator_recurs(start[m], steps, rank, cfg))
    return Stalls(rank_a, start, end, op, recurs)


def quiet_stretches(hs: np.ndarray, he: np.ndarray, cs: np.ndarray, ce: np.ndarray,
                    min_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` of each stretch of at least ``min_ns`` between consecutive boundaries (starts and ends
    of the host rows ``hs``/``he``, sorted by start, and of the calls ``cs``/``ce``) that begins at or after the
    first host start (one before it lies in no operator).

    No host row starts inside such a stretch, so it lies in a window between consecutive host starts (or
    after the last) at least ``min_ns`` long: only the boundaries inside those few windows are sorted, not
    every boundary of the thread."""
    none = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(hs) == 0:
        return none
    if min_ns <= 0:  # every pair of boundaries qualifies: no window to narrow to
        b = np.sort(np.concatenate((hs, he, cs, ce)))
        k = np.flatnonzero((np.diff(b) >= min_ns) & (b[:-1] >= hs[0]))
        return b[k], b[k + 1]
    top = max(int(he.max()), int(ce.max()) if len(ce) else int(he.max()))
    edges = np.append(hs, top)
    w = np.flatnonzero(np.diff(edges) >= min_ns)
    if len(w) == 0:
        return none
    lo, hi = edges[w], edges[w + 1]
    id_parts, at_parts = [np.arange(len(w)), np.arange(len(w))], [lo, hi]
    # A host row ending before the next row starts ends inside a window only when its start opens that window
    # (those are few); a row ending later (a parent of the rows after it) is searched for
    own = he[w]
    keep = (own > lo) & (own < hi)
    id_parts.append(np.flatnonzero(keep))
    at_parts.append(own[keep])
    # (such a row starts at or before the window it ends in: its end passes the start of the first window at or
    # after its own position, which only the rows holding a window's start do; those few are tested)
    lo_next = np.repeat(np.append(lo, np.iinfo(np.int64).max), np.diff(w, prepend=-1, append=len(hs) - 1))
    spans = np.flatnonzero(he > lo_next)
    del lo_next
    spans = spans[he[spans] > edges[1:][spans]]
    bounds = np.empty(2 * len(w), dtype=lo.dtype)
    bounds[0::2], bounds[1::2] = lo, hi
    for inner in (he[spans], cs, ce):  # the boundaries strictly inside a window (one array at a time)
        if len(inner) > _SORTED_SEARCH_MIN and intervals.is_sorted(inner):
            # sorted (a thread's calls): each window's boundaries are one run, found by its two ends
            first = np.searchsorted(inner, lo, side="right")
            count = np.maximum(np.searchsorted(inner, hi, side="left") - first, 0)
            j = np.repeat(np.arange(len(w)), count)
            id_parts.append(j)
            at_parts.append(inner[np.arange(len(j)) - np.repeat(np.cumsum(count) - count - first, count)])
            continue
        # the windows are disjoint and in order: with their ends interleaved (lo0, hi0, lo1, ...), a boundary
        # after an odd number of ends lies in window k // 2 (above its start), and strictly inside unless it is
        # the window's end; those are few, so only they are read again
        k = np.searchsorted(bounds, inner, side="left")
        cand = np.flatnonzero(k & 1)
        j = k[cand] >> 1
        keep = inner[cand] < hi[j]
        id_parts.append(j[keep])
        at_parts.append(inner[cand[keep]])
        del k, cand, j, keep
    ids, at = np.concatenate(id_parts), np.concatenate(at_parts)
    order = np.lexsort((at, ids))
    ids, at = ids[order], at[order]
    k = np.flatnonzero((ids[1:] == ids[:-1]) & (np.diff(at) >= min_ns))
    return at[k], at[k + 1]


# Boundary arrays from this many on are checked for order: a sorted one is searched by the windows' ends.
_SORTED_SEARCH_MIN = 1024


def _step_count(steps: pd.DataFrame, rank: int) -> np.ndarray:
    """The distinct step numbers of ``rank``."""
    return np.unique(steps["step"].to_numpy()[steps["rank"].to_numpy() == rank])


def stall_cover(gaps: Frame, found: Stalls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(ns, op, recurs)``: the child-free stretches of its rank covering it (union, ns), the op
    holding the longest one ('' when none) and whether that op's stretches recur every step."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    op = np.empty(n, dtype=object)
    op.fill("")
    recurs = np.zeros(n, dtype=bool)
    if n == 0 or len(found.start) == 0:
        return ns, op, recurs
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(found.rank):
        mine = found.where(found.rank == rank)
        sel = np.flatnonzero(g_rank == rank)
        if len(sel) == 0:
            continue
        ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(mine.start, mine.end))
        sel = sel[ns[sel] > 0]
        for dev in distinct(g_dev[sel]):
            q = sel[g_dev[sel] == dev]
            q = q[np.argsort(gs[q], kind="stable")]  # a device's gaps are disjoint
            _, idx = intervals.longest_overlap(gs[q], ge[q], mine.start, mine.end)
            hit = idx >= 0
            op[q[hit]] = mine.op[idx[hit]]
            recurs[q[hit]] = mine.recurs[idx[hit]]
    return ns, op, recurs
