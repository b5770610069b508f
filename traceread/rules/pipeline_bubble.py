"""pipeline-bubble: the same gap at the same phase of every step, waiting on p2p or on nothing.

::

    step k     |==fwd==fwd==fwd=|.......bubble.......|==bwd==bwd==|
    step k+1   |==fwd==fwd==fwd=|.......bubble.......|==bwd==bwd==|
    comm       |                |<--- p2p recv ----->|            |   (or nothing at all)
    host                 launches already queued ^ (the GPU waits on a dependency, not the host)

Periodicity (vectorized, no loop per gap): phases are cut into bins of half the phase tolerance
and durations into log-scale bins; every candidate gap (long enough, in an analysed step) is
counted in the windows of the bins around it (phase within the tolerance, with wrap-around at the
step boundary; duration within about 1.4x). For each (rank, device, window) we count the
distinct analysed steps with a candidate there and the coefficient of variation of the
duration of each step's candidate nearest the window's centre. A gap is periodic when its
window holds gaps in at least ``bubble_presence`` of the analysed steps with a CV of at most
``bubble_max_cv``. Only gaps with the bubble's own waiting signature (below) are compared, so
that a loader stall or an exposed all-reduce at the same phase does not count as the same gap.
It is judged on analysed steps and applied to every long gap (warmup and outlier steps too). Fewer than ``bubble_min_steps`` analysed steps: not judged (a note says so).

Signature: periodic, at least ``bubble_min_gap_ns``, and either a point-to-point transfer covers
most of the gap or the next kernel was already queued (the stream waited on a dependency). A
periodic gap the host caused (next kernel submitted late) is not a bubble: no schedule fixes it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules._base import Rule, RuleContext, cat, col, fmt_ns, fmt_pct, frac

NAME = "pipeline-bubble"


def waits_like_a_bubble(gaps: pd.DataFrame, queued: np.ndarray, cfg: Thresholds) -> np.ndarray:
    """The bubble's local signature: a p2p wait or a queued kernel, with no collective or H2D copy."""
    p2p = frac(gaps, "comm_p2p") >= cfg.comm_cover
    other = (frac(gaps, "comm_collective") >= cfg.comm_cover) | (frac(gaps, "memcpy_htod") >= cfg.data_loader_cover)
    return (p2p | queued) & ~other


