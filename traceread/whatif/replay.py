"""Replaying a rank's model and reading the step times off the replay.

A step is measured the way :mod:`traceread.engine.steps` measures it, on replayed times: step N on a device
ends at the later of its host end and the end of the last GPU op launched during it, and starts at
the later of its host start and the end of step N-1. The same formula on the recorded times gives
the *measured* figure; the analysis' own step length plus the replay's change of that figure is the
replayed step (so a step whose bounds the analysis found another way moves by the same amount).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread.whatif.fixes import Edges
from traceread.whatif.model import RankModel
from traceread.whatif.sweep import sweep_span

_I64 = np.int64


@dataclass(frozen=True)
class Replayed:
    """Node values of one replay (start of each node; a node's end is start + its duration)."""

    start: np.ndarray
    dur: np.ndarray
    # (first start, last end) when the sweep read them in its pass (None: computed from the arrays)
    extent: tuple[int, int] | None = field(default=None, compare=False)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur


def replay(m: RankModel, e: Edges, scratch: dict[str, np.ndarray] | None = None) -> Replayed:
    """The sweep of ``e``; with ``scratch``, into its ``start`` array (made there on the first replay): the
    result is then good until the next replay with the same ``scratch``."""
    out = None
    if scratch is not None:
        out = scratch.get("start")
        if out is None or len(out) != len(m.time):
            out = scratch["start"] = np.empty(len(m.time), dtype=_I64)
    start, extent = sweep_span(m.time, e.src, e.delay, e.dur, out)
    return Replayed(start, e.dur, extent)


def recorded(m: RankModel) -> Replayed:
    """The trace as recorded, in the model's terms (what an exact replay gives)."""
    return Replayed(m.time, m.dur)


@dataclass(frozen=True)
class _DeviceSteps:
    pos: np.ndarray  # rows of the steps frame, in host order
    host_start: np.ndarray  # node of each step's host start
    host_end: np.ndarray  # node of each step's host end
    ops: np.ndarray  # op nodes launched during a step, grouped by step (as numpy's indices, intp: gathered per replay)
    seg_start: np.ndarray  # where each step's group begins in ``ops``
    seg_step: np.ndarray  # that step (index in host order)


@dataclass(frozen=True)
class StepIndex:
    """What a step's bounds are made of, read once off the recorded times (which step launched each
    op and which host points bound it do not move in a replay): :meth:`bounds` of any replay is then
    a gather and a segmented max."""

    parts: tuple[_DeviceSteps, ...]
    analysed: np.ndarray  # the analysis' length of each step row

    @staticmethod
    def of(m: RankModel, steps: pd.DataFrame) -> StepIndex:
        """The index of ``steps`` (one rank; any devices) in ``m``."""
        lp = np.where(m.launch_point >= 0, m.launch_point, m.op_nodes)
        launched = m.time[lp]
        devices = steps["device"].to_numpy()
        parts = []
        for device in np.unique(devices):  # a loop over devices, not events
            sel = np.flatnonzero(devices == device)
            st = steps.iloc[sel]
            order = np.argsort(st["cpu_start_ns"].to_numpy(), kind="stable")
            cs = st["cpu_start_ns"].to_numpy(_I64)[order]
            ce = st["cpu_end_ns"].to_numpy(_I64)[order]
            mine = np.flatnonzero(m.device == device)
            at = launched[mine]
            idx = _at_or_before(cs, at) - 1
            ok = (idx >= 0) & (at < ce[np.maximum(idx, 0)])
            mine, idx = mine[ok], idx[ok]
            by_step = np.argsort(idx, kind="stable")
            grouped = idx[by_step]
            first = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1]))) if len(grouped) else \
                np.zeros(0, np.int64)
            parts.append(_DeviceSteps(
                pos=sel[order], host_start=m.step_node[np.searchsorted(m.step_time, cs)],
                host_end=m.step_node[np.searchsorted(m.step_time, ce)],
                ops=m.op_nodes[mine[by_step]].astype(np.intp),
                seg_start=first, seg_step=grouped[first]))
        return StepIndex(tuple(parts), (steps["end_ns"] - steps["start_ns"]).to_numpy(_I64))

    def bounds(self, r: Replayed) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of each step row on the replay ``r`` (module doc)."""
        out_s = np.zeros(len(self.analysed), dtype=_I64)
        out_e = np.zeros(len(self.analysed), dtype=_I64)
        for p in self.parts:
            hs = r.start[p.host_start]
            he = r.start[p.host_end]
            last = np.full(len(hs), np.iinfo(_I64).min, dtype=_I64)
            if len(p.ops):
                ends = r.start[p.ops]
                ends += r.dur[p.ops]
                last[p.seg_step] = np.maximum.reduceat(ends, p.seg_start)
            end = np.maximum(he, last)
            start = hs.copy()
            start[1:] = np.maximum(hs[1:], end[:-1])
            out_s[p.pos] = start
            out_e[p.pos] = end
        return out_s, out_e

    def lengths(self, r: Replayed, base: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Replayed length of each step: the analysis' length plus the change the replay made
        (``base``: the bounds on the recorded times)."""
        s, e = self.bounds(r)
        return np.maximum(self.analysed + (e - s) - (base[1] - base[0]), 0)


def _at_or_before(points: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time of ``t``: how many of ``points`` (sorted) are at or before it (``searchsorted`` right); a
    comparison pass per point where they are few (a capture's steps): a binary search per time is slower."""
    if len(points) > 16:
        return np.searchsorted(points, t, side="right")
    out = np.zeros(len(t), dtype=np.intp)
    for p in points.tolist():
        out += t >= p
    return out


def step_bounds(m: RankModel, r: Replayed, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each row of ``steps`` (one rank; any devices) on the replay ``r``."""
    return StepIndex.of(m, steps).bounds(r)


def step_lengths(m: RankModel, r: Replayed, steps: pd.DataFrame, base: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Replayed length of each step: the analysis' length plus the change the replay made
    (``base``: the bounds on the recorded times)."""
    return StepIndex.of(m, steps).lengths(r, base)


def span(r: Replayed) -> int:
    """First start to last end of the replay."""
    if len(r.start) == 0:
        return 0
    if r.extent is not None:
        return r.extent[1] - r.extent[0]
    return int(np.max(r.end) - np.min(r.start))
