"""Classify every compute-idle gap by its signature: what else was busy while compute waited.

``RULES`` is ordered; the first rule whose mask holds names the gap, anything left is
``unattributed``. The order (and why it differs from the suggested one) is in docs/rules.md:

0. ``capture-boundary``: idle at the capture's edges explained by work issued before it or by the
   profiler shutting down (not a cause: kept out of the verdict).
0. ``one-time-cost``: compilation, graph capture, module loading, first launches, context setup or
   allocator growth over most of the gap (not steady state: re-profile, don't fix).
1. ``data-starved``: positive loader / host-to-device evidence over most of the gap.
2. ``comm-bound``: communication over most of the gap while compute waited for it.
3. ``sync-stall``: the host was blocked in a sync (or a recurring allocator call) for most of the gap.
4. ``pipeline-bubble``: recurs at the same phase of every step, waiting on p2p or a dependency.
5. ``launch-bound``: the GPU waited for a host busy dispatching launches.

Every rule is a pair of vectorized functions over the whole gaps frame (see ``rules._base``); no
Python loop runs per gap. Which rules there are, and their order, is read off the cause records
(``traceread.causes``: each names its rule module and its precedence); the words of each class
(first response, levers) are in its record too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traceread import causes
from traceread.config import Thresholds
from traceread.note import Note
from traceread.rules import (
    _calls,
    bus,
    capture_boundary,
    evidence,
    host_comm,
    host_stall,
    host_work,
    one_time_cost,
    pipeline_bubble,
    recurring,
    sampled,
    sync_stall,
    textcat,
)
from traceread.rules._base import (
    Rule,
    RuleContext,
    comm_tail,
    dispatch_cover,
    launch_timing,
    longest_api_call,
    nonempty,
    sync_at_drain,
    texts,
    timestamp_tick_ns,
    waited_for_comm,
)
from traceread.rules._columns import ColumnCache, Frame, Rows, cached, col, column_cache
from traceread.trace import Trace
from traceread.vocabulary import GAP_CLASSES, UNATTRIBUTED


def _rule_of(cause: causes.Cause) -> Rule:
    """The ``RULE`` of the module a cause record names (rule modules are this package's: resolved here)."""
    rule = importlib.import_module(str(cause.rule)).RULE
    if not isinstance(rule, Rule) or rule.name != cause.name:
        raise TypeError(f"{cause.rule}.RULE is not the rule of {cause.name!r}")
    return rule


# The rules in the order they are tried, and the residual class's (its evidence; it claims what is left).
RULES: tuple[Rule, ...] = tuple(_rule_of(c) for c in causes.rules_in_order())
RESIDUAL: Rule = _rule_of(causes.residual())
# The context the rules get: the join of the facts every rule declares, in RuleContext's field order.
FACTS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RuleContext)
                               if any(f.name in r.facts for r in RULES + (RESIDUAL,)))
FACTS_SET = frozenset(FACTS)

__all__ = ["GAP_CLASSES", "RULES", "RESIDUAL", "FACTS", "Rule", "RuleContext", "build_context", "classify", "notes"]


