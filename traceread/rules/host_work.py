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

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.host_calls import (
    DATALOADER_PREFIX,
    GRAPH_LAUNCH,
    KERNEL_LAUNCH,
    PROFILER_STEP_PREFIX,
    SYNC,
    frame_label,
)
from traceread.lanes import API_CATS, EventView, event_view
from traceread.rules._base import col
from traceread.trace import Trace

# Frames that only forward to their callee: the label names what is inside them instead.
_GENERIC = ("__call__", "wrapper", "_call_impl", "_wrapped_call_impl", "decorate_context", "inner", "<lambda>",
            "_fn", "fn", "run", "__iter__", "__next__")
_MIN_CHILD_SHARE = 0.05  # descendants under 5% of the outer frame are not named
_NAMED = 2  # descendants named beside the outer frame


def launching_thread(gaps: pd.DataFrame, trace: Trace | None) -> np.ndarray:
    """Per gap, the thread that launched its next kernel, else the rank's busiest launching thread (-1: none)."""
    n = len(gaps)
    out = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return out
    v = event_view(trace)
    api = v.rows((schema.LANE_CPU_THREAD,), API_CATS)
    launches = api[v.matching(api, KERNEL_LAUNCH) | v.matching(api, GRAPH_LAUNCH)]
    if len(launches) == 0:
        return out
    g_rank = col(gaps, "rank", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    l_rank = v.rank[launches]
    for rank in pd.unique(l_rank).tolist():  # ranks are few
        sel = np.flatnonzero(g_rank == rank)
        if len(sel) == 0:
            continue
        calls = launches[l_rank == rank]
        tid = v.tid[calls].astype(np.int64)
        out[sel] = int(pd.Series(tid).value_counts().index[0])
        order = np.argsort(v.start[calls], kind="stable")
        cs, tid = v.start[calls][order].astype(np.int64), tid[order]
        k = np.minimum(np.searchsorted(cs, lstart[sel]), len(cs) - 1)
        found = (lstart[sel] >= 0) & (cs[k] == lstart[sel])
        out[sel[found]] = tid[k[found]]
    return out


_MARKERS = re.compile("^(?:" + re.escape(PROFILER_STEP_PREFIX) + "|" + re.escape(DATALOADER_PREFIX) + ")")


def _host_rows(v: EventView) -> np.ndarray:
    """Rows of Python frames, CPU ops and user ranges (not the step marker nor the loader's own range)."""
    host = np.sort(np.concatenate([
        v.rows((schema.LANE_CPU_THREAD,), (schema.CAT_PYTHON, schema.CAT_CPU_OP)),
        v.rows((schema.LANE_CPU_ANNOTATION,), (schema.CAT_USER_ANNOTATION,))]))
    return host[~v.matching(host, _MARKERS)]


def host_work(gaps: pd.DataFrame, trace: Trace | None, tids: np.ndarray, cfg: Thresholds
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per gap: ``(ns, label)``: launch-free host work on thread ``tids`` overlapping the gap (union, ns),
    and, where it holds at least ``data_loader_cover`` of a gap longer than ``input_work_min_ns``
    (the only gaps a rule names it for), the name of its outermost frame holding most of it with its
    longest meaningful descendants ('' elsewhere)."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    label = np.full(n, "", dtype=object)
    if trace is None or n == 0:
        return ns, label
    v = event_view(trace)
    host = _host_rows(v)
    if len(host) == 0:
        return ns, label
    api = v.rows((schema.LANE_CPU_THREAD,), API_CATS)
    # A frame holding a launch is dispatch; one holding a sync (aten::item around a blocking copy) is a
    # host waiting on the GPU: neither is host work.
    launches = api[v.matching(api, KERNEL_LAUNCH) | v.matching(api, GRAPH_LAUNCH) | v.matching(api, SYNC)]
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    h_rank, h_tid = v.rank[host].astype(np.int64), v.tid[host].astype(np.int64)
    l_rank, l_tid = v.rank[launches].astype(np.int64), v.tid[launches].astype(np.int64)
    threads = pd.DataFrame({"r": h_rank, "t": h_tid}).groupby(["r", "t"], sort=False).indices
    for (rank, tid), at in threads.items():  # threads are few
        sel = np.flatnonzero((g_rank == rank) & (tids == tid))
        if len(sel) == 0:
            continue
        hev = host[at]  # row order, as the frame's
        points = np.sort(v.start[launches[(l_rank == rank) & (l_tid == tid)]].astype(np.int64))
        s, e = v.start[hev].astype(np.int64), v.end[hev].astype(np.int64)
        free = intervals.count_in(s, e, points) == 0
        if not free.any():
            continue
        s, e = s[free], e[free]
        ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
        q = sel[np.argsort(gs[sel], kind="stable")]
        dur = ge[q] - gs[q]
        hit = q[(ns[q] >= cfg.data_loader_cover * dur) & (dur > cfg.input_work_min_ns)]
        if len(hit) == 0:
            continue
        names = v.names[v.name[hev[free]]]
        order = np.lexsort((-e, s))
        s, e, names = s[order], e[order], names[order]
        reach = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
        outer = e > reach  # not inside an earlier (longer-or-equal) launch-free frame
        o_pos = np.flatnonzero(outer)
        for dev in np.unique(g_dev[hit]):  # a device's gaps are disjoint (longest_overlap needs it)
            h = hit[g_dev[hit] == dev]
            _, idx = intervals.longest_overlap(gs[h], ge[h], s[outer], e[outer])
            for g, i in zip(h, idx, strict=True):  # long gaps mostly held by host work only
                if i >= 0:
                    label[g] = _label(s, e, names, int(o_pos[i]))
    return ns, label


def _fmt_ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms" if ns >= 100_000 else f"{ns / 1e3:.0f} us"


def _label(s: np.ndarray, e: np.ndarray, names: np.ndarray, top: int) -> str:
    """The frame at ``top`` and its longest meaningful descendants (generic forwarding frames skipped)."""
    lo = top + 1
    hi = int(np.searchsorted(s, e[top], side="left"))
    span = max(int(e[top] - s[top]), 1)
    inner = np.arange(lo, hi)
    inner = inner[(e[inner] - s[inner]) >= _MIN_CHILD_SHARE * span]
    # Children of a frame: inner frames not inside an earlier inner frame (the stack nests).
    picked: list[int] = []
    frontier = _children(s, e, inner)
    while frontier and len(picked) < _NAMED:
        frontier.sort(key=lambda k: -(e[k] - s[k]))
        k = frontier.pop(0)
        func = str(names[k]).rsplit(": ", 1)[-1].strip()
        if func in _GENERIC or str(names[k]).startswith("nn.Module: "):
            sub = inner[(s[inner] >= s[k]) & (e[inner] <= e[k]) & (inner != k)]
            frontier.extend(_children(s, e, sub))
            continue
        picked.append(k)
    text = f"{frame_label(str(names[top]))} {_fmt_ms(int(e[top] - s[top]))}"
    if picked:
        text += ": " + ", ".join(f"{frame_label(str(names[k]))} {_fmt_ms(int(e[k] - s[k]))}" for k in picked)
    return text


def _children(s: np.ndarray, e: np.ndarray, inner: np.ndarray) -> list[int]:
    """The members of ``inner`` (sorted by start, outer first) not nested in an earlier member."""
    out: list[int] = []
    reach = np.iinfo(np.int64).min
    for k in inner:
        if e[k] > reach:
            out.append(int(k))
            reach = int(e[k])
    return out
