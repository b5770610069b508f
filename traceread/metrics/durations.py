"""Duration statistics per name, the shape of ``nsys stats`` summaries, grouped with numpy.

:func:`by_name` turns one duration per event and a name code per event into one row per name:
``count, total_ns, mean_ns, median_ns, p90_ns, p99_ns, min_ns, max_ns, share``. Percentiles are numpy's
default (``linear``: interpolated between the two nearest ranks of the sorted durations), the median
is the 50th of them, so it equals pandas' and nsys' median. Shared by the range (NVTX/annotation) and
host API summaries; one sort for every name at once, no loop per event or per name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STAT_COLUMNS = ["count", "total_ns", "mean_ns", "median_ns", "p90_ns", "p99_ns", "min_ns", "max_ns", "share"]
PERCENTILE_METHOD = "linear"  # numpy's default: interpolated between the nearest ranks


def _quantile(sorted_v: np.ndarray, start: np.ndarray, count: np.ndarray, q: float) -> np.ndarray:
    """Per group (``start``, ``count`` into ``sorted_v``, each group sorted), numpy's linear percentile ``q``."""
    pos = q * (count - 1).astype(np.float64)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, count - 1)
    a, b = sorted_v[start + lo], sorted_v[start + hi]
    return a + (b - a) * (pos - lo)


def by_name(code: np.ndarray, names: np.ndarray, dur: np.ndarray, share_of: float | None = None,
            label: str = "name") -> pd.DataFrame:
    """One row per distinct ``code`` (``names[code]`` its text): the statistics of its ``dur`` (int64 ns).

    ``share`` is each name's total over ``share_of`` (default: the sum of every total). Rows by total
    time, descending (ties by name)."""
    code = np.asarray(code, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    if len(code) == 0:
        return pd.DataFrame({label: pd.Series(dtype=object),
                             **{c: pd.Series(dtype="int64" if c in ("count", "total_ns", "min_ns", "max_ns")
                                             else "float64") for c in STAT_COLUMNS}})
    # One sort by (name, duration) gives the groups, their order statistics and their sums at once.
    order = np.lexsort((dur, code))
    return _table(code[order], dur[order], names, share_of, label)


def _table(sorted_code: np.ndarray, sorted_dur: np.ndarray, names: np.ndarray, share_of: float | None,
           label: str) -> pd.DataFrame:
    """:func:`by_name`'s frame from the codes and durations sorted by (code, duration)."""
    start = np.concatenate(([0], np.flatnonzero(np.diff(sorted_code)) + 1)).astype(np.int64)
    used = sorted_code[start]
    count = np.diff(np.append(start, len(sorted_code))).astype(np.int64)
    v = sorted_dur.astype(np.float64)
    total = np.add.reduceat(sorted_dur, start).astype(np.int64)  # exact int64 sums (not float weights)
    denom = float(share_of) if share_of else float(total.sum())
    out = pd.DataFrame({
        label: np.asarray(names, dtype=object)[used].astype(str),
        "count": count, "total_ns": total, "mean_ns": total / count,
        "median_ns": _quantile(v, start, count, 0.5), "p90_ns": _quantile(v, start, count, 0.9),
        "p99_ns": _quantile(v, start, count, 0.99),
        "min_ns": sorted_dur[start], "max_ns": sorted_dur[start + count - 1],
        "share": total / denom if denom > 0 else 0.0,
    })
    return out.sort_values(["total_ns", label], ascending=[False, True], kind="stable").reset_index(drop=True)


def top_by_name(code: np.ndarray, names: np.ndarray, dur: np.ndarray, top: int, share_of: float | None = None,
                label: str = "name") -> tuple[pd.DataFrame, int]:
    """The first ``top`` rows of :func:`by_name` (the same frame) and how many rows it has, sorting only
    the durations of those names: the totals of every name come from one bincount over the codes (a
    report shows a few rows; the sort of every duration by name was most of the table's time)."""
    code = np.asarray(code, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    # float sums that would not be exact, or more rows than int8 slots: the full table
    if len(code) == 0 or top > 127 or int(np.abs(dur).sum()) >= 1 << 53:
        full = by_name(code, names, dur, share_of, label)
        return full.head(top).reset_index(drop=True), len(full)
    n = int(code.max()) + 1
    count = np.bincount(code, minlength=n)
    used = np.flatnonzero(count)
    total = np.bincount(code, weights=dur, minlength=n).astype(np.int64)[used]
    text = np.asarray(names, dtype=object)[used].astype(str)
    first = used[np.lexsort((text, -total))[:top]]  # by total, ties by name, as by_name orders them
    denom = float(share_of) if share_of else float(total.sum())
    # The shown names' durations grouped by name (one pass and a radix sort of their few codes), each
    # group put in order at the positions _table reads (ends and percentiles' neighbours): a partition
    shown = np.sort(first)
    slot = np.full(n, -1, dtype=np.int8)
    slot[shown] = np.arange(len(shown))  # top is a handful (the report's rows)
    at = slot[code]
    idx = np.flatnonzero(at >= 0)
    idx = idx[np.argsort(at[idx], kind="stable")]
    bounds = np.cumsum(count[shown])
    parts = [_ordered_at_reads(d) for d in np.split(dur[idx], bounds[:-1])]
    sorted_code = np.repeat(shown, count[shown])
    return _table(sorted_code, np.concatenate(parts), names, denom, label), len(used)


def _ordered_at_reads(d: np.ndarray) -> np.ndarray:
    """``d`` with the sorted values at every position :func:`_table` reads (first, last, and both neighbours
    of each percentile's position); the others in any order (their sum is all it takes of them)."""
    n = len(d)
    pos = {0, n - 1}
    for q in (0.5, 0.9, 0.99):
        lo = int(np.floor(q * (n - 1)))
        pos.update((lo, min(lo + 1, n - 1)))
    return np.partition(d, sorted(pos))
