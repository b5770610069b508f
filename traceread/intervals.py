"""Generic primitives over half-open int64 intervals ``[start, end)``; nothing here knows about GPUs.

Conventions shared by every function:

* An interval set is two int64 arrays ``(starts, ends)`` of equal length with ``ends >= starts``.
* A *union* is an interval set that is sorted by start, pairwise disjoint, with no touching
  neighbours and no zero-length members (what :func:`union` returns). Functions that take a union
  rely on that shape and do not check it.
* Every function is vectorized: sorts and ``searchsorted`` sweeps, O(n log n), no Python loop over
  intervals. Inputs are never modified.

The ``rows_*`` sweeps at the end also have a compiled form (``_cintervals.c``), kept because numpy
cannot do what it does: one merge pass over rows already sorted by start, reading ``start``/``end``
through the row numbers, where numpy needs the selected columns gathered into new arrays, a sort or
a ``searchsorted`` per query set, and a temporary array per step. Without it (``TRACEREAD_NO_CGAPS=1``)
``analyze`` of the nsys 5M-kernel export takes 1.18x the CPU (1.03-1.07x on the 1.1 GB Kineto input):
``scripts/bench_analyze.py --baseline HEAD --env-after TRACEREAD_NO_CGAPS=1 --sizes 1100 --gaps-kernels 0
--skip-nsys-ai --repeat 2``.
"""

from __future__ import annotations

import numpy as np

from traceread.extensions import optional, switched_off

_I64 = np.int64
INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max


def _arr(a) -> np.ndarray:
    return np.asarray(a, dtype=_I64)


def is_sorted(a) -> bool:
    """True when ``a`` is non-decreasing (a cheap check that lets callers skip a sort)."""
    a = np.asarray(a)
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def one_of(values: np.ndarray, few) -> np.ndarray:
    """Bool per value: is it one of ``few`` (``np.isin(values, few)``). A handful of wanted values (the launching
    threads, a few category codes) is an equality pass each: ``np.isin`` builds a lookup table over the wanted
    values' range, and over thread ids that range is wide."""
    few = np.asarray(few)
    values = np.asarray(values)
    if len(few) > _ONE_OF_EQUALITY_MAX or values.dtype.kind not in "iub" or few.dtype.kind not in "iub":
        return np.isin(values, few)
    out = np.zeros(values.shape, dtype=bool)
    for x in np.unique(few).tolist():  # few values
        out |= values == x
    return out


# The most wanted values :func:`one_of` compares one at a time (beyond it, np.isin).
_ONE_OF_EQUALITY_MAX = 8


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Merge an interval set into its union.

    In: ``starts``, ``ends`` (any order, may overlap, may be zero-length).
    Out: ``(us, ue)``, the union (see module conventions). Zero-length intervals cover no time and
    are dropped; intervals that touch (``end == next start``) are merged.
    """
    s, e = _arr(starts), _arr(ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s.copy(), e.copy()
    return union_of_own(s, e)


def union_of_own(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`union` of int64 intervals all of positive length, in arrays the caller gives up (``e`` is
    overwritten with the ends' running max, and intervals already disjoint come back as they are: no copy
    of millions of launch pairs)."""
    if len(s) and not is_sorted(s):
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        del order
    reach = np.maximum.accumulate(e, out=e)
    # A new merged interval starts where a start lies strictly beyond everything before it.
    new = np.empty(len(s), dtype=bool)
    new[:1] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    if new.all():
        return s, reach
    first = np.flatnonzero(new)
    del new
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def total_length(us, ue) -> int:
    """Total covered length of a union (ns)."""
    return int((_arr(ue) - _arr(us)).sum())


