"""What every rule shares: the Rule record, the per-gap context computed once, and formatting.

A rule is two vectorized functions over the whole gaps frame (``traceread.engine.gaps.find_gaps`` columns):
``mask(gaps, ctx, cfg) -> bool ndarray`` (the signature holds) and
``evidence(gaps, ctx, cfg) -> object ndarray`` (one sentence per row saying what decided it); they
read its columns with ``col``/``frac`` (``rules._columns``: ``classify`` hands them a ``ColumnCache``
over the frame, which converts each column once). The context carries facts that need the trace or the steps (sync in progress at the drain, periodicity)
so that the rules themselves read only columns. The context fields ``evidence`` reads are named in
``Rule.reads``: the analysis keeps them with the gaps and makes the sentences only for the rows an
output shows or writes (``rules.evidence``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.host_calls import SYNC
from traceread.note import Note
from traceread.rules import textcat
from traceread.rules._calls import api_calls as calls_of
from traceread.rules._calls import (
    count_at_or_before,
    count_before,
    distinct,
    longer_than,
    name_hits,
    thread_cpu_ops,
)
from traceread.rules._columns import Frame, Gaps, col
from traceread.trace import Trace

# Notes of one kind named GPU by GPU before the rest are counted in one line: a report on a job of
# thousands of GPUs reads one line, not thousands (a display limit, not a threshold).
MAX_UNIT_NOTES = 3


@dataclass(frozen=True)
class Rule:
    """The code of one gap class: its name, its mask and its evidence (see module docstring); the rest of
    what is known of the class is its record in ``traceread.causes``, which names this rule's module."""

    name: str
    mask: Callable[[Frame, RuleContext, Thresholds], np.ndarray]
    evidence: Callable[[Gaps, RuleContext, Thresholds], np.ndarray]
    # The named piece of evidence per row (``allocator``, ``compile``...); None: the class itself.
    kind: Callable[..., np.ndarray] | None = None
    # The context fields ``evidence`` reads beyond the gap columns: kept with the rule's gaps as data
    # (``rules.evidence``), so that the sentence is formatted only where it is shown or written.
    reads: tuple[str, ...] = ()
    # ``kind`` takes the thresholds as a third argument (a kind decided by thresholds, not by a fact)
    kind_reads_cfg: bool = False
    # Every context field the rule reads (mask, kind, evidence, and helpers of other rules it calls): the
    # facts it needs. The context the rules get is the join of every rule's facts (``rules.FACTS``).
    facts: tuple[str, ...] = ()
    # The context fields ``kind`` reads, when fewer than ``facts``: only they are taken for its rows (None: all).
    kind_facts: tuple[str, ...] | None = None


