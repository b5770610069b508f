"""What the launching thread did during a gap outside any dispatch: host work with no launch inside.

Two rules read it: ``data-starved`` (the host produced the batch itself: decoding, normalizing,
collating on the training thread) and ``sync-stall`` (the host work a drain-sync exposed).

Host work here is every Python frame (``with_stack``), CPU operator and user range on the thread
that launched the gap's next kernel (else the rank's busiest launching thread) that holds no kernel
or graph launch and no sync call: eager dispatch (a ``forward`` frame whose ops launch kernels) is
not host work, nor is a host blocked in ``aten::item``'s synchronizing copy. The
frames are named from the outermost launch-free one, with its longest meaningful descendants
(``preprocess (video_classification.py:129) 217 ms: preprocess (image_processing_videomae.py:235)
178 ms, read_video_pyav (video_classification.py:174) 36 ms``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import intervals
from traceread.config import Thresholds
from traceread.engine.lanes import EventView, event_view
from traceread.host_calls import (
    DATALOADER_PREFIX,
    GRAPH_LAUNCH,
    KERNEL_LAUNCH,
    PROFILER_STEP_PREFIX,
    SYNC,
    frame_label,
)
from traceread.rules._base import texts
from traceread.rules._calls import (
    api_calls,
    api_ranks,
    count_before,
    distinct,
    matching,
    name_hits,
    thread_host_rows,
)
from traceread.rules._columns import Frame, col
from traceread.trace import Trace

# Frames that only forward to their callee: the label names what is inside them instead.
_GENERIC = ("__call__", "wrapper", "_call_impl", "_wrapped_call_impl", "decorate_context", "inner", "<lambda>",
            "_fn", "fn", "run", "__iter__", "__next__")
_MIN_CHILD_SHARE = 0.05  # descendants under 5% of the outer frame are not named
_NAMED = 2  # descendants named beside the outer frame


def launching_thread(gaps: Frame, trace: Trace | None) -> np.ndarray:
    """Per gap, the thread that launched its next kernel, else the rank's busiest launching thread (-1: none)."""
    n = len(gaps)
    out = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return out
    g_rank = col(gaps, "rank", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    for rank in api_ranks(trace):  # ranks are few
        sel = np.flatnonzero(g_rank == rank)
        if len(sel) == 0:
            continue
        calls = api_calls(trace, rank)  # sorted by start once for every rule
        is_launch = matching(trace, calls, KERNEL_LAUNCH, GRAPH_LAUNCH)
        if not is_launch.any():
            continue
        tid = calls.tid_of(is_launch)  # (the launches' threads only)
        lo = int(np.min(tid))
        if lo == int(np.max(tid)):
            out[sel] = lo  # one launching thread (the common case): no search, no copy of the launches
            continue
        out[sel] = _busiest(tid, calls.rows[is_launch])
        known = sel[lstart[sel] >= 0]
        k = intervals.sorted_positions(calls.start[is_launch], lstart[known])  # (a merge pass where in order)
        found = k >= 0
        out[known[found]] = tid[k[found]]
    return out


def _busiest(tid: np.ndarray, rows: np.ndarray) -> int:
    """The thread with the most launches; on a tie, as ``value_counts`` of the tids in frame order
    picks (the tied thread seen first)."""
    uniq = pd.unique(tid)  # launching threads are few
    counts = np.array([np.count_nonzero(tid == t) for t in uniq.tolist()], dtype=np.int64)
    first = np.array([np.min(rows[tid == t]) for t in uniq.tolist()], dtype=np.int64)
    o = np.argsort(first, kind="stable")
    return int(pd.Series(counts[o], index=uniq[o]).sort_values(ascending=False).index[0])


_MARKERS = re.compile("^(?:" + re.escape(PROFILER_STEP_PREFIX) + "|" + re.escape(DATALOADER_PREFIX) + ")")


def host_work(gaps: Frame, trace: Trace | None, tids: np.ndarray, cfg: Thresholds
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per gap longer than ``input_work_min_ns`` (the only gaps a rule reads it for; 0 and '' for the
    rest): ``(ns, label)``: launch-free host work on thread ``tids`` overlapping the gap (union, ns),
    and, where it holds at least ``data_loader_cover`` of the gap, the name of its outermost frame
    holding most of it with its longest meaningful descendants ('' elsewhere)."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    label = texts(n)
    if trace is None or n == 0:
        return ns, label
    v = event_view(trace)
    marker = name_hits(trace, _MARKERS)
    # A frame holding a launch is dispatch; one holding a sync (aten::item around a blocking copy) is a
    # host waiting on the GPU: neither is host work.
    holds = name_hits(trace, KERNEL_LAUNCH) | name_hits(trace, GRAPH_LAUNCH) | name_hits(trace, SYNC)
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(g_rank):  # ranks and threads are few
        held: tuple[np.ndarray, np.ndarray] | None = None  # the rank's launch and sync calls: starts, threads
        for tid in distinct(tids[g_rank == rank]):
            sel = np.flatnonzero((g_rank == rank) & (tids == tid))
            sel = sel[ge[sel] - gs[sel] > cfg.input_work_min_ns]  # the only gaps a rule reads it for
            hev = thread_host_rows(trace, rank, tid)  # sorted by start (frame order among equal starts)
            if len(sel) == 0 or len(hev) == 0:
                continue
            if held is None:  # (found once for the rank's threads)
                calls = api_calls(trace, rank)  # sorted by start
                at = holds[calls.name]
                held = calls.start[at], v.tid[calls.rows[at]]
            # Only frames overlapping those gaps count (and every frame enclosing one overlaps them too).
            us, ue = intervals.union(gs[sel], ge[sel])
            frames, near = _free_near(v, hev, marker, held[0][held[1] == tid], us, ue)
            if len(near) == 0:
                continue
            s, e = frames.s[near], frames.e[near]
            ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
            q = sel[np.argsort(gs[sel], kind="stable")]
            hit = q[ns[q] >= cfg.data_loader_cover * (ge[q] - gs[q])]
            if len(hit) == 0:
                continue
            s, e, near = _outer_first(s, e, near)
            reach = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
            outer = e > reach  # not inside an earlier (longer-or-equal) launch-free frame
            named, tops = [], []
            for dev in np.unique(g_dev[hit]):  # a device's gaps are disjoint (longest_overlap needs it)
                h = hit[g_dev[hit] == dev]
                _, idx = intervals.longest_overlap(gs[h], ge[h], s[outer], e[outer])
                named.append(h[idx >= 0])
                tops.append(near[outer][idx[idx >= 0]])
            if named:
                label[np.concatenate(named)] = frames.labels(v, np.concatenate(tops))
    return ns, label


def _free_near(v: EventView, hev: np.ndarray, marker: np.ndarray, points: np.ndarray, us: np.ndarray,
               ue: np.ndarray) -> tuple[_Frames, np.ndarray]:
    """The thread's frames ``hev`` (sorted by start) but the markers (``marker`` per name code), and the
    positions among them of the launch-free ones (no launch or sync call of ``points`` starts inside)
    overlapping the union ``us``/``ue`` of the gaps (at least one member). Compiled (``_cintervals.free_near``:
    one pass over the frames, no array per step) where built, else :func:`_free_near_numpy`, its twin."""
    c = intervals.sweeper()
    if c is not None:
        n = len(hev)
        rows, s, e, near = (np.empty(n, dtype=np.int64) for _ in range(4))
        got = c.free_near(np.ascontiguousarray(v.start, np.int64), np.ascontiguousarray(v.end, np.int64),
                          np.ascontiguousarray(v.name), np.ascontiguousarray(hev), np.ascontiguousarray(marker, bool),
                          np.ascontiguousarray(points, np.int64), np.ascontiguousarray(us, np.int64),
                          np.ascontiguousarray(ue, np.int64), rows, s, e, near)
        if got is not None:  # (None: not sorted as it needs; the twin answers)
            m, q = got
            return _Frames(s[:m], e[:m], rows[:m], points), near[:q]
    return _free_near_numpy(v, hev, marker, points, us, ue)


def _free_near_numpy(v: EventView, hev: np.ndarray, marker: np.ndarray, points: np.ndarray, us: np.ndarray,
                     ue: np.ndarray) -> tuple[_Frames, np.ndarray]:
    """:func:`_free_near` in numpy (the compiled pass's twin)."""
    hev = hev[~marker[v.name[hev]]]
    frames = _Frames(v.start[hev].astype(np.int64, copy=False), v.end[hev].astype(np.int64, copy=False), hev, points)
    j = np.minimum(_count_at_or_before(ue, frames.s), len(ue) - 1)
    near = np.flatnonzero((ue[j] > frames.s) & (us[j] < frames.e))
    return frames, near[frames.free(near)]


def _count_at_or_before(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``np.searchsorted(points, t, side="right")`` for sorted ``t`` (a thread's frames, many) and sorted
    ``points`` (few): each point placed among the times once, then counted, not a search per time."""
    first = np.searchsorted(t, points, side="left")  # the first time at or after each point
    return np.cumsum(np.bincount(first, minlength=len(t) + 1)[: len(t)])


@dataclass(frozen=True)
class _Frames:
    """One thread's host frames sorted by start (frame order among equal starts) and its launch and
    sync calls' starts (sorted)."""

    s: np.ndarray
    e: np.ndarray
    rows: np.ndarray
    points: np.ndarray

    def free(self, at: np.ndarray) -> np.ndarray:
        """Per frame at ``at``: no launch or sync call starts inside it (the first at or after its start
        is at or past its end)."""
        if len(self.points) == 0:
            return np.ones(len(at), dtype=bool)
        k = count_before(self.points, self.s[at])  # (frames in start order: a merge pass)
        return (k == len(self.points)) | (self.points[np.minimum(k, len(self.points) - 1)] >= self.e[at])

    def labels(self, v: EventView, tops: np.ndarray) -> np.ndarray:
        """:func:`_label` of each outermost launch-free frame at ``tops``, read among the launch-free
        frames starting inside those frames (a frame's descendants), ordered as the whole thread's are."""
        lo = np.searchsorted(self.s, self.s[tops], side="left")
        hi = np.searchsorted(self.s, self.e[tops], side="left")
        inside = np.zeros(len(self.s) + 1, dtype=np.int64)
        np.add.at(inside, lo, 1)
        np.add.at(inside, hi, -1)
        at = np.flatnonzero(np.cumsum(inside[:-1]) > 0)
        at = at[self.free(at)]
        pos = np.searchsorted(at, tops)  # (``at`` ascending: the positions the sorted reordered ones have)
        s, e, at = _outer_first(self.s[at], self.e[at], at)  # a top before the frames it holds
        where = np.empty(len(at), dtype=np.int64)
        where[np.argsort(at, kind="stable")] = np.arange(len(at))
        names = _names_at(v, self.rows[at])
        top = where[pos]
        ends = np.searchsorted(s, e[top], side="left")  # past each top's descendants (one search for all)
        shown: dict[str, str] = {}  # frame_label of each name, found once (the tops repeat a few frames)

        def label_of(name: str) -> str:
            got = shown.get(name)
            if got is None:
                got = shown[name] = frame_label(name)
            return got
        # each top's own part ("name 12.3 ms"), its name and length read for all tops at once
        heads = [f"{label_of(str(name))} {_fmt_ms(ns)}" for name, ns in
                 zip(v.names[v.name[self.rows[at[top]]]].tolist(), (e[top] - s[top]).tolist(), strict=True)]
        return np.array([_label(s, e, names, k, hi, label_of, head)
                         for k, hi, head in zip(top.tolist(), ends.tolist(), heads, strict=True)] or [""],
                        dtype=object)[:len(tops)]


def _outer_first(s: np.ndarray, e: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames sorted by start (frame order among equal starts) reordered so that among equal starts the
    longest comes first (a stack's outer frame before its callees): only runs of equal starts move."""
    at = np.flatnonzero(s[1:] == s[:-1])
    if len(at) == 0:
        return s, e, rows
    at = np.union1d(at, at + 1)
    o = at[np.lexsort((-e[at], s[at]))]
    s, e, rows = s.copy(), e.copy(), rows.copy()
    s[at], e[at], rows[at] = s[o], e[o], rows[o]
    return s, e, rows


def _names_at(v: EventView, rows: np.ndarray) -> Callable[[int], str]:
    """The name of ``rows[k]``, looked up only for the frames a label names."""
    return lambda k: str(v.names[v.name[rows[k]]])


def _fmt_ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms" if ns >= 100_000 else f"{ns / 1e3:.0f} us"


def _label(s: np.ndarray, e: np.ndarray, names: Callable[[int], str], top: int, hi: int,
           label_of: Callable[[str], str] = frame_label, head: str | None = None) -> str:
    """The frame at ``top`` and its longest meaningful descendants (generic forwarding frames skipped;
    ``hi``: the first frame starting at or after its end; ``label_of``: ``frame_label``; ``head``: the
    top's own part, when made already)."""
    lo = top + 1
    picked: list[int] = []
    # Children of a frame: inner frames not inside an earlier inner frame (the stack nests).
    frontier: list[int] = []
    if hi > lo:  # (a frame with none inside: no child to find)
        inner = np.arange(lo, hi)
        inner = inner[(e[inner] - s[inner]) >= _MIN_CHILD_SHARE * max(int(e[top] - s[top]), 1)]
        frontier = _children(s, e, inner)
    while frontier and len(picked) < _NAMED:
        frontier.sort(key=lambda k: -(e[k] - s[k]))
        k = frontier.pop(0)
        func = names(k).rsplit(": ", 1)[-1].strip()
        if func in _GENERIC or names(k).startswith("nn.Module: "):
            sub = inner[(s[inner] >= s[k]) & (e[inner] <= e[k]) & (inner != k)]
            frontier.extend(_children(s, e, sub))
            continue
        picked.append(k)
    text = f"{label_of(names(top))} {_fmt_ms(int(e[top] - s[top]))}" if head is None else head
    if picked:
        text += ": " + ", ".join(f"{label_of(names(k))} {_fmt_ms(int(e[k] - s[k]))}" for k in picked)
    return text


def _children(s: np.ndarray, e: np.ndarray, inner: np.ndarray) -> list[int]:
    """The members of ``inner`` (sorted by start, outer first) not nested in an earlier member: those
    ending after every earlier one (a member nested in an earlier one never raises that reach, so the
    reach of the earlier members is the reach of the kept ones)."""
    if len(inner) == 0:
        return []
    ends = e[inner]
    keep = np.empty(len(inner), dtype=bool)
    keep[0] = ends[0] > np.iinfo(np.int64).min
    np.greater(ends[1:], np.maximum.accumulate(ends)[:-1], out=keep[1:])
    out: list[int] = inner[keep].tolist()
    return out
