"""The gap engine's compiled interval sweeps (``traceread/_cintervals.c``) against their numpy twins in
traceread.intervals, on random interval sets (ties, nesting, zero lengths, unsorted rows, int32 and
int64 row numbers) and on the selections of real traces; and the switch that turns them off."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import needs_shared, shared_kineto, shared_nsys

import traceread
from traceread import intervals as iv
from traceread.config import Thresholds
from traceread.engine import capture_edges as ce
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.errors import UserFacingError

pytestmark = pytest.mark.skipif(iv._CGAPS is None, reason="the compiled sweeps were not built (no C compiler)")


def _twins(start, end, rows, qs, qe):
    s, e = start[rows], end[rows]
    return (iv.overlap_with_union(qs, qe, *iv.union(s, e)), iv.longest_overlap(qs, qe, s, e),
            iv.count_in(qs, qe, np.sort(s)))


def _compiled(start, end, rows, qs, qe):
    return (iv.rows_covered(start, end, rows, qs, qe), iv.rows_longest_overlap(start, end, rows, qs, qe),
            iv.rows_count_in(start, rows, qs, qe))


def _queries(rng, n, span):
    """Sorted, pairwise disjoint (possibly touching) queries, as the engine's gaps are."""
    cuts = np.sort(rng.integers(0, span, size=2 * n))
    qs, qe = cuts[0::2], cuts[1::2]
    keep = qe > qs
    return qs[keep], qe[keep]


