"""traceread.intervals: inline goldens, and hypothesis checks against plain slow references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceread import intervals as iv


def a(*xs):
    return np.array(xs, dtype=np.int64)


# --- goldens ------------------------------------------------------------------------------------

def test_union_merges_overlapping_touching_and_drops_zero_length():
    us, ue = iv.union(a(5, 0, 10, 3, 20, 30), a(8, 4, 12, 5, 20, 31))
    assert us.tolist() == [0, 10, 30] and ue.tolist() == [8, 12, 31]


def test_complement_in_windows_leading_inner_trailing_holes():
    w, gs, ge = iv.complement_in_windows(a(2, 6), a(4, 12), a(0, 10), a(10, 15))
    assert list(zip(w.tolist(), gs.tolist(), ge.tolist(), strict=False)) == [(0, 0, 2), (0, 4, 6), (1, 12, 15)]


def test_complement_of_empty_union_is_each_window():
    w, gs, ge = iv.complement_in_windows(a(), a(), a(0, 10), a(5, 20))
    assert w.tolist() == [0, 1] and gs.tolist() == [0, 10] and ge.tolist() == [5, 20]


def test_overlap_with_union_queries_may_overlap_each_other():
    got = iv.overlap_with_union(a(0, 3, 9, 0), a(10, 7, 9, 100), a(2, 6), a(4, 12))
    assert got.tolist() == [6, 2, 0, 8]


def test_longest_overlap_covers_calls_before_inside_and_past_the_query():
    # queries [10,20) and [30,40); calls: one from before covering 10..15, one inside (12..19),
    # one crossing the second query's end (35..50).
    length, idx = iv.longest_overlap(a(10, 30), a(20, 40), a(0, 12, 35), a(15, 19, 50))
    assert length.tolist() == [7, 5] and idx.tolist() == [1, 2]


def test_innermost_covering_walks_out_of_finished_children():
    # parent [0,100) with children [10,20) and [30,60), grandchild [40,50)
    s, e = a(30, 0, 10, 40), a(60, 100, 20, 50)
    got = iv.innermost_covering(a(5, 15, 25, 45, 55, 100), s, e)
    assert got.tolist() == [1, 2, 1, 3, 0, -1]


def test_longest_starting_at_prefers_the_longest_of_tied_starts():
    got = iv.longest_starting_at(a(5, 7, 10, 11), a(1, 5, 5, 5, 10), a(2, 6, 9, 7, 12))
    assert got.tolist() == [2, -1, 4, -1]


def test_count_in_is_half_open():
    assert iv.count_in(a(0, 5), a(5, 10), a(0, 5, 5, 9, 10)).tolist() == [1, 3]


# --- slow references ----------------------------------------------------------------------------

def covered_set(starts, ends):
    out = set()
    for s, e in zip(starts, ends, strict=False):
        out.update(range(s, e))
    return out


def ref_union(starts, ends):
    cov = sorted(covered_set(starts, ends))
    res = []
    for t in cov:
        if res and res[-1][1] == t:
            res[-1][1] = t + 1
        else:
            res.append([t, t + 1])
    return res


intervals_st = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1])), max_size=25)


@settings(max_examples=100, deadline=None)
@given(intervals_st)
def test_union_matches_reference(ivs):
    s, e = a(*[x for x, _ in ivs]), a(*[y for _, y in ivs])
    us, ue = iv.union(s, e)
    assert [[int(x), int(y)] for x, y in zip(us, ue, strict=False)] == ref_union(s.tolist(), e.tolist())


@settings(max_examples=100, deadline=None)
@given(intervals_st, intervals_st)
def test_overlap_and_longest_match_reference(ivs, queries):
    s, e = a(*[x for x, _ in ivs]), a(*[y for _, y in ivs])
    cov = covered_set(s.tolist(), e.tolist())
    us, ue = iv.union(s, e)
    qs, qe = a(*[x for x, _ in queries]), a(*[y for _, y in queries])
    got = iv.overlap_with_union(qs, qe, us, ue)
    assert got.tolist() == [len(cov & set(range(x, y))) for x, y in zip(qs.tolist(), qe.tolist(), strict=False)]
    # longest_overlap needs disjoint sorted queries: use the union of the queries.
    ds, de = iv.union(qs, qe)
    length, idx = iv.longest_overlap(ds, de, s, e)
    for q0, q1, ln, i in zip(ds.tolist(), de.tolist(), length.tolist(), idx.tolist(), strict=False):
        want = max([max(0, min(y, q1) - max(x, q0)) for x, y in zip(s.tolist(), e.tolist(), strict=False)], default=0)
        assert ln == want
        assert (i == -1) == (want == 0)
        if i >= 0:
            assert min(e[i], q1) - max(s[i], q0) == want


@settings(max_examples=100, deadline=None)
@given(intervals_st, st.lists(st.integers(-5, 130), max_size=40))
def test_covered_before_sorted_matches_reference(ivs, times):
    s, e = a(*[x for x, _ in ivs]), a(*[y for _, y in ivs])
    cov = covered_set(s.tolist(), e.tolist())
    us, ue = iv.union(s, e)
    t = np.sort(a(*times))
    want = [sum(1 for c in cov if c < x) for x in t.tolist()]
    assert iv.covered_before_sorted(t, us, ue).tolist() == want == iv.covered_before(t, us, ue).tolist()


@settings(max_examples=100, deadline=None)
@given(intervals_st, intervals_st)
def test_complement_partitions_each_window(ivs, wins):
    s, e = a(*[x for x, _ in ivs]), a(*[y for _, y in ivs])
    ws, we = iv.union(a(*[x for x, _ in wins]), a(*[y for _, y in wins]))
    us, ue = iv.union(s, e)
    w, gs, ge = iv.complement_in_windows(us, ue, ws, we)
    cov = covered_set(s.tolist(), e.tolist())
    for k, (w0, w1) in enumerate(zip(ws.tolist(), we.tolist(), strict=False)):
        holes = [(g0, g1) for j, g0, g1 in zip(w.tolist(), gs.tolist(), ge.tolist(), strict=False) if j == k]
        want = ref_union([t for t in range(w0, w1) if t not in cov], [t + 1 for t in range(w0, w1)
                                                                      if t not in cov])
        assert [list(h) for h in holes] == want
        busy = int(iv.overlap_with_union(a(w0), a(w1), us, ue)[0])
        assert busy + sum(g1 - g0 for g0, g1 in holes) == w1 - w0


@st.composite
def laminar(draw, lo=0, hi=80, depth=0):
    out = []
    t = lo
    while t < hi and depth < 4 and len(out) < 6:
        s = draw(st.integers(t, hi))
        if s >= hi:
            break
        e = draw(st.integers(s + 1, hi))
        out.append((s, e))
        out.extend(draw(laminar(s, e, depth + 1)))
        t = e
    return out


@settings(max_examples=100, deadline=None)
@given(laminar(), st.lists(st.integers(-2, 82), max_size=15))
def test_innermost_covering_matches_reference(frames, ts):
    s, e = a(*[x for x, _ in frames]), a(*[y for _, y in frames])
    got = iv.innermost_covering(a(*ts), s, e)
    for t, g in zip(ts, got.tolist(), strict=False):
        cover = [i for i in range(len(frames)) if s[i] <= t < e[i]]
        if not cover:
            assert g == -1
        else:
            # innermost = shortest covering frame (laminar: the covering frames are a chain)
            assert e[g] - s[g] == min(e[i] - s[i] for i in cover) and s[g] <= t < e[g]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 2**40), max_size=60), st.lists(st.integers(-3, 2**40), max_size=12))
def test_one_of_is_isin(values, few):
    # few wanted values (compared one at a time) and more (np.isin itself), int64 and int32 columns
    pool = np.array(values + few, dtype=np.int64)
    for a in (pool, np.array([x % 2**31 for x in values + few], dtype=np.int32)):
        for want in (np.array(few, dtype=np.int64), np.array(few[:3], dtype=np.int64)):
            assert np.array_equal(iv.one_of(a, want), np.isin(a, want))
