"""One class per recurring gap: the same gap in each step is judged on the evidence of all of them.

::

    step 1  ==k:fwd_last==|....batch copy 49%....|==k:fwd_first==    unattributed (49% < 50%)
    step 2  ==k:fwd_last==|....batch copy 52%....|==k:fwd_first==    data-starved
    step 3  ==k:fwd_last==|....batch copy 48%....|==k:fwd_first==    unattributed
            same slot, same kernels before and after, durations alike: one gap that recurs

A cover threshold splits a gap that recurs every step when its evidence sits near the threshold
(the same batch copy covering 49% of the gap in one step and 52% in the next). Gaps are one
*recurring gap* when they have the same signature: the same kernel names just before and just after,
the same slot (the k-th gap with that pair of names in its step, on its rank and device), and a
duration within ``recurring_dur_factor`` of the group's median, in two or more steps or ranks: the
same gap on every rank of a job is one (issue 42: a threshold must not split it between ranks, nor
make the difference a straggler's stated cause). The ranks of one file (an nsys export of several
processes) are pooled here; files classified apart (Kineto: one per rank) in ``rules.across``. A group whose
classes differ is classified on its pooled evidence: the class holding most of its idle time
(strictly more than half) is the group's, and a member of another class takes it only when its own
evidence is near the thresholds: its own class's mask fails with every cover threshold raised by
``recurring_near_band`` (or it is unattributed), and the group's class's mask holds for it with every
cover threshold lowered by that band (or the group's class is unattributed). A gap with clear
evidence of its own keeps its class; so does every gap at a capture boundary. Each gap keeps its own
evidence (its sentence reads its own facts); its evidence kind is the group's (that of the group's
longest gap of the group's class).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.rules._base import Rule, RuleContext
from traceread.rules._calls import count_at_or_before, count_before, distinct
from traceread.rules._columns import ColumnCache, Frame, Rows, col, column_cache, frame_of
from traceread.trace import Trace
from traceread.vocabulary import CAPTURE_BOUNDARY, GAP_CLASSES

# The cover thresholds the near band moves (each a fraction of the gap that a class's evidence must hold).
COVER_FIELDS = ("data_loader_cover", "comm_cover", "launch_cpu_cover", "one_time_cover", "sync_stall_min_share")


def _shifted(cfg: Thresholds, by: float) -> Thresholds:
    """``cfg`` with every cover threshold moved by ``by`` (kept in [0, 1])."""
    return dataclasses.replace(cfg, **{f: min(max(getattr(cfg, f) + by, 0.0), 1.0) for f in COVER_FIELDS})


def neighbours(gaps: Frame, trace: Trace | None) -> tuple[np.ndarray, np.ndarray]:
    """Per gap: the name codes (the trace's event names) of the compute kernel that ended at its start
    and of the one that started at its end (-1: none on its device)."""
    n = len(gaps)
    prev = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return prev, nxt
    v = event_view(trace)
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(g_rank):  # ranks and devices are few
        for dev in distinct(g_dev[g_rank == rank]):
            sel = np.flatnonzero((g_rank == rank) & (g_dev == dev))
            k = v.rows((schema.LANE_GPU_COMPUTE,), rank=int(rank), device=int(dev))
            if len(k) == 0:
                continue
            ks, ke = v.start[k].astype(np.int64, copy=False), v.end[k].astype(np.int64, copy=False)
            by_end = _in_order(ke)
            i = count_at_or_before(ke if by_end is None else ke[by_end], gs[sel]) - 1
            ok = i >= 0
            prev[sel[ok]] = v.name[k[i[ok] if by_end is None else by_end[i[ok]]]]
            by_start = _in_order(ks)
            j = count_before(ks if by_start is None else ks[by_start], ge[sel])
            ok = j < len(k)
            nxt[sel[ok]] = v.name[k[j[ok] if by_start is None else by_start[j[ok]]]]
    return prev, nxt


def _in_order(t: np.ndarray) -> np.ndarray | None:
    """The stable sort order of ``t``, or None when it is sorted already (a device's kernels mostly are)."""
    return None if intervals.is_sorted(t) else np.argsort(t, kind="stable")


def groups(gaps: Frame, trace: Trace | None, eligible: np.ndarray, cfg: Thresholds) -> np.ndarray:
    """Per gap, its recurring group (see the module doc; -1: none): eligible gaps with the same kernels
    before and after and slot (on any rank and device), a duration within ``recurring_dur_factor`` of the
    group's median, two or more of them."""
    n = len(gaps)
    out = np.full(n, -1, dtype=np.int64)
    prev, nxt = neighbours(gaps, trace)
    cand = np.flatnonzero(eligible & (prev >= 0) & (nxt >= 0))
    if len(cand) < 2:
        return out
    unit = _row_ids(np.stack([col(gaps, "rank", dtype=np.int64)[cand], col(gaps, "device", dtype=np.int64)[cand]],
                             axis=1))
    grp, order = slots(_row_ids(np.stack([prev[cand], nxt[cand]], axis=1)), unit,
                       col(gaps, "step", dtype=np.int64)[cand], col(gaps, "start_ns", dtype=np.int64)[cand])
    rows = cand[order]
    return _alike(out, rows, grp, col(gaps, "dur_ns", dtype=np.int64)[rows], cfg)


def slots(sig: np.ndarray, unit: np.ndarray, step: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group, order)``: the rows in ``order`` (by signature, unit, step, start) and each one's group, its
    signature and slot (the k-th gap of its signature in its unit's step: units are the (rank, device) pairs,
    and a recurring gap is the same on every rank of a job, so they are not part of the group)."""
    order = np.lexsort((start, step, unit, sig))
    s_sig, s_unit, s_step = sig[order], unit[order], step[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (s_sig[1:] != s_sig[:-1]) | (s_unit[1:] != s_unit[:-1]) | (s_step[1:] != s_step[:-1])
    run = np.cumsum(first) - 1
    slot = np.arange(len(order)) - np.flatnonzero(first)[run]  # k-th gap of this signature in its step
    if len(order) == 0:
        return np.zeros(0, dtype=np.intp), order
    # The group: the rank of (signature, slot) among the distinct pairs, read off the order (no sort): a
    # signature's slots are 0 to its longest run's length - 1, every one present (that run holds them all).
    new_sig = np.ones(len(order), dtype=bool)
    new_sig[1:] = s_sig[1:] != s_sig[:-1]
    width = np.maximum.reduceat(slot, np.flatnonzero(new_sig)) + 1
    return (np.cumsum(width) - width)[np.cumsum(new_sig) - 1] + slot, order


def _alike(out: np.ndarray, rows: np.ndarray, grp: np.ndarray, dur_ns: np.ndarray, cfg: Thresholds) -> np.ndarray:
    """``out`` with ``grp`` set at ``rows`` where a gap's duration is within ``recurring_dur_factor`` of its
    group's median and the group keeps two or more such gaps."""
    dur = dur_ns.astype(np.float64)
    med = _medians(grp, dur, dur_ns)
    f = cfg.recurring_dur_factor
    alike = (dur <= med[grp] * f) & (dur * f >= med[grp])
    size = np.bincount(grp[alike], minlength=int(np.max(grp)) + 1)
    keep = alike & (size[grp] >= 2)
    out[rows[keep]] = grp[keep]
    return out


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0, return_inverse=True)[1]`` of an int64 matrix: each row's rank among the
    distinct rows in lexicographic order, by one mixed-radix key of each column's sorted codes (a sort of one
    int64 column, not of rows; none where the keys span not much more than the rows)."""
    key = np.zeros(len(rows), dtype=np.int64)
    room = 1
    for j in range(rows.shape[1]):
        codes, uniq = pd.factorize(rows[:, j], sort=True)
        room *= max(len(uniq), 1)
        if room >= 2**62:  # too many combinations for one key: the rows themselves
            return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
        key = key * len(uniq) + codes
    if room > 2 * len(key) + 4096:
        return np.unique(key, return_inverse=True)[1].reshape(-1)
    # keys within a span not much longer than the rows: each key's rank among the present ones by a table, no sort
    present = np.zeros(room, dtype=bool)
    present[key] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return rank[key].astype(np.intp, copy=False)


def _medians(grp: np.ndarray, x: np.ndarray, ints: np.ndarray | None = None) -> np.ndarray:
    """The median of ``x`` per group ``grp`` (0..max), vectorized: sort by (group, value), take the middle.
    ``ints``: integers that ``x`` holds as floats (durations), ordered alike: (group, value) is then sorted as
    one integer key where it fits, one sort, not two."""
    m = int(grp.max()) + 1
    order = None
    if ints is not None and len(ints):
        least = int(np.min(ints))
        span = int(np.max(ints)) - least + 1
        if m * span < 2**62:
            order = np.argsort(grp * span + (ints - least), kind="stable")
    if order is None:
        order = np.lexsort((x, grp))
    sx, sg = x[order], grp[order]
    count = np.bincount(sg, minlength=m)
    begin = np.concatenate([[0], np.cumsum(count)[:-1]])
    lo = begin + (count - 1) // 2
    hi = begin + count // 2
    out = np.zeros(m, dtype=np.float64)
    has = count > 0
    out[has] = (sx[lo[has]] + sx[hi[has]]) / 2
    return out


# Gap columns that are not amounts to pool (times and the longest host call: the representative's).
_NOT_SUMMED = ("start_ns", "end_ns", "offset_ns", "next_launch_start_ns", "next_launch_end_ns", "longest_cpu_ns")
# Context amounts a group holds in sum (ns covered, counts, bytes); the others are the representative's,
# but flags (the time-weighted majority), the dispatch share (time-weighted) and the link rate (the fastest).
_SUMMED = ("sync_wait_ns", "api_call_ns", "one_time_ns", "one_time_count", "sync_blocked_ns", "sync_alloc_ns",
           "sync_alloc_calls", "host_work_ns", "host_stall_ns", "h2d_bytes", "h2d_copy_ns", "host_comm_ns",
           "comm_tail_ns", "sampled_ns")


def _sums(g: np.ndarray, x: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros(m, dtype=np.float64 if x.dtype.kind == "f" else np.int64)
    np.add.at(out, g, x)
    return out


def pooled(gaps: Frame, ctx: RuleContext, member: np.ndarray, g: np.ndarray) -> tuple[pd.DataFrame, RuleContext]:
    """One row per group (``g``: the group of each of the rows ``member``): the gap columns and the context
    with its members' amounts summed (time covered by each kind of activity, launches, bytes), flags by
    time-weighted majority, the rest its longest member's (the representative)."""
    m = int(np.max(g)) + 1
    dur = col(gaps, "dur_ns", dtype=np.int64)[member]
    o = np.lexsort((-dur, g))
    first = np.ones(len(o), dtype=bool)
    first[1:] = g[o][1:] != g[o][:-1]
    at_rep = o[first]
    rep = member[at_rep]  # per group (ascending), its longest member
    weight = _sums(g, dur, m).astype(np.float64)
    data: dict[str, np.ndarray] = {}
    members = Rows(frame_of(gaps), member)  # (the members' rows of each column only, not whole columns converted)
    for name in frame_of(gaps).columns:
        if not isinstance(name, str) or name.startswith("evidence"):
            continue
        a = members[name]
        summed = (name == "dur_ns" or name == "launch_count" or (name.endswith("_ns") and name not in _NOT_SUMMED)) \
            and a.dtype.kind in "iuf"
        data[name] = _sums(g, a, m) if summed else a[at_rep]
    out = pd.DataFrame(data)
    for name in [c for c in out.columns if c.endswith("_frac")]:
        out[name] = out[name[:-5] + "_ns"] / np.maximum(out["dur_ns"], 1) if name[:-5] + "_ns" in out else out[name]
    fields: dict[str, object] = {}
    for f in dataclasses.fields(ctx):
        v = getattr(ctx, f.name)
        if not isinstance(v, np.ndarray) or len(v) != len(gaps):
            fields[f.name] = v
        elif f.name in _SUMMED:
            fields[f.name] = _sums(g, v[member], m)
        elif v.dtype == bool:
            fields[f.name] = _sums(g, np.where(v[member], dur, 0), m) * 2 >= weight
        elif f.name == "dispatch":
            fields[f.name] = _sums(g, v[member] * dur, m) / np.maximum(weight, 1)
        elif f.name == "link_bps":
            best = np.zeros(m, dtype=np.float64)
            np.maximum.at(best, g, v[member])
            fields[f.name] = best
        else:
            fields[f.name] = v[rep]
    return out, RuleContext(**fields)  # type: ignore[arg-type]