@pytest.mark.parametrize("seed", range(60))
def test_sweeps_equal_their_numpy_twins(seed):
    rng = np.random.default_rng(seed)
    n, span = int(rng.integers(0, 400)), int(rng.choice([20, 200, 5000]))
    start = rng.integers(0, span, size=n + 5).astype(np.int64)
    # few distinct lengths (zero included) so that ends and overlaps tie often
    end = start + rng.choice([0, 1, 3, 7, span // 4 + 1], size=n + 5)
    rows = rng.choice(n + 5, size=int(rng.integers(0, n + 5)) if n else 0, replace=False)
    if seed % 3 == 0:
        rows = rows[np.argsort(start[rows], kind="stable")]  # the sorted path without a sort
    rows = rows.astype(np.int32 if seed % 2 else np.int64)
    qs, qe = _queries(rng, int(rng.integers(0, 60)), span + 10)
    tid = rng.integers(0, 4, size=n + 5)
    tids = rng.choice(4, size=int(rng.integers(0, 4)), replace=False)
    kept = rows[np.isin(tid[rows], tids)]
    want_len, want_at = iv.longest_overlap(qs, qe, start[kept], end[kept])
    got_len, got_at = iv.rows_longest_overlap(start, end, rows, qs, qe, tid, tids)
    assert got_len.tolist() == want_len.tolist()
    # positions into rows, of the same interval as among the kept rows
    assert [rows[i] if i >= 0 else -1 for i in got_at] == [kept[i] if i >= 0 else -1 for i in want_at]
    want, got = _twins(start, end, rows, qs, qe), _compiled(start, end, rows, qs, qe)
    assert got[0].tolist() == want[0].tolist()
    assert got[1][0].tolist() == want[1][0].tolist()
    assert got[1][1].tolist() == want[1][1].tolist()  # the same interval on ties, not only the same length
    assert got[2].tolist() == want[2].tolist()


@pytest.mark.parametrize("seed", range(40))
def test_starts_and_counts_at_times_equal_their_numpy_twins(seed):
    rng = np.random.default_rng(seed)
    n, span = int(rng.integers(0, 300)), int(rng.choice([10, 100, 3000]))
    start = rng.integers(0, span, size=n).astype(np.int64)
    end = start + rng.choice([0, 2, 9], size=n)  # few lengths: ties on the end are common
    rows = np.argsort(start, kind="stable").astype(np.int32 if seed % 2 else np.int64)
    t = np.sort(rng.integers(0, span + 5, size=int(rng.integers(0, 80))))
    if seed % 4 == 0:
        t = np.unique(t)
    want = iv.longest_starting_at(t, start[rows], end[rows])
    assert iv.rows_starting_at(start, end, rows, t).tolist() == want.tolist()
    points = np.sort(start)
    assert iv.sorted_count_at_or_before(t, points).tolist() == iv.count_at_or_before(t, points).tolist()


@pytest.mark.parametrize("seed", range(40))
def test_holes_and_positions_equal_their_numpy_twins(seed):
    rng = np.random.default_rng(seed)
    span = int(rng.choice([30, 300, 5000]))
    s = rng.integers(0, span, size=int(rng.integers(0, 120)))
    us, ue = iv.union(s, s + rng.choice([0, 1, 4, 20], size=len(s)))
    cuts = np.sort(rng.integers(-5, span + 30, size=2 * int(rng.integers(1, 20))))
    ws, we = cuts[0::2], cuts[1::2]
    if seed % 3 == 0:  # windows that touch, as consecutive steps do
        ws, we = cuts[:-1], cuts[1:]
    got, want = iv.complement_in_windows(us, ue, ws, we), iv.complement_in_windows_numpy(us, ue, ws, we)
    assert [x.tolist() for x in got] == [x.tolist() for x in want]
    keys = np.sort(rng.integers(0, span, size=int(rng.integers(0, 100)))).astype(np.int32 if seed % 2 else np.int64)
    queries = np.sort(rng.integers(0, span, size=int(rng.integers(0, 100))))
    assert iv.sorted_positions(keys, queries).tolist() == iv.sorted_positions_numpy(keys, queries).tolist()


@pytest.mark.parametrize("seed", range(30))
def test_union_of_rows_equals_its_numpy_twin(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    start = rng.integers(0, 500, size=n).astype(np.int64)
    end = start + rng.choice([0, 1, 3, 30], size=n)
    rows = rng.choice(n, size=n // 2, replace=False) if n else np.zeros(0, np.int64)
    if seed % 2:
        rows = rows[np.argsort(start[rows], kind="stable")].astype(np.int32)
    got, want = iv.rows_union(start, end, rows), iv.union(start[rows], end[rows])
    assert [x.tolist() for x in got] == [x.tolist() for x in want]


def test_queries_out_of_shape_fall_back_to_the_twins():
    # overlapping queries: no sweep can take them; the answer is still the twin's
    start, end = np.array([0, 2, 5], np.int64), np.array([4, 9, 6], np.int64)
    rows = np.array([2, 0, 1])
    qs, qe = np.array([1, 3, 0], np.int64), np.array([8, 10, 2], np.int64)
    assert iv.rows_covered(start, end, rows, qs, qe).tolist() == [7, 6, 2]
    assert iv.rows_count_in(start, rows, qs, qe).tolist() == [2, 1, 1]


def test_switch_uses_the_twins(monkeypatch):
    monkeypatch.delenv(iv.DISABLE_ENV, raising=False)
    calls = []
    monkeypatch.setattr(iv, "overlap_with_union", lambda *a: calls.append(a) or np.zeros(1, np.int64))
    start, end, rows = np.array([0], np.int64), np.array([5], np.int64), np.array([0])
    qs, qe = np.array([1], np.int64), np.array([3], np.int64)
    assert iv.rows_covered(start, end, rows, qs, qe).tolist() == [2] and not calls
    monkeypatch.setenv(iv.DISABLE_ENV, "1")
    iv.rows_covered(start, end, rows, qs, qe)
    assert len(calls) == 1


@needs_shared
@pytest.mark.parametrize("path", shared_kineto() + shared_nsys(), ids=lambda p: p.name)
def test_gaps_of_real_traces_are_the_same_without_the_sweeps(path, monkeypatch):
    try:
        trace = traceread.load(path)
    except UserFacingError as exc:
        pytest.skip(f"not loadable: {exc}")
    steps = find_steps(trace, Thresholds()).steps
    monkeypatch.delenv(iv.DISABLE_ENV, raising=False)
    trace.cache = None  # the capture edges are kept in the engine's cache: made anew with each setting
    edges, compiled = ce.capture_edges(trace, steps, Thresholds()), find_gaps(trace, steps)
    monkeypatch.setenv(iv.DISABLE_ENV, "1")
    trace.cache = None
    pd.testing.assert_frame_equal(ce.capture_edges(trace, steps, Thresholds()), edges, check_exact=True)
    pd.testing.assert_frame_equal(find_gaps(trace, steps), compiled, check_exact=True)


class _View:
    """The columns of an event view that capture_edges._latest_end reads."""

    def __init__(self, rng, n):
        self.start = rng.integers(0, 1000, size=n).astype(np.int64)
        self.end = self.start + rng.choice([0, 5, 50, 400], size=n)
        self.cat = rng.integers(-1, 4, size=n).astype(np.int8)
        self.name = rng.integers(-1, 30, size=n).astype(np.int32)


@pytest.mark.parametrize("seed", range(30))
def test_latest_end_by_bucket_equals_its_numpy_twin(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    v = _View(rng, int(rng.integers(0, 300)))
    rows = rng.choice(len(v.start), size=len(v.start) // 2, replace=False).astype(np.int32 if seed % 2 else np.int64)
    bounds = np.sort(rng.integers(0, 1100, size=int(rng.integers(0, 12))))
    tables = (rng.random(5) < 0.7, rng.random(31) < 0.8) if seed % 3 else None
    got, want = (np.full(len(bounds) + 1, np.iinfo(np.int64).min, dtype=np.int64) for _ in range(2))
    monkeypatch.delenv(iv.DISABLE_ENV, raising=False)
    ce._latest_end(v, rows, bounds, 300, got, tables)
    monkeypatch.setenv(iv.DISABLE_ENV, "1")
    ce._latest_end(v, rows, bounds, 300, want, tables)
    assert got.tolist() == want.tolist()
