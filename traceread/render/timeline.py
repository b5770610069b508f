"""Which steps the timeline renderers draw, and the events inside them (a read-only view).

Shared by the picture and the Perfetto trace: per unit (trace, rank, device), the median steady step
and the worst step (most idle time), or every step.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from traceread import schema
from traceread.analysis import Analysis

HOST_LANES = (schema.LANE_CPU_THREAD, schema.LANE_CPU_ANNOTATION)
DEVICE_LANES = (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM, schema.LANE_MEMCPY, schema.LANE_MEMSET)
WINDOW_COLUMNS = ["trace", "rank", "device", "step", "start_ns", "end_ns", "label"]


def windows(a: Analysis, which: str = "key") -> pd.DataFrame:
    """Steps to draw (``WINDOW_COLUMNS``); ``which`` is ``key`` (median and worst) or ``all``."""
    s = a.steps
    if s.empty:
        return pd.DataFrame({c: [] for c in WINDOW_COLUMNS})
    if which == "all":
        out = s[["trace", "rank", "device", "step", "start_ns", "end_ns"]].copy()
        out["label"] = ""
        return out.reset_index(drop=True)
    rows = []
    for _, g in s.groupby(["trace", "rank", "device"], sort=True):
        rows += _key_rows(g)
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def _key_rows(g: pd.DataFrame) -> list[list]:
    steady = g[~(g["warmup"] | g["outlier"])]
    steady = steady if len(steady) else g
    length = (steady["end_ns"] - steady["start_ns"]).to_numpy()
    med_i = int(np.argmin(np.abs(length - np.median(length))))
    median = steady.iloc[med_i]
    candidates = g[~g["warmup"]] if (~g["warmup"]).any() else g
    worst = candidates.iloc[int(np.argmax(candidates["idle_ns"].to_numpy()))]
    rows: list[list] = []
    for r, label in ((median, "median step"), (worst, "worst step")):
        if rows and rows[0][3] == int(r["step"]):
            rows[0][6] = "median and worst step"
            continue
        rows.append([int(r["trace"]), int(r["rank"]), int(r["device"]), int(r["step"]),
                     int(r["start_ns"]), int(r["end_ns"]), label])
    return rows


def _unit_mask(ev: pd.DataFrame, rank: int, device: int | None, lanes: tuple[str, ...]) -> np.ndarray:
    """Rows of ``lanes`` for ``rank`` (and ``device`` unless None)."""
    mask = (ev["rank"].to_numpy() == rank) & ev["lane"].isin(lanes).to_numpy()
    if device is not None:
        mask &= ev["device"].to_numpy() == device
    return mask


def events_in(a: Analysis, trace: int, rank: int, device: int | None, start_ns: int, end_ns: int,
              lanes: tuple[str, ...]) -> pd.DataFrame:
    """Events of ``lanes`` for ``rank`` (and ``device`` for GPU lanes) overlapping [start_ns, end_ns)."""
    ev = a.inputs[trace].events
    mask = _unit_mask(ev, rank, device, lanes)
    mask &= (ev["start_ns"].to_numpy() < end_ns) & (ev["end_ns"].to_numpy() > start_ns)
    return ev[mask]


def window_events(a: Analysis, trace: int, rank: int, device: int | None, wins: pd.DataFrame,
                  lanes: tuple[str, ...]) -> Iterator[pd.DataFrame]:
    """Per window (in start order), the events not yielded for an earlier window: each event once.

    An event is yielded with the first window it overlaps; the unit's events are selected and
    sorted once and each window is found by binary search, so all steps cost O(n log n), not
    O(n x steps), and only one window's events are materialized at a time.
    """
    ev = a.inputs[trace].events
    rows = np.flatnonzero(_unit_mask(ev, rank, device, lanes))
    starts = ev["start_ns"].to_numpy()[rows]
    order = np.argsort(starts, kind="stable")
    rows, starts = rows[order], starts[order]
    ends = ev["end_ns"].to_numpy()[rows]
    prev_hi: int | None = None
    for lo, hi in sorted(zip(wins["start_ns"].astype(int), wins["end_ns"].astype(int), strict=True)):
        first = 0 if prev_hi is None else int(np.searchsorted(starts, prev_hi, side="left"))
        last = int(np.searchsorted(starts, hi, side="left"))
        # overlapping the window; zero-length events at its start belong to it too
        sel = first + np.flatnonzero((ends[first:last] > lo) | (starts[first:last] >= lo))
        prev_hi = hi if prev_hi is None else max(prev_hi, hi)
        yield ev.iloc[rows[sel]]


def gaps_in(a: Analysis, trace: int, rank: int, device: int, start_ns: int, end_ns: int) -> pd.DataFrame:
    g = a.gaps
    if g.empty:
        return g
    mask = ((g["trace"] == trace) & (g["rank"] == rank) & (g["device"] == device)
            & (g["start_ns"] < end_ns) & (g["end_ns"] > start_ns))
    return g[mask]


def launch_threads(events: pd.DataFrame, limit: int = 3) -> list[int]:
    """Host threads that issued the most CUDA runtime/driver calls (the launching threads)."""
    calls = events[events["category"].isin([schema.CAT_RUNTIME, schema.CAT_DRIVER])]
    if calls.empty:
        calls = events[events["lane"] == schema.LANE_CPU_THREAD]
    counts = calls.groupby("tid").size().sort_values(ascending=False, kind="stable")
    return [int(t) for t in counts.index[:limit]]