# The rules' context is built for the gaps a rule can claim only (their columns copied once) when they
# are at most this share of all gaps; above it the copy costs more than the rows it saves. A speed
# choice, not a threshold: both ways classify alike (see ``_claimable``).
JUDGED_SUBSET_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class _Whole:
    """The context facts read over every gap: launch timing, what is judged, the capture edges (the
    gaps at a boundary only: a few per device, not two string arrays over every gap)."""

    judged: np.ndarray
    queued: np.ndarray
    late: np.ndarray
    turnaround: np.ndarray
    capture_at: np.ndarray  # positions of the gaps at a capture boundary, ascending
    capture_kind_at: np.ndarray  # their kinds
    capture_text_at: np.ndarray  # their sentences
    edges: pd.DataFrame | None

    def capture(self, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``capture_kind_at`` / ``capture_text_at`` as an array over every gap ('' elsewhere), or over
        the gaps ``rows`` (ascending)."""
        if rows is None:
            out = texts(len(self.judged))
            out[self.capture_at] = values
            return out
        out = texts(len(rows))
        k = np.minimum(np.searchsorted(self.capture_at, rows), max(len(self.capture_at) - 1, 0))
        hit = np.flatnonzero(self.capture_at[k] == rows) if len(self.capture_at) else k[:0]
        out[hit] = values[k[hit]]
        return out

    def boundary(self, *kinds: str) -> np.ndarray:
        """Bool per gap: at a capture boundary (of one of ``kinds``, when given)."""
        out = np.zeros(len(self.judged), dtype=bool)
        at = self.capture_at if not kinds else self.capture_at[np.isin(self.capture_kind_at, kinds)]
        out[at] = True
        return out


def _whole(gaps: Frame, steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds) -> _Whole:
    queued, late = launch_timing(gaps)
    dur = col(gaps, "dur_ns", dtype=np.int64)
    # A gap within the GPU's own turnaround is judged only when the host provably submitted late.
    # With integer-microsecond timestamps a 2 us turnaround can read as 3 us: one tick more is still one.
    turnaround = ~late & (dur < cfg.turnaround_max_ns + timestamp_tick_ns(trace))
    judged = (dur >= cfg.min_judged_gap_ns) & ~turnaround
    edges = capture_boundary.edges_of(steps, trace, cfg)
    at, kind_at, text_at = capture_boundary.cover_at(gaps, edges)
    return _Whole(judged=judged, queued=queued, late=late, turnaround=turnaround, capture_at=at,
                  capture_kind_at=kind_at, capture_text_at=text_at, edges=edges)


def _claimable(gaps: Frame, whole: _Whole, cfg: Thresholds) -> np.ndarray:
    """Bool per gap: a rule past the capture boundary may claim it or read it. Every such rule's mask
    requires ``judged``; periodicity (which compares a gap with the others of its place in the step)
    reads gaps of at least ``bubble_min_gap_ns`` only. Any other gap is a capture boundary or
    unattributed whatever the rest of its context holds."""
    return whole.judged | (col(gaps, "dur_ns", dtype=np.int64) >= cfg.bubble_min_gap_ns)


def build_context(gaps: Frame, steps: pd.DataFrame | None, trace: Trace | None,
                  cfg: Thresholds) -> RuleContext:
    """The per-gap facts the rules read (launch timing, sync at drain, periodicity...): the join of the facts
    every rule declares (``FACTS``); a field no rule declares is left empty."""
    cols = cached(gaps)
    return _context(cols, cols, None, steps, trace, cfg, _whole(cols, steps, trace, cfg))


def _context(part: Frame, gaps: Frame, rows: np.ndarray | None, steps: pd.DataFrame | None,
             trace: Trace | None, cfg: Thresholds, whole: _Whole) -> RuleContext:
    """The context of ``part``: the rows ``rows`` of ``gaps`` (None: all of it; else at least every
    ``_claimable`` one), ``whole`` read for every gap."""
    def pick(a: np.ndarray) -> np.ndarray:
        return a if rows is None else a[rows]

    n = len(part)

    def wanted(*facts: str) -> bool:  # the context is the join of the rules' facts: no other is computed
        return not FACTS_SET.isdisjoint(facts)

    def none(dtype: type | str) -> np.ndarray:  # a fact no rule reads
        return texts(n) if dtype is object else np.zeros(n, dtype=dtype)

    queued, late = pick(whole.queued), pick(whole.late)
    capture_kind = whole.capture(whole.capture_kind_at, rows)
    if wanted("sync_at_drain", "sync_name", "sync_end_ns", "sync_origin", "sync_wait_ns"):
        held, sync_name, sync_end, sync_start, sync_tid = sync_at_drain(part, trace, cfg)
    else:
        held, sync_name, sync_end, sync_start, sync_tid = none(bool), none(object), none("i8"), none("i8"), none("i8")
    sync_origin = sync_stall.origin_op(part, trace, held, sync_start, sync_tid) if wanted("sync_origin") \
        else none(object)
    tids = host_work.launching_thread(part, trace) \
        if wanted("host_work_ns", "host_work_label", "sampled_ns", "sampled_label") else none("i8")
    work_ns, work_label = host_work.host_work(part, trace, tids, cfg) \
        if wanted("host_work_ns", "host_work_label") else (none("i8"), none(object))
    s_ns, s_label = sampled.sampled_work(part, trace, tids, cfg) if wanted("sampled_ns", "sampled_label") \
        else (none("i8"), none(object))
    dispatch, dispatch_op = dispatch_cover(part, trace) if wanted("dispatch", "dispatch_op") \
        else (none("f8"), none(object))
    api_call_ns, api_call_name = longest_api_call(part, trace, cfg.launch_call_max_ns) \
        if wanted("api_call_ns", "api_call_name") else (none("i8"), none(object))
    stall_ns, stall_op, stall_recurs = host_stall.stall_cover(part, host_stall.stalls(trace, steps, cfg)) \
        if wanted("host_stall_ns", "host_stall_op", "host_stall_recurs") else (none("i8"), none(object), none(bool))
    h2d_bytes, h2d_ns, link = bus.bus_rate(part, trace, cfg) if wanted("h2d_bytes", "h2d_copy_ns", "link_bps") \
        else (none("f8"), none("i8"), none("f8"))
    hc_ns, hc_name = host_comm.host_comm(part, trace) if wanted("host_comm_ns", "host_comm_name") \
        else (none("i8"), none(object))
    # Periodicity reads places in the captured part of each step, boundary stretches left out (always: its
    # notes say what could not be judged).
    tail = comm_tail(part, trace)
    eligible = pipeline_bubble.waits_like_a_bubble(part, queued, cfg, waited_for_comm(part, tail, cfg)) & \
        ~nonempty(capture_kind)
    periodic, presence, cv, bubble_notes = pipeline_bubble.periodicity(
        *capture_boundary.captured(part, steps, whole.edges, cfg), cfg, eligible)
    one_ns, one_kind, one_label, one_count = one_time_cost.cover(part, steps, trace, cfg) \
        if wanted("one_time_ns", "one_time_kind", "one_time_label", "one_time_count") \
        else (none("i8"), none(object), none(object), none("i8"))
    blocked_ns, alloc_ns, alloc_calls, block_start = sync_stall.blocked(part, steps, trace, cfg) \
        if wanted("sync_blocked_ns", "sync_alloc_ns", "sync_alloc_calls", "sync_block_start_ns") \
        else (none("i8"), none("i8"), none("i8"), none("i8"))
    # A drain-sync's queued wait takes out the idle of every earlier gap of its device, claimable or not.
    wait = sync_stall.queued_wait(gaps, held, sync_start, unrecorded=whole.boundary(*capture_boundary.LEADS),
                                  at=rows) if wanted("sync_wait_ns") else none("i8")
    return RuleContext(judged=pick(whole.judged), queued=queued, late=late, sync_at_drain=held, sync_name=sync_name,
                       sync_end_ns=sync_end, sync_origin=sync_origin, sync_wait_ns=wait,
                       dispatch=dispatch, dispatch_op=dispatch_op, api_call_ns=api_call_ns,
                       api_call_name=api_call_name, periodic=periodic, presence=presence, cv=cv, notes=bubble_notes,
                       one_time_ns=one_ns, one_time_kind=one_kind, one_time_label=one_label,
                       one_time_count=one_count, sync_blocked_ns=blocked_ns, sync_alloc_ns=alloc_ns,
                       sync_alloc_calls=alloc_calls, sync_block_start_ns=block_start, capture_kind=capture_kind,
                       capture_text=whole.capture(whole.capture_text_at, rows), host_work_ns=work_ns, host_work_label=work_label,
                       turnaround=pick(whole.turnaround), comm_tail_ns=tail, host_stall_ns=stall_ns,
                       host_stall_op=stall_op, host_stall_recurs=stall_recurs, h2d_bytes=h2d_bytes,
                       h2d_copy_ns=h2d_ns, link_bps=link, host_comm_ns=hc_ns, host_comm_name=hc_name,
                       sampled_ns=s_ns, sampled_label=s_label)


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def classify(gaps_df: pd.DataFrame, steps_df: pd.DataFrame | None, trace: Trace | None,
             cfg: Thresholds, text: bool = True, between: Callable[[], None] = _nothing,
             evidence_data: bool = True) -> pd.DataFrame:
    """The gaps frame plus ``class`` (one of ``GAP_CLASSES``), ``evidence`` (a sentence) and
    ``evidence_kind``.

    In: ``gaps_df`` as ``traceread.engine.gaps.find_gaps`` returns it (columns missing from a hand-built
    frame read as zero / unknown), ``steps_df`` (``schema.STEP_COLUMNS``; used for periodicity),
    ``trace`` (host sync calls; may be None), ``cfg``. Out: a new frame, same rows and order;
    ``attrs["notes"]`` holds notes as data (``traceread.note.Note``, e.g. bubbles not judged for lack of steps).
    The input is not modified. ``text=False`` (the analysis): the evidence is kept as data instead
    of a sentence per gap, made where it is shown or written (``rules.evidence``). ``between`` is called
    once the rules' context is freed. ``evidence_data=False`` (with ``text=False``): no evidence data either,
    for a caller that makes no sentence from it (``traceread gaps`` but with ``--csv --derived``).
    """
    if text and not evidence_data:
        raise ValueError("classify: the evidence sentence is made from the evidence data")
    out = gaps_df.copy(deep=False)  # new columns only: the input is not modified
    with column_cache(out) as cols, _calls.shared(trace):
        out = _classify(cols, steps_df, trace, cfg, evidence_data)
        if text:
            out = evidence.with_evidence(cols, cfg)
    # The context's temporaries are freed: their pages can go back, not under what the caller allocates next
    between()
    return out


def _classify(cols: ColumnCache, steps_df: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds,
              evidence_data: bool = True) -> pd.DataFrame:
    out = cols.frame
    n = len(out)
    whole = _whole(cols, steps_df, trace, cfg)
    code = {c: i for i, c in enumerate(GAP_CLASSES)}
    # (the capture boundary's gaps too, claimable or not: a few per device, and their kinds and sentences
    # are then the part's own, not arrays over every gap)
    rows: np.ndarray | None = np.flatnonzero(_claimable(cols, whole, cfg) | whole.boundary())
    # (none claimable: the whole frame still, for periodicity's notes on steps too few to judge)
    if rows is not None and not 0 < len(rows) <= min(JUDGED_SUBSET_SHARE * n, n - 1):
        rows = None
    with contextlib.ExitStack() as stack:
        part = cols if rows is None else stack.enter_context(column_cache(out.take(rows)))
        ctx = _context(part, cols, rows, steps_df, trace, cfg, whole)
        _calls.release(trace)  # the trace's selections: the rules read the context only from here on
        if part is not cols:
            cols.forget()  # the rules read the claimable rows' own columns from here on
        cls, kinds = _rules(part, ctx, cfg)
        cls, kinds, pooled = recurring.pool(part, ctx, cfg, cls, kinds, trace, RULES, _rules)  # one class per recurring gap
        ctx = dataclasses.replace(ctx, recurring_n=pooled)
        del part
    if rows is not None:  # the other gaps: unattributed (see _claimable; the boundary's are in ``rows``)
        cls_all = np.full(n, code[UNATTRIBUTED], dtype=np.int8)
        kinds_all = texts(n, UNATTRIBUTED)
        cls_all[rows], kinds_all[rows] = cls, kinds
        cls, kinds = cls_all, kinds_all
        # the facts read for every gap, whole, beside the other rows' own (rules.evidence.store reads both)
        ctx = dataclasses.replace(ctx, judged=whole.judged, queued=whole.queued, late=whole.late,
                                  turnaround=whole.turnaround)
    out["class"] = pd.Categorical.from_codes(cls, categories=pd.Index(list(GAP_CLASSES)))
    out["evidence_kind"] = _kinds_column(kinds, out.index)
    if evidence_data:
        evidence.store(out, ctx, cls, rows)  # the sentences' inputs, as columns (rules.evidence)
    out.attrs["notes"] = list(ctx.notes)
    return out


def _kinds_column(kinds: np.ndarray, index: pd.Index) -> pd.Series:
    """The evidence kinds (an object array of a few shared str) as a categorical column: one byte-sized code
    per gap, not an eight-byte pointer, in a column as long as the gaps. Kinds that are not all str stay
    objects."""
    codes, uniq = textcat.factorize(kinds)
    if not all(type(u) is str for u in uniq):
        return pd.Series(kinds, index=index, dtype=object, copy=False)  # (kinds is new: no copy)
    cats = pd.Index(np.asarray(uniq, dtype=object), dtype=object)
    return pd.Series(pd.Categorical.from_codes(codes, categories=cats), index=index, copy=False)


def _rules(gaps: ColumnCache, ctx: RuleContext, cfg: Thresholds) -> tuple[np.ndarray, np.ndarray]:
    """Class codes (int8, in ``GAP_CLASSES``) and evidence kinds of every gap: the first rule whose mask holds."""
    n = len(gaps)
    code = {c: i for i, c in enumerate(GAP_CLASSES)}
    cls = np.full(n, code[UNATTRIBUTED], dtype=np.int8)  # class codes: no string per gap
    # One reference per gap to one string: np.full converts the string to a str per element (a new object
    # per gap, kept in the frame's evidence_kind column).
    kinds = texts(n, UNATTRIBUTED)
    free = np.ones(n, dtype=bool)
    for rule in RULES:
        if not free.any():
            break
        hit = free & np.asarray(rule.mask(gaps, ctx, cfg), dtype=bool)
        if hit.any():
            cls[hit] = code[rule.name]
            kinds[hit] = rule.name
            if rule.kind is not None:
                for idx in _chunks(np.flatnonzero(hit)):
                    # one string object per distinct kind, not one per gap
                    sub = _subset(ctx, idx, rule.facts if rule.kind_facts is None else rule.kind_facts)
                    got = rule.kind(Rows(gaps, idx), sub, cfg) if rule.kind_reads_cfg else rule.kind(Rows(gaps, idx), sub)
                    values, names = textcat.factorize(got)
                    kinds[idx] = np.asarray(names, dtype=object)[values]
            free &= ~hit
    return cls, kinds


# Rows whose evidence kind is found at a time (a memory bound, not a threshold).
EVIDENCE_CHUNK_ROWS = evidence.CHUNK_ROWS


def _chunks(idx: np.ndarray) -> list[np.ndarray]:
    return [idx[lo:lo + EVIDENCE_CHUNK_ROWS] for lo in range(0, len(idx), EVIDENCE_CHUNK_ROWS)]


def notes(gaps_df: pd.DataFrame, steps_df: pd.DataFrame | None, cfg: Thresholds) -> list[Note]:
    """What the rules could not judge, as notes the renderers word (same as ``attrs['notes']``)."""
    return pipeline_bubble.periodicity(gaps_df, steps_df, cfg)[3]


def _subset(ctx: RuleContext, idx: np.ndarray, facts: tuple[str, ...] | None = None) -> RuleContext:
    """The context of some rows (per-gap arrays indexed, notes kept; an empty field is one not set yet and stays
    empty). ``facts``: only those fields are indexed, the other arrays come empty (a rule reading a fact it did not
    declare fails on the lengths, loudly)."""
    keep = None if facts is None else set(facts)
    fields: dict[str, Any] = {
        f.name: (v[idx] if isinstance(v, np.ndarray) and len(v) and (keep is None or f.name in keep)
                 else v[:0] if isinstance(v, np.ndarray) else v)
        for f in dataclasses.fields(ctx) for v in (getattr(ctx, f.name),)}
    return RuleContext(**fields)