def periodicity(gaps: pd.DataFrame, steps: pd.DataFrame, cfg: Thresholds, eligible: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``(periodic, presence, cv, notes)`` per gap (see module docstring).

    ``eligible``: the gaps that may recur as the same gap (same waiting signature); all when None.
    """
    n = len(gaps)
    periodic = np.zeros(n, dtype=bool)
    presence = np.full(n, np.nan)
    cv = np.full(n, np.nan)
    notes: list[str] = []
    if n == 0 or steps is None or steps.empty:
        return periodic, presence, cv, notes
    keep = ~steps["warmup"].to_numpy(bool)
    if "outlier" in steps.columns:
        keep &= ~steps["outlier"].to_numpy(bool)
    analysed = steps.loc[keep, ["rank", "device", "step"]]
    counts = analysed.groupby(["rank", "device"]).size()
    short = counts[counts < cfg.bubble_min_steps]
    for (rank, device), k in short.items():
        notes.append(f"pipeline bubbles cannot be judged on rank {rank} device {device}: only {k} analysed "
                     f"step(s), periodicity needs at least {cfg.bubble_min_steps}")
    units = counts[counts >= cfg.bubble_min_steps]
    if units.empty:
        return periodic, presence, cv, notes
    unit_index = pd.MultiIndex.from_tuples(list(units.index), names=["rank", "device"])
    g_unit = unit_index.get_indexer(pd.MultiIndex.from_arrays(
        [col(gaps, "rank").astype(np.int64), col(gaps, "device").astype(np.int64)]))
    step_keys = pd.MultiIndex.from_frame(analysed.astype("int64"))
    in_step = step_keys.get_indexer(pd.MultiIndex.from_arrays(
        [col(gaps, "rank").astype(np.int64), col(gaps, "device").astype(np.int64),
         col(gaps, "step", -1).astype(np.int64)])) >= 0
    dur = col(gaps, "dur_ns").astype(np.int64)
    phase = np.clip(np.nan_to_num(col(gaps, "phase", 0.0).astype(np.float64)), 0.0, 1.0 - 1e-12)
    width = cfg.bubble_phase_tolerance / 2.0
    nbins = max(int(np.ceil(1.0 / width)), 1)
    gbin = np.minimum((phase / width).astype(np.int64), nbins - 1)
    long_enough = (g_unit >= 0) & (dur >= cfg.bubble_min_gap_ns)
    if eligible is not None:
        long_enough &= eligible
    cand = np.flatnonzero(long_enough & in_step)  # the evidence: gaps of analysed steps
    if len(cand) == 0:
        return periodic, presence, cv, notes
    # Duration bins (log scale) keep a 3 ms stall that happens to share the phase from being
    # compared with a 0.8 ms bubble; per step, the gap nearest the window's centre stands for it.
    dwidth = np.log1p(2.0 * cfg.bubble_max_cv) / 2.0
    logd = np.log(np.maximum(dur, 1).astype(np.float64))
    dbin = np.floor(logd / dwidth).astype(np.int64)
    reach = 2  # bins on each side: phase within the tolerance, duration within ~1.4x
    ps, ds = np.meshgrid(np.arange(-reach, reach + 1), np.arange(-reach, reach + 1))
    ps, ds = ps.ravel(), ds.ravel()
    rep = np.repeat(cand, len(ps))
    win = (gbin[rep] + np.tile(ps, len(cand))) % nbins
    dwin = dbin[rep] + np.tile(ds, len(cand))
    dphase = np.abs(phase[rep] - (win + 0.5) * width)
    dphase = np.minimum(dphase, 1.0 - dphase)  # the step boundary wraps
    dist = (dphase / width) ** 2 + ((logd[rep] - (dwin + 0.5) * dwidth) / dwidth) ** 2
    df = pd.DataFrame({"unit": g_unit[rep], "win": win, "dwin": dwin,
                       "step": col(gaps, "step").astype(np.int64)[rep], "dur": dur[rep].astype(np.float64),
                       "dist": dist})
    per_step = (df.sort_values("dist", kind="stable")
                .drop_duplicates(["unit", "win", "dwin", "step"]))
    by_win = per_step.groupby(["unit", "win", "dwin"], sort=False)["dur"]
    stats = pd.DataFrame({"size": by_win.size(), "mean": by_win.mean(), "std": by_win.std(ddof=0)})
    # Judged on analysed steps, applied to every long gap of the unit (warmup and outlier steps too).
    cand = np.flatnonzero(long_enough)
    pos = stats.index.get_indexer(pd.MultiIndex.from_arrays([g_unit[cand], gbin[cand], dbin[cand]]))
    found = pos >= 0
    cand, pos = cand[found], pos[found]
    size = stats["size"].to_numpy()[pos].astype(np.float64)
    mean = stats["mean"].to_numpy()[pos]
    std = stats["std"].to_numpy()[pos]
    n_steps = units.to_numpy()[g_unit[cand]].astype(np.float64)
    presence[cand] = size / n_steps
    cv[cand] = np.where(mean > 0, std / np.maximum(mean, 1.0), np.inf)
    periodic[cand] = (presence[cand] >= cfg.bubble_presence) & (cv[cand] <= cfg.bubble_max_cv)
    return periodic, presence, cv, notes


def mask(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    p2p = frac(gaps, "comm_p2p") >= cfg.comm_cover
    waiting = p2p | ctx.queued
    return ctx.judged & ctx.periodic & waiting & (col(gaps, "dur_ns") >= cfg.bubble_min_gap_ns)


def evidence(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    p2p = frac(gaps, "comm_p2p")
    waits_on = np.where(p2p >= cfg.comm_cover,
                        cat("point-to-point transfer covers ", fmt_pct(p2p), " of it"),
                        "next kernel was already queued (waiting on a dependency, not the host)")
    return cat("recurs at phase ", pd.Series(col(gaps, "phase", 0.0)).round(2).astype(str).to_numpy(object),
               " of the step in ", fmt_pct(ctx.presence), " of analysed steps, duration CV ",
               pd.Series(ctx.cv).round(2).astype(str).to_numpy(object), "; ", fmt_ns(col(gaps, "dur_ns")),
               " gap; ", waits_on)


RULE = Rule(NAME, mask, evidence)
