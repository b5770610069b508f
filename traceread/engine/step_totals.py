"""Per-step totals of a trace's gaps (``traceread gaps``' step table): each overlap kind's idle time,
launch count and gap count summed over each step's gaps, a column at a time (one home apart from the
gap engine, which finds the gaps these sum)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.engine.gaps import OVERLAP_KINDS


def step_totals(steps_df: pd.DataFrame, gaps_df: pd.DataFrame) -> pd.DataFrame:
    """Per rank/device/step: ``step_ns``, ``busy_ns``, ``idle_ns``, ``gap_count``, and for each
    overlap kind X the idle time it overlapped, ``X_ns`` (sum over the step's gaps), plus
    ``launch_count``. One row per row of ``steps_df``, same order; gaps of no step there are left out.

    Summed a column at a time by each gap's step (a sparse column from its stored values only): a
    group-by of the frame would make every sparse overlap column dense at once."""
    keys = ["rank", "device", "step"]
    sums = [f"{k}_ns" for k in OVERLAP_KINDS] + ["launch_count"]
    out = steps_df[keys + ["busy_ns", "idle_ns"]].copy()
    out.insert(3, "step_ns", steps_df["end_ns"] - steps_df["start_ns"])
    unit, step_unit, n_units = _step_of_gaps(steps_df, gaps_df)
    counts = np.bincount(unit, minlength=n_units + 1)
    for c in sums:
        out[c] = _summed(gaps_df[c], unit, counts, n_units + 1)[step_unit]
    out["gap_count"] = counts[step_unit].astype(np.int64)
    return out


_CHUNK = 1 << 18  # gaps coded at a time: bounds the temporaries, not a threshold


def _step_of_gaps(steps_df: pd.DataFrame, gaps_df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Each gap's step as an index into the distinct (rank, device, step) of ``steps_df`` (int32; the
    count of them for a gap of no listed step), each step row's index, and that count."""
    def key(frame: pd.DataFrame, lo: int, hi: int) -> np.ndarray:
        k = np.zeros(hi - lo, dtype=np.int64)
        for name, (low, span) in bounds.items():
            k *= span
            k += np.asarray(frame[name].iloc[lo:hi], dtype=np.int64) - low
        return k

    bounds = {}
    for name in ("rank", "device", "step"):
        both = [np.asarray(f[name], dtype=np.int64) for f in (steps_df, gaps_df) if len(f)]
        low = min((int(np.min(v)) for v in both), default=0)
        high = max((int(np.max(v)) for v in both), default=0)
        bounds[name] = (low, high - low + 1)
    if float(np.prod([span for _, span in bounds.values()], dtype=np.float64)) >= 2.0**62:
        raise OverflowError("rank/device/step out of range")  # not reachable with real ids
    step_keys = key(steps_df, 0, len(steps_df))
    distinct = np.unique(step_keys)
    step_unit = np.searchsorted(distinct, step_keys)
    unit = np.empty(len(gaps_df), dtype=np.int32)
    for lo in range(0, len(gaps_df), _CHUNK):
        hi = min(lo + _CHUNK, len(gaps_df))
        k = key(gaps_df, lo, hi)
        at = np.minimum(np.searchsorted(distinct, k), max(len(distinct) - 1, 0))
        hit = distinct[at] == k if len(distinct) else np.zeros(hi - lo, dtype=bool)
        unit[lo:hi] = np.where(hit, at, len(distinct))
    return unit, step_unit, len(distinct)


def _summed(col: pd.Series, unit: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """Per unit, the column's sum over its rows as int64 (missing values count 0)."""
    total = np.zeros(n, dtype=np.int64)
    arr = col.array
    if isinstance(col.dtype, pd.SparseDtype) and col.dtype.subtype.kind in "iub" and not pd.isna(col.dtype.fill_value):
        at = np.asarray(arr.sp_index.to_int_index().indices, dtype=np.intp)
        np.add.at(total, unit[at], arr.sp_values.astype(np.int64, copy=False))
        if fill := int(np.asarray(col.dtype.fill_value, dtype=np.int64)):
            total += fill * (counts - np.bincount(unit[at], minlength=n))
        return total
    if col.dtype.kind in "iub":
        values = col.to_numpy()
        for lo in range(0, len(values), _CHUNK):
            np.add.at(total, unit[lo:lo + _CHUNK], values[lo:lo + _CHUNK].astype(np.int64, copy=False))
        return total
    # other dtypes (floats, nullable, dense sparse of floats): as the group-by summed them
    by = pd.Series(col.to_numpy()).groupby(unit).sum()
    return by.reindex(range(n), fill_value=0).fillna(0).astype("int64").to_numpy()
