"""Whether each fix's prediction agrees with the report's own diagnosis (docs/whatif.md, "Consistency").

For each cause with a fix that holds at least ``CHECK_MIN_SHARE`` of step time, its fix's predicted saving
should be at least ``CHECK_MIN_RATIO`` of its idle time: a steady cause's saving a step against its median
idle a steady step (the measured step less the naive figure), a one-time cause's saving once against its
idle over the capture. Where it is not, one reason the trace shows is named:

* ``bus``: the batch copies hold the data-starved gaps; prefetched, they still take the bus one after another;
* ``external``: GPU ops waited for work the trace does not show (another process, work issued before the
  capture), which no fix of this trace removes;
* ``host-work``: the launch-bound idle is mostly the host's own work on the launching thread (the rule's
  ``host-work`` evidence: logging, metrics, host math), which CUDA graphs do not remove (docs/whatif.md);
* ``gpu``: the GPU becomes the bound: the predicted step is the GPU's own busy time a step;
* ``exposed``: the host work the idle was hiding stays (the fix removes what its rule attributed only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceread import causes
from traceread.rules.launch_bound import HOST_WORK as _HOST_WORK_KIND
from traceread.vocabulary import DATA_STARVED, LAUNCH_BOUND

CHECK_MIN_SHARE = 0.05  # a cause under 5% of step time is not checked
CHECK_MIN_RATIO = 0.5  # a fix should buy at least half its cause's idle time
_GPU_BOUND_SLACK = 1.02  # a predicted step within 2% of the GPU's busy time a step is GPU-bound

BUS, EXTERNAL, HOST_WORK, GPU, EXPOSED = "bus", "external", "host-work", "gpu", "exposed"


@dataclass(frozen=True)
class Check:
    """One cause's check: its share of step time, its idle (a steady step's median, or over the capture for
    one-time work), what its fix saves (a step, or once), whether that is at least ``CHECK_MIN_RATIO`` of the
    idle, and otherwise the reason (module doc) with the figure it rests on (ns)."""

    cause: str
    share: float
    idle_ns: int
    saving_ns: int
    once: bool
    holds: bool
    reason: str = ""
    figure_ns: int = 0


def checks(w: Any, shares: dict[str, float], steps: pd.DataFrame, gaps: pd.DataFrame,
           cover: float = 0.5) -> tuple[Check, ...]:
    """The checks of a :class:`~traceread.whatif.WhatIf` against the analysis' part ``shares``, ``steps`` (with
    ``busy_ns``, ``warmup``, ``outlier`` and the idle columns) and classified ``gaps``; ``cover``: the rules'
    ``data_loader_cover`` (a copy holds a gap when it covers that much of it)."""
    out = []
    for p in w.fixes:
        cause = causes.find(p.cause)
        if cause is None or shares.get(p.cause, 0.0) < CHECK_MIN_SHARE:
            continue
        once = p.step_ns is None
        if once:
            idle = _capture_idle(gaps, p.cause)
            saving = int(p.once_ns)
        elif p.naive_step_ns is None:
            continue  # no idle class: a busy part (memory-bound)
        else:
            idle = int(w.measured_step_ns) - int(p.naive_step_ns)
            saving = int(p.saving_ns or 0)
        holds = saving >= CHECK_MIN_RATIO * idle
        reason, figure = ("", 0) if holds else _reason(w, p, idle, steps, gaps, cover)
        out.append(Check(p.cause, float(shares[p.cause]), idle, saving, once, holds, reason, figure))
    return tuple(out)


def _capture_idle(gaps: pd.DataFrame, cause: str) -> int:
    if gaps.empty or "class" not in gaps.columns:
        return 0
    g = gaps[gaps["class"] == cause]
    return int((g["end_ns"] - g["start_ns"]).sum())


def _reason(w: Any, p: Any, idle: int, steps: pd.DataFrame, gaps: pd.DataFrame, cover: float) -> tuple[str, int]:
    if p.cause == DATA_STARVED and not gaps.empty and {"memcpy_htod_ns", "dataloader_ns"} <= set(gaps.columns):
        g = gaps[gaps["class"] == DATA_STARVED]
        dur = (g["end_ns"] - g["start_ns"]).to_numpy(np.int64)
        htod, loader = g["memcpy_htod_ns"].to_numpy(np.int64), g["dataloader_ns"].to_numpy(np.int64)
        held = (htod >= cover * dur) & (htod > loader)
        if 2 * int(dur[held].sum()) >= int(dur.sum()) > 0:
            return BUS, int(htod[held].sum())
    if p.cause == LAUNCH_BOUND and not gaps.empty and "evidence_kind" in gaps.columns:
        g = gaps[gaps["class"] == LAUNCH_BOUND]
        dur = (g["end_ns"] - g["start_ns"]).to_numpy(np.int64)
        own = (g["evidence_kind"] == _HOST_WORK_KIND).to_numpy(bool)
        if 2 * int(dur[own].sum()) >= int(dur.sum()) > 0:
            return HOST_WORK, int(dur[own].sum())
    external = int(getattr(w, "external_wait_ns", 0) or 0)
    if external and 2 * external >= _capture_idle(gaps, p.cause) > 0:
        return EXTERNAL, external
    busy = _steady_busy(steps)
    if p.step_ns is not None and busy and p.step_ns <= _GPU_BOUND_SLACK * busy:
        return GPU, busy
    return EXPOSED, int(p.step_ns) if p.step_ns is not None else 0


def _steady_busy(steps: pd.DataFrame) -> int:
    """The median steady step's GPU busy time (the busiest unit of each step), 0 without the column."""
    if steps.empty or "busy_ns" not in steps.columns:
        return 0
    keep = ~(steps["warmup"].to_numpy(bool) | steps["outlier"].to_numpy(bool))
    s = steps[keep] if keep.any() else steps
    return int(s.groupby("step")["busy_ns"].max().median())


__all__ = ["Check", "checks", "CHECK_MIN_SHARE", "CHECK_MIN_RATIO", "BUS", "EXTERNAL", "HOST_WORK", "GPU", "EXPOSED"]
