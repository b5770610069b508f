"""Group-by over a few integer keys with numpy, giving pandas' group-by results bit for bit.

The analysis runs the same handful of group-bys on every trace (periodicity, warmup and outlier flags,
host steps); on the small frames of a many-rank job pandas' fixed cost per operation (building the
grouper, the index, the result frame) is most of their time. These functions give what pandas gives:

* groups are numbered in the lexicographic order of their keys (``groupby(sort=True)``);
* ``total`` (a float sum) is pandas' Kahan-compensated sum over the group's rows in row order, ``mean``
  that sum divided by the count;
* ``std`` (ddof=0) is pandas' Welford update in row order, then ``sqrt(M2 / n)``;
* ``median`` picks the middle value (the mean of the two middle values) of the sorted group;

every one skips NaN values, and a group with none gives NaN (the sum: 0). The sum, mean and std take one pass per row
position in the largest group (each pass over every group at once); past ``SEQUENTIAL_MAX`` rows in a
group they hand the values to pandas instead, which gives the same numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# The most rows of one group for which the mean and std run here (one numpy pass per row position);
# above it pandas' compiled loop is faster. A speed choice: both give the same bits.
SEQUENTIAL_MAX = 256


def codes(*keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row, its group's number (int64, 0..n-1 in the keys' lexicographic order) and n.

    Each key is numbered densely and the numbers combined one key at a time, renumbered densely
    whenever the product of the widths outgrows the row count (it never overflows)."""
    code = np.zeros(len(keys[0]), dtype=np.int64)
    n = 1
    for key in keys:
        uniq, inv = np.unique(np.asarray(key), return_inverse=True)
        code = code * len(uniq) + inv.reshape(-1)
        n *= len(uniq)
        if n > len(code):  # renumber: keeps the product of the widths below the row count
            uniq_code, code = np.unique(code, return_inverse=True)
            code, n = code.reshape(-1).astype(np.int64), len(uniq_code)
    uniq_code, code = np.unique(code, return_inverse=True)  # dense: every number 0..n-1 is a group
    return code.reshape(-1).astype(np.int64), len(uniq_code)


# Keys of at most this many combinations are looked up in a dense table (a memory bound, not a threshold).
_DENSE_KEYS = 1 << 22


def lookup(groups: list[np.ndarray], queries: list[np.ndarray]) -> np.ndarray:
    """Per query row, the position of the row of ``groups`` (unique rows, one array per key) with the
    same keys, or -1: ``MultiIndex.get_indexer`` without the index. Where the keys' value ranges multiply to
    few combinations (ranks, devices, step numbers), by one mixed-radix key per row and a table; else by
    numbering the keys of both together (:func:`codes`, a sort)."""
    n = len(groups[0])
    if n == 0 or len(queries[0]) == 0:
        return np.full(len(queries[0]), -1, dtype=np.int64)
    found = _dense_lookup([np.asarray(g).astype(np.int64, copy=False) for g in groups], queries)
    if found is not None:
        return found
    code, _ = codes(*(np.concatenate([np.asarray(g), np.asarray(q)]) for g, q in zip(groups, queries, strict=True)))
    table = np.full(int(code.max()) + 1, -1, dtype=np.int64)
    table[code[:n]] = np.arange(n)
    return table[code[n:]]


def _dense_lookup(groups: list[np.ndarray], queries: list[np.ndarray]) -> np.ndarray | None:
    """:func:`lookup` through a table over every combination of the keys' ranges; None where that table would
    be too large, or where rows of ``groups`` repeat (the sort's numbering decides those)."""
    lo = [min(int(np.min(g)), int(np.min(q))) for g, q in zip(groups, queries, strict=True)]
    span = [max(int(np.max(g)), int(np.max(q))) - low + 1 for g, q, low in zip(groups, queries, lo, strict=True)]
    if float(np.prod([float(x) for x in span])) > _DENSE_KEYS:
        return None
    k_group = np.zeros(len(groups[0]), dtype=np.int64)
    k_query = np.zeros(len(queries[0]), dtype=np.int64)
    for g, q, low, width in zip(groups, queries, lo, span, strict=True):
        k_group = k_group * width + (g - low)
        k_query *= width
        k_query += q - low
    table = np.full(int(np.prod(span)), -1, dtype=np.int64)
    rows = np.arange(len(groups[0]))
    table[k_group] = rows
    if not np.array_equal(table[k_group], rows):
        return None
    return table[k_query]


def first_rows(code: np.ndarray, n: int) -> np.ndarray:
    """The position of each group's first row (groups in number order)."""
    first = np.full(n, len(code), dtype=np.int64)
    np.minimum.at(first, code, np.arange(len(code), dtype=np.int64))
    return first


