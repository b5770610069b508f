"""pipeline-bubble: a stage of a pipeline-parallel job waits for its neighbour.

::

    step k     |.fill.|==F==F==F==F=|....drain....|==B==B==B==B==|      (one stage of 1F1B/GPipe)
    comm       |recv->|             |<-- recv ---->|               |      p2p recv posted early, runs
    host           launches already queued ^ (the GPU waits on a dependency, not the host)  until the peer sends

Evidence of pipeline parallelism comes first: a point-to-point transfer in the gap's step, by
collective identity (``step_p2p_count``: ``c10d::send``/``recv``, ``nccl:send``/``nccl:recv``,
``batch_isend_irecv``, or a SendRecv kernel no collective op encloses; an all-to-all made of
SendRecv kernels is a collective and is no evidence), or a point-to-point transfer over the gap
itself. Without it nothing is a bubble: a periodic wait on an all-to-all or all-reduce is comm-bound,
a periodic queued wait on nothing visible stays unattributed.

With the evidence, a gap of at least ``bubble_min_gap_ns`` is a bubble when

* a point-to-point transfer covers most of it (``comm_cover``) and compute waited for it (the next
  kernel was already queued or its launch is unknown, or it was submitted with most of the gap
  still ahead, or the host sat in a sync for most of the gap): the stage waited on its neighbour, whether that is the schedule's
  fill/drain (periodic) or stage imbalance (not); or
* nothing visible covers it, the next kernel was already queued, and the gap is periodic (below):
  the same wait in nearly every step is the schedule, a one-off is not.

Periodicity ("the same gap" in every analysed step), vectorized, several ways; any suffices:

1. Place windows: the gap's place in the step, as (a) its phase, (b) its offset from the step
   start and (c) its distance to the step end (both over the median step length; a drain keeps
   its distance to the end when the step's length changes, and a wait after a fixed amount of work
   its offset from the start; each gap is read from the nearer end of its step), is cut into bins
   of half ``bubble_phase_tolerance`` and durations
   into log-scale bins; a gap is periodic when the window around it holds gaps in at least
   ``bubble_presence`` of the analysed steps with a duration CV of at most ``bubble_max_cv``.
2. Order: among a step's long gaps with the bubble's waiting signature, its rank counted from the
   start (gaps in the first half of the step) or from the end (second half; the fill is the first,
   the drain the last). A gap is periodic
   when, for either count, at least ``bubble_presence`` of the analysed steps hold a gap of that
   rank within ``bubble_duration_tolerance`` of the rank's median duration and at the same place
   (its offset from the step start, or its distance to the step end, for a rank counted from the
   end, within ``bubble_order_phase_tolerance`` of the median step length), and so does it. This
   holds when the step length varies (a gap's phase moves with the step; its place relative to the
   end it is counted from does not) and with jitter on every duration.

Only gaps with the bubble's waiting signature are compared, so a loader stall or an exposed
all-reduce at the same phase does not count as the same gap. Judged on analysed steps, applied to
every long gap (warmup and outlier steps too). Fewer than ``bubble_min_steps`` analysed steps: not
judged (a note says so). A periodic gap the host caused (next kernel submitted late) is not a
bubble: no schedule fixes it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import grouped
from traceread.config import Thresholds
from traceread.note import BUBBLES_NOT_JUDGED, BUBBLES_NOT_JUDGED_MORE, Note
from traceread.rules._base import (
    MAX_UNIT_NOTES,
    Rule,
    RuleContext,
    cat,
    fmt_int,
    fmt_ns,
    fmt_pct,
    waited_for_comm,
    where,
)
from traceread.rules._columns import Frame, Gaps, col, frac

NAME = "pipeline-bubble"


def pipeline_evidence(gaps: Frame) -> np.ndarray:
    """Bool per gap: its step holds a point-to-point transfer (by identity), or one overlaps the gap."""
    return (col(gaps, "step_p2p_count") > 0) | (col(gaps, "comm_p2p_ns") > 0)


def waits_on_p2p(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Bool per gap: a point-to-point transfer covers most of it and compute waited for it (the
    next kernel was queued or its launch is unknown, it was submitted with most of the gap still
    ahead, or the host sat in a sync for most of the gap)."""
    p2p = frac(gaps, "comm_p2p") >= cfg.comm_cover
    # Submitted a little after the GPU went idle but then still waiting for most of the gap: the
    # transfer, not the host, held the kernel back.
    dur = col(gaps, "dur_ns", dtype=np.int64)
    lend = col(gaps, "next_launch_end_ns", -1, dtype=np.int64)
    held_after_submit = (lend >= 0) & (col(gaps, "end_ns", dtype=np.int64) - lend >= cfg.comm_cover * dur)
    return p2p & (~ctx.late | held_after_submit | (frac(gaps, "sync") >= cfg.comm_cover))


