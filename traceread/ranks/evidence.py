"""Whether a job's ranks can support a claim: enough collectives and steps, and enough of the job present.

:func:`judge` reads the figures of one job analysis (matched collective instances, the steps they fall in,
the ranks present against the world size the files claim) and returns a :class:`ClaimEvidence`: what a
claim needs (``traceread.config.Thresholds``: ``straggler_min_collectives``, ``straggler_min_steps``,
``job_min_present_share``), what the job has, and which claims it can carry:

* ``sufficient``: at least the minimum collectives over the minimum steps (steps only where known);
  otherwise no straggler and no slow stage is named: the verdict says "insufficient evidence" with the
  numbers, and what the figures would have said;
* a rank whose lateness is at its first collective (:func:`start_skew`) or too rare is no straggler
  (:func:`early_text`); nor, in a pipeline, one no slower than its stage in the steps it is waited for (the
  others wait in the fill and drain: :func:`bubble_text`);
* ``partial``: ranks missing against the world size (without one, against the ranks the present ranks'
  numbers imply: ranks 4 and 8 are "2 of at least 9"); the verdict starts "N of M ranks present", a slow
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
    world_at_least: int | None = None  # no world size said: how many ranks the present ranks' numbers imply

    @property
    def partial(self) -> bool:
        bound = self.world_size if self.world_size is not None else self.world_at_least
        return bound is not None and self.present_ranks < bound

    @property
    def world_text(self) -> str:
        return str(self.world_size) if self.world_size is not None else f"at least {self.world_at_least}"

    @property
    def present_text(self) -> str:
        return f"{self.present_ranks} of {self.world_text} ranks present" if self.partial else ""

    def to_dict(self) -> dict[str, Any]:
        return {"collectives": self.collectives, "steps": self.steps, "present_ranks": self.present_ranks,
                "world_size": self.world_size, "partial": self.partial, "sufficient": self.sufficient,
                "stage_claims": self.stage_claims, "straggler_claims": self.straggler_claims,
                "reason": self.reason}


def implied_world(ranks: list[int]) -> int | None:
    """Without a world size, the least the present ranks' numbers imply: ``max + 1`` when a rank below the
    highest is missing (ranks are numbered from 0; a missing 0 alone may be files numbered from 1, and is not
    taken for a hole); None when none is (trailing ranks may still be missing: nothing says so)."""
    have = {int(r) for r in ranks if r is not None and int(r) >= 0}
    if not have:
        return None
    top = max(have)
    # a hole in 1..top-1: fewer distinct ranks there than numbers (counted, not listed: ranks may be huge)
    holes = sum(1 for r in have if 1 <= r < top) < top - 1
    return top + 1 if holes else None


def judge(collectives: int, steps: int, present: int, world: int | None, cfg: Thresholds,
          world_at_least: int | None = None) -> ClaimEvidence:
    """What the job's figures can support (module doc). ``world_at_least``: without ``world``, the ranks the
    present ones' numbers imply (:func:`implied_world`): a job short of it is partial too."""
    if world is not None:
        world_at_least = None
    bound = world if world is not None else world_at_least
    few_calls = collectives < cfg.straggler_min_collectives
    few_steps = 0 < steps < cfg.straggler_min_steps
    sufficient = not (few_calls or few_steps)
    partial = bound is not None and present < bound
    stage_ok = sufficient and not partial
    strag_ok = sufficient and (not partial or present >= cfg.job_min_present_share * float(bound or 0))
    of = str(world) if world is not None else f"at least {world_at_least}"
    reasons = []
    if not sufficient:
        steps_text = f" over {steps} step{'s' if steps != 1 else ''}" if steps else ""
        reasons.append(f"insufficient evidence: {collectives} collective{'s' if collectives != 1 else ''} matched "
                       f"across ranks{steps_text} (a claim needs {cfg.straggler_min_collectives} collectives over "
                       f"{cfg.straggler_min_steps} steps)")
    elif partial and not strag_ok:
        reasons.append(f"insufficient evidence: only {present} of {of} ranks present (a straggler claim needs "
                       f"{cfg.job_min_present_share:.0%} of the world, a stage claim every rank): the missing ranks "
                       "may be as slow")
    elif partial:
        reasons.append(f"{(bound or 0) - present} of {of} ranks missing: no pipeline stage is named (its missing "
                       "ranks may be as slow)")
    return ClaimEvidence(collectives, steps, present, world, sufficient, stage_ok, strag_ok, "; ".join(reasons),
                         world_at_least)


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


