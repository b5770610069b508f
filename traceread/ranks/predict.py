"""What the job would step at without its straggler, or with balanced pipeline stages.

``job_prediction(usable, step, stragglers, imbalance, stage_ranks) -> JobPrediction | None`` reads each rank's
*own* step lengths from its summary (``steps["own_ns"]``: the what-if replay of that rank with every
communication kernel taking no time, :func:`traceread.whatif.straggler.free_comm_lengths`, computed
where the trace was loaded). Speeding a rank up ``f``-fold divides its own step by ``f`` (every
duration and delay of its replay scales), so per step number the prediction is the measured job step
less the change of the slowest rank's own step; its median over the steady steps is the figure. The
straggler runs at its pipeline stage's median rank's compute speed (its compute per step over theirs;
all other ranks without stages); every rank of the slow stage at the other stages' median rank's.
What the own-step model leaves out (the transfers, a pipeline's fill and drain) cancels in the
difference. In a pipeline (stages read) the figure comes instead from the job's
critical path replayed through its matched collectives (:mod:`traceread.ranks.critical`): a slow worker off the
critical path during the fill and drain gains less than its own step shrinks, which the per-rank model cannot see.
Plain data in, a :class:`~traceread.ranks.results.JobPrediction` out: the job report's
``prediction``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceread.ranks.align import primary_device
from traceread.ranks.critical import step_gains
from traceread.ranks.results import (
    JobPrediction,
    JobStep,
    StageImbalance,
    StageSpeedup,
    Straggler,
    StragglerSpeedup,
)
from traceread.ranks.summary import RankSummary

METHOD = ("what-if replay: each rank's own step (its replay with communication taking no time); the job "
          "step less the change of the slowest rank's own step, median over steady steps")
METHOD_CRITICAL = ("job critical-path replay: every rank's arrivals and its calls' ends replayed through the matched "
                   "collectives with the faster ranks' own work shortened; the job step less each step's gain, median "
                   "over steady steps")


def _steady(s: RankSummary) -> np.ndarray:
    st = s.steps
    steady = ~(st["warmup"].astype(bool) | st["outlier"].astype(bool))
    return steady if steady.any() else np.ones(len(st["step"]), dtype=bool)


def _own_table(usable: list[RankSummary]) -> tuple[np.ndarray, np.ndarray, list[int]] | None:
    """(step numbers, ranks x steps own ns (NaN: absent), ranks) over steady steps; None when a rank has none."""
    per: list[dict[int, float]] = []
    for s in usable:
        st = s.steps
        if "own_ns" not in st or len(st["own_ns"]) != len(st["step"]):
            return None
        keep = _steady(s)
        d: dict[int, float] = {}
        for k, v in zip(st["step"][keep].tolist(), st["own_ns"][keep].tolist(), strict=True):
            d[int(k)] = max(d.get(int(k), 0.0), float(v))  # a rank of several devices: its slowest
        per.append(d)
    steps = np.array(sorted({k for d in per for k in d}), dtype=np.int64)
    own = np.array([[d.get(int(k), np.nan) for k in steps] for d in per], dtype=np.float64).reshape(len(per), len(steps))
    return steps, own, [int(s.identity.claimed_rank) for s in usable]


def _compute(s: RankSummary) -> float:
    st = s.steps
    keep = _steady(s)
    dev = st["device"] == primary_device(s)
    sel = keep & dev if (keep & dev).any() else keep
    return float(np.median(st["busy_ns"][sel])) if sel.any() else 0.0


def _predict(steps: np.ndarray, own: np.ndarray, measured: dict[int, int], faster: np.ndarray,
             factor: float) -> int | None:
    after = own.copy()
    after[faster] /= factor
    with np.errstate(all="ignore"):
        before_max, after_max = np.nanmax(own, axis=0), np.nanmax(after, axis=0)
    vals = [measured[int(k)] - (b - a) for k, b, a in zip(steps.tolist(), before_max, after_max, strict=True)
            if int(k) in measured and np.isfinite(b) and np.isfinite(a)]
    return int(np.median(vals)) if vals else None


def _replayed(t: dict[str, Any], ranks: list[int], faster: list[int], factor: float,
              measured: dict[int, int]) -> int | None:
    """The job step with ``faster`` ranks ``factor`` x faster, from the job's critical path replayed
    (:mod:`traceread.ranks.critical`): per step the measured job step less its gain, median over steady steps."""
    speed = np.ones(len(t["ranks"]))
    speed[[t["ranks"].index(r) for r in faster if r in t["ranks"]]] = factor
    gains = step_gains(t, speed)
    vals = [measured[k] - g for k, g in gains.items() if k in measured]
    return int(np.median(vals)) if vals else None


def job_prediction(usable: list[RankSummary], step: JobStep, stragglers: list[Straggler],
                   imbalance: StageImbalance | None, stage_ranks: list[list[int]] | None,
                   t: dict[str, Any] | None = None) -> JobPrediction | None:
    """The job report's ``prediction`` (module doc), None without a straggler or slow stage, or without
    own steps (summaries of an older scan cache)."""
    if not stragglers and imbalance is None:
        return None
    table = _own_table(usable)
    measured = {p.step: p.job_step_ns for p in step.per_step}
    if table is None or not measured:
        return None
    steps, own, ranks = table
    if not stage_ranks:
        t = None  # the critical-path replay for pipelines (traceread.ranks.critical)
    free_ns: int | None = None
    balanced_ns: int | None = None
    straggler: StragglerSpeedup | None = None
    stage: StageSpeedup | None = None
    compute = np.array([_compute(s) for s in usable])
    if stragglers:
        r = int(stragglers[0].rank)
        i = ranks.index(r) if r in ranks else -1
        peers = next((g for g in (stage_ranks or []) if r in g), ranks)
        peer_compute = [compute[ranks.index(p)] for p in peers if p != r and p in ranks]
        if i >= 0 and peer_compute and np.median(peer_compute) > 0:
            f = max(float(compute[i] / np.median(peer_compute)), 1.0)
            free_ns = _predict(steps, own, measured, np.array([i]), f)
            if t is not None:
                free_ns = _replayed(t, ranks, [r], f, measured) or free_ns
            straggler = StragglerSpeedup(r, round(f, 4), f"rank {r} runs at the median speed of "
                                         + ("its pipeline stage" if stage_ranks else "the other ranks")
                                         + f" (its compute {f:.2f}x theirs)")
    if imbalance is not None and imbalance.others_compute_per_step_ns:
        f = max(float(imbalance.compute_per_step_ns) / float(imbalance.others_compute_per_step_ns), 1.0)
        idx = np.array([ranks.index(r) for r in imbalance.ranks if r in ranks], dtype=np.int64)
        if len(idx):
            balanced_ns = _predict(steps, own, measured, idx, f)
            if t is not None:
                balanced_ns = _replayed(t, ranks, list(imbalance.ranks), f, measured) or balanced_ns
            stage = StageSpeedup(int(imbalance.stage), round(f, 4),
                                 f"every rank of stage {imbalance.stage} runs at the other stages' "
                                 f"median rank's compute speed (theirs {f:.2f}x)")
    if free_ns is None and balanced_ns is None:
        return None
    return JobPrediction(free_ns, balanced_ns, METHOD if t is None else METHOD_CRITICAL, step.median_job_step_ns,
                         straggler, stage)
