"""The rule context's selections over the engine's numpy view of the events (``lanes.event_view``).

Seven context functions read the host's runtime/driver calls, CPU operators and ranges; each used
to select them from the pandas events frame (a copy of every column) or from the view, sort them by
start and test their names against a pattern on its own. Here each selection is one boolean pass
over the view's category codes, each rank's runtime/driver calls are sorted by start once
(:func:`api_calls`), and a pattern is tested once per distinct name (:func:`name_hits`). While
:func:`shared` is open on the trace (``rules.classify`` opens it) the results are kept and shared
by every rule; they are freed when it closes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.engine.lanes import API_CATS, EventView, engine_cache, event_view
from traceread.trace import Trace

T = TypeVar("T")

# One selection: (lane, categories, negate): rows on ``lane`` whose category is (negate: is not) one of
# ``categories``; a row without a category is never "one of" them.
Spec = tuple[tuple[str, tuple[str, ...], bool], ...]

API: Spec = ((schema.LANE_CPU_THREAD, tuple(sorted(API_CATS)), False),)


_SCOPE = "rule_selections"  # the key of an open ``shared`` scope in the engine's cache (EngineCache.derived)


def _scope(trace: Trace) -> dict[tuple[Any, ...], Any] | None:
    """The selections kept for ``trace`` while :func:`shared` is open (in the engine's cache beside its view)."""
    derived = trace.cache.derived_of(trace.events) if trace.cache is not None else None
    return derived.get(_SCOPE) if derived is not None else None


@contextmanager
def shared(trace: Trace | None) -> Iterator[None]:
    """While open, every selection of ``trace`` made here is kept and shared by the rules; freed on close."""
    if trace is None:
        yield
        return
    event_view(trace)  # the view the selections are kept beside
    derived = engine_cache(trace).derived_of(trace.events)
    if derived is not None:
        derived[_SCOPE] = {}
    try:
        yield
    finally:
        if derived is not None:
            derived.pop(_SCOPE, None)


def release(trace: Trace | None) -> None:
    """Free the selections kept for ``trace`` so far (``shared`` stays open): for a phase that reads
    no more of them (the rules' masks read the context only)."""
    if trace is None:
        return
    scope = _scope(trace)
    if scope is not None:
        scope.clear()


def _cached(trace: Trace, key: tuple[Any, ...], make: Callable[[], T]) -> T:
    """``make()``, kept while :func:`shared` is open on ``trace`` (else not kept)."""
    scope = _scope(trace)
    if scope is None:
        return make()
    if key not in scope:
        scope[key] = make()
    out: T = scope[key]
    return out


def name_hits(trace: Trace, rx: re.Pattern[str]) -> np.ndarray:
    """Bool per name code of the view: ``rx`` finds the name (``search``, as
    ``host_calls.calls_matching``), tested once per distinct name; the trailing entry (code -1, no
    name) is False, so ``hits[v.name[rows]]`` answers per row."""
    v = event_view(trace)

    def make() -> np.ndarray:
        hit = np.zeros(len(v.names), dtype=bool)
        hit[:-1] = [bool(rx.search(str(x))) for x in v.names[:-1].tolist()]
        return hit
    return _cached(trace, ("hits", rx.pattern, rx.flags), make)


def _pairs(trace: Trace) -> np.ndarray:
    """Per event, its (lane, category) pair as one small code: ``(lane + 1) * (categories + 1) + category + 1``."""
    v = event_view(trace)

    def make() -> np.ndarray:
        # int16 where the codes fit (they are a few dozen): half the bytes every selection reads
        small = (len(v.lane_codes) + 1) * (len(v.cat_codes) + 1) < np.iinfo(np.int16).max
        pair = v.lane.astype(np.int16 if small else np.int32) + 1
        pair *= len(v.cat_codes) + 1
        pair += v.cat
        pair += 1
        return pair
    return _cached(trace, ("pairs",), make)


def _only_rank(trace: Trace) -> int | None:
    """The trace's rank when every event has the same one (the common case: no rank test per row)."""
    v = event_view(trace)

    def make() -> int | None:
        if len(v.rank) == 0:
            return None
        lo, hi = int(np.min(v.rank)), int(np.max(v.rank))
        return lo if lo == hi else None
    return _cached(trace, ("only_rank",), make)


def select(trace: Trace, spec: Spec, rank: int | None = None, names: tuple[re.Pattern[str], ...] = ()) -> np.ndarray:
    """Sorted row indices of the view that ``spec`` selects (of ``rank`` when given; whose name one of
    ``names`` finds, when given): one pass over the lane, category and name codes, not a
    concatenation and sort of per-lane selections."""
    v = event_view(trace)
    if rank is not None and len(v.rank) and _only_rank(trace) is not None:
        if rank != _only_rank(trace):
            return np.zeros(0, dtype=np.int32)
        rank = None

    key = ("select", spec, rank, tuple((rx.pattern, rx.flags) for rx in names))
    if rank is not None:
        scope = _scope(trace)
        if scope is not None and key not in scope:
            _split_by_rank(trace, spec, names, scope)
        if scope is not None:
            out: np.ndarray = scope.get(key, np.zeros(0, dtype=np.int32))
            return out

    def make() -> np.ndarray:
        table = np.zeros((len(v.lane_codes) + 1, len(v.cat_codes) + 1), dtype=bool)  # index 0: none
        for lane, cats, negate in spec:
            if lane not in v.lane_codes:
                continue
            row = table[v.lane_codes[lane] + 1]
            row[:] = negate
            row[[v.cat_codes[c] + 1 for c in cats if c in v.cat_codes]] = not negate
        if names:  # the named rows first (few), then their lane and category: no pass over every pair
            named = np.zeros(len(v.names), dtype=bool)
            for rx in names:
                named |= name_hits(trace, rx)
            # (patterns that name no event of the trace, the common case: no pass over the events)
            rows = np.flatnonzero(named[v.name]) if named.any() else np.zeros(0, dtype=np.intp)
            rows = rows[table.ravel()[_pairs(trace)[rows]]]
            if rank is not None:
                rows = rows[v.rank[rows] == rank]
        else:
            keep = table.ravel()[_pairs(trace)]
            if rank is not None:
                keep &= v.rank == rank
            rows = np.flatnonzero(keep)
        return rows.astype(np.int32) if len(v.lane) < (1 << 31) else rows
    return _cached(trace, key, make)


def _split_by_rank(trace: Trace, spec: Spec, names: tuple[re.Pattern[str], ...], kept: dict[tuple[Any, ...], Any]
                   ) -> None:
    """Keep in ``kept`` the selection of ``spec`` (and ``names``) of every rank at once, split from the
    selection of all ranks (kept only when it was asked for itself): one pass over the events for
    every rank, not one per rank, and no copy of the whole selection beside the ranks' parts.
    ``("ranks", ...)`` holds the ranks in order of their first row."""
    v = event_view(trace)
    key_names = tuple((rx.pattern, rx.flags) for rx in names)
    asked = ("select", spec, None, key_names) in kept
    whole = select(trace, spec, None, names)
    of = v.rank[whole]
    ranks = [int(x) for x in pd.unique(of)] if len(of) and np.min(of) != np.max(of) else \
        ([int(of[0])] if len(of) else [])
    for r in ranks:  # ranks are few
        kept[("select", spec, r, key_names)] = whole[of == r] if len(ranks) > 1 else whole
    kept[("ranks", spec, key_names)] = ranks
    if not asked:
        kept.pop(("select", spec, None, key_names), None)


class Calls:
    """One rank's runtime/driver calls on host threads, sorted by start (frame order among equal starts).

    ``rows``, ``start`` and ``name`` are kept; ``end`` and ``tid`` of every call are read from the
    event view when asked (each is asked a few times per classification; kept, they were 16 bytes a
    call beside the 12 the rest holds, for millions of calls per rank). A :meth:`where` selection
    keeps its own."""

    def __init__(self, rows: np.ndarray, start: np.ndarray, name: np.ndarray, view: EventView | None = None,
                 end: np.ndarray | None = None, tid: np.ndarray | None = None) -> None:
        self.rows = rows  # event rows
        self.start = start  # int64
        self.name = name  # name codes (index ``name_hits`` with them)
        self._view, self._end, self._tid = view, end, tid

    @property
    def end(self) -> np.ndarray:
        """int64"""
        return self.end_of(slice(None))

    @property
    def tid(self) -> np.ndarray:
        """int64"""
        return self.tid_of(slice(None))

    def end_of(self, at: np.ndarray | slice) -> np.ndarray:
        """``end[at]`` (int64) without reading every call's end (``at``: a mask or positions)."""
        return self._column(self._end, "end", at)

    def tid_of(self, at: np.ndarray | slice) -> np.ndarray:
        """``tid[at]`` (int64) without reading every call's thread (``at``: a mask or positions)."""
        return self._column(self._tid, "tid", at)

    def _column(self, own: np.ndarray | None, name: str, at: np.ndarray | slice) -> np.ndarray:
        """The calls' ``at`` of a column kept (``own``) or read from the view's ``name`` column."""
        if own is not None:
            return own[at]
        assert self._view is not None
        return getattr(self._view, name)[self.rows[at]].astype(np.int64, copy=False)

    def where(self, keep: np.ndarray) -> Calls:
        rows = self.rows[keep]
        if self._view is None:
            assert self._end is not None and self._tid is not None
            return Calls(rows, self.start[keep], self.name[keep], end=self._end[keep], tid=self._tid[keep])
        return Calls(rows, self.start[keep], self.name[keep], end=self._view.end[rows].astype(np.int64, copy=False),
                     tid=self._view.tid[rows].astype(np.int64, copy=False))


def api_calls(trace: Trace, rank: int) -> Calls:
    """The runtime/driver calls on host threads of ``rank``, sorted by start once."""
    v = event_view(trace)

    def make() -> Calls:
        rows = select(trace, API, rank)
        start = v.start[rows].astype(np.int64, copy=False)
        if len(start) > 1 and not bool(np.all(start[1:] >= start[:-1])):  # (nsys exports: already in order)
            order = np.argsort(start, kind="stable")
            rows, start = rows[order], start[order]
            del order
        return Calls(rows, start, v.name[rows], view=v)
    return _cached(trace, ("api", rank), make)


def longer_than(trace: Trace, rank: int, ns: int) -> np.ndarray:
    """Bool per call of ``api_calls(trace, rank)``: it lasted longer than ``ns`` (found once for the
    rules that read it: every call's end is read for it)."""
    def make() -> np.ndarray:
        calls = api_calls(trace, rank)
        return calls.end - calls.start > ns
    return _cached(trace, ("longer_than", rank, ns), make)


def distinct(values: np.ndarray) -> list[int]:
    """The sorted distinct values of a column that holds few (ranks, devices, threads), by hashing or a
    min/max test, not by sorting the column (``np.unique`` sorted every gap's rank, once per reader)."""
    if len(values) == 0:
        return []
    lo, hi = np.min(values), np.max(values)
    if lo == hi:
        return [int(lo)]
    # two values (two threads, two devices): two comparisons, cheaper than hashing every row
    if np.count_nonzero(values == lo) + np.count_nonzero(values == hi) == len(values):
        return [int(lo), int(hi)]
    return sorted(int(x) for x in pd.unique(values))


def count_before(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``np.searchsorted(points, t, side="left")`` (``points`` sorted): the points before each time. Of int64
    times sorted too (the gaps of a device, a thread's calls), one merge pass (``intervals``), not a search each."""
    if points.dtype == np.int64 and t.dtype == np.int64:
        return intervals.sorted_count_at_or_before(t - 1, points)  # (integers: before t is at or before t - 1)
    return np.searchsorted(points, t, side="left")


def count_at_or_before(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``np.searchsorted(points, t, side="right")`` (``points`` sorted): :func:`count_before`'s twin."""
    if points.dtype == np.int64 and t.dtype == np.int64:
        return intervals.sorted_count_at_or_before(t, points)
    return np.searchsorted(points, t, side="right")


def api_ranks(trace: Trace) -> list[int]:
    """The ranks that have runtime/driver calls, in order of their first call in the frame."""
    v = event_view(trace)

    scope = _scope(trace)
    if _only_rank(trace) is None and scope is not None:
        if ("ranks", API, ()) not in scope:
            _split_by_rank(trace, API, (), scope)  # (the ranks' own selections come with it)
        ranks: list[int] = scope[("ranks", API, ())]
        return ranks

    def make() -> list[int]:
        rows, only = select(trace, API), _only_rank(trace)
        if only is not None:
            return [only] if len(rows) else []
        return [int(x) for x in pd.unique(v.rank[rows])]  # in order of appearance
    return _cached(trace, ("api_ranks",), make)


def matching(trace: Trace, calls: Calls, *patterns: re.Pattern[str]) -> np.ndarray:
    """Bool per call: any of ``patterns`` finds its name."""
    hit = name_hits(trace, patterns[0])
    for rx in patterns[1:]:
        hit = hit | name_hits(trace, rx)
    if not hit.any():  # most patterns name no call of a trace: no pass over the calls
        return np.zeros(len(calls.name), dtype=bool)
    return hit[calls.name]


CPU_OPS: Spec = ((schema.LANE_CPU_THREAD, (schema.CAT_CPU_OP,), False),)
# What a host thread runs besides runtime calls: Python frames, CPU ops and user ranges.
HOST_WORK: Spec = ((schema.LANE_CPU_THREAD, (schema.CAT_PYTHON, schema.CAT_CPU_OP), False),
                   (schema.LANE_CPU_ANNOTATION, (schema.CAT_USER_ANNOTATION,), False))


def _host_tids(trace: Trace, rank: int) -> np.ndarray:
    """The thread of each ``HOST_WORK`` row of ``rank`` (kept: every thread's selection reads it)."""
    v = event_view(trace)
    return _cached(trace, ("host_tids", rank), lambda: v.tid[select(trace, HOST_WORK, rank)])


def host_threads(trace: Trace, rank: int) -> list[int]:
    """The threads of ``rank`` with ``HOST_WORK`` rows, ascending."""
    return _cached(trace, ("host_threads", rank), lambda: distinct(_host_tids(trace, rank)))


def thread_host_rows(trace: Trace, rank: int, tid: int) -> np.ndarray:
    """The ``HOST_WORK`` rows of one host thread sorted by start (frame order among equal starts)."""
    v = event_view(trace)

    def make() -> np.ndarray:
        host = select(trace, HOST_WORK, rank)
        rows = host[_host_tids(trace, rank) == tid]
        start = v.start[rows]
        # (a Kineto thread's frames are written in start order: a check, not a sort, in the common case)
        return rows if intervals.is_sorted(start) else rows[np.argsort(start, kind="stable")]
    return _cached(trace, ("thread_host", rank, tid), make)


def thread_cpu_ops(trace: Trace, rank: int, tid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CPU operators of one host thread sorted by start (frame order among equal starts):
    ``(rows, start, reach)``, ``reach`` the running maximum of their ends."""
    v = event_view(trace)

    def make() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = thread_host_rows(trace, rank, tid)  # already sorted: the CPU ops are a subsequence
        pair = (v.lane_codes.get(schema.LANE_CPU_THREAD, -99) + 1) * (len(v.cat_codes) + 1) \
            + v.cat_codes.get(schema.CAT_CPU_OP, -99) + 1
        ops = rows[_pairs(trace)[rows] == pair]
        return ops, v.start[ops].astype(np.int64, copy=False), \
            np.maximum.accumulate(v.end[ops].astype(np.int64, copy=False))
    return _cached(trace, ("thread_cpu_ops", rank, tid), make)