def intersect(as_, ae, bs, be) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairwise intersections of two unions (each sorted and disjoint).

    In: union A ``(as_, ae)``, union B ``(bs, be)``.
    Out: ``(a_idx, b_idx, s, e)``: one row per pair of members that overlap by more than zero,
    with the overlap ``[s, e)``, sorted by ``s``. At most ``len(A) + len(B)`` rows.
    """
    as_, ae, bs, be = _arr(as_), _arr(ae), _arr(bs), _arr(be)
    # For each B member, the A members overlapping it form a contiguous run [lo, hi).
    lo = np.searchsorted(ae, bs, side="right")
    hi = np.searchsorted(as_, be, side="left")
    cnt = np.maximum(hi - lo, 0)
    b_idx = np.repeat(np.arange(len(bs), dtype=_I64), cnt)
    run_start = np.repeat(np.cumsum(cnt) - cnt, cnt)
    a_idx = np.repeat(lo, cnt) + (np.arange(len(b_idx), dtype=_I64) - run_start)
    s = np.maximum(as_[a_idx], bs[b_idx])
    e = np.minimum(ae[a_idx], be[b_idx])
    ok = e > s
    return a_idx[ok], b_idx[ok], s[ok], e[ok]


def complement_in_windows(us, ue, ws, we) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The holes of a union inside each window.

    In: union ``(us, ue)``; windows ``(ws, we)`` sorted by start and pairwise disjoint (they may
    touch).
    Out: ``(win_idx, gs, ge)``: every maximal sub-interval of a window not covered by the union,
    with the index of its window, sorted by ``gs``. Lengths are > 0. One compiled pass when built
    (:func:`complement_in_windows_numpy` is its twin).
    """
    c = sweeper()
    if c is not None and len(ws):
        us, ue, ws, we = (np.ascontiguousarray(x, _I64) for x in (us, ue, ws, we))
        w_idx, gs, ge = (np.empty(len(us) + 1 + len(ws), dtype=_I64) for _ in range(3))
        n = c.holes(us, ue, ws, we, w_idx, gs, ge)
        if n is not None:  # copies of the filled part: the spare room is not kept
            return w_idx[:n].copy(), gs[:n].copy(), ge[:n].copy()
    return complement_in_windows_numpy(us, ue, ws, we)


