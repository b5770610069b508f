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
Python loop runs per gap. First responses per class are data in ``rules.responses``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules import (
    _calls,
    capture_boundary,
    comm_bound,
    data_starved,
    evidence,
    host_work,
    launch_bound,
    one_time_cost,
    pipeline_bubble,
    sync_stall,
)
from traceread.rules._base import (
    Rows,
    Rule,
    RuleContext,
    col,
    column_cache,
    comm_tail,
    dispatch_cover,
    launch_timing,
    longest_api_call,
    sync_at_drain,
    timestamp_tick_ns,
    waited_for_comm,
)
from traceread.rules.responses import FIRST_RESPONSES, first_response
from traceread.trace import Trace
from traceread.vocabulary import GAP_CLASSES, UNATTRIBUTED

RULES: list[Rule] = [
    capture_boundary.RULE,
    one_time_cost.RULE,
    data_starved.RULE,
    comm_bound.RULE,
    sync_stall.RULE,
    pipeline_bubble.RULE,
    launch_bound.RULE,
]

__all__ = ["GAP_CLASSES", "RULES", "FIRST_RESPONSES", "Rule", "RuleContext", "build_context", "classify",
           "first_response", "notes"]


def build_context(gaps: pd.DataFrame, steps: pd.DataFrame | None, trace: Trace | None,
                  cfg: Thresholds) -> RuleContext:
    """The per-gap facts every rule may read (launch timing, sync at drain, periodicity)."""
    queued, late = launch_timing(gaps)
    dur = col(gaps, "dur_ns", dtype=np.int64)
    # A gap within the GPU's own turnaround is judged only when the host provably submitted late.
    # With integer-microsecond timestamps a 2 us turnaround can read as 3 us: one tick more is still one.
    turnaround = ~late & (dur < cfg.turnaround_max_ns + timestamp_tick_ns(trace))
    judged = (dur >= cfg.min_judged_gap_ns) & ~turnaround
    held, sync_name, sync_end, sync_start, sync_tid = sync_at_drain(gaps, trace, cfg)
    sync_origin = sync_stall.origin_op(gaps, trace, held, sync_start, sync_tid)
    work_ns, work_label = host_work.host_work(gaps, trace, host_work.launching_thread(gaps, trace), cfg)
    dispatch, dispatch_op = dispatch_cover(gaps, trace)
    api_call_ns, api_call_name = longest_api_call(gaps, trace, cfg.launch_call_max_ns)
    edges = capture_boundary.edges_of(steps, trace, cfg)
    capture_kind, capture_text = capture_boundary.cover(gaps, edges)
    # Periodicity reads places in the captured part of each step, boundary stretches left out.
    tail = comm_tail(gaps, trace)
    eligible = pipeline_bubble.waits_like_a_bubble(gaps, queued, cfg, waited_for_comm(gaps, tail, cfg)) & \
        (capture_kind == "")
    periodic, presence, cv, bubble_notes = pipeline_bubble.periodicity(*capture_boundary.captured(gaps, steps, edges, cfg),
                                                                        cfg, eligible)
    one_ns, one_kind, one_label, one_count = one_time_cost.cover(gaps, steps, trace, cfg)
    blocked_ns, alloc_ns, alloc_calls, block_start = sync_stall.blocked(gaps, steps, trace, cfg)
    return RuleContext(judged=judged, queued=queued, late=late, sync_at_drain=held, sync_name=sync_name,
                       sync_end_ns=sync_end, sync_start_ns=sync_start, sync_origin=sync_origin,
                       sync_wait_ns=sync_stall.queued_wait(gaps, held, sync_start,
                                                                unrecorded=capture_boundary.lead(capture_kind)),
                       dispatch=dispatch, dispatch_op=dispatch_op,
                       api_call_ns=api_call_ns, api_call_name=api_call_name, periodic=periodic,
                       presence=presence, cv=cv, notes=bubble_notes, one_time_ns=one_ns,
                       one_time_kind=one_kind, one_time_label=one_label, one_time_count=one_count,
                       sync_blocked_ns=blocked_ns, sync_alloc_ns=alloc_ns, sync_alloc_calls=alloc_calls,
                       sync_block_start_ns=block_start, capture_kind=capture_kind, capture_text=capture_text,
                       host_work_ns=work_ns, host_work_label=work_label, turnaround=turnaround,
                       comm_tail_ns=tail)


