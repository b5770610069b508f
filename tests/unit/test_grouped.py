"""traceread.grouped: the numpy group-bys give pandas' group-by results bit for bit (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceread import grouped


def _same(ref: np.ndarray, got: np.ndarray) -> bool:
    """Equal bits, NaN where NaN."""
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    nan = np.isnan(ref)
    return bool(np.array_equal(nan, np.isnan(got)) and np.array_equal(ref[~nan].view(np.int64), got[~nan].view(np.int64)))


# values whose sums lose bits (wide magnitudes) and NaN, in groups of one to ~60 rows
_VALUES = st.one_of(st.floats(-1e12, 1e12), st.just(float("nan")), st.sampled_from([1e-7, 3e9, 0.1, 1e15]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 2), _VALUES), max_size=120))
def test_aggregations_match_pandas_bit_for_bit(rows):
    a = np.array([r[0] for r in rows], dtype=np.int64)
    b = np.array([r[1] for r in rows], dtype=np.int64)
    v = np.array([r[2] for r in rows], dtype=np.float64)
    code, n = grouped.codes(a, b)
    frame = pd.DataFrame({"a": a, "b": b, "v": v})
    g = frame.groupby(["a", "b"])
    assert n == g.ngroups and np.array_equal(code, g.ngroup().to_numpy())
    assert _same(g["v"].sum().to_numpy(), grouped.total(v, code, n))
    assert _same(g["v"].mean().to_numpy(), grouped.mean(v, code, n))
    assert _same(g["v"].std(ddof=0).to_numpy(), grouped.std(v, code, n))
    assert _same(g["v"].median().to_numpy(), grouped.median(v, code, n))
    assert np.array_equal(g.size().to_numpy(), grouped.sizes(code, n))
    assert np.array_equal(g.cumcount().to_numpy(), grouped.cumcount(code, n))
    assert np.array_equal(g.cumcount(ascending=False).to_numpy(), grouped.cumcount(code, n, ascending=False))
    first = grouped.first_rows(code, n)
    assert np.array_equal(first, np.array([ix[0] for ix in g.indices.values()], dtype=np.int64).reshape(-1))


@pytest.mark.parametrize("size", [grouped.SEQUENTIAL_MAX, grouped.SEQUENTIAL_MAX + 1])
def test_large_groups_match_pandas_on_either_side_of_the_handover(size):
    rng = np.random.default_rng(size)
    v = rng.integers(1, 10**9, 2 * size).astype(np.float64) * rng.choice([1e-7, 1.0, 1e9], 2 * size)
    key = np.repeat(np.array([5, 9]), size)
    code, n = grouped.codes(key)
    s = pd.Series(v).groupby(key)
    assert _same(s.sum().to_numpy(), grouped.total(v, code, n))
    assert _same(s.mean().to_numpy(), grouped.mean(v, code, n))
    assert _same(s.std(ddof=0).to_numpy(), grouped.std(v, code, n))


def test_lookup_finds_rows_and_misses_absent_ones():
    groups = [np.array([0, 0, 1]), np.array([5, 7, 5])]
    got = grouped.lookup(groups, [np.array([1, 0, 0, 2]), np.array([5, 7, 6, 5])])
    assert got.tolist() == [2, 1, -1, -1]
    assert grouped.lookup([np.array([], np.int64)], [np.array([3])]).tolist() == [-1]


def test_empty_input():
    code, n = grouped.codes(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert n == 0 and len(code) == 0
    assert len(grouped.mean(np.zeros(0), code, n)) == 0 and len(grouped.median(np.zeros(0), code, n)) == 0


def test_lookup_is_multiindex_get_indexer() -> None:
    rng = np.random.default_rng(0)
    index = pd.MultiIndex.from_arrays([np.repeat([0, 3], 6), np.tile([-1, 2], 6), np.arange(12) * 5])
    query = [rng.integers(-1, 5, 500), rng.integers(-2, 3, 500), rng.integers(0, 60, 500)]
    query[2][:12] = index.get_level_values(2)  # some present for sure
    query[0][:12], query[1][:12] = index.get_level_values(0), index.get_level_values(1)
    want = index.get_indexer(pd.MultiIndex.from_arrays(query))
    assert (want >= 0).sum() >= 12
    levels = [index.get_level_values(i).to_numpy() for i in range(index.nlevels)]
    assert np.array_equal(grouped.lookup(levels, query), want)
    wide = [query[0], query[1], query[2] * (1 << 40)]  # too many combinations for a table: pandas' lookup
    wide_index = pd.MultiIndex.from_arrays([index.get_level_values(0), index.get_level_values(1),
                                            index.get_level_values(2) * (1 << 40)])
    wide_levels = [wide_index.get_level_values(i).to_numpy() for i in range(wide_index.nlevels)]
    assert np.array_equal(grouped.lookup(wide_levels, wide),
                          wide_index.get_indexer(pd.MultiIndex.from_arrays(wide)))
