"""The job report's typed results: its ranks, a straggler, the slow stage, whom the others wait for, the step.

Read by attribute across packages (the analysis' notes, the renderers, diff); each ``to_dict()`` is its
object of the JSON report (``job.groups[].report``) and of a scan's ``jobs/<job>.json``, key for key in
the order the schema lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceread.ranks.align import RankAlignment


@dataclass(frozen=True, eq=False)
class Straggler:
    """A rank the job waits for (:func:`traceread.ranks.analyze_job`): how much, why, and the evidence."""

    rank: int
    waited_on_ns: int  # the others' waits for it where it arrived last (per waiter a union, summed)
    last_arrivals: int
    matched_collectives: int
    median_lateness_ns: int
    share_of_others_time: float
    cause: str  # a key of traceread.ranks.job.REASONS
    reason: str
    cause_basis: str  # lead | step
    stage: int | None
    lead_excess_ns: dict[str, int]  # per component: its lead's excess over its peers' median
    step_excess_ns: dict[str, int]
    attributed_wait_ns: int  # the others' waiting attributed to it (passed on along chains)
    others_waiting_ns: int
    attributed_share: float
    others_comm_bound_waiting_ns: int  # the others' comm-bound idle inside their waits for it
    others_comm_bound_ns: int
    evidence: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "waited_on_ns": self.waited_on_ns, "last_arrivals": self.last_arrivals,
                "matched_collectives": self.matched_collectives, "median_lateness_ns": self.median_lateness_ns,
                "share_of_others_time": self.share_of_others_time, "cause": self.cause, "reason": self.reason,
                "cause_basis": self.cause_basis, "stage": self.stage, "lead_excess_ns": dict(self.lead_excess_ns),
                "step_excess_ns": dict(self.step_excess_ns), "attributed_wait_ns": self.attributed_wait_ns,
                "others_waiting_ns": self.others_waiting_ns, "attributed_share": self.attributed_share,
                "others_comm_bound_waiting_ns": self.others_comm_bound_waiting_ns,
                "others_comm_bound_ns": self.others_comm_bound_ns, "evidence": list(self.evidence)}


@dataclass(frozen=True, eq=False)
class StageImbalance:
    """The slow pipeline stage (every rank of it computes longer per step), its figures and its fix."""

    stage: int
    ranks: tuple[int, ...]
    compute_per_step_ns: int  # the stage's median rank's compute per step
    others_compute_per_step_ns: int  # the other stages' median rank's
    excess: float
    attributed_wait_ns: int  # the other stages' waiting attributed to it
    others_waiting_ns: int
    attributed_share: float
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "ranks": list(self.ranks), "compute_per_step_ns": self.compute_per_step_ns,
                "others_compute_per_step_ns": self.others_compute_per_step_ns, "excess": self.excess,
                "attributed_wait_ns": self.attributed_wait_ns, "others_waiting_ns": self.others_waiting_ns,
                "attributed_share": self.attributed_share, "fix": self.fix}


@dataclass(frozen=True, eq=False)
class WaitingFor:
    """Whom the other ranks' waiting is for: ``kind`` ``rank`` (``rank``), ``stage`` (``stage``) or ``moving``
    (no single rank: ``step_culprits``, step -> the rank most waited for). For a rank or stage, the other
    ranks' largest idle class (``cls``: None without idle), its share of their time and how much of it is
    waiting for it (``class_waiting_ns`` None where no class was measured)."""

    kind: str
    rank: int | None = None
    stage: int | None = None
    ranks: tuple[int, ...] = ()
    cls: str | None = None
    class_share: float | None = None
    class_time_share: float | None = None
    class_waiting_ns: int | None = None
    step_culprits: dict[int, int] | None = None

    @property
    def who(self) -> int | None:
        """The rank or stage waited for (None when it moves)."""
        return self.rank if self.kind == "rank" else self.stage if self.kind == "stage" else None

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "moving":
            return {"kind": self.kind, "step_culprits": dict(self.step_culprits or {})}
        out: dict[str, Any] = {"kind": self.kind, self.kind: self.who, "ranks": list(self.ranks), "class": self.cls,
                               "class_share": self.class_share, "class_time_share": self.class_time_share}
        if self.class_waiting_ns is not None:
            out["class_waiting_ns"] = self.class_waiting_ns
        return out


@dataclass(frozen=True, eq=False)
class PipelineStages:
    """The pipeline stages read from the point-to-point transfers: how many, how they were found, the ranks
    of each (stage order)."""

    count: int
    evidence: str
    ranks: tuple[tuple[int, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "evidence": self.evidence, "ranks": [list(r) for r in self.ranks]}


@dataclass(frozen=True)
class StragglerSpeedup:
    """The straggler-free prediction's assumption: ``rank`` runs ``factor`` x faster (its peers' speed)."""

    rank: int
    factor: float
    assumption: str

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "factor": self.factor, "assumption": self.assumption}


@dataclass(frozen=True)
class StageSpeedup:
    """The balanced-stages prediction's assumption: every rank of ``stage`` runs ``factor`` x faster."""

    stage: int
    factor: float
    assumption: str

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "factor": self.factor, "assumption": self.assumption}