def complement_in_windows_numpy(us, ue, ws, we) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`complement_in_windows` in numpy (the compiled pass's twin)."""
    us, ue = _arr(us), _arr(ue)
    hs = np.concatenate(([INT64_MIN], ue))
    he = np.concatenate((us, [INT64_MAX]))
    _, w_idx, gs, ge = intersect(hs, he, _arr(ws), _arr(we))
    return w_idx, gs, ge


def covered_before(t, us, ue) -> np.ndarray:
    """Length of the union that lies before each time ``t`` (the union's cumulative coverage)."""
    t, us, ue = _arr(t), _arr(us), _arr(ue)
    if len(us) == 0:
        return np.zeros(len(t), dtype=_I64)
    return _covered_before(t, us, *_coverage_tables(us, ue))


def _coverage_tables(us: np.ndarray, ue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prefix[k]``: length of the first k members; ``end_at[k]``: the end of member k-1 (0 for k=0)."""
    prefix = np.empty(len(us) + 1, dtype=_I64)
    prefix[0] = 0
    np.cumsum(ue - us, out=prefix[1:])
    end_at = np.empty(len(ue) + 1, dtype=_I64)
    end_at[0] = 0
    end_at[1:] = ue
    return prefix, end_at


def _covered_before(t: np.ndarray, us: np.ndarray, prefix: np.ndarray, end_at: np.ndarray) -> np.ndarray:
    # With k members starting at or before t, the coverage is theirs minus what member k-1 has after t.
    k = np.searchsorted(us, t, side="right")
    after = end_at[k]
    after -= t
    np.maximum(after, 0, out=after)
    out = prefix[k]
    out -= after
    out[k == 0] = 0
    return out


def covered_before_sorted(t, us, ue) -> np.ndarray:
    """:func:`covered_before` for times ``t`` sorted ascending (many, against a smaller union): the members
    starting at or before each time are counted by placing the union's starts among the times."""
    t, us, ue = _arr(t), _arr(us), _arr(ue)
    if len(us) == 0:
        return np.zeros(len(t), dtype=_I64)
    lens = ue - us
    prefix = np.concatenate(([0], np.cumsum(lens)))
    first = np.searchsorted(t, us, side="left")  # the first time at or after each member's start
    k = np.cumsum(np.bincount(first, minlength=len(t) + 1)[: len(t)])  # members starting at or before t
    km1 = np.maximum(k - 1, 0)
    partial = np.clip(t - us[km1], 0, lens[km1])
    return np.where(k > 0, prefix[km1] + partial, 0)


def overlap_with_union(qs, qe, us, ue) -> np.ndarray:
    """Length of each query interval covered by a union.

    In: queries ``(qs, qe)`` in any order (may overlap each other); union ``(us, ue)``.
    Out: int64 array, one length per query, in ``[0, qe - qs]``.
    """
    qs, qe, us, ue = _arr(qs), _arr(qe), _arr(us), _arr(ue)
    if len(us) == 0:
        return np.zeros(len(qs), dtype=_I64)
    tables = _coverage_tables(us, ue)  # once for both ends
    out = _covered_before(qe, us, *tables)
    out -= _covered_before(qs, us, *tables)
    return out


def count_in(qs, qe, points) -> np.ndarray:
    """Number of ``points`` (sorted ascending) with ``qs <= p < qe``, per query."""
    p = _arr(points)
    return np.searchsorted(p, _arr(qe), side="left") - np.searchsorted(p, _arr(qs), side="left")


def count_at_or_before(t, points) -> np.ndarray:
    """Number of ``points`` (sorted ascending) ``<= t``, per time ``t``."""
    return np.searchsorted(_arr(points), _arr(t), side="right")


def longest_starting_at(t, starts, ends) -> np.ndarray:
    """For each time ``t``, the interval starting exactly at ``t`` that ends last.

    In: times ``t``; intervals ``(starts, ends)`` sorted by start.
    Out: index into ``starts`` (-1 when no interval starts at ``t``).
    """
    t, s, e = _arr(t), _arr(starts), _arr(ends)
    lo = np.searchsorted(s, t, side="left")
    cnt = np.searchsorted(s, t, side="right") - lo
    out = np.where(cnt > 0, lo, -1)
    multi = np.flatnonzero(cnt > 1)
    if len(multi):  # ties on the start are rare: expand only those
        c = cnt[multi]
        pos = np.repeat(lo[multi], c) + (np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c))
        seg = np.cumsum(c) - c
        best = np.maximum.reduceat(e[pos], seg)
        at_max = np.flatnonzero(e[pos] == np.repeat(best, c))
        owner = np.repeat(np.arange(len(multi)), c)[at_max]
        first = np.concatenate(([True], owner[1:] != owner[:-1]))
        out[multi[owner[first]]] = pos[at_max[first]]
    return out


def running_argmax(values) -> np.ndarray:
    """For each position i, the index of the maximum of ``values[:i+1]`` (latest on ties)."""
    v = _arr(values)
    if len(v) == 0:
        return np.zeros(0, dtype=_I64)
    cm = np.maximum.accumulate(v)
    return np.maximum.accumulate(np.where(v == cm, np.arange(len(v), dtype=_I64), 0))


def longest_overlap(qs, qe, starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the single interval of a set that overlaps it the longest.

    In: queries ``(qs, qe)`` sorted by start and pairwise disjoint; an interval set
    ``(starts, ends)`` in any order (may overlap and nest).
    Out: ``(length, index)``: the longest overlap (ns, 0 if none) and the index of that interval
    into ``starts`` (-1 if none). Ties pick one of the tied intervals.
    """
    qs, qe = _arr(qs), _arr(qe)
    s, e = _arr(starts), _arr(ends)
    nq = len(qs)
    best = np.zeros(nq, dtype=_I64)
    best_idx = np.full(nq, -1, dtype=_I64)
    if nq == 0 or len(s) == 0:
        return best, best_idx
    order = None if is_sorted(s) else np.argsort(s, kind="stable")
    s_sorted, e_sorted = (s, e) if order is None else (s[order], e[order])
    # (a) intervals starting before the query start: the one reaching furthest wins.
    k = np.searchsorted(s_sorted, qs, side="left")
    ramax = running_argmax(e_sorted)
    has = k > 0
    cand = ramax[np.maximum(k - 1, 0)]
    ov_a = np.where(has, np.minimum(e_sorted[cand], qe) - qs, 0)
    ov_a = np.maximum(ov_a, 0)
    take = ov_a > 0
    best[take] = ov_a[take]
    best_idx[take] = cand[take] if order is None else order[cand[take]]
    # (b) intervals starting inside a query: each belongs to exactly one query (queries disjoint),
    # and those of query i are s_sorted[k[i]:k_hi[i]] (found per query, not per interval).
    k_hi = np.searchsorted(s_sorted, qe, side="left")
    cnt = np.maximum(k_hi - k, 0)
    nz = np.flatnonzero(cnt)
    if len(nz):
        c = cnt[nz]
        seg = np.cumsum(c) - c  # where each query's run starts in pos
        pos = np.arange(int(c.sum()), dtype=_I64)
        pos += np.repeat(k[nz] - seg, c)
        ov = np.minimum(e_sorted[pos], np.repeat(qe[nz], c))
        ov -= s_sorted[pos]
        seg_max = np.maximum.reduceat(ov, seg)
        # First position of each run that reaches the run's maximum.
        at_max = np.flatnonzero(ov == np.repeat(seg_max, c))
        owner = np.repeat(np.arange(len(nz)), c)[at_max]
        first = np.concatenate(([True], owner[1:] != owner[:-1]))
        q, ov_b, pos_b = nz[owner[first]], seg_max[owner[first]], pos[at_max[first]]
        better = ov_b > best[q]
        best[q[better]] = ov_b[better]
        best_idx[q[better]] = pos_b[better] if order is None else order[pos_b[better]]
    return best, best_idx


def innermost_covering(t, starts, ends) -> np.ndarray:
    """For each time ``t``, the innermost interval of a laminar set that covers it.

    In: times ``t``; an interval set ``(starts, ends)`` in any order that is laminar (any two
    members are nested or disjoint, as a call stack's frames are).
    Out: index into ``starts`` of the covering member (``start <= t < end``) that starts latest,
    or -1 when none covers ``t``.
    """
    t, s, e = _arr(t), _arr(starts), _arr(ends)
    out = np.full(len(t), -1, dtype=_I64)
    keep = np.flatnonzero(e > s)
    if len(t) == 0 or len(keep) == 0:
        return out
    # Outer frames first on equal starts, so depth counts nest correctly.
    order = keep[np.lexsort((-e[keep], s[keep]))]
    s_sorted, e_sorted = s[order], e[order]
    ends_sorted = np.sort(e_sorted, kind="stable")  # ends of intervals in start order: nearly in order
    # Depth of each member = number of members covering its start, excluding itself.
    depth = (np.arange(len(order), dtype=_I64)
             - np.searchsorted(ends_sorted, s_sorted, side="right"))
    # Number of members covering t; the innermost sits at depth (that - 1).
    n_cover = (np.searchsorted(s_sorted, t, side="right")
               - np.searchsorted(ends_sorted, t, side="right"))
    want = n_cover - 1
    # Loop over distinct depths (a call stack is at most a few hundred deep), not over events.
    d_order = np.lexsort((s_sorted, depth))
    d_sorted = depth[d_order]
    for d in np.unique(want[want >= 0]):
        qi = np.flatnonzero(want == d)
        lo, hi = np.searchsorted(d_sorted, [d, d + 1], side="left")
        starts_d = s_sorted[d_order[lo:hi]]
        j = np.searchsorted(starts_d, t[qi], side="right") - 1
        ok = j >= 0
        cand = d_order[lo:hi][np.maximum(j, 0)]
        ok &= e_sorted[cand] > t[qi]
        out[qi[ok]] = order[cand[ok]]
    return out


# Sweeps over intervals given by row numbers into two columns (the gap engine's measurements): one
# pass in compiled code (``_cintervals.c``, optional) where it was built, else the numpy functions above,
# which are their exact twins (``TRACEREAD_NO_CGAPS=1`` uses the twins; a test compares them). The
# compiled sweeps need the rows sorted by start (they sort a copy when not) and the queries sorted by
# start and pairwise disjoint (else the twin answers).
DISABLE_ENV = "TRACEREAD_NO_CGAPS"
_CGAPS = optional("traceread._cintervals")


def sweeper():
    """The compiled sweeps' module, or None (not built, or switched off)."""
    return None if _CGAPS is None or switched_off(DISABLE_ENV) else _CGAPS


def by_start(start: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` in the order of their ``start`` (stable: equal starts keep their order); ``rows``
    itself when already so."""
    s = start[rows]
    return rows if is_sorted(s) else rows[np.argsort(s, kind="stable")]



def rows_covered(start, end, rows, qs, qe) -> np.ndarray:
    """``overlap_with_union(qs, qe, *union(start[rows], end[rows]))``: the length of each query
    covered by the union of the selected intervals."""
    c = sweeper()
    if c is not None and len(qs):
        start, end = np.ascontiguousarray(start, _I64), np.ascontiguousarray(end, _I64)
        rows, qs, qe = _row_arr(rows), np.ascontiguousarray(qs, _I64), np.ascontiguousarray(qe, _I64)
        out = np.empty(len(qs), dtype=_I64)
        if c.covered(start, end, rows, qs, qe, out) or c.covered(start, end, by_start(start, rows), qs, qe, out):
            return out
    return overlap_with_union(qs, qe, *union(np.asarray(start)[rows], np.asarray(end)[rows]))


def rows_longest_overlap(start, end, rows, qs, qe, tid=None, tids=None) -> tuple[np.ndarray, np.ndarray]:
    """``longest_overlap(qs, qe, start[rows], end[rows])``: per query the longest overlap and the
    position in ``rows`` of the interval making it (-1: none). With ``tid`` (a value per event) and
    ``tids``, only the rows whose ``tid`` is among ``tids`` take part (positions still into ``rows``)."""
    c = sweeper()
    if c is not None and len(qs) and len(rows):
        start, end = np.ascontiguousarray(start, _I64), np.ascontiguousarray(end, _I64)
        rows, qs, qe = _row_arr(rows), np.ascontiguousarray(qs, _I64), np.ascontiguousarray(qe, _I64)
        only = () if tid is None else (np.ascontiguousarray(tid, _I64), np.unique(np.asarray(tids, dtype=_I64)))
        length, idx = np.empty(len(qs), dtype=_I64), np.empty(len(qs), dtype=_I64)
        if c.longest(start, end, rows, qs, qe, length, idx, *only):
            return length, idx
        order = np.argsort(start[rows], kind="stable")
        if c.longest(start, end, rows[order], qs, qe, length, idx, *only):
            hit = idx >= 0
            idx[hit] = order[idx[hit]]
            return length, idx
    if tid is None:
        return longest_overlap(qs, qe, np.asarray(start)[rows], np.asarray(end)[rows])
    kept = np.flatnonzero(one_of(np.asarray(tid)[rows], tids))
    length, idx = longest_overlap(qs, qe, np.asarray(start)[rows[kept]], np.asarray(end)[rows[kept]])
    return length, np.where(idx >= 0, kept[np.maximum(idx, 0)], -1) if len(kept) else idx


def rows_count_in(start, rows, qs, qe) -> np.ndarray:
    """``count_in(qs, qe, np.sort(start[rows]))``: per query the rows starting inside it."""
    c = sweeper()
    if c is not None and len(qs):
        start = np.ascontiguousarray(start, _I64)
        rows, qs, qe = _row_arr(rows), np.ascontiguousarray(qs, _I64), np.ascontiguousarray(qe, _I64)
        out = np.empty(len(qs), dtype=_I64)
        if c.count(start, rows, qs, qe, out) or c.count(start, by_start(start, rows), qs, qe, out):
            return out
    return count_in(qs, qe, np.sort(np.asarray(start)[rows], kind="stable"))  # rows nearly in start order


def _row_arr(rows) -> np.ndarray:
    rows = np.asarray(rows)
    return np.ascontiguousarray(rows if rows.dtype in (np.int32, np.int64) else rows.astype(np.int64))


def rows_starting_at(start, end, rows, t) -> np.ndarray:
    """``longest_starting_at(t, start[rows], end[rows])`` for ``rows`` sorted by start: the position
    in ``rows`` of the interval starting at each time that ends last (-1: none)."""
    c = sweeper()
    if c is not None and len(t):
        start, end = np.ascontiguousarray(start, _I64), np.ascontiguousarray(end, _I64)
        rows, t = _row_arr(rows), np.ascontiguousarray(t, _I64)
        out = np.empty(len(t), dtype=_I64)
        if c.starting_at(start, end, rows, t, out):
            return out
    return longest_starting_at(t, np.asarray(start)[rows], np.asarray(end)[rows])


def sorted_count_at_or_before(t, points) -> np.ndarray:
    """:func:`count_at_or_before` for times ``t`` sorted ascending (one merge pass when compiled)."""
    c = sweeper()
    if c is not None and len(t):
        p, t = np.ascontiguousarray(points, _I64), np.ascontiguousarray(t, _I64)
        out = np.empty(len(t), dtype=_I64)
        if c.at_or_before(p, t, out):
            return out
    return count_at_or_before(t, points)


def sorted_positions(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query, the position of the first equal key (-1: none); ``keys`` sorted ascending, and
    ``queries`` too for the compiled merge pass (else searched)."""
    c = sweeper()
    if c is not None and len(queries) and len(keys):
        k, q = _row_arr(keys), _row_arr(queries)
        out = np.empty(len(q), dtype=_I64)
        if c.positions(k, q, out):
            return out
    return sorted_positions_numpy(keys, queries)


def sorted_positions_numpy(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """:func:`sorted_positions` by ``searchsorted`` (its twin; any order of queries)."""
    if len(keys) == 0:
        return np.full(len(queries), -1, dtype=_I64)
    k = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return np.where(keys[k] == queries, k, -1).astype(_I64, copy=False)


def rows_union(start, end, rows) -> tuple[np.ndarray, np.ndarray]:
    """``union(start[rows], end[rows])``: one compiled pass when ``rows`` are sorted by start."""
    c = sweeper()
    if c is not None and len(rows):
        start, end, rows = np.ascontiguousarray(start, _I64), np.ascontiguousarray(end, _I64), _row_arr(rows)
        us, ue = np.empty(len(rows), dtype=_I64), np.empty(len(rows), dtype=_I64)
        n = c.union_rows(start, end, rows, us, ue)
        if n is not None:  # copies of the filled part: the spare room is not kept
            return us[:n].copy(), ue[:n].copy()
    return union(np.asarray(start)[rows], np.asarray(end)[rows])