def _rows_of(ctx: RuleContext, rows: np.ndarray, n: int) -> RuleContext:
    """The context of the gaps ``rows`` (its per-gap arrays, ``n`` long, indexed; the rest kept)."""
    return RuleContext(**{f.name: (v[rows] if isinstance(v, np.ndarray) and len(v) == n else v)
                          for f in dataclasses.fields(ctx) for v in (getattr(ctx, f.name),)})


Classifier = Callable[[ColumnCache, RuleContext, Thresholds], tuple[np.ndarray, np.ndarray]]


def pool(gaps: Frame, ctx: RuleContext, cfg: Thresholds, cls: np.ndarray, kinds: np.ndarray,
         trace: Trace | None, rules: tuple[Rule, ...], classify: Classifier,
         given: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cls, kinds, pooled)``: class codes (``GAP_CLASSES`` order) and evidence kinds after each recurring
    group's near-threshold members take the class of the group's pooled evidence (module doc; ``classify``
    classifies the pooled rows as the rules do); ``pooled``: per gap, the size of its group where it took
    the group's class (0 elsewhere). ``given``: the groups (-1: none), found by the caller (the gaps of
    several traces: ``rules.across``), instead of :func:`groups` of ``trace``'s gaps."""
    n = len(gaps)
    none = np.zeros(n, dtype=np.int64)
    code = {c: i for i, c in enumerate(GAP_CLASSES)}
    eligible = np.asarray(ctx.judged, dtype=bool) & (cls != code[CAPTURE_BOUNDARY])
    if n < 2 or (trace is None and given is None) or not eligible.any():
        return cls, kinds, none
    grp = groups(gaps, trace, eligible, cfg) if given is None else np.where(eligible, given, -1)
    member = np.flatnonzero(grp >= 0)
    if len(member) == 0:
        return cls, kinds, none
    c = cls[member].astype(np.int64)
    # only the groups whose classes differ
    g0 = grp[member]
    lo = np.full(int(np.max(g0)) + 1, len(GAP_CLASSES), dtype=np.int64)
    hi = np.full(len(lo), -1, dtype=np.int64)
    np.minimum.at(lo, g0, c)
    np.maximum.at(hi, g0, c)
    mixed = lo[g0] != hi[g0]
    member, c = member[mixed], c[mixed]
    if len(member) == 0:
        return cls, kinds, none
    _, g = np.unique(grp[member], return_inverse=True)
    g = g.reshape(-1)
    rows, pctx = pooled(gaps, ctx, member, g)
    with column_cache(rows) as pcols:
        top, top_kind = classify(pcols, pctx, cfg)
    top = top.astype(np.int64)
    cand = (c != top[g]) & (top[g] != code[CAPTURE_BOUNDARY])
    if not cand.any():
        return cls, kinds, none
    by_name = {r.name: r for r in rules}
    tight, loose = _shifted(cfg, cfg.recurring_near_band), _shifted(cfg, -cfg.recurring_near_band)
    masks: dict[tuple[str, bool], np.ndarray] = {}
    # the masks are read for the members only (a few rows of a large frame)
    sub, sub_ctx = ColumnCache(frame_of(gaps).take(member)), _rows_of(ctx, member, n)

    def mask(name: str, relaxed: bool) -> np.ndarray:
        if (name, relaxed) not in masks:
            masks[(name, relaxed)] = np.asarray(by_name[name].mask(sub, sub_ctx, loose if relaxed else tight), dtype=bool)
        return masks[(name, relaxed)]

    flip = np.zeros(len(member), dtype=bool)
    names = np.asarray(GAP_CLASSES, dtype=object)
    for own in distinct(c[cand]):  # classes are few
        mine = cand & (c == own)
        own_name = str(names[own])
        near = np.ones(len(member), dtype=bool) if own_name not in by_name else ~mask(own_name, False)
        for to in distinct(top[g][mine]):
            here = mine & (top[g] == to)
            to_name = str(names[to])
            joins = np.ones(len(member), dtype=bool) if to_name not in by_name else mask(to_name, True)
            flip |= here & near & joins
    if not flip.any():
        return cls, kinds, none
    cls = cls.copy()
    kinds = kinds.copy()
    at = member[flip]
    cls[at] = top[g[flip]].astype(cls.dtype)
    kinds[at] = top_kind[g[flip]]
    none[at] = np.bincount(g, minlength=int(np.max(g)) + 1)[g[flip]]
    return cls, kinds, none