@dataclass(frozen=True)
class JobPrediction:
    """What the job would step at without its straggler / with balanced stages (``traceread.ranks.predict``;
    a figure is None where it could not be predicted), the method, the measured step, and the assumptions."""

    straggler_free_step_ns: int | None
    balanced_stages_step_ns: int | None
    method: str
    measured_step_ns: int | None
    straggler: StragglerSpeedup | None = None
    stage: StageSpeedup | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"straggler_free_step_ns": self.straggler_free_step_ns,
                               "balanced_stages_step_ns": self.balanced_stages_step_ns, "method": self.method,
                               "measured_step_ns": self.measured_step_ns}
        if self.straggler is not None:
            out["straggler"] = self.straggler.to_dict()
        if self.stage is not None:
            out["stage"] = self.stage.to_dict()
        return out


@dataclass(frozen=True)
class JobStepRow:
    """One step number of a job on aligned windows: the job's step (last end minus first start over its
    ranks), the same from raw timestamps, the slowest rank's own step and which rank, the ends' spread."""

    step: int
    job_step_ns: int
    unaligned_job_step_ns: int
    max_rank_step_ns: int
    slowest_rank: int
    end_spread_ns: int

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "job_step_ns": self.job_step_ns, "unaligned_job_step_ns": self.unaligned_job_step_ns,
                "max_rank_step_ns": self.max_rank_step_ns, "slowest_rank": self.slowest_rank,
                "end_spread_ns": self.end_spread_ns}


@dataclass(frozen=True, eq=False)
class JobStep:
    """The job's step time on aligned windows: medians over ``per_step`` (None without steps).
    ``ranked``: False when no rank had a step to place (its object then lists no max-rank or spread
    median)."""

    steps: int
    median_job_step_ns: int | None
    median_unaligned_job_step_ns: int | None
    median_max_rank_step_ns: int | None = None
    median_end_spread_ns: int | None = None
    per_step: tuple[JobStepRow, ...] = ()
    ranked: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": self.steps, "median_job_step_ns": self.median_job_step_ns,
                               "median_unaligned_job_step_ns": self.median_unaligned_job_step_ns}
        if self.ranked:
            out["median_max_rank_step_ns"] = self.median_max_rank_step_ns
            out["median_end_spread_ns"] = self.median_end_spread_ns
        out["per_step"] = [p.to_dict() for p in self.per_step]
        return out


@dataclass(frozen=True)
class RankWaits:
    """One rank's part in the job's matched collectives: how often it arrived last, the others' waits for it
    (direct, and attributed through chains), its stage, and its own mean wait."""

    last_arrivals: int
    waited_on_ns: int
    attributed_wait_ns: int
    stage: int | None
    share_of_others_time: float
    mean_wait_ns: int | None
    collectives_matched: int

    def to_dict(self) -> dict[str, Any]:
        return {"last_arrivals": self.last_arrivals, "waited_on_ns": self.waited_on_ns,
                "attributed_wait_ns": self.attributed_wait_ns, "stage": self.stage,
                "share_of_others_time": self.share_of_others_time, "mean_wait_ns": self.mean_wait_ns,
                "collectives_matched": self.collectives_matched}


@dataclass(frozen=True, eq=False)
class JobRank:
    """One rank of a job report: its trace, device and collectives, its waits (None when no collective was
    matched or the job was not judged) and its clock alignment (None when not judged)."""

    rank: int
    trace: str
    path: str
    device: int
    collectives: int
    waits: RankWaits | None = None
    alignment: RankAlignment | None = None

    @property
    def stage(self) -> int | None:
        return self.waits.stage if self.waits is not None else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "trace": self.trace, "path": self.path, "device": self.device,
                               "collectives": self.collectives}
        if self.waits is not None:
            out.update(self.waits.to_dict())
        if self.alignment is not None:
            out.update(self.alignment.to_dict())
        return out
