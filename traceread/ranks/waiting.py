"""Whom a job waits for: the verdict of :func:`traceread.ranks.analyze_job`, the slow stage's figures, and
how much of the other ranks' largest idle class is waiting for the straggler or the slow stage.

Helpers of :mod:`traceread.ranks.job` over its instance matrices (``t``) and :class:`~traceread.ranks.blame.Blame`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from traceread import intervals
from traceread.config import Thresholds
from traceread.ranks.align import epoch_shift, primary_device
from traceread.ranks.blame import step_parts
from traceread.ranks.grouping import ranges
from traceread.ranks.results import StageImbalance, Straggler, WaitingFor
from traceread.ranks.summary import RankSummary
from traceread.vocabulary import GAP_CLASSES


def fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if abs(ns) < 1e8 else f"{ns / 1e9:.3f} s"


def step_culprits(b: Any, step: np.ndarray, n: int) -> dict[int, int]:
    """Per step number (where steps are known): the rank the most waiting that step is attributed to."""
    out = {}
    total = b.waits.sum(axis=0)
    for s in np.unique(step[step >= 0]):
        m = step == s
        per = np.bincount(b.culprit[m], weights=total[m], minlength=n)
        if per.sum() > 0:
            out[int(s)] = int(np.argmax(per))
    return out


def others_class(usable: list[RankSummary], t: dict[str, Any], b: Any, who: list[int],
                  cls: str) -> tuple[float, float]:
    """Idle of class ``cls`` on the ranks outside ``who`` inside their waits attributed to ``who`` (and its total).

    A wait interval is from the rank's arrival to the end of its wait, on the aligned clock; gaps are on the
    rank's own clock, so the intervals are moved back to it."""
    inside = total = 0.0
    for j, s in enumerate(usable):
        if j in who:
            continue
        g = s.gaps
        sel = (g["class"] == cls) & (g["device"] == primary_device(s)) if len(g["class"]) else \
            np.zeros(0, dtype=bool)
        if not sel.any():
            continue
        us, ue = intervals.union(g["start_ns"][sel], g["end_ns"][sel])
        total += float((ue - us).sum())
        okc = np.isin(b.culprit, who) & (b.waits[j] > 0)
        if not okc.any():
            continue
        shift = int(t["off"][s.identity.claimed_rank]) - epoch_shift(s) + int(t["base"])
        qs = t["arr"][j, okc].astype(np.int64) + shift
        qe = qs + b.waits[j, okc].astype(np.int64)
        qs, qe = intervals.union(qs, qe)
        inside += float(intervals.overlap_with_union(qs, qe, us, ue).sum())
    return inside, total


def rotation(ex: Any, culprits: dict[int, int]) -> tuple[int, int, float, float] | None:
    """Evidence of an imbalance that moves between ranks: (distinct ranks waited for, steps, median per-step
    spread of the ranks' compute (slowest minus fastest, ns), that spread over the median rank's compute);
    None without steps."""
    if not culprits or not len(ex.steps):
        return None
    busy = ex.values[:, :, 0]
    with np.errstate(all="ignore"):
        spread = np.nanmax(busy, axis=0) - np.nanmin(busy, axis=0)
        med = np.nanmedian(busy, axis=0)
    ok = np.isfinite(spread) & (med > 0)
    if not ok.any():
        return None
    return (len(set(culprits.values())), len(culprits), float(np.median(spread[ok])),
            float(np.median(spread[ok] / med[ok])))


def rotating(culprits: dict[int, int], rot: tuple[int, int, float, float] | None, shares: np.ndarray,
             cfg: Thresholds) -> bool:
    """Whether waiting that no single rank stands out for is an imbalance that moves between ranks: the rank
    waited for most changes from step to step (none leads ``straggler_min_step_share`` of the steps), the waiting
    for some rank is significant (``straggler_min_wait_share`` of the others' time) and per step the slowest rank
    computes at least ``stage_imbalance_min_excess`` longer than the fastest (median over steps, on each rank's
    own clock). When every rank is the slow one once, none waits twice as long as the median rank's
    (``straggler_min_excess``), so the per-rank test alone calls such a job balanced."""
    if rot is None or len(culprits) < 2 or not len(shares):
        return False
    most = max(list(culprits.values()).count(c) for c in set(culprits.values()))
    return (len(set(culprits.values())) >= 2 and most < cfg.straggler_min_step_share * len(culprits)
            and float(np.max(shares)) >= cfg.straggler_min_wait_share and rot[3] >= cfg.stage_imbalance_min_excess)