def bubble_text(bubble: list[tuple[int, int, float, int, int]], cfg: Thresholds) -> str:
    """The verdict when the rank the others wait for in a pipeline is no slower than its own stage's ranks in the
    steps they wait for it most (all steps when none)."""
    r, stage, share, slower, steps = max(bubble, key=lambda x: x[2])
    return (f"no straggler: rank {r} (pipeline stage {stage}) would cost the others {share:.1%} of their time, but "
            f"it is slower than its stage's other ranks in only {slower} of the {steps} steps they wait for it (it needs "
            f"{cfg.straggler_min_step_share:.0%}): the others wait in the pipeline's fill and drain, not for a slow "
            "rank")


def early_text(early: list[tuple[int, float, int, float]], cfg: Thresholds) -> str:
    r, share, late, skew = max(early, key=lambda x: x[1])
    if np.isfinite(skew):
        return (f"no straggler: rank {r} would cost the others {share:.1%} of their time, but that waiting is at "
                f"its first collective (it arrived {fmt_ms(skew)} after the others' median): its process started "
                "later (start skew), a lateness that does not recur")
    return (f"not judged: rank {r} would cost the others {share:.1%} of their time, but it arrived last at only "
            f"{late} collective{'s' if late != 1 else ''} (a claim needs {cfg.straggler_min_late_collectives}): "
            "a lateness that does not recur")




def confined_waits(b: Any, present: np.ndarray, last: np.ndarray, i: int, unc: float,
                   cfg: Thresholds) -> tuple[int, float] | None:
    """Waits for rank ``i`` confined to a few collectives: (how many, their median wait) when fewer than
    ``straggler_min_late_collectives`` of the collectives it arrived last at (``last``: the last arriver per
    collective) hold at least half of the waiting there, each
    wait at least ``straggler_min_uncertainty_factor`` x the alignment's per-collective error ``unc`` (so the
    clocks can judge it) and ``straggler_confined_min_ratio`` x the median collective's longest wait; else None."""
    longest = np.nanmax(np.where(present, b.waits, 0.0), axis=0) if present.size else np.zeros(0)
    mine = (last == i) & (longest > 0)
    if not mine.any():
        return None
    bar = max(cfg.straggler_min_uncertainty_factor * unc, cfg.straggler_confined_min_ratio * float(np.median(longest)))
    heavy = mine & (longest > bar)
    k = int(heavy.sum())
    if not 0 < k < cfg.straggler_min_late_collectives or longest[heavy].sum() < 0.5 * longest[mine].sum():
        return None
    return k, float(np.median(longest[heavy]))


def confined_text(few: list[tuple[int, float, int, float, float]], n: int) -> str:
    r, share, k, wait, unc = max(few, key=lambda x: x[1])
    return (f"no straggler: rank {r} would cost the others {share:.1%} of their time, but that waiting is in only {k} "
            f"of {n} collectives (the others waited {fmt_ms(wait)} there, median; the alignment's per-collective "
            f"error is {fmt_ms(unc)}, far below): a delay confined to those collectives (work on that rank there "
            "only), not a straggler that recurs")


def _fine(ns: float) -> str:
    return f"{ns / 1e3:.1f} us" if abs(ns) < 100_000 else fmt_ms(ns)


