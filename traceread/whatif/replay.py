"""Replaying a rank's model and reading the step times off the replay.

A step is measured the way :mod:`traceread.steps` measures it, on replayed times: step N on a device
ends at the later of its host end and the end of the last GPU op launched during it, and starts at
the later of its host start and the end of step N-1. The same formula on the recorded times gives
the *measured* figure; the analysis' own step length plus the replay's change of that figure is the
replayed step (so a step whose bounds the analysis found another way moves by the same amount).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread.whatif.fixes import Edges
from traceread.whatif.model import RankModel
from traceread.whatif.sweep import sweep

_I64 = np.int64


@dataclass(frozen=True)
class Replayed:
    """Node values of one replay (start of each node; a node's end is start + its duration)."""

    start: np.ndarray
    dur: np.ndarray

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur


def replay(m: RankModel, e: Edges) -> Replayed:
    return Replayed(sweep(m.time, e.src, e.delay, e.dur), e.dur)


def recorded(m: RankModel) -> Replayed:
    """The trace as recorded, in the model's terms (what an exact replay gives)."""
    return Replayed(m.time, m.dur)


def step_bounds(m: RankModel, r: Replayed, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each row of ``steps`` (one rank; any devices) on the replay ``r``."""
    out_s = np.zeros(len(steps), dtype=_I64)
    out_e = np.zeros(len(steps), dtype=_I64)
    host = r.start[m.step_node]
    lp = np.where(m.launch_point >= 0, m.launch_point, m.op_nodes)
    launched = m.time[lp]
    ends = r.end[m.op_nodes]
    for device in np.unique(steps["device"].to_numpy()):  # a loop over devices, not events
        sel = np.flatnonzero(steps["device"].to_numpy() == device)
        st = steps.iloc[sel]
        order = np.argsort(st["cpu_start_ns"].to_numpy(), kind="stable")
        cs = st["cpu_start_ns"].to_numpy(_I64)[order]
        ce = st["cpu_end_ns"].to_numpy(_I64)[order]
        hs = host[np.searchsorted(m.step_time, cs)]
        he = host[np.searchsorted(m.step_time, ce)]
        mine = m.device == device
        idx = np.searchsorted(cs, launched[mine], side="right") - 1
        ok = (idx >= 0) & (launched[mine] < ce[np.maximum(idx, 0)])
        last = np.full(len(cs), np.iinfo(_I64).min, dtype=_I64)
        np.maximum.at(last, idx[ok], ends[mine][ok])
        end = np.maximum(he, last)
        start = hs.copy()
        start[1:] = np.maximum(hs[1:], end[:-1])
        out_s[sel[order]] = start
        out_e[sel[order]] = end
    return out_s, out_e


def step_lengths(m: RankModel, r: Replayed, steps: pd.DataFrame, base: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Replayed length of each step: the analysis' length plus the change the replay made
    (``base``: the bounds on the recorded times)."""
    s, e = step_bounds(m, r, steps)
    analysed = (steps["end_ns"] - steps["start_ns"]).to_numpy(_I64)
    return np.maximum(analysed + (e - s) - (base[1] - base[0]), 0)


def span(r: Replayed) -> int:
    """First start to last end of the replay."""
    if len(r.start) == 0:
        return 0
    return int(np.max(r.end) - np.min(r.start))
