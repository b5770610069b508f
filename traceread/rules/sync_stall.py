"""sync-stall: a synchronization took away the host's lead, or held the host for most of the gap.

::

    compute  ==queued kernels==|..........gap..........|==next==
    host  [aten::item: cudaStreamSynchronize]|log_metrics / dispatch ....|launch
           ^ waits while the GPU runs the queue ^ host work the lead would have hidden
    host     [cudaMemcpy DtoH / cudaStreamSynchronize / cudaFree .........]|launch
                                 ^ the host is provably inside the sync for most of the gap

Two signatures, both requiring that the next kernel had not been queued before the drain:

* **drain-sync** (``.item()``, ``.cpu()``, ``synchronize()``): a sync call in progress at the drain
  that waited at least ``sync_min_wait_ns`` while the GPU ran queued work (``queued_wait``) and
  returned as the GPU went idle, so whatever host work follows (logging, metrics, operator dispatch)
  is exposed: without the sync the host would have done it while the GPU still ran the work it
  waited for. That lost lead, ``min(wait, gap)``, is the part of the gap the sync caused; when it is
  at least ``sync_stall_min_share`` of the gap (the host work would mostly have been hidden), the
  gap is a sync stall; the first fix is to remove or defer the sync. A short lead before a long
  stretch of host work (a blocking result copy, then seconds of MPI and host compute) did not cause
  most of the gap: it is judged by the rest. Host work with stronger evidence of
  its own (a DataLoader or the host producing the batch, compilation or other one-time work,
  communication) is taken by the earlier rules first. A sync called after the drain (or within
  ``sync_min_wait_ns`` of it) returned at once: it cost nothing, the host was behind anyway, and the
  gap is judged by what the host did next (dense dispatch: launch-bound).
* **blocked**: the host was inside sync calls (stream/device/event synchronize, blocking
  ``cudaMemcpy``) or synchronizing allocator calls that recur every step
  (``cudaFree``/``hipFree``/``cudaMalloc``: the caching allocator thrashing) for at least
  ``sync_stall_min_share`` of the gap. A next launch issued within ``sync_refill_max_ns`` of the
  sync's return is the stall's own refill and counts with it.

A host blocked on a point-to-point recv that recurs every step is the pipeline schedule (a bubble),
not a stall.

Evidence is named: ``allocator`` when allocator calls hold more of the gap than other syncs (first
fix: the caching allocator's configuration), else ``sync`` (first fix: take the sync out of the
loop).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import HOST_LANES, event_view
from traceread.host_calls import DEVICE_ALLOCATOR, SYNC
from traceread.rules._base import Rule, RuleContext, cat, fmt_int, fmt_ns, fmt_pct, texts, where
from traceread.rules._calls import api_calls, count_at_or_before, count_before, distinct, name_hits
from traceread.rules._columns import Frame, Gaps, col, frac
from traceread.rules.one_time_cost import allocator_recurs
from traceread.trace import Trace

NAME = "sync-stall"


def _first_overlap(gs: np.ndarray, ge: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per query ``[gs, ge)``: when the earliest interval overlapping it began (clipped to ``gs``; -1: none)."""
    if not intervals.is_sorted(s):  # (the rules' calls come sorted by start: no sort)
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
    out = np.full(len(gs), -1, dtype=np.int64)
    k = count_at_or_before(s, gs) - 1
    reach = np.maximum.accumulate(e)
    before = (k >= 0) & (reach[np.maximum(k, 0)] > gs)
    out[before] = gs[before]
    j = count_before(s, gs)
    inside = ~before & (j < len(s)) & (s[np.minimum(j, len(s) - 1)] < ge)
    out[inside] = s[j[inside]]
    return out


