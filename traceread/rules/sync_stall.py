"""sync-stall: the host was blocked in a synchronization for most of the compute-idle gap.

::

    compute  ==queued kernels==|..........gap..........|==next==
    host     [cudaMemcpy DtoH / cudaStreamSynchronize / cudaFree .........]|launch
                                 ^ the host is provably inside the sync for most of the gap

Signature: the next kernel had not been queued before the drain, and the host was inside sync
calls (stream/device/event synchronize, blocking ``cudaMemcpy``) or synchronizing allocator calls
that recur every step (``cudaFree``/``hipFree``/``cudaMalloc``: the caching allocator thrashing)
for at least ``sync_stall_min_share`` of the gap. A next launch issued within
``sync_refill_max_ns`` of the sync's return is the stall's own refill and counts with it. Host work
after the sync returned (Python, operator dispatch, a long host stretch) is *not* the stall: it is
judged on its own evidence by the later rules (launch-bound, unattributed). A host blocked on a
point-to-point recv that recurs every step is the pipeline schedule (a bubble), not a stall.

Evidence is named: ``allocator`` when allocator calls hold more of the gap than other syncs (first
fix: the caching allocator's configuration), else ``sync`` (first fix: take the sync out of the
loop).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals
from traceread.config import Thresholds
from traceread.host_calls import DEVICE_ALLOCATOR, SYNC, calls_matching
from traceread.rules._base import Rows, Rule, RuleContext, api_calls, cat, col, fmt_ns, fmt_pct, frac
from traceread.rules.one_time_cost import allocator_recurs
from traceread.trace import Trace

NAME = "sync-stall"


def _first_overlap(gs: np.ndarray, ge: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per query ``[gs, ge)``: when the earliest interval overlapping it began (clipped to ``gs``; -1: none)."""
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    out = np.full(len(gs), -1, dtype=np.int64)
    k = np.searchsorted(s, gs, side="right") - 1
    reach = np.maximum.accumulate(e)
    before = (k >= 0) & (reach[np.maximum(k, 0)] > gs)
    out[before] = gs[before]
    j = np.searchsorted(s, gs, side="left")
    inside = ~before & (j < len(s)) & (s[np.minimum(j, len(s) - 1)] < ge)
    out[inside] = s[j[inside]]
    return out


def blocked(gaps: pd.DataFrame, steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(blocked_ns, alloc_ns, alloc_calls, block_start_ns)``: host time inside sync calls or
    recurring allocator calls (union), the allocator part of it, how many allocator calls start in
    the gap, and when the host first blocked in it (-1: never)."""
    n = len(gaps)
    blocked_ns = np.zeros(n, dtype=np.int64)
    alloc_ns = np.zeros(n, dtype=np.int64)
    alloc_calls = np.zeros(n, dtype=np.int64)
    block_start = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return blocked_ns, alloc_ns, alloc_calls, block_start
    ev = trace.events
    api = api_calls(ev)
    if api.empty:
        return blocked_ns, alloc_ns, alloc_calls, block_start
    is_sync = calls_matching(api["name"], SYNC)
    is_alloc = calls_matching(api["name"], DEVICE_ALLOCATOR)
    g_rank = col(gaps, "rank").astype(np.int64)
    gs = col(gaps, "start_ns").astype(np.int64)
    ge = col(gaps, "end_ns").astype(np.int64)
    r_all = api["rank"].to_numpy(np.int64)
    s_all, e_all = api["start_ns"].to_numpy(np.int64), api["end_ns"].to_numpy(np.int64)
    for rank in np.unique(g_rank):  # ranks are few
        sel = np.flatnonzero(g_rank == rank)
        here = r_all == rank
        a = here & is_alloc
        if not allocator_recurs(s_all[a], steps, int(rank), cfg):
            a = np.zeros_like(a)
        b = here & (is_sync | a)
        if b.any():
            blocked_ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s_all[b], e_all[b]))
            block_start[sel] = _first_overlap(gs[sel], ge[sel], s_all[b], e_all[b])
        if a.any():
            alloc_ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s_all[a], e_all[a]))
            alloc_calls[sel] = intervals.count_in(gs[sel], ge[sel], np.sort(s_all[a]))
    return blocked_ns, alloc_ns, alloc_calls, block_start


def stall_ns(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Host-blocked time of each gap plus the refill right after the sync (see module doc)."""
    start = col(gaps, "start_ns").astype(np.int64)
    end = col(gaps, "end_ns").astype(np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1).astype(np.int64)
    lend = col(gaps, "next_launch_end_ns", -1).astype(np.int64)
    returned = np.where(ctx.sync_end_ns >= 0, ctx.sync_end_ns, -1)
    refill = ctx.sync_at_drain & (lstart >= returned) & (lstart - returned <= cfg.sync_refill_max_ns)
    refill_ns = np.where(refill, np.clip(np.minimum(lend, end) - np.maximum(returned, start), 0, None), 0)
    return np.minimum(ctx.sync_blocked_ns + refill_ns, end - start)


def mask(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    # A host blocked on a pipeline's recurring p2p recv is waiting on the schedule: a bubble.
    structural = ctx.periodic & (frac(gaps, "comm_p2p") >= cfg.comm_cover)
    dur = np.maximum(col(gaps, "dur_ns").astype(np.int64), 1)
    held = stall_ns(gaps, ctx, cfg) / dur >= cfg.sync_stall_min_share
    # The next kernel submitted before the host blocked: the GPU had the work and waited on something
    # else (a dependency the trace does not show), not on the blocked host.
    lend = col(gaps, "next_launch_end_ns", -1).astype(np.int64)
    submitted_first = (lend >= 0) & (ctx.sync_block_start_ns >= 0) & (lend <= ctx.sync_block_start_ns)
    return ctx.judged & held & ~ctx.queued & ~structural & ~submitted_first


def kind(gaps: pd.DataFrame | Rows, ctx: RuleContext) -> np.ndarray:
    """``allocator`` where allocator calls hold more of the gap than the other syncs, else ``sync``."""
    other = ctx.sync_blocked_ns - ctx.sync_alloc_ns
    return np.where(ctx.sync_alloc_ns >= np.maximum(other, 1), "allocator", "sync").astype(object)


def evidence(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns").astype(np.int64), 1)
    share = fmt_pct(stall_ns(gaps, ctx, cfg) / dur)
    alloc = kind(gaps, ctx) == "allocator"
    name = np.where(ctx.sync_name != "", ctx.sync_name, "sync calls")
    sync_text = cat("host blocked in ", name, " for ", share, " of the ", fmt_ns(dur), " gap")
    alloc_text = cat("allocator: host in ", ctx.sync_alloc_calls.astype(str).astype(object),
                     " synchronizing allocator call(s) (cudaFree/hipFree/cudaMalloc, recurring every step) for ",
                     fmt_pct(ctx.sync_alloc_ns / dur), " of the ", fmt_ns(dur), " gap (blocked ", share, " in all)")
    return np.where(alloc, alloc_text, sync_text).astype(object)


RULE = Rule(NAME, mask, evidence, kind)
