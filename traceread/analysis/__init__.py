"""The diagnosis: steps -> gaps -> rules -> attribution -> kernels/collectives/MFU -> ranks -> what-if.

The stages are declared in order in :data:`traceread.analysis.stages.STAGES`; each reads loaded traces and
what the stages before it made, and the last returns plain data (an :class:`Analysis`: a frozen dataclass of
DataFrames, typed results and strings); none does I/O. :func:`traceread.runner.analyze` walks them (with the
what-if replay beside them) and is the entry point; :func:`finish` walks them without a runner. Every renderer (Markdown, JSON, the
timeline picture, Perfetto) reads an :class:`Analysis` and nothing else. Whatever could not be
computed is listed in ``Analysis.unavailable`` with the reason, never silently skipped.

Several traces are analysed together as one job: each trace goes through the pipeline on its own
and the tables are concatenated with a ``trace`` column (the input's index), so two files that both
call themselves rank 0 stay apart. A *unit* is one (trace, rank, device).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceread.analysis import pipeline as pipe
from traceread.analysis.findings import Findings
from traceread.analysis.pipeline import UNIT, LaunchStats
from traceread.config import Thresholds
from traceread.note import Note
from traceread.trace import EpochWindow, Trace
from traceread.vocabulary import BUSY_PARTS, GAP_CLASSES, PARTS, part_col
from traceread.vocabulary import VERDICTS as CAUSES

if TYPE_CHECKING:
    from traceread.metrics.compact import CompactTables
    from traceread.metrics.mfu import MfuResult
    from traceread.metrics.workload import Workload
    from traceread.ranks.identity import RankIdentity
    from traceread.ranks.section import JobSection
    from traceread.ranks.summary import RankSummary
    from traceread.whatif import WhatIf

SCHEMA_VERSION = "2.1"
__all__ = ["finish", "Hooks", "Analysis", "TraceSummary", "Failure", "GAP_CLASSES", "BUSY_PARTS", "PARTS", "CAUSES",
           "part_col", "SCHEMA_VERSION", "rank_summary", "Removal", "LaunchStats"]


@dataclass(frozen=True)
class TraceSummary(EpochWindow):
    """One input as the report header and JSON ``traces`` show it (no host or user names)."""

    index: int
    path: str  # as given on the command line
    format: str
    generation: str
    time_base: str
    devices: tuple[dict[str, Any], ...]  # DeviceInfo.to_dict() of the devices the trace used or listed
    ranks: tuple[int, ...]
    world_size: int | None
    start_ns: int  # first event: Kineto reports show "ms from the trace's first event" from here
    end_ns: int
    step_source: str
    truncated: bool = False
    epoch_offset_ns: int | None = None  # add to any start_ns/end_ns of this trace for Unix-epoch ns

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class Removal:
    """The upper bound of removing the dominant cause's idle time (see ``_removal``): median step time
    with and without it, and MFU before and at most after when MFU is known."""

    cause: str
    step_time_ns: int
    step_time_without_ns: int
    speedup: float | None  # None when nothing would be left of the step
    mfu: float | None = None
    mfu_without: float | None = None


@dataclass(frozen=True)
class Failure:
    """An input that could not be read: its path and the one-line problem."""

    path: str
    problem: str


@dataclass(frozen=True, eq=False)
class Analysis:
    """Everything the renderers show. Times are int64 ns in each trace's own time base.

    * ``steps``: one row per unit and step: ``trace, rank, device, step, start_ns, end_ns, busy_ns,
      idle_ns, warmup, outlier`` plus ``<class>_ns`` idle by gap class (``part_col``).
    * ``gaps``: every classified compute-idle gap (the engine's columns, ``class``, ``evidence_kind``,
      ``trace``) with its evidence as data (``evidence.*`` columns): the sentences are made for the rows
      shown or written by ``rules.evidence`` (``with_evidence``, ``evidence_text``).
    * ``attribution``: one row per unit: ``trace, rank, device, step_ns`` and ``<part>_ns`` for every
      part in ``PARTS``; the parts sum to ``step_ns``.
    * ``kernels`` / ``collectives``: the scoreboard tables with a ``trace`` column.
    * ``mfu``: a ``traceread.metrics.mfu.MfuResult`` or None, with ``mfu_hint`` saying why not / which
      flags add it.
    * ``removal``: the upper bound of removing the dominant cause (:class:`Removal`), or None.
    * ``launch_stats``: :class:`~traceread.analysis.pipeline.LaunchStats` when launch-bound matters, or None.
    * ``job``: a ``traceread.ranks.section.JobSection`` when the inputs hold two ranks or more: how
      they group into jobs/captures (with evidence), and each job's clock alignment and stragglers
      (typed: ``traceread.ranks.results``).
    * ``tables``: per input (in order), the first rows of ``traceread kernels``' op, module, range, copy and
      host API tables (``traceread.metrics.compact.CompactTables``), None where they could not be made.
    * ``notes``: method notes, each a sentence or a ``traceread.note.Note`` the renderers word.
    * ``findings`` (property): what the reports show beyond these tables, made when asked
      (``traceread.analysis.findings``: the largest gaps with their evidence, each unit's own verdict).
    """

    traces: tuple[TraceSummary, ...]
    steps: pd.DataFrame
    gaps: pd.DataFrame
    attribution: pd.DataFrame
    dominant_cause: str
    dominant_cost_share: float
    second_cause: str | None
    second_cost_share: float
    removal: Removal | None
    mfu: MfuResult | None
    mfu_hint: str
    kernels: pd.DataFrame
    collectives: pd.DataFrame
    launch_stats: LaunchStats | None
    notes: tuple[str | Note, ...]  # a Note is worded by the renderers (traceread.render.notes)
    unavailable: tuple[str, ...]
    cfg: Thresholds
    top_gaps: int = 10
    failures: tuple[Failure, ...] = ()
    dominant_evidence: str = ""  # the named evidence holding most of the dominant cause (attribution)
    # no-gpu-activity: what is missing, per trace, from evidence in the file (sanity.missing_gpu_activity)
    refusal: str = ""
    inputs: tuple[Trace, ...] = field(default=(), repr=False)  # for timeline renderers only
    job: JobSection | None = None  # several ranks: how they group into jobs, alignment, stragglers
    whatif: WhatIf | None = None  # what each fix would buy (the dependency replay), None when it could not run
    tables: tuple[CompactTables | None, ...] = ()  # per input: the report's compact part of the kernels tables

    @property
    def units(self) -> pd.DataFrame:
        return self.attribution[UNIT]

    @property
    def findings(self) -> Findings:
        """What the reports show beyond the tables (largest gaps with evidence, per-unit verdicts), made when asked."""
        return Findings(self)

    def unit_label(self, trace: int, rank: int, device: int) -> str:
        """``rank 0 / GPU 1``; prefixed with the file when two inputs share a rank number."""
        label = f"rank {rank} / GPU {device}"
        ranks = [r for t in self.traces for r in t.ranks]
        if len(ranks) != len(set(ranks)) and len(self.traces) > 1:
            label = f"{self.traces[trace].name}: {label}"
        return label

    def shares(self) -> dict[str, float]:
        """Each part's share of total step time over every unit (sums to 1 when there are steps)."""
        if self.attribution.empty:
            return {p: 0.0 for p in PARTS}
        total = float(self.attribution["step_ns"].sum()) or 1.0
        return {p: float(self.attribution[part_col(p)].sum()) / total for p in PARTS}

    def steady_steps(self) -> pd.DataFrame:
        """Steps that count for medians: neither warmup nor outlier (all steps if none are left)."""
        s = self.steps
        keep = s[~(s["warmup"] | s["outlier"])]
        return keep if len(keep) else s


def _nothing() -> None:
    pass


def _no_replay() -> tuple[Any, tuple[str, ...]]:
    return None, ()


@dataclass(frozen=True)
class Hooks:
    """What the runner (:mod:`traceread.runner`) gives the stages: where its replay and its heap come in.
    Each hook changes nothing the analysis computes; their defaults do nothing."""

    # One input's steps and classified gaps, as soon as the rules are done with them (pipeline.finish_one)
    classified: Callable[[pd.DataFrame, pd.DataFrame], None] | None = None
    # The what-if and its unavailable lines (waits for the replay): the ``whatif`` stage's result
    replayed: Callable[[], tuple[Any, tuple[str, ...]]] = _no_replay
    between: Callable[[], None] = _nothing  # called between phases (and between a job's ranks)
    # Work that needs neither the gaps nor the rules (a trace's tables), given as soon as it could start: the
    # hook returns what gives its result where it is read (the runner runs it on a thread meanwhile)
    beside: Callable[[Callable[[], Any]], Callable[[], Any]] = pipe.when_read


def finish(traces: list[Trace] | tuple[Trace, ...], per: list[pipe.PerTrace], workload: Workload | None,
           cfg: Thresholds, top_gaps: int, failures: tuple[Failure, ...] | list[Failure], rank_pattern: str | None,
           hooks: Hooks = Hooks()) -> Analysis:  # noqa: B008 - frozen, never mutated
    """The analysis of ``traces`` once their steps are found (``per``: :func:`traceread.analysis.pipeline.found_steps`):
    the stages after ``steps`` (:data:`traceread.analysis.stages.STAGES`), walked without a runner. The what-if is
    the runner's (:func:`traceread.runner.analyze`): read from ``hooks.replayed``."""
    from traceread.analysis import stages

    work = stages.Work(tuple(traces), cfg, stages.Options(workload, top_gaps, failures=tuple(failures),
                                                          rank_pattern=rank_pattern), steps=per)
    job = stages.walk(work, hooks, stages.STAGES[1:]).job
    assert job is not None
    return job


def _dominant_evidence(per: list[pipe.PerTrace], gaps: pd.DataFrame, dominant: str) -> str:
    """The dominant cause's named evidence; one trace's attribution already found it for its own cause."""
    from traceread.attribution import dominant_evidence

    if len(per) == 1 and per[0].dominant is not None and per[0].dominant[0] == dominant:
        return per[0].dominant[1]
    return dominant_evidence(gaps, dominant)


def _waiting_evidence(section: JobSection | None, dominant: str) -> str:
    """``stage-imbalance`` / ``straggler`` when most of the dominant class's time on the other ranks of a job is
    waiting for one stage / one rank (its first fix is that stage's layers or that rank, not a schedule)."""
    for rep in (r for r in (section.reports if section is not None else ()) if r is not None):
        wf = rep.waiting_for
        if wf is not None and wf.cls == dominant and (wf.class_share or 0.0) >= 0.5:
            if wf.kind == "stage" and dominant == "pipeline-bubble":
                return "stage-imbalance"
            if wf.kind == "rank" and dominant in ("pipeline-bubble", "comm-bound"):
                return "straggler"
    return ""


def _groups(traces: Any, cfg: Thresholds, rank_pattern: str | None) -> list[Any] | None:
    """The inputs' ranks grouped into jobs/captures, or None for a single rank."""
    from traceread.ranks import group_jobs
    from traceread.ranks.identity import rank_count
    from traceread.ranks.section import identities

    if sum(rank_count(t) for t in traces) < 2:  # one rank: nothing to group (its identity is not read)
        return None
    ids = identities(traces, rank_pattern)
    return group_jobs(ids, rank_pattern, cfg) if len(ids) > 1 else None


def _job_section(result: Analysis, cfg: Thresholds, rank_pattern: str | None, groups: list[Any],
                 between: Callable[[], None] = _nothing) -> JobSection | None:
    """The job's section; ``between`` is called after each rank's digest (before the next rank's)."""
    from traceread.ranks.section import job_section

    def summary(identity: RankIdentity) -> RankSummary:
        out = rank_summary(result, identity, between)
        between()  # a rank's selections and unions go back before the next rank's
        return out

    return job_section(result.inputs, summary, cfg, rank_pattern, groups)


def rank_summary(result: Analysis, identity: RankIdentity, between: Callable[[], None] = _nothing) -> RankSummary:
    """``identity``'s rank digest (:func:`traceread.ranks.summarize`) from the analysis of its trace (``between``:
    as the what-if's model build calls it, when the rank is replayed here)."""
    from traceread.ranks.summary import GAP_COLUMNS, summarize

    index = next((t.index for t in result.traces if t.path == identity.path), None)
    if index is None:
        raise ValueError(f"{identity.path}: not among the analysed traces")
    steps, gaps = result.steps, result.gaps
    steps = steps[steps["trace"] == index] if len(steps) else steps
    gaps = _trace_rows(gaps, index, (*GAP_COLUMNS, "rank"))
    # The analysis' replay already ran each rank's own steps (its comm-bound replay): read them off it.
    own = getattr(result.whatif, "own_steps", {}).get((index, identity.frame_rank))
    summary = summarize(result.inputs[index], identity, steps, gaps, result.traces[index].step_source,
                        own if own is not None else _own_steps(result.inputs[index], steps, result.cfg,
                                                               identity.frame_rank, between))
    return summary


def _trace_rows(frame: pd.DataFrame, index: int, columns: tuple[str, ...]) -> pd.DataFrame:
    """The rows of input ``index``: ``frame`` itself when every row is (one input), else only ``columns`` of
    them (a boolean selection copies every column: the gaps' evidence too, a sentence per gap)."""
    if not len(frame):
        return frame
    hit = (frame["trace"] == index).to_numpy()
    return frame if hit.all() else frame.loc[hit, [c for c in columns if c in frame.columns]]


def _own_steps(trace: Trace, steps: pd.DataFrame, cfg: Thresholds, rank: int,
               between: Callable[[], None] = _nothing) -> np.ndarray | None:
    """The rank's own step per step row in the what-if replay (communication free), for the job's
    straggler-free prediction; None when the replay cannot run (the prediction is then left out)."""
    if steps.empty:
        return None
    from traceread.whatif.straggler import free_comm_lengths

    try:
        return free_comm_lengths(trace, steps, cfg, rank, between)
    except Exception:  # noqa: BLE001 - an optional figure: the job report says nothing rather than fail
        return None


def _step_groups(steps: pd.DataFrame, groups: list[Any] | None, traces: Any) -> np.ndarray | None:
    """Per step row, the index of its job group (None when there is at most one group)."""
    if not groups or len(groups) < 2 or steps.empty:
        return None
    from traceread.ranks.section import group_of_units

    of = group_of_units(groups, [t.meta.path for t in traces])
    keys = zip(steps["trace"].to_numpy().tolist(), steps["rank"].to_numpy().tolist(), strict=True)
    return np.array([of.get(k, -1) for k in keys], dtype=np.int64)


def _removal(steps: pd.DataFrame, cause: str, mfu: MfuResult | None,
             group: np.ndarray | None = None) -> Removal | None:
    """Upper bound of removing ``cause``'s idle time: median step time with and without it.

    Per steady step, step time minus that class's idle (nothing else moves closer: an upper
    bound). MFU scales inversely with step time. None when the cause is not an idle class.
    """
    if cause not in GAP_CLASSES or steps.empty:
        return None
    keep = steps[~(steps["warmup"] | steps["outlier"])]
    keep = keep if len(keep) else steps
    # The job's step is its slowest device's step: the max over every rank/GPU of the same step
    # number within one job (``group``: separate jobs/captures are never maxed together).
    step_ns = (keep["end_ns"] - keep["start_ns"]).to_numpy()
    cost = keep[part_col(cause)].to_numpy()
    g = group[keep.index.to_numpy()] if group is not None else np.zeros(len(keep), dtype=np.int64)
    frame = pd.DataFrame({"group": g, "step": keep["step"].to_numpy(), "before": step_ns, "after": step_ns - cost})
    per_step = frame.groupby(["group", "step"], sort=True)[["before", "after"]].max()
    before = int(np.median(per_step["before"].to_numpy()))
    after = int(np.median(per_step["after"].to_numpy()))
    speedup = (before / after) if after > 0 else None
    if mfu is None or after <= 0:
        return Removal(cause, before, after, speedup)
    return Removal(cause, before, after, speedup, mfu=float(mfu.mfu), mfu_without=float(mfu.mfu) * before / after)


def _summarize(index: int, trace: Trace, step_source: str) -> TraceSummary:
    """The header facts of one input."""
    ev = trace.events
    used = [d.to_dict() for d in trace.meta.devices if d.used] or [d.to_dict() for d in trace.meta.devices]
    ranks = sorted({int(r) for r in ev["rank"].unique()}) if len(ev) else [r.rank for r in trace.meta.ranks]
    return TraceSummary(
        index=index, path=trace.meta.path, format=trace.meta.format, generation=trace.meta.generation,
        time_base=trace.meta.time_base, devices=tuple(used), ranks=tuple(ranks),
        world_size=trace.meta.world_size,
        start_ns=int(ev["start_ns"].min()) if len(ev) else 0,
        end_ns=int(ev["end_ns"].max()) if len(ev) else 0,
        step_source=step_source, truncated=bool(trace.meta.truncated),
        epoch_offset_ns=trace.meta.epoch_offset_if_epoch,
    )


def summarize_trace(index: int, trace: Trace, step_source: str) -> TraceSummary:
    """The header facts of one input (what the JSON ``traces`` entries show)."""
    return _summarize(index, trace, step_source)