def takes(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """The gaps this rule claims (``mask`` without the judged-length condition); comm-bound and
    sync-stall leave these to it."""
    hidden = ctx.periodic & ctx.queued & waits_like_a_bubble(gaps, ctx.queued, cfg,
                                                              waited_for_comm(gaps, ctx.comm_tail_ns, cfg))
    return pipeline_evidence(gaps) & (col(gaps, "dur_ns") >= cfg.bubble_min_gap_ns) & \
        (waits_on_p2p(gaps, ctx, cfg) | hidden)


def waits_like_a_bubble(gaps: Frame, queued: np.ndarray, cfg: Thresholds,
                        comm_waited: np.ndarray | None = None) -> np.ndarray:
    """The bubble's local signature: a p2p wait or a queued kernel, with no collective it could have
    waited for (``comm_waited``: ``rules._base.waited_for_comm``; None: any) and no H2D copy."""
    p2p = frac(gaps, "comm_p2p") >= cfg.comm_cover
    collective = frac(gaps, "comm_collective") >= cfg.comm_cover
    if comm_waited is not None:
        collective &= comm_waited
    other = collective | (frac(gaps, "memcpy_htod") >= cfg.data_loader_cover)
    return (p2p | queued) & ~other


def periodicity(gaps: Frame, steps: pd.DataFrame | None, cfg: Thresholds, eligible: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Note]]:
    """``(periodic, presence, cv, notes)`` per gap (see module docstring).

    ``eligible``: the gaps that may recur as the same gap (same waiting signature); all when None.
    """
    n = len(gaps)
    periodic = np.zeros(n, dtype=bool)
    presence = np.full(n, np.nan)
    cv = np.full(n, np.nan)
    notes: list[Note] = []
    if n == 0 or steps is None or steps.empty:
        return periodic, presence, cv, notes
    keep = ~steps["warmup"].to_numpy(bool)
    if "outlier" in steps.columns:
        keep &= ~steps["outlier"].to_numpy(bool)
    # numpy group-bys (traceread.grouped): pandas' per-operation cost was most of this on small traces
    s_keys = [steps["rank"].to_numpy(), steps["device"].to_numpy(), steps["step"].to_numpy()]
    a_keys = [k[keep] for k in s_keys]  # the analysed steps
    a_unit, n_units = grouped.codes(*a_keys[:2])
    first = grouped.first_rows(a_unit, n_units)
    counts = grouped.sizes(a_unit, n_units)  # analysed steps per (rank, device), in key order
    short = np.flatnonzero(counts < cfg.bubble_min_steps)
    for u in short[:MAX_UNIT_NOTES]:
        rank, device, k = a_keys[0][first[u]].item(), a_keys[1][first[u]].item(), int(counts[u])
        notes.append(Note.of(BUBBLES_NOT_JUDGED, rank=rank, device=device, steps=k, needed=cfg.bubble_min_steps))
    if len(short) > MAX_UNIT_NOTES:  # one line for the rest: a note per GPU of thousands is not read
        notes.append(Note.of(BUBBLES_NOT_JUDGED_MORE, pairs=len(short) - MAX_UNIT_NOTES,
                             fewest=int(counts[short].min()), most=int(counts[short].max())))
    judged = np.flatnonzero(counts >= cfg.bubble_min_steps)
    if len(judged) == 0:
        return periodic, presence, cv, notes
    g_keys = [col(gaps, "rank", dtype=np.int64), col(gaps, "device", dtype=np.int64), col(gaps, "step", -1, dtype=np.int64)]
    g_unit = grouped.lookup([a_keys[0][first[judged]], a_keys[1][first[judged]]], g_keys[:2])
    in_step = grouped.lookup(a_keys, g_keys) >= 0
    dur = col(gaps, "dur_ns", dtype=np.int64)
    long_enough = (g_unit >= 0) & (dur >= cfg.bubble_min_gap_ns)
    if eligible is not None:
        long_enough &= eligible
    if not (long_enough & in_step).any():
        return periodic, presence, cv, notes
    lengths = (steps["end_ns"].to_numpy() - steps["start_ns"].to_numpy()).astype(np.int64)
    at = grouped.lookup(s_keys, g_keys)
    step_len = np.where(at >= 0, lengths[np.maximum(at, 0)], -1).astype(np.float64)
    # The unit's median analysed step length turns a place in the step into a fraction of a step
    # (NaN for a unit none of whose gaps is in an analysed step, as a reindex gives).
    measured = in_step & (g_unit >= 0)
    med = grouped.median(step_len[measured], g_unit[measured], len(judged))
    unit_len = np.maximum(med[np.maximum(g_unit, 0)], 1.0)
    offset = col(gaps, "offset_ns", dtype=np.float64)
    phase = np.clip(np.nan_to_num(col(gaps, "phase", 0.0, dtype=np.float64)), 0.0, 1.0 - 1e-12)
    places = [(phase, True),  # 1a. phase (the step boundary wraps)
              (np.clip(offset / unit_len, 0.0, 1.0 - 1e-12), False),  # 1b. from the step start
              (np.clip((step_len - offset) / unit_len, 0.0, 1.0 - 1e-12), False)]  # 1c. to the step end
    n_steps = counts[judged]
    # A gap's place is read from the nearer end of its step: from the start in the first half,
    # to the end in the second (a fill's distance to the end is the whole, varying, step).
    first_half = offset < step_len / 2.0
    known = long_enough & (step_len > 0)
    for (place, wrap), ok in zip(places, (long_enough, known & first_half, known & ~first_half), strict=True):
        _by_window(gaps, g_unit, in_step, ok, place, wrap, n_steps, cfg, periodic, presence, cv)
    _by_order(gaps, g_unit, in_step, known, first_half, n_steps, step_len, cfg, periodic, presence, cv)
    return periodic, presence, cv, notes


