"""Whether a job's ranks can support a claim: enough collectives and steps, and enough of the job present.

:func:`judge` reads the figures of one job analysis (matched collective instances, the steps they fall in,
the ranks present against the world size the files claim) and returns a :class:`ClaimEvidence`: what a
claim needs (``traceread.config.Thresholds``: ``straggler_min_collectives``, ``straggler_min_steps``,
``job_min_present_share``), what the job has, and which claims it can carry:

* ``sufficient``: at least the minimum collectives over the minimum steps (steps only where known);
  otherwise no straggler and no slow stage is named: the verdict says "insufficient evidence" with the
  numbers, and what the figures would have said;
* a rank whose lateness is at its first collective (:func:`start_skew`) or too rare is no straggler
  (:func:`early_text`);
* ``partial``: ranks missing against the world size; the verdict starts "N of M ranks present", a slow
  stage is named only when every rank is present (a stage's other ranks may be as slow) and a straggler
  only when at least ``job_min_present_share`` of the world is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceread.config import Thresholds
from traceread.ranks.waiting import fmt_ms


@dataclass(frozen=True)
class ClaimEvidence:
    collectives: int  # collective instances matched across ranks
    steps: int  # distinct step numbers they fall in (0: steps not known)
    present_ranks: int
    world_size: int | None  # what the files claim (None: not said)
    sufficient: bool  # enough collectives and steps for any claim
    stage_claims: bool  # a slow stage may be named
    straggler_claims: bool  # a straggler may be named
    reason: str  # why a claim is withheld ('' when none is)

    @property
    def partial(self) -> bool:
        return self.world_size is not None and self.present_ranks < self.world_size

    @property
    def present_text(self) -> str:
        return f"{self.present_ranks} of {self.world_size} ranks present" if self.partial else ""

    def to_dict(self) -> dict[str, Any]:
        return {"collectives": self.collectives, "steps": self.steps, "present_ranks": self.present_ranks,
                "world_size": self.world_size, "partial": self.partial, "sufficient": self.sufficient,
                "stage_claims": self.stage_claims, "straggler_claims": self.straggler_claims,
                "reason": self.reason}


def judge(collectives: int, steps: int, present: int, world: int | None, cfg: Thresholds) -> ClaimEvidence:
    """What the job's figures can support (module doc)."""
    few_calls = collectives < cfg.straggler_min_collectives
    few_steps = 0 < steps < cfg.straggler_min_steps
    sufficient = not (few_calls or few_steps)
    partial = world is not None and present < world
    stage_ok = sufficient and not partial
    strag_ok = sufficient and (not partial or present >= cfg.job_min_present_share * float(world or 0))
    reasons = []
    if not sufficient:
        steps_text = f" over {steps} step{'s' if steps != 1 else ''}" if steps else ""
        reasons.append(f"insufficient evidence: {collectives} collective{'s' if collectives != 1 else ''} matched "
                       f"across ranks{steps_text} (a claim needs {cfg.straggler_min_collectives} collectives over "
                       f"{cfg.straggler_min_steps} steps)")
    elif partial and not strag_ok:
        reasons.append(f"insufficient evidence: only {present} of {world} ranks present (a straggler claim needs "
                       f"{cfg.job_min_present_share:.0%} of the world, a stage claim every rank): the missing ranks "
                       "may be as slow")
    elif partial:
        reasons.append(f"{(world or 0) - present} of {world} ranks missing: no pipeline stage is named (its missing ranks "
                       "may be as slow)")
    return ClaimEvidence(collectives, steps, present, world, sufficient, stage_ok, strag_ok, "; ".join(reasons))


def withheld_text(ev: ClaimEvidence, stragglers: list[Any], imbalance: Any) -> str:
    """The verdict when a claim the figures point to is withheld: the reason, then those figures (not a
    claim); '' when nothing is withheld."""
    figures = []
    if stragglers and not ev.straggler_claims:
        s = stragglers[0]
        figures.append(f"rank {s.rank} arrived last at {s.last_arrivals} of {s.matched_collectives} matched "
                       f"collectives, the others waiting {s.attributed_wait_ns / 1e6:.3f} ms for it")
    if imbalance is not None and not ev.stage_claims:
        who = ", ".join(str(r) for r in imbalance.ranks)
        figures.append(f"rank{'s' if len(imbalance.ranks) > 1 else ''} {who} compute{'' if len(imbalance.ranks) > 1 else 's'} "
                       f"{imbalance.excess:+.0%} per step against the other present ranks' median")
    if not figures:
        return ""
    head = f"{ev.present_text}: " if ev.partial else ""
    return f"{head}not judged: {ev.reason}; the figures alone: {'; '.join(figures)}"


def start_skew(b: Any, present: np.ndarray, arr: np.ndarray, i: int) -> float | None:
    """Rank ``i``'s lateness at its first matched collective when at least half of the waiting blamed on it is
    there (its process started later: start skew, not a slow rank), else None."""
    mine = np.where(b.culprit == i, b.waits.sum(axis=0), 0.0)
    cols = np.flatnonzero(present[i])
    if not len(cols) or mine.sum() <= 0 or mine[cols[0]] < 0.5 * mine.sum():
        return None
    first = int(cols[0])
    others = np.delete(arr[:, first], i)
    others = others[np.isfinite(others)]
    return float(arr[i, first] - np.median(others)) if len(others) else 0.0


def early_text(early: list[tuple[int, float, int, float]], cfg: Thresholds) -> str:
    r, share, late, skew = max(early, key=lambda x: x[1])
    if np.isfinite(skew):
        return (f"no straggler: rank {r} would cost the others {share:.1%} of their time, but that waiting is at "
                f"its first collective (it arrived {fmt_ms(skew)} after the others' median): its process started "
                "later (start skew), a lateness that does not recur")
    return (f"not judged: rank {r} would cost the others {share:.1%} of their time, but it arrived last at only "
            f"{late} collective{'s' if late != 1 else ''} (a claim needs {cfg.straggler_min_late_collectives}): "
            "a lateness that does not recur")