def verdict_text(out: list[Straggler], imb: Any, st: Any, loose: list, moving: list, culprits: dict[int, int],
             ranks: list[int], best_share: float, cfg: Thresholds,
             rotating: tuple[int, int, float, float] | None = None) -> str:
    if imb is not None:
        v = (f"pipeline stage {imb.stage} (ranks {ranges(list(imb.ranks))}) holds the job back: every rank of it "
             f"computes longer per step ({fmt_ms(imb.compute_ns)}, {imb.excess:+.0%} over the other stages' median "
             f"{fmt_ms(imb.others_ns)}; the same micro-batches on every stage, so per micro-batch too), and the "
             "other stages wait for it in pipeline bubbles: rebalance layers across stages (fewer on stage "
             f"{imb.stage}); a different pipeline schedule does not remove this wait")
        if out:
            v += f"; besides, rank {out[0].rank} is slower than its own stage ({out[0].cause})"
        return v
    if out:
        s = out[0]
        where = f" (pipeline stage {s.stage})" if s.stage is not None else ""
        return (f"rank {s.rank}{where} holds the job back: the other ranks waited {fmt_ms(s.attributed_wait_ns)} "
                f"for it ({s.attributed_share:.0%} of their waiting in collectives, {s.share_of_others_time:.1%} "
                f"of their time); cause: {s.cause}")
    if moving:
        who = sorted({ranks[c] for c in culprits.values()})
        return (f"no single straggler: the rank the others wait for changes from step to step ({len(who)} different "
                f"ranks over {len(culprits)} steps: {', '.join(map(str, who[:8]))}{'...' if len(who) > 8 else ''}), "
                "an imbalance that moves between ranks (e.g. sequence-length imbalance), not one slow worker"
                + (f"; per step the slowest rank computes {fmt_ms(rotating[2])} ({rotating[3]:.0%}) longer than the "
                   "fastest (median over steps): balance the work per rank (e.g. pack sequences by length)"
                   if rotating is not None else ""))
    if loose:
        r, share, lateness, unc = max(loose, key=lambda x: x[1])
        return (f"not judged: rank {r} would cost the others {share:.1%} of their time, but its median lateness "
                f"({fmt_ms(lateness)}) is within {cfg.straggler_min_uncertainty_factor:g}x the alignment's "
                f"per-collective error ({fmt_ms(unc)}): the clocks are not aligned well enough to name it")
    return (f"balanced: no rank causes a significant wait (the largest, {best_share:.2%} of the others' time, "
            f"is under the {cfg.straggler_min_wait_share:.0%} threshold or not above the median rank's)")


def imbalance_record(imb: Any, b: Any, st: Any, usable: list[RankSummary], t: dict[str, Any],
                     off: dict[int, Any]) -> StageImbalance:
    members = [j for j in range(len(t["ranks"])) if st.stage[j] == imb.stage]
    outside = [j for j in range(len(t["ranks"])) if j not in members]
    attributed = float(b.attributed[np.ix_(outside, members)].sum()) if outside else 0.0
    waiting = float(b.waiting[outside].sum()) if outside else 0.0
    return StageImbalance(
        stage=imb.stage, ranks=tuple(imb.ranks), compute_per_step_ns=imb.compute_ns,
        others_compute_per_step_ns=imb.others_ns, excess=float(imb.excess),
        attributed_wait_ns=int(attributed), others_waiting_ns=int(waiting),
        attributed_share=float(attributed / waiting) if waiting > 0 else 0.0,
        fix=f"rebalance layers across pipeline stages (move layers off stage {imb.stage}); a different "
            "pipeline schedule does not remove this wait")


def waiting_for(usable: list[RankSummary], off: dict[int, Any], t: dict[str, Any], b: Any,
                 who: list[int], kind: str, name: int) -> WaitingFor:
    """The other ranks' largest idle class and how much of it is waiting for ``who``."""
    idle = {c: 0.0 for c in GAP_CLASSES if c != "capture-boundary"}
    total = 0.0
    for j, s in enumerate(usable):
        if j in who:
            continue
        p = step_parts(s.steps, primary_device(s))
        for v in p.values():
            total += float(v.sum())
            for k, c in enumerate(GAP_CLASSES):
                if c in idle:
                    idle[c] += float(v[1 + k])
    out = WaitingFor(kind, rank=name if kind == "rank" else None, stage=name if kind == "stage" else None,
                     ranks=tuple(t["ranks"][j] for j in who))
    if total <= 0 or not any(idle.values()):
        return out
    cls = max(idle, key=lambda c: idle[c])
    inside, cls_total = others_class(usable, t, b, who, cls)
    return dataclasses.replace(out, cls=cls, class_time_share=idle[cls] / total,
                               class_share=inside / cls_total if cls_total > 0 else 0.0, class_waiting_ns=int(inside))