@dataclass
class RuleContext:
    """Per-gap facts beyond the gap columns, aligned with the gaps frame's rows."""

    judged: np.ndarray  # long enough to judge and not a queued kernel-to-kernel turnaround
    queued: np.ndarray  # the next compute kernel's launch call had returned before the gap began
    late: np.ndarray  # the next compute kernel was still being submitted when the gap began
    sync_at_drain: np.ndarray  # a host sync call was in progress when the GPU went idle
    sync_name: np.ndarray  # its name ('' when none)
    sync_end_ns: np.ndarray  # when it returned (-1 when none)
    sync_origin: np.ndarray  # the host op enclosing it (aten::item...; '' when none)
    sync_wait_ns: np.ndarray  # how long it waited while the GPU ran queued work (0 when none)
    dispatch: np.ndarray  # share of the gap the launching thread spent inside the op that launched
    dispatch_op: np.ndarray  # that op's name ('' when unknown)
    api_call_ns: np.ndarray  # overlap with the gap of the single longest CUDA runtime/driver call (ns), of
    # those longer than launch_call_max_ns (the rules read no shorter overlap; 0 when none)
    api_call_name: np.ndarray  # that call's name ('' when none)
    periodic: np.ndarray  # the gap recurs at the same phase of most analysed steps (see pipeline_bubble)
    presence: np.ndarray  # fraction of analysed steps with a gap at this phase (NaN: not judged)
    cv: np.ndarray  # coefficient of variation of those gaps' durations (NaN: not judged)
    notes: list[Note] = field(default_factory=list)  # what the rules could not judge, as data
    # one-time-cost (rules.one_time_cost.cover) and sync-stall (rules.sync_stall.blocked) facts
    one_time_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    one_time_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    one_time_label: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    one_time_count: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_blocked_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_alloc_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_alloc_calls: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_block_start_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # capture-boundary (rules.capture_boundary.cover): the edge a gap lies in ('' none) and its sentence
    capture_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    capture_text: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    # host work on the launching thread outside any dispatch (rules.host_work), in gaps longer than
    # input_work_min_ns (the rules read no other; 0 and '' elsewhere)
    host_work_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_work_label: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    # a kernel-to-kernel turnaround: shorter than turnaround_max_ns (one timestamp tick more in
    # integer-microsecond traces) and the host not provably late
    turnaround: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    # long child-free host stretches inside a CPU op covering the gap (rules.host_stall): union (ns), the op
    # holding the longest one ('' none), and whether that op's stretches recur every step
    host_stall_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_stall_op: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    host_stall_recurs: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    # host-to-device copies (not pageable) in the gap (rules.bus): bytes (prorated), their union (ns), and
    # the link's measured rate on the gap's rank and device (bytes/s; 0 unknown)
    h2d_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    h2d_copy_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    link_bps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    # host communication library ranges (MPI, Gloo) covering the gap (rules.host_comm): union (ns), longest's name
    host_comm_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_comm_name: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    # how long the gap went on after the last communication kernel in it ended (rules._base.comm_tail)
    comm_tail_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the launching thread's own computation seen by CPU sampling (rules.sampled): ns, its top functions
    sampled_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sampled_label: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    # how many gaps of its recurring gap a gap's class was pooled with (rules.recurring; 0: its own class)
    recurring_n: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # how many ranks that recurring gap spans where its class was pooled across the files of a job (rules.across)
    recurring_ranks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


# --- evidence formatting (vectorized over rows) -----------------------------------------------

