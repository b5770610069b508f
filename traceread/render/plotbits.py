"""Drawing pieces shared by the timeline pictures (one rank: ``plot``; several: ``plot_job``).

Busy and idle are decided per pixel column, so a stretch is never drawn busy and idle at once: a
panel is cut into ``BINS`` columns; a column where compute is idle for at least half of it is shaded
by the class holding most of that idle time, and compute bars are drawn only in the other columns
(a kernel narrower than a column still shows there). Labels are fitted to their bars: elided to the
bar's width, dropped when fewer than ``LABEL_MIN_CHARS`` fit or when they would overlap a label
already placed (longest bars first, so of nested annotations the outer one keeps its name).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceread import causes
from traceread.intervals import overlap_with_union, union
from traceread.render.names import shorten
from traceread.vocabulary import GAP_CLASSES

# Each gap class's shade is its record's (traceread.causes).
CLASS_COLORS = {c.name: str(c.colour) for c in causes.gap_classes()}
LANE_COLORS = {"runtime": "#59a14f", "host": "#c7d9c2", "compute": "#1f4e79", "comm": "#ff7f0e",
               "copy": "#76b7b2", "annotation": "#9c755f"}
STRAGGLER_COLOR = "#c00000"
IDLE_ALPHA = 0.35
BINS = 1000  # pixel columns a panel is decided in (about its width in pixels at 100 dpi)
AXES_PX = 800.0  # a panel's drawing width in pixels (10 in figure at 100 dpi, less the row labels)
CHAR_PX = 6.0  # width of one character at the label font size (7 pt), generous: labels never touch
LABEL_MIN_CHARS = 3  # a bar with room for fewer characters gets no label


def edges(lo: int, hi: int, bins: int = BINS) -> np.ndarray:
    """``bins + 1`` int64 column edges from ``lo`` to ``hi``."""
    return lo + (np.arange(bins + 1, dtype=np.int64) * max(hi - lo, 0)) // bins


def runs(mask: np.ndarray, e: np.ndarray, lo: int) -> list[tuple[float, float]]:
    """(x, width) in ms from ``lo`` of each run of True columns."""
    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    first, last = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    xs = (e[first] - lo) / 1e6
    ws = (e[last] - e[first]) / 1e6
    return list(zip(xs.tolist(), ws.tolist(), strict=True))


def coverage(start: np.ndarray, end: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per column, the ns covered by the union of the intervals."""
    us, ue = union(start, end)
    return overlap_with_union(e[:-1], e[1:], us, ue)


def idle_columns(gaps: pd.DataFrame, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(idle mask, class index into GAP_CLASSES) per column: idle where compute is idle for at
    least half the column; the class is the one with most idle time in it."""
    width = np.maximum(np.diff(e), 1)
    per_class = np.zeros((len(GAP_CLASSES), len(width)), dtype=np.int64)
    if len(gaps):
        cls = gaps["class"].astype(str).to_numpy()
        s, en = gaps["start_ns"].to_numpy(np.int64), gaps["end_ns"].to_numpy(np.int64)
        for i, c in enumerate(GAP_CLASSES):
            m = cls == c
            if m.any():
                per_class[i] = coverage(s[m], en[m], e)
    idle = 2 * per_class.sum(axis=0) >= width
    return idle & (per_class.sum(axis=0) > 0), np.argmax(per_class, axis=0)


def busy_columns(ev: pd.DataFrame, e: np.ndarray, idle: np.ndarray) -> np.ndarray:
    """Columns drawn busy for compute events ``ev``: any work in a column not shaded idle."""
    if not len(ev):
        return np.zeros(len(e) - 1, dtype=bool)
    cov = coverage(ev["start_ns"].to_numpy(np.int64), ev["end_ns"].to_numpy(np.int64), e)
    # zero-length kernels (some traces record them) still mark their column
    point = np.zeros(len(e) - 1, dtype=bool)
    s = ev["start_ns"].to_numpy(np.int64)
    inside = (s >= e[0]) & (s < e[-1])
    point[np.clip(np.searchsorted(e, s[inside], side="right") - 1, 0, len(point) - 1)] = True
    return ((cov > 0) | point) & ~idle


def shade(ax: Any, e: np.ndarray, lo: int, idle: np.ndarray, cls_idx: np.ndarray, y0: float,
          height: float) -> set[str]:
    """Shade idle columns by class over rows ``[y0, y0 + height]``; the classes drawn."""
    seen = set()
    for i, c in enumerate(GAP_CLASSES):
        m = idle & (cls_idx == i)
        if m.any():
            seen.add(c)
            ax.broken_barh(runs(m, e, lo), (y0, height), facecolors=CLASS_COLORS.get(c, "#cccccc"),
                           alpha=IDLE_ALPHA, linewidth=0, zorder=0)
    return seen


def fitted_labels(starts_ms: np.ndarray, widths_ms: np.ndarray, names: list[str],
                  window_ms: float) -> list[tuple[float, str]]:
    """(centre x in ms, text) of the labels that fit: each elided to its bar, none overlapping."""
    if not len(starts_ms) or window_ms <= 0:
        return []
    px_per_ms = AXES_PX / window_ms
    chars = np.floor(widths_ms * px_per_ms / CHAR_PX).astype(np.int64) - 1  # a character's margin
    order = np.argsort(-widths_ms, kind="stable")
    order = order[chars[order] >= LABEL_MIN_CHARS]
    placed: list[tuple[float, float]] = []
    out = []
    for i in order.tolist():
        text = shorten(names[i], int(chars[i]))
        if len(text) < LABEL_MIN_CHARS:
            continue
        mid = float(starts_ms[i] + widths_ms[i] / 2)
        half = (len(text) + 1) * CHAR_PX / px_per_ms / 2
        if any(mid - half < b and a < mid + half for a, b in placed):
            continue
        placed.append((mid - half, mid + half))
        out.append((mid, text))
    return out


def nesting_depth(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per interval, how many of the others are open when it starts (0: outermost); for properly
    nested ranges, its nesting depth. Ties in start: the longer one is the outer one."""
    s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    order = np.lexsort((-e, s))
    ended = np.searchsorted(np.sort(e), s[order], side="right")  # closed at or before it starts
    depth = np.empty(len(s), dtype=np.int64)
    depth[order] = np.maximum(np.arange(len(s)) - ended, 0)
    return depth


def legend_handles(seen: set[str], lanes: tuple[tuple[str, str], ...]) -> list[Any]:
    from matplotlib.patches import Patch

    handles = [Patch(color=LANE_COLORS[k], label=lab) for k, lab in lanes]
    handles += [Patch(color=CLASS_COLORS[c], alpha=IDLE_ALPHA, label=causes.get(c).part_label)
                for c in GAP_CLASSES if c in seen]
    return handles