def blocked(gaps: Frame, steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(blocked_ns, alloc_ns, alloc_calls, block_start_ns)``: host time inside sync calls or
    recurring allocator calls (union), the allocator part of it, how many allocator calls overlap
    the gap, and when the host first blocked in it (-1: never)."""
    n = len(gaps)
    blocked_ns = np.zeros(n, dtype=np.int64)
    alloc_ns = np.zeros(n, dtype=np.int64)
    alloc_calls = np.zeros(n, dtype=np.int64)
    block_start = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return blocked_ns, alloc_ns, alloc_calls, block_start
    sync, alloc = name_hits(trace, SYNC), name_hits(trace, DEVICE_ALLOCATOR)
    g_rank = col(gaps, "rank", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(g_rank):  # ranks are few
        sel = np.flatnonzero(g_rank == rank)
        calls = api_calls(trace, rank)  # sorted by start once for every rule
        a = alloc[calls.name]
        if not allocator_recurs(calls.start[a], steps, rank, cfg):
            a = np.zeros_like(a)
        b = sync[calls.name] | a
        if b.any():  # (the ends of these calls only: not a gather of every call's end)
            s_b, e_b = calls.start[b], calls.end_of(b)
            blocked_ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s_b, e_b))
            block_start[sel] = _first_overlap(gs[sel], ge[sel], s_b, e_b)
        if a.any():
            s_a, e_a = calls.start[a], calls.end_of(a)
            alloc_ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s_a, e_a))
            # calls overlapping the gap (one that began before it and holds it counts: a long hipFree)
            alloc_calls[sel] = count_before(s_a, ge[sel]) - count_at_or_before(np.sort(e_a), gs[sel])
    return blocked_ns, alloc_ns, alloc_calls, block_start


def origin_op(gaps: Frame, trace: Trace | None, held: np.ndarray, start: np.ndarray, tid: np.ndarray
              ) -> np.ndarray:
    """Per gap, the host op that issued its drain sync: the outermost CPU op on the sync's thread
    enclosing the call at ``start`` (``aten::item`` around ``aten::_local_scalar_dense``), else the
    innermost user range there ('' when none, or no sync)."""
    out = texts(len(gaps))
    if trace is None or not held.any():
        return out
    # The engine's numpy view of the events (built once per trace): no pandas selection of the ops.
    v = event_view(trace)
    step_marker = np.char.startswith(v.names.astype(str), "ProfilerStep#")  # per distinct name
    g_rank = col(gaps, "rank", dtype=np.int64)
    for rank, t in sorted({(int(r), int(x)) for r, x in zip(g_rank[held], tid[held], strict=True)}):  # threads are few
        q = np.flatnonzero((g_rank == rank) & (tid == t) & held)
        for cat_, outermost in ((schema.CAT_USER_ANNOTATION, False), (schema.CAT_CPU_OP, True)):
            rows = v.rows(HOST_LANES, (cat_,), rank=rank)
            rows = rows[v.tid[rows] == t]
            if not outermost:
                rows = rows[~step_marker[v.name[rows]]]
            if len(rows) == 0:
                continue
            os_, oe = v.start[rows].astype(np.int64), v.end[rows].astype(np.int64)
            names = v.names_of(rows)
            if outermost:
                order = np.argsort(os_, kind="stable")
                os_, oe, names = os_[order], oe[order], names[order]
                reach = np.maximum.accumulate(oe)
                first = np.searchsorted(reach, start[q], side="right")  # earliest op still running after t
                inside = (first < len(os_)) & (os_[np.minimum(first, len(os_) - 1)] <= start[q])
                out[q[inside]] = names[first[inside]]
            else:
                idx = intervals.innermost_covering(start[q], os_, oe)
                out[q[idx >= 0]] = names[idx[idx >= 0]]
    return out


def queued_wait(gaps: Frame, held: np.ndarray, sync_start: np.ndarray,
                unrecorded: np.ndarray | None = None, at: np.ndarray | None = None) -> np.ndarray:
    """Per gap, how long its drain sync waited while the GPU ran queued work: compute-busy time between
    the sync's call and the drain (the idle of earlier gaps of the device in that window taken out).
    ``unrecorded``: gaps in which the GPU was busy with work the capture did not record (a capture's
    lead): queued work too, so not taken out (a blocking copy at the capture's start waited on it).
    0 where no sync was in progress at the drain (``held`` False). ``at``: ``held`` and ``sync_start``
    (and the result) are of the gaps at these positions (ascending) only; the idle read is every gap's."""
    out = np.zeros(len(held), dtype=np.int64)
    which = np.flatnonzero(held)
    if len(which) == 0:
        return out
    has = which if at is None else at[which]
    # rank and device as the frame holds them (compared with one value each): no int64 copy of every gap's
    g_rank, g_dev = col(gaps, "rank"), col(gaps, "device")
    gs, ge = col(gaps, "start_ns", dtype=np.int64), col(gaps, "end_ns", dtype=np.int64)
    h_rank, h_dev = g_rank[has], g_dev[has]
    units = [(rank, dev) for rank in distinct(h_rank) for dev in distinct(h_dev[h_rank == rank])]
    for rank, dev in units:  # ranks and devices are few
        mine = (g_rank == rank) & (g_dev == dev)
        k = np.flatnonzero(mine[has])
        q = has[k]
        lo = np.minimum(sync_start[which[k]], gs[q])
        idle_gaps = mine if unrecorded is None else mine & ~unrecorded
        idle = intervals.overlap_with_union(lo, gs[q], *intervals.union(gs[idle_gaps], ge[idle_gaps]))
        out[which[k]] = gs[q] - lo - idle
    return out


def drain_sync(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """A sync in progress at the drain that waited at least ``sync_min_wait_ns`` while the GPU ran queued
    work (the host lost the lead it had), rather than returning at once or waiting on an idle GPU."""
    return ctx.sync_at_drain & (ctx.sync_wait_ns >= cfg.sync_min_wait_ns)


def stall_ns(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Host-blocked time of each gap plus the refill right after the sync (see module doc)."""
    start = col(gaps, "start_ns", dtype=np.int64)
    end = col(gaps, "end_ns", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    lend = col(gaps, "next_launch_end_ns", -1, dtype=np.int64)
    returned = np.where(ctx.sync_end_ns >= 0, ctx.sync_end_ns, -1)
    # Only a sync that waited on queued work owns the refill: one that returned at once cost nothing.
    refill = drain_sync(gaps, ctx, cfg) & (lstart >= returned) & (lstart - returned <= cfg.sync_refill_max_ns)
    refill_ns = np.where(refill, np.clip(np.minimum(lend, end) - np.maximum(returned, start), 0, None), 0)
    return np.minimum(np.maximum(ctx.sync_blocked_ns + refill_ns, lead_ns(gaps, ctx, cfg)), end - start)


def lead_ns(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Per gap, the part of it a drain-sync's lost lead would have hidden: the host work after the sync
    would have run while the GPU still had the queued work it waited for (0 without a drain-sync)."""
    dur = col(gaps, "end_ns", dtype=np.int64) - col(gaps, "start_ns", dtype=np.int64)
    return np.where(drain_sync(gaps, ctx, cfg), np.minimum(ctx.sync_wait_ns, dur), 0)


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    # A host blocked on a pipeline's recurring p2p recv is waiting on the schedule: a bubble.
    structural = ctx.periodic & (frac(gaps, "comm_p2p") >= cfg.comm_cover)
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    held = stall_ns(gaps, ctx, cfg) / dur >= cfg.sync_stall_min_share
    # The next kernel submitted before the host blocked: the GPU had the work and waited on something
    # else (a dependency the trace does not show), not on the blocked host.
    lend = col(gaps, "next_launch_end_ns", -1, dtype=np.int64)
    submitted_first = (lend >= 0) & (ctx.sync_block_start_ns >= 0) & (lend <= ctx.sync_block_start_ns)
    return ctx.judged & held & ~ctx.queued & ~structural & ~submitted_first


def kind(gaps: Gaps, ctx: RuleContext) -> np.ndarray:
    """``allocator`` where allocator calls hold more of the gap than the other syncs, else ``sync``."""
    other = ctx.sync_blocked_ns - ctx.sync_alloc_ns
    return np.where(ctx.sync_alloc_ns >= np.maximum(other, 1), "allocator", "sync").astype(object)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    start = col(gaps, "start_ns", dtype=np.int64)
    stalled = stall_ns(gaps, ctx, cfg)
    share = fmt_pct(stalled / dur)
    alloc = kind(gaps, ctx) == "allocator"
    name = where(ctx.sync_name != "", ctx.sync_name, "sync calls")
    origin = where(ctx.sync_origin != "", cat(" (from ", ctx.sync_origin, ")"), "")
    sync_text = cat("host blocked in ", name, origin, " for ", share, " of the ", fmt_ns(dur), " gap")
    # The drain-sync: what it waited for, and what host work it exposed.
    longest = col(gaps, "longest_cpu_name", "").astype(object)
    exposed = where(ctx.host_work_label != "", cat(": ", ctx.host_work_label),
                    where(longest != "", cat(" (longest host call ", longest, ")"), ""))
    after = np.clip(col(gaps, "end_ns", dtype=np.int64) - np.maximum(ctx.sync_end_ns, start), 0, None)
    drain_text = cat(name, origin, " waited ", fmt_ns(ctx.sync_wait_ns),
                     " for queued GPU work and returned as the GPU went idle; the host then ran ", fmt_ns(after),
                     " of host work before the next launch", exposed, "; the sync took away the host's lead, which "
                     "would have hidden ", fmt_pct(lead_ns(gaps, ctx, cfg) / dur), " of the ", fmt_ns(dur), " gap")
    blocked = np.minimum(ctx.sync_blocked_ns, dur)
    sync_text = where(lead_ns(gaps, ctx, cfg) > blocked, drain_text, sync_text)
    alloc_text = cat("allocator: host in ", fmt_int(ctx.sync_alloc_calls),
                     " synchronizing allocator call(s) (cudaFree/hipFree/cudaMalloc, recurring every step) for ",
                     fmt_pct(ctx.sync_alloc_ns / dur), " of the ", fmt_ns(dur), " gap (blocked ", share, " in all)")
    return where(alloc, alloc_text, sync_text)


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "periodic", "sync_at_drain", "sync_name", "sync_end_ns", "sync_origin",
         "sync_wait_ns", "sync_blocked_ns", "sync_alloc_ns", "sync_alloc_calls", "sync_block_start_ns",
         "host_work_label")

RULE = Rule(NAME, mask, evidence, kind, reads=(
    "sync_at_drain", "sync_name", "sync_end_ns", "sync_origin", "sync_wait_ns", "sync_blocked_ns", "sync_alloc_ns",
    "sync_alloc_calls", "host_work_label"), facts=FACTS)