def _by_value(key: np.ndarray, text: Callable[[int], str]) -> np.ndarray:
    """``text(k)`` for every ``k`` of ``key``, formatted once per distinct value (gaps share durations
    and percentages to the digits shown: a few thousand strings for a million gaps)."""
    uniq, inverse = _distinct(np.asarray(key, dtype=np.int64).reshape(-1))
    if textcat.lazy():  # a writer's parts: the distinct texts and a code per row
        return textcat.from_codes([text(k) for k in uniq.tolist()], inverse)  # type: ignore[return-value]
    return np.array([text(k) for k in uniq.tolist()] or [""], dtype=object)[inverse]


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` of int64 keys; by a table over the keys' span when it is
    small beside their count (percentages, counts, durations rounded to the digits shown): no sort."""
    if not len(key):
        return key, np.zeros(0, dtype=np.intp)
    lo, hi = int(np.min(key)), int(np.max(key))
    span = hi - lo + 1
    if span > 2 * len(key) + 4096:
        uniq, inverse = np.unique(key, return_inverse=True)
        return uniq, inverse.reshape(-1)
    offset = key - lo
    seen = np.zeros(span, dtype=bool)
    seen[offset] = True
    present = np.flatnonzero(seen)
    position = np.empty(span, dtype=np.intp)
    position[present] = np.arange(len(present))
    return present + lo, position[offset]


# (lower bound, divisor, digits, unit) of each range fmt_ns shows; below the first: whole ns
_NS_UNITS = ((1_000, 100, 1, " us"), (1_000_000, 10_000, 2, " ms"), (1_000_000_000, 10_000_000, 2, " s"))


@functools.lru_cache(maxsize=1 << 16)  # evidence is made per output: each shown duration is formatted once
def _ns_text(key: int) -> str:
    q, unit = divmod(key, 4)
    if unit == 0:
        return f"{q} ns"
    _, _, digits, name = _NS_UNITS[unit - 1]
    whole, part = divmod(q, 10 ** digits)
    return f"{whole}.{part:0{digits}d}{name}"


def fmt_ns(ns: np.ndarray) -> np.ndarray:
    """Durations as short strings: '850 ns', '12.3 us', '4.56 ms', '1.23 s' (integer maths, no floats)."""
    v = np.maximum(np.asarray(ns, dtype=np.int64), 0)
    unit = np.searchsorted(np.array([lo for lo, *_ in _NS_UNITS]), v, side="right")
    div = np.array([1] + [d for _, d, _, _ in _NS_UNITS], dtype=np.int64)[unit]
    q = (v + div // 2) // div  # rounded to the unit's last digit shown
    return _by_value(q * 4 + unit, _ns_text)


def fmt_pct(f: np.ndarray) -> np.ndarray:
    """Fractions as whole percentages: '62%'."""
    pct = np.round(np.nan_to_num(np.asarray(f, dtype=np.float64)) * 100).astype(np.int64)
    return _by_value(pct, lambda k: f"{k}%")


def fmt_int(n: np.ndarray) -> np.ndarray:
    """Counts as decimal strings."""
    return _by_value(np.asarray(n, dtype=np.int64), str)


def fmt_ns_text(ns: int) -> str:
    """One duration as :func:`fmt_ns` shows it (a str, also while text is kept as parts)."""
    with textcat.as_str():
        return str(fmt_ns(np.array([ns]))[0])


# Inside ``textcat.as_parts()`` (a writer asking for the evidence's parts) the helpers below and the
# formatters above give ``textcat.Texts`` (distinct parts and codes per row) instead of arrays of str:
# the evidence functions are written once for both, with these helpers in place of ``np.where``.

def cat(*parts: np.ndarray | str) -> np.ndarray:
    """Element-wise string concatenation of equally long arrays (of str) and scalars (compiled: ``textcat``)."""
    if textcat.lazy() and any(not isinstance(p, str) for p in parts):
        return textcat.cat_parts(*parts)  # type: ignore[return-value]
    return textcat.cat(*parts)


def where(cond: np.ndarray, a: np.ndarray | str, b: np.ndarray | str) -> np.ndarray:
    """``np.where(cond, a, b)`` of texts, as an object array."""
    if textcat.lazy():
        return textcat.where_parts(cond, a, b)  # type: ignore[return-value]
    return np.where(cond, a, b).astype(object)


def choose(which: np.ndarray, texts: list[str]) -> np.ndarray:
    """``texts[which[i]]`` for every row (one of a few fixed sentences), as an object array."""
    if textcat.lazy():
        return textcat.from_codes(texts, which)  # type: ignore[return-value]
    return np.array(texts, dtype=object)[which]


Part = str | np.ndarray | tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]


def cat_where(cond: np.ndarray, *parts: Part, other: str | np.ndarray = "") -> np.ndarray:
    """``cat(*parts)`` on the rows where ``cond`` holds, ``other`` elsewhere: only those rows are
    formatted. A part is a string, an array of text (indexed), or ``(formatter, values)`` (the values
    indexed, then formatted: ``(fmt_ns, dur)``)."""
    sel = np.flatnonzero(cond)
    if textcat.lazy():
        picked = [p if isinstance(p, str) else p[0](np.asarray(p[1])[sel]) if isinstance(p, tuple)
                  else textcat.Texts(p.table, p.codes[sel]) if isinstance(p, textcat.Texts) else np.asarray(p)[sel]
                  for p in parts]
        return textcat.fill(textcat.texts(other, len(cond)), sel,  # type: ignore[return-value]
                            textcat.cat_parts(*picked, n=len(sel)))
    if isinstance(other, str):
        out = texts(len(cond), other)
    else:
        out = np.asarray(other, dtype=object).copy()
    if len(sel):
        out[sel] = cat(*(p if isinstance(p, str) else p[0](np.asarray(p[1])[sel]) if isinstance(p, tuple)
                         else np.asarray(p)[sel] for p in parts))
    return out


# --- context ----------------------------------------------------------------------------------

def texts(n: int, value: str = "") -> np.ndarray:
    """An object array of ``n`` references to the one string ``value``: ``np.full(n, value,
    dtype=object)`` converts the string through a unicode array, one new str object per element for
    a non-empty one (memory that grows with the gaps, for one repeated value) and a conversion per element
    for ''."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def nonempty(values: np.ndarray) -> np.ndarray:
    """``values != ""`` of an object array of texts. The rows holding the one empty str object (most rows:
    a fact most gaps lack, made by :func:`texts`) are told apart by reference; only the others are compared."""
    arr = np.asarray(values)
    if arr.dtype != object or len(arr) < 4096:
        return np.asarray(arr != "", dtype=bool)
    out = np.frombuffer(np.ascontiguousarray(arr), dtype=np.intp) != id("")
    at = np.flatnonzero(out)
    out[at] = arr[at] != ""
    return out


def timestamp_tick_ns(trace: Trace | None) -> int:
    """How coarse the trace's timestamps are beyond 1 ns: 1000 for integer-microsecond Kineto, else 0."""
    q = int(trace.meta.extra.get("timestamp_quantum_ns", 1) or 1) if trace is not None else 1
    return q if q > 1 else 0


def launch_timing(gaps: Frame) -> tuple[np.ndarray, np.ndarray]:
    """``(queued, late)``: was the next compute kernel already submitted when the GPU went idle?

    queued: its launch call returned at or before the gap start (the GPU had the work and waited
    on a dependency). late: the launch was issued after the gap began, or was still in progress at
    it (the GPU waited for the host). Neither when the launch is unknown (no correlation).
    """
    start = col(gaps, "start_ns", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    lend = col(gaps, "next_launch_end_ns", -1, dtype=np.int64)
    after = col(gaps, "launch_after_gap_start", False, dtype=bool)
    known = (lstart >= 0) | (lend >= 0)
    late = after | (known & (lend > start))
    queued = known & ~late
    return queued, late


def launch_calls(gaps: Gaps) -> np.ndarray:
    """Launch calls during each gap, as its evidence counts them: the engine's ``launch_count`` (calls
    that began in it) plus the next kernel's own launch when it began before the gap and was still
    running at its start (the evidence said "0 launch call(s)" next to a host inside that launch)."""
    start = col(gaps, "start_ns", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    lend = col(gaps, "next_launch_end_ns", -1, dtype=np.int64)
    in_flight = (lstart >= 0) & (lstart < start) & (lend > start)
    return col(gaps, "launch_count", dtype=np.int64) + in_flight


def sync_at_drain(gaps: Frame, trace: Trace | None, cfg: Thresholds
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Was a host sync call (``host_calls.SYNC``) of the gap's rank in progress when the gap began?

    Returns ``(held, name, end_ns, start_ns, tid)`` per gap (-1 / '' where none). A call counts when it
    started before the gap start and returned no earlier than ``cfg.sync_drain_tolerance_ns`` before
    it (clock skew).
    """
    n = len(gaps)
    held = np.zeros(n, dtype=bool)
    names = texts(n)
    ends = np.full(n, -1, dtype=np.int64)
    starts = np.full(n, -1, dtype=np.int64)
    tids = np.full(n, -1, dtype=np.int64)
    if trace is None or n == 0:
        return held, names, ends, starts, tids
    v = event_view(trace)
    sync = name_hits(trace, SYNC)
    tol = cfg.sync_drain_tolerance_ns
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_start = col(gaps, "start_ns", dtype=np.int64)
    for rank in distinct(g_rank):  # ranks are few
        calls = calls_of(trace, rank)  # sorted by start once for every rule
        calls = calls.where(sync[calls.name])
        if len(calls.rows) == 0:
            continue
        sel = np.flatnonzero(g_rank == rank)
        s, e = calls.start, calls.end
        arg = intervals.running_argmax(e)
        k = intervals.sorted_count_at_or_before(g_start[sel], s) - 1
        ok = k >= 0
        idx = arg[np.maximum(k, 0)]
        hit = ok & (e[idx] >= g_start[sel] - tol)
        held[sel] = hit
        names[sel[hit]] = v.names[calls.name[idx[hit]]]
        ends[sel[hit]] = e[idx[hit]]
        starts[sel[hit]] = s[idx[hit]]
        tids[sel[hit]] = calls.tid[idx[hit]]
    return held, names, ends, starts, tids


def comm_tail(gaps: Frame, trace: Trace | None) -> np.ndarray:
    """Per gap, how long it went on after the last communication kernel overlapping it ended (ns): 0
    when one runs to its end, or without a trace; the whole gap when none overlaps it."""
    n = len(gaps)
    tail = np.zeros(n, dtype=np.int64)
    if trace is None or n == 0:
        return tail
    v = event_view(trace)
    comm = v.lane_rows(schema.LANE_GPU_COMM)
    if len(comm) == 0:
        return col(gaps, "dur_ns", dtype=np.int64).copy()
    g_rank, g_dev = col(gaps, "rank", dtype=np.int64), col(gaps, "device", dtype=np.int64)
    gs, ge = col(gaps, "start_ns", dtype=np.int64), col(gaps, "end_ns", dtype=np.int64)
    tail = ge - gs
    c_rank, c_dev = v.rank[comm], v.device[comm]
    for rank in distinct(g_rank):  # ranks and devices are few
        for dev in distinct(g_dev[g_rank == rank]):
            k = comm[(c_rank == rank) & (c_dev == dev)]
            if len(k) == 0:
                continue
            sel = np.flatnonzero((g_rank == rank) & (g_dev == dev))
            ks = v.start[k].astype(np.int64, copy=False)
            if not intervals.is_sorted(ks):  # (a device's kernels mostly are: no sort)
                o = np.argsort(ks, kind="stable")
                k, ks = k[o], ks[o]
            reach = np.maximum.accumulate(v.end[k].astype(np.int64, copy=False))
            j = count_before(ks, ge[sel]) - 1  # started before the end
            last = np.where(j >= 0, reach[np.maximum(j, 0)], np.iinfo(np.int64).min)
            over = last > gs[sel]  # the latest-ending one still ran inside the gap
            tail[sel[over]] = np.maximum(ge[sel[over]] - last[over], 0)
    return tail


def waited_for_comm(gaps: Gaps, tail: np.ndarray, cfg: Thresholds) -> np.ndarray:
    """Compute could have been waiting for the communication: it ran until shortly before the gap ended
    (at most ``comm_tail_max`` of the gap, or a kernel-to-kernel turnaround, after the last one ended;
    ``tail`` from :func:`comm_tail`, empty: unknown, taken as waited). A collective that ended long
    before the next kernel started was not what that kernel waited on."""
    dur = col(gaps, "dur_ns").astype(np.int64)
    tail = tail if len(tail) == len(dur) else np.zeros(len(dur), np.int64)
    return tail <= np.maximum(cfg.turnaround_max_ns, cfg.comm_tail_max * dur)


def dispatch_cover(gaps: Frame, trace: Trace | None) -> tuple[np.ndarray, np.ndarray]:
    """How much of each gap the host spent dispatching the operator that ends it.

    The next kernel's launch call is found by its start time on the gap's rank; on that thread,
    the outermost CPU operator (``cpu_op``) containing the launch is the op being dispatched.
    Returns ``(share, name)``: the part of the gap from its start (or the op's start, if later) to
    the launch, over the gap length, and the op's name. 0 and '' when the launch is unknown or not
    inside an operator.
    """
    n = len(gaps)
    share = np.zeros(n)
    names = texts(n)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    if trace is None or n == 0 or not (lstart >= 0).any():
        return share, names
    v = event_view(trace)  # the engine's numpy view of the events, built once per trace
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_start = col(gaps, "start_ns", dtype=np.int64)
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    for rank in distinct(g_rank[lstart >= 0]):  # ranks and threads are few
        calls = calls_of(trace, rank)  # sorted by start once for every rule
        if len(calls.rows) == 0:  # (a thread without CPU ops is skipped below: no pass over every event here)
            continue
        sel = np.flatnonzero((g_rank == rank) & (lstart >= 0))
        # (the launches' starts are in order where the gaps are: one merge pass, else searched)
        k = intervals.sorted_positions(calls.start, lstart[sel])
        found = k >= 0
        sel, tid = sel[found], calls.tid_of(k[found])
        for t in distinct(tid):
            q = sel[tid == t]
            thread_ops, os_, reach = thread_cpu_ops(trace, rank, t)
            if len(thread_ops) == 0:
                continue
            t_launch = lstart[q]
            # earliest op still running at t: the ops whose reach is before t (< t: at or before t - 1)
            first = intervals.sorted_count_at_or_before(t_launch - 1, reach)
            inside = first < intervals.sorted_count_at_or_before(t_launch, os_)
            q, first = q[inside], first[inside]
            began = np.maximum(os_[first], g_start[q])
            share[q] = np.clip((lstart[q] - began) / dur[q], 0.0, 1.0)
            names[q] = v.names_of(thread_ops[first])
    return share, names


def longest_api_call(gaps: Frame, trace: Trace | None, longer_than_ns: int = -1
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The single CUDA runtime/driver call of the gap's rank that overlaps each gap the longest.

    Returns ``(overlap_ns, name)`` per gap (0 and '' when none). One long call is driver work (lazy
    module loading on a first launch, context or stream creation, allocation), which the launch-bound
    rule must not read as dispatch overhead. Only calls longer than ``longer_than_ns`` are read (the
    rules pass ``launch_call_max_ns``: they read an overlap only when it is longer, which only such a
    call can have, and the same call then holds it).
    """
    n = len(gaps)
    length = np.zeros(n, dtype=np.int64)
    names = texts(n)
    if trace is None or n == 0:
        return length, names
    v = event_view(trace)
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    g_start = col(gaps, "start_ns", dtype=np.int64)
    g_end = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(g_rank):  # ranks and devices are few
        calls = calls_of(trace, rank)  # sorted by start once for every rule: no sort per device
        calls = calls.where(longer_than(trace, rank, longer_than_ns))
        if len(calls.rows) == 0:
            continue
        for dev in distinct(g_dev[g_rank == rank]):
            sel = np.flatnonzero((g_rank == rank) & (g_dev == dev))
            sel = sel[np.argsort(g_start[sel], kind="stable")]  # a device's gaps are disjoint
            ov, idx = _longest_overlap(g_start[sel], g_end[sel], calls.start, calls.end)
            length[sel] = ov
            hit = idx >= 0
            code = calls.name[idx[hit]]  # names of the hits only; a missing one reads 'nan' (as str())
            names[sel[hit]] = np.where(code >= 0, v.names[code], "nan").astype(object)
    return length, names


def _longest_overlap(qs: np.ndarray, qe: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``intervals.longest_overlap`` asked only of the queries some interval overlaps (each query's answer
    is its own; the others' is 0 and -1): a few long calls against every gap of a device."""
    if len(s) == 0 or len(qs) == 0 or not bool(np.all(e >= s)):
        return intervals.longest_overlap(qs, qe, s, e)
    # intervals overlapping a query: started before its end, less those ended by its start (all of which
    # started before its end too)
    some = np.flatnonzero(count_before(np.sort(s), qe) > count_at_or_before(np.sort(e), qs))
    length = np.zeros(len(qs), dtype=np.int64)
    index = np.full(len(qs), -1, dtype=np.int64)
    length[some], index[some] = intervals.longest_overlap(qs[some], qe[some], s, e)
    return length, index