def _by_window(gaps: Frame, g_unit: np.ndarray, in_step: np.ndarray, long_enough: np.ndarray,
               place: np.ndarray, wrap: bool, unit_steps: np.ndarray, cfg: Thresholds, periodic: np.ndarray,
               presence: np.ndarray, cv: np.ndarray) -> None:
    """Periodicity by windows of place in the step (a fraction in [0, 1)) and duration (module
    docstring, 1.); updates ``periodic``, ``presence`` and ``cv`` in place where it holds."""
    cand = np.flatnonzero(long_enough & in_step)  # the evidence: gaps of analysed steps
    if len(cand) == 0:
        return
    dur = col(gaps, "dur_ns", dtype=np.int64)
    width = cfg.bubble_phase_tolerance / 2.0
    nbins = max(int(np.ceil(1.0 / width)), 1)
    gbin = np.minimum((place / width).astype(np.int64), nbins - 1)
    # Duration bins (log scale) keep a 3 ms stall that happens to share the place from being
    # compared with a 0.8 ms bubble; per step, the gap nearest the window's centre stands for it.
    dwidth = np.log1p(2.0 * cfg.bubble_max_cv) / 2.0
    logd = np.log(np.maximum(dur, 1).astype(np.float64))
    dbin = np.floor(logd / dwidth).astype(np.int64)
    reach = 2  # bins on each side: place within the tolerance, duration within ~1.4x
    grid = np.meshgrid(np.arange(-reach, reach + 1), np.arange(-reach, reach + 1))
    ps, ds = grid[0].ravel(), grid[1].ravel()
    rep = np.repeat(cand, len(ps))
    win = gbin[rep] + np.tile(ps, len(cand))
    if wrap:
        win %= nbins
    dwin = dbin[rep] + np.tile(ds, len(cand))
    dplace = np.abs(place[rep] - (win + 0.5) * width)
    if wrap:
        dplace = np.minimum(dplace, 1.0 - dplace)  # the step boundary wraps
    dist = (dplace / width) ** 2 + ((logd[rep] - (dwin + 0.5) * dwidth) / dwidth) ** 2
    unit, step, wdur = g_unit[rep], col(gaps, "step", dtype=np.int64)[rep], dur[rep].astype(np.float64)
    # Per step, the row nearest the window's centre (the first in a stable sort by distance: a sort and
    # drop_duplicates), kept in that order: the window's mean and std add its gaps in that order.
    order = np.argsort(dist, kind="stable")
    key, n_keys = grouped.codes(unit[order], win[order], dwin[order], step[order])
    kept = order[np.sort(grouped.first_rows(key, n_keys))]
    wkey, n_wins = grouped.codes(unit[kept], win[kept], dwin[kept])
    w_first = kept[grouped.first_rows(wkey, n_wins)]
    size = grouped.sizes(wkey, n_wins)
    w_mean = grouped.mean(wdur[kept], wkey, n_wins)
    w_std = grouped.std(wdur[kept], wkey, n_wins)
    # Judged on analysed steps, applied to every long gap of the unit (warmup and outlier steps too).
    cand = np.flatnonzero(long_enough)
    pos = grouped.lookup([unit[w_first], win[w_first], dwin[w_first]], [g_unit[cand], gbin[cand], dbin[cand]])
    found = pos >= 0
    cand, pos = cand[found], pos[found]
    p = size[pos].astype(np.float64) / unit_steps[g_unit[cand]].astype(np.float64)
    mean = w_mean[pos]
    c = np.where(mean > 0, w_std[pos] / np.maximum(mean, 1.0), np.inf)
    # The gap itself must be the window's gap: within 1 + 2 * bubble_max_cv of its mean duration. The bins
    # reach further, and a gap outside the analysed steps is not in the window's statistics at all: without
    # this check a one-off in the warmup step, somewhat longer than the drains beside it, would be read as
    # a drain.
    fits = np.abs(np.log(np.maximum(dur[cand], 1) / np.maximum(mean, 1.0))) <= np.log1p(2.0 * cfg.bubble_max_cv)
    hit = (p >= cfg.bubble_presence) & (c <= cfg.bubble_max_cv) & fits
    # Keep the best reading per gap: a periodic one first, then the higher presence.
    better = (hit & ~periodic[cand]) | ((hit == periodic[cand]) & (p > np.nan_to_num(presence[cand], nan=-1.0)))
    presence[cand[better]] = p[better]
    cv[cand[better]] = c[better]
    periodic[cand[hit]] = True


