"""The launching thread's own computation seen by CPU sampling (nsys ``cpu_samples``), over a gap.

::

    host     |cudaMemcpy|..MPI_Send..|  (no range, no call: samples in main, std::abs)  |cudaMemcpy|launch
    samples             . . . . . .   . . . . . . . . . . . . . . . . . . . . . . . . .
    compute  ==k==|...........................gap..........................................|==k==

A thread is sampled only while it runs, so a stretch of its samples with no CUDA call around them is the
host computing for itself (host math, logging, an MPI program's own loop), the CPU the bottleneck.
Each sample stands for the time to the thread's next sample, at most the thread's sampling period (its
median spacing): a thread off the CPU leaves a hole. Samples inside a runtime or driver call (dispatch,
a sync, a copy) or a host communication range (``rules.host_comm``) are not its own work. Per gap longer
than ``input_work_min_ns``: the time so covered, and where it holds ``launch_cpu_cover`` of the gap the
functions most of those samples were taken in (their share of them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.rules import host_comm
from traceread.rules._base import texts
from traceread.rules._calls import api_calls, distinct, select
from traceread.rules._columns import Frame, col
from traceread.trace import Trace

TABLE = "cpu_samples"
_NAMED = 3  # functions named
_MIN_SHARE = 0.05  # a function under 5% of the gap's samples is not named


def sampled_work(gaps: Frame, trace: Trace | None, tids: np.ndarray, cfg: Thresholds) -> tuple[np.ndarray, np.ndarray]:
    """``(ns, label)`` per gap (module doc; 0 and '' where not measured)."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    label = texts(n)
    if trace is None or n == 0 or TABLE not in trace.side:
        return ns, label
    side = trace.side[TABLE]
    if len(side) == 0:
        return ns, label
    s_rank = side["rank"].to_numpy(np.int64)
    s_tid = side["tid"].to_numpy(np.int64)
    s_time = side["time_ns"].to_numpy(np.int64)
    func = side["function"]
    f_code = func.cat.codes.to_numpy(np.int64) if isinstance(func.dtype, pd.CategoricalDtype) else \
        pd.factorize(func.to_numpy(dtype=object))[0]
    f_names = np.asarray(func.cat.categories if isinstance(func.dtype, pd.CategoricalDtype)
                         else pd.factorize(func.to_numpy(dtype=object))[1], dtype=object)
    v = event_view(trace)
    g_rank = col(gaps, "rank", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    comm = select(trace, host_comm._RANGES, names=(host_comm.HOST_COMM,))
    for rank in distinct(g_rank):  # ranks and threads are few
        for tid in distinct(tids[g_rank == rank]):
            sel = np.flatnonzero((g_rank == rank) & (tids == tid) & (ge - gs > cfg.input_work_min_ns))
            at = np.flatnonzero((s_rank == rank) & (s_tid == tid))  # sorted by time (the table's order)
            if len(sel) == 0 or len(at) < 2:
                continue
            t = s_time[at]
            step = np.diff(t)
            period = int(np.median(step))
            own_s, own_e = intervals.union(t, t + np.minimum(np.append(step, period), period))
            calls = api_calls(trace, rank)
            mine = calls.rows[v.tid[calls.rows] == tid]
            c_rows = comm[(v.rank[comm] == rank) & (v.tid[comm] == tid)]
            rows = np.concatenate([mine, c_rows])
            xs, xe = intervals.union(v.start[rows].astype(np.int64), v.end[rows].astype(np.int64))
            _, fs, fe = intervals.complement_in_windows(xs, xe, own_s, own_e)  # the samples' time outside them
            ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], fs, fe)
            hit = sel[ns[sel] >= cfg.launch_cpu_cover * (ge[sel] - gs[sel])]
            if len(hit):
                free = intervals.covered_before(t, xs, xe) == intervals.covered_before(t + 1, xs, xe)  # not inside
                label[hit] = _top(gs[hit], ge[hit], t[free], f_code[at][free], f_names)
    return ns, label


def _top(gs: np.ndarray, ge: np.ndarray, t: np.ndarray, code: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Per gap (of one thread), its samples' most frequent named functions with their shares of them."""
    out = texts(len(gs))
    o = np.argsort(gs, kind="stable")
    k = np.searchsorted(gs[o], t, side="right") - 1
    inside = k >= 0
    inside[inside] = t[inside] < ge[o][k[inside]]
    if not inside.any():
        return out
    gap, c = o[k[inside]], code[inside]
    total = np.bincount(gap, minlength=len(gs))
    named = names[c] != ""
    pairs, counts = np.unique(np.stack([gap[named], c[named]], axis=1), axis=0, return_counts=True)
    order = np.lexsort((-counts, pairs[:, 0]))
    pairs, counts = pairs[order], counts[order]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = pairs[1:, 0] != pairs[:-1, 0]
    place = np.arange(len(pairs)) - np.flatnonzero(first)[np.cumsum(first) - 1]  # rank within its gap
    share = counts / np.maximum(total[pairs[:, 0]], 1)
    keep = (place < _NAMED) & (share >= _MIN_SHARE)
    parts: dict[int, list[str]] = {}
    for g, f, x in zip(pairs[keep, 0].tolist(), pairs[keep, 1].tolist(), share[keep].tolist(), strict=True):
        parts.setdefault(g, []).append(f"{names[f]} {x:.0%}")  # at most _NAMED per claimed gap
    for g, p in parts.items():
        out[g] = ", ".join(p)
    return out