def classify(gaps_df: pd.DataFrame, steps_df: pd.DataFrame | None, trace: Trace | None,
             cfg: Thresholds, text: bool = True) -> pd.DataFrame:
    """The gaps frame plus ``class`` (one of ``GAP_CLASSES``), ``evidence`` (a sentence) and
    ``evidence_kind``.

    In: ``gaps_df`` as ``traceread.gaps.find_gaps`` returns it (columns missing from a hand-built
    frame read as zero / unknown), ``steps_df`` (``schema.STEP_COLUMNS``; used for periodicity),
    ``trace`` (host sync calls; may be None), ``cfg``. Out: a new frame, same rows and order;
    ``attrs["notes"]`` holds user-facing sentences (e.g. bubbles not judged for lack of steps).
    The input is not modified. ``text=False`` (the analysis): the evidence is kept as data instead
    of a sentence per gap, made where it is shown or written (``rules.evidence``).
    """
    out = gaps_df.copy(deep=False)  # new columns only: the input is not modified
    with column_cache(out), _calls.shared(trace):
        out = _classify(out, steps_df, trace, cfg)
        return evidence.with_evidence(out, cfg) if text else out


def _classify(out: pd.DataFrame, steps_df: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds) -> pd.DataFrame:
    n = len(out)
    ctx = build_context(out, steps_df, trace, cfg)
    code = {c: i for i, c in enumerate(GAP_CLASSES)}
    cls = np.full(n, code[UNATTRIBUTED], dtype=np.int8)  # class codes: no string per gap
    # One reference per gap to one string: np.full converts the string to a str per element (4.6M
    # objects, 267 MB on a 5M-gap export, kept in the frame's evidence_kind column).
    kinds = np.empty(n, dtype=object)
    kinds.fill(UNATTRIBUTED)
    free = np.ones(n, dtype=bool)
    for rule in RULES:
        if not free.any():
            break
        hit = free & np.asarray(rule.mask(out, ctx, cfg), dtype=bool)
        if hit.any():
            cls[hit] = code[rule.name]
            kinds[hit] = rule.name
            if rule.kind is not None:
                for idx in _chunks(np.flatnonzero(hit)):
                    # one string object per distinct kind, not one per gap
                    values, names = pd.factorize(rule.kind(Rows(out, idx), _subset(ctx, idx)), use_na_sentinel=False)
                    kinds[idx] = np.asarray(names, dtype=object)[values]
            free &= ~hit
    out["class"] = pd.Categorical.from_codes(cls, categories=pd.Index(list(GAP_CLASSES)))
    out["evidence_kind"] = pd.Series(kinds, index=out.index, dtype=object)
    evidence.store(out, ctx, cls)  # the sentences' inputs, as columns (rules.evidence)
    out.attrs["notes"] = list(ctx.notes)
    return out


# Rows whose evidence kind is found at a time (a memory bound, not a threshold).
EVIDENCE_CHUNK_ROWS = evidence.CHUNK_ROWS


def _chunks(idx: np.ndarray) -> list[np.ndarray]:
    return [idx[lo:lo + EVIDENCE_CHUNK_ROWS] for lo in range(0, len(idx), EVIDENCE_CHUNK_ROWS)]


def notes(gaps_df: pd.DataFrame, steps_df: pd.DataFrame | None, cfg: Thresholds) -> list[str]:
    """User-facing sentences about what the rules could not judge (same as ``attrs['notes']``)."""
    return pipeline_bubble.periodicity(gaps_df, steps_df, cfg)[3]


def _subset(ctx: RuleContext, idx: np.ndarray) -> RuleContext:
    """The context of some rows (per-gap arrays indexed, notes kept)."""
    return RuleContext(**{f.name: (v[idx] if isinstance(v, np.ndarray) else v)
                          for f in dataclasses.fields(ctx) for v in (getattr(ctx, f.name),)})