def _by_order(gaps: Frame, g_unit: np.ndarray, in_step: np.ndarray, long_enough: np.ndarray,
              first_half: np.ndarray, unit_steps: np.ndarray, step_len: np.ndarray, cfg: Thresholds,
              periodic: np.ndarray, presence: np.ndarray, cv: np.ndarray) -> None:
    """Periodicity by order among the step's long gaps of the same waiting signature (module
    docstring, 2.); updates ``periodic``, ``presence`` and ``cv`` in place where it holds."""
    idx = np.flatnonzero(long_enough)
    if len(idx) == 0:
        return
    # numpy group-bys (traceread.grouped) in place of a frame's: the gaps in (unit, step, start) order
    order = idx[np.lexsort((col(gaps, "start_ns", dtype=np.int64)[idx], col(gaps, "step", -1, dtype=np.int64)[idx],
                            g_unit[idx]))]
    unit, step = g_unit[order], col(gaps, "step", -1, dtype=np.int64)[order]
    offset = col(gaps, "offset_ns", dtype=np.float64)[order]
    length = step_len[order].astype(np.float64)
    dur = col(gaps, "dur_ns", dtype=np.float64)[order]
    analysed, early = in_step[order], first_half[order]
    by_step, n_by_step = grouped.codes(unit, step)
    counted = {"first": grouped.cumcount(by_step, n_by_step), "last": grouped.cumcount(by_step, n_by_step, ascending=False)}
    n_steps = unit_steps[unit].astype(np.float64)
    # Where the gap sits, from the end it is counted from: a gap counted from the start keeps its
    # offset from the step start, one counted from the end its distance to the step end, whatever
    # the step's length does in between.
    place = {"first": offset, "last": length - offset}
    for rank in ("first", "last"):
        key, n_keys = grouped.codes(unit, counted[rank])
        ka = key[analysed]
        ref_dur, ref_place, ref_len = (grouped.median(x[analysed], ka, n_keys)[key] for x in (dur, place[rank], length))
        moved = np.abs(place[rank] - ref_place)
        with np.errstate(invalid="ignore"):
            ok = (np.abs(dur / ref_dur - 1.0) <= cfg.bubble_duration_tolerance) & \
                (moved <= cfg.bubble_order_phase_tolerance * ref_len)
        ok &= early == (rank == "first")  # counted from the nearer end
        sel = ok & analysed
        ks = key[sel]
        # distinct steps per key (nunique): each (key, step) pair once
        pair, n_pairs = grouped.codes(ks, step[sel])
        distinct = np.bincount(ks[grouped.first_rows(pair, n_pairs)], minlength=n_keys)
        k_mean, k_std = grouped.mean(dur[sel], ks, n_keys), grouped.std(dur[sel], ks, n_keys)
        p = distinct[key].astype(np.float64) / n_steps
        c = k_std[key] / np.maximum(k_mean[key], 1.0)
        hit = ok & (p >= cfg.bubble_presence)
        rows = order[hit]
        better = ~periodic[rows] | (p[hit] > np.nan_to_num(presence[rows]))
        periodic[rows] = True
        presence[rows[better]] = p[hit][better]
        cv[rows[better]] = c[hit][better]


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    return ctx.judged & takes(gaps, ctx, cfg)


def _two(x: np.ndarray) -> np.ndarray:
    """Numbers with two decimals as strings ('nan' where missing)."""
    return np.char.mod("%.2f", np.asarray(x, dtype=np.float64)).astype(object)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    p2p = frac(gaps, "comm_p2p")
    waits_on = where(p2p >= cfg.comm_cover,
                        cat("waits on a point-to-point transfer covering ", fmt_pct(p2p), " of it"),
                        "next kernel was already queued (waiting on a dependency, not the host)")
    recurs = where(ctx.periodic,
                      cat("recurs at phase ", _two(col(gaps, "phase", 0.0)), " of the step in ",
                          fmt_pct(ctx.presence), " of analysed steps, duration CV ", _two(ctx.cv)),
                      "does not recur every step (stage imbalance)")
    steps_p2p = col(gaps, "step_p2p_count", dtype=np.int64)
    return cat(fmt_ns(col(gaps, "dur_ns")), " gap; ", waits_on, "; ", recurs, "; ",
               fmt_int(steps_p2p), " point-to-point transfers in the step")


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "late", "periodic", "presence", "cv", "comm_tail_ns")

RULE = Rule(NAME, mask, evidence, reads=("periodic", "presence", "cv"), facts=FACTS)