def figures(ev: ClaimEvidence, out: list[Any], imb: Any, moving: bool, culprits: dict[int, int],
            rot: tuple[int, int, float, float] | None, few: list, early: list, loose: list, unc: float,
            cfg: Thresholds, ranks: list[int]) -> tuple[str, ...]:
    """The figures each claim of the verdict rests on, one line per claim, with the bar it had to pass (the
    Markdown job section lists them under the verdict)."""
    f = cfg.straggler_min_uncertainty_factor
    lines = [f"{ev.collectives} collectives matched across ranks over {ev.steps} steps (a claim needs "
             f"{cfg.straggler_min_collectives} over {cfg.straggler_min_steps})"
             + (f"; {ev.present_ranks} of {ev.world_text} ranks present" if ev.world_size or ev.partial else ""),
             f"clock alignment: per-collective error up to {_fine(unc)} (a lateness must exceed {f:g}x it)"]
    for s in out:
        led = sum(1 for c in culprits.values() if ranks[c] == s.rank)
        lines.append(f"rank {s.rank}: last at {s.last_arrivals} of {s.matched_collectives} collectives, median "
                     f"lateness {fmt_ms(s.median_lateness_ns)} ({s.median_lateness_ns / max(unc, 1.0):,.0f}x the "
                     f"alignment's error); the others waited {fmt_ms(s.attributed_wait_ns)} for it "
                     f"({s.attributed_share:.0%} of their waiting, {s.share_of_others_time:.1%} of their time; a claim "
                     f"needs {cfg.straggler_min_wait_share:.0%}); waited for most in {led} of {len(culprits)} steps "
                     f"(a claim needs {cfg.straggler_min_step_share:.0%})")
    if imb is not None:
        lines.append(f"stage {imb.stage}: compute {fmt_ms(imb.compute_per_step_ns)} per step against "
                     f"{fmt_ms(imb.others_compute_per_step_ns)} on the other stages' median rank ({imb.excess:+.0%}; "
                     f"a claim needs +{cfg.stage_imbalance_min_excess:.0%}); {imb.attributed_share:.0%} of the other "
                     "ranks' waiting in collectives is for it")
    if moving and culprits:
        most = max(list(culprits.values()).count(c) for c in set(culprits.values()))
        lines.append(f"rank waited for most: {len(set(culprits.values()))} different ranks over {len(culprits)} "
                     f"steps, the most often {most} (a single straggler needs {cfg.straggler_min_step_share:.0%})"
                     + (f"; per step the slowest rank computes {fmt_ms(rot[2])} ({rot[3]:.0%}) longer than the "
                        "fastest (median over steps)" if rot is not None else ""))
    for r, _share, k, wait, u in few:
        lines.append(f"rank {r}: its waiting is in {k} of {ev.collectives} collectives, {fmt_ms(wait)} each (median), "
                     f"{wait / max(u, 1.0):,.0f}x the alignment's error of {_fine(u)} (a recurring straggler needs "
                     f"{cfg.straggler_min_late_collectives} late collectives)")
    for r, _share, late, skew in early:
        lines.append(f"rank {r}: arrived {fmt_ms(skew)} after the others' median at its first collective, where most "
                     "of its waiting is (start skew)" if np.isfinite(skew) else
                     f"rank {r}: last at only {late} collectives (a claim needs {cfg.straggler_min_late_collectives})")
    for r, _share, lateness, u in loose:
        lines.append(f"rank {r}: median lateness {fmt_ms(lateness)}, within {f:g}x the alignment's error "
                     f"({_fine(u)})")
    return tuple(lines)


def median_lateness(arr: np.ndarray, present: np.ndarray, i: int, m: np.ndarray) -> float:
    """Rank ``i``'s median lateness over the collectives ``m``: its arrival minus the other members' median."""
    if not m.any():
        return 0.0
    n = arr.shape[0]
    with np.errstate(all="ignore"):
        late = arr[i, m] - np.nanmedian(np.where(present[:, m], arr[:, m], np.nan)[np.arange(n) != i], axis=0)
    return float(np.nanmedian(late)) if np.isfinite(late).any() else 0.0