def sizes(code: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(code, minlength=n).astype(np.int64)


def cumcount(code: np.ndarray, n: int, ascending: bool = True) -> np.ndarray:
    """Per row, how many rows of its group come before it (after it: ``ascending=False``), as
    ``groupby().cumcount``."""
    order = np.argsort(code, kind="stable")
    size = sizes(code, n)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    out = np.empty(len(code), dtype=np.int64)
    out[order] = np.arange(len(code), dtype=np.int64) - start[code[order]]
    return out if ascending else size[code] - 1 - out


def median(values: np.ndarray, code: np.ndarray, n: int) -> np.ndarray:
    """Per group, the median of its values that are not NaN (NaN when none), as pandas'."""
    values = np.asarray(values, dtype=np.float64)
    out = np.full(n, np.nan)
    ok = ~np.isnan(values)
    v, c = values[ok], code[ok]
    order = np.lexsort((v, c))
    v = v[order]
    count = np.bincount(c, minlength=n)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    has = count > 0
    s, k = start[has], count[has]
    hi = v[s + k // 2] if len(v) else np.zeros(0)
    lo = v[s + np.maximum(k // 2 - 1, 0)] if len(v) else np.zeros(0)
    out[has] = np.where(k % 2 == 1, hi, (hi + lo) / 2)
    return out


def _by_position(values: np.ndarray, code: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-NaN values in group order (row order within a group), each group's start and count."""
    ok = ~np.isnan(values)
    rows = np.flatnonzero(ok)
    order = rows[np.argsort(code[rows], kind="stable")]
    count = np.bincount(code[rows], minlength=n).astype(np.int64)
    start = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
    return values[order], start, count


def total(values: np.ndarray, code: np.ndarray, n: int) -> np.ndarray:
    """Per group, pandas' ``groupby().sum()`` of float ``values`` (NaN skipped; 0 for none)."""
    values = np.asarray(values, dtype=np.float64)
    v, start, count = _by_position(values, code, n)
    if len(count) and int(count.max()) > SEQUENTIAL_MAX:
        return _pandas(values, code, n, "sum", 0.0)
    return _kahan(v, start, count, n)


def mean(values: np.ndarray, code: np.ndarray, n: int) -> np.ndarray:
    """Per group, pandas' ``groupby().mean()`` of ``values`` (NaN skipped; NaN for none)."""
    values = np.asarray(values, dtype=np.float64)
    v, start, count = _by_position(values, code, n)
    if len(count) and int(count.max()) > SEQUENTIAL_MAX:
        return _pandas(values, code, n, "mean")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, _kahan(v, start, count, n) / np.maximum(count, 1), np.nan)


def _kahan(v: np.ndarray, start: np.ndarray, count: np.ndarray, n: int) -> np.ndarray:
    """Per group, the compensated sum of its values in order (pandas' group sum)."""
    total = np.zeros(n)
    comp = np.zeros(n)
    for k in range(int(count.max()) if len(count) else 0):
        g = np.flatnonzero(count > k)
        y = v[start[g] + k] - comp[g]
        t = total[g] + y
        c = (t - total[g]) - y
        comp[g] = np.where(np.isnan(c), 0.0, c)  # an infinite value: pandas resets the compensation
        total[g] = t
    return total


def std(values: np.ndarray, code: np.ndarray, n: int) -> np.ndarray:
    """Per group, pandas' ``groupby().std(ddof=0)`` of ``values`` (NaN skipped; NaN for none)."""
    values = np.asarray(values, dtype=np.float64)
    v, start, count = _by_position(values, code, n)
    if len(count) and int(count.max()) > SEQUENTIAL_MAX:
        return _pandas(values, code, n, "std")
    avg = np.zeros(n)
    m2 = np.zeros(n)
    for k in range(int(count.max()) if len(count) else 0):
        g = np.flatnonzero(count > k)
        val = v[start[g] + k]
        old = avg[g]
        new = old + (val - old) / float(k + 1)
        avg[g] = new
        m2[g] += (val - new) * (val - old)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.sqrt(m2 / np.maximum(count, 1)), np.nan)


def _pandas(values: np.ndarray, code: np.ndarray, n: int, how: str, empty: float = np.nan) -> np.ndarray:
    grouped = pd.Series(values).groupby(code)
    res = grouped.sum() if how == "sum" else grouped.mean() if how == "mean" else grouped.std(ddof=0)
    out = np.full(n, empty)
    out[res.index.to_numpy(np.int64)] = res.to_numpy(np.float64)
    return out
