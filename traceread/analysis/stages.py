"""The analysis of one job, declared as its stages in order (:data:`STAGES`).

Each stage is a function of what the stages before it made (a :class:`Work`) and the thresholds, and
returns one typed result, which :func:`walk` keeps under the stage's name for the stages after it. The
list is the analysis' whole plan, read top to bottom:

steps -> groups (ranks into jobs) -> classified (gaps, classes, attribution, tables of each trace; a recurring
gap one class across the files of a job) -> tables (joined over the traces) -> verdict -> mfu -> removal ->
launch -> analysis -> whatif -> job (alignment, stragglers; the what-if and the notes added).

The runner (:func:`traceread.runner.analyze`) walks the same list and adds what is not the analysis' own
business between the stages: it starts the what-if replay once the steps are found, gives the engine's
selections and freed heap pages back once the rules and tables are done (after ``launch``), and its replay's
result is the ``whatif`` stage's (:class:`~traceread.analysis.Hooks`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceread.analysis import Hooks
from traceread.analysis import pipeline as pipe
from traceread.config import Thresholds
from traceread.note import STRAGGLER_COMM_BOUND, WAITING_FOR, Note
from traceread.trace import Trace
from traceread.vocabulary import NO_GPU_ACTIVITY

if TYPE_CHECKING:
    from traceread.analysis import Analysis, Failure, Removal
    from traceread.metrics.mfu import MfuResult
    from traceread.metrics.workload import Workload
    from traceread.whatif import WhatIf


@dataclass(frozen=True)
class Options:
    """What the caller asked of the analysis besides the traces and thresholds."""

    workload: Workload | None = None
    top_gaps: int = 10
    warmup_steps: int | None = None
    step_range: str | None = None
    failures: tuple[Failure, ...] = ()
    rank_pattern: str | None = None


@dataclass(frozen=True)
class Tables:
    """The per-trace tables joined over every input (each with its ``trace`` column)."""

    steps: pd.DataFrame
    gaps: pd.DataFrame
    attribution: pd.DataFrame
    kernels: pd.DataFrame
    collectives: pd.DataFrame


@dataclass(frozen=True)
class Verdict:
    """The dominant cause over every unit and the runner-up; ``refusal`` says why no GPU cause can be named."""

    cause: str
    share: float
    second: str | None
    second_share: float
    refusal: str = ""


@dataclass(frozen=True)
class Mfu:
    """The MFU result, or None and ``hint``: why not, which flags add it."""

    result: MfuResult | None
    hint: str


@dataclass
class Work:
    """One analysis' inputs and what its stages have made so far (a field per stage, None until it ran).
    ``notes`` and ``unavailable`` gather, in report order, what each stage had to say."""

    traces: tuple[Trace, ...]
    cfg: Thresholds
    options: Options
    notes: list[Any] = field(default_factory=list)  # sentences, or Notes the renderers word
    unavailable: list[str] = field(default_factory=list)
    steps: list[pipe.PerTrace] | None = None
    classified: list[pipe.PerTrace] | None = None
    tables: Tables | None = None
    verdict: Verdict | None = None
    mfu: Mfu | None = None
    groups: list[Any] | None = None
    removal: Removal | None = None
    launch: pipe.LaunchStats | None = None
    analysis: Analysis | None = None
    whatif: tuple[WhatIf | None, tuple[str, ...]] | None = None
    job: Analysis | None = None


@dataclass(frozen=True)
class Stage:
    """One step of the analysis: ``run(work, hooks)`` returns the result kept as ``work.<name>``."""

    name: str
    run: Callable[[Work, Hooks], Any]


def _steps(work: Work, hooks: Hooks) -> list[pipe.PerTrace]:
    """Each trace's caveats and its steps as found (the what-if replay starts from these); what reads no
    steps is handed to ``hooks.beside`` first."""
    o = work.options
    return [pipe.found_steps(i, t, work.cfg, o.warmup_steps, o.step_range, hooks.between, hooks.beside)
            for i, t in enumerate(work.traces)]


def _classified(work: Work, hooks: Hooks) -> list[pipe.PerTrace]:
    """Each trace's gaps and their classes, its attribution, kernel and collective tables and sanity notes."""
    per = work.steps or []
    for i, (t, p) in enumerate(zip(work.traces, per, strict=True)):
        pipe.finish_one(i, t, work.cfg, p, hooks.classified, hooks.between, hooks.beside)
        work.notes.extend(p.notes)
        work.unavailable.extend(p.unavailable)
    # a recurring gap is one class on every rank of a job, whose files were classified apart
    pipe.pool_jobs(list(work.traces), per, work.groups, work.cfg, work.unavailable)
    return per


def _tables(work: Work, hooks: Hooks) -> Tables:
    from traceread.rules.evidence import aligned

    per = work.classified or []
    return Tables(
        steps=pipe.concat([p.steps for p in per], pipe.STEP_OUT_COLUMNS),
        gaps=pipe.concat(aligned([p.gaps for p in per]), pipe.GAP_MIN_COLUMNS),
        attribution=pipe.concat([p.attribution for p in per], pipe.ATTR_COLUMNS),
        kernels=pipe.concat([p.kernels for p in per], None),
        collectives=pipe.concat([p.collectives for p in per], None))


def _verdict(work: Work, hooks: Hooks) -> Verdict:
    """One verdict function for one trace or several (summed over every unit), scan jobs and diff sides."""
    from traceread.attribution import table_verdict

    assert work.tables is not None
    from traceread.frame.sanity import has_kernels

    run = table_verdict(work.tables.attribution, work.cfg)
    if work.tables.attribution.empty and not any(has_kernels(t) for t in work.traces):
        # Nothing ran on a GPU (a CPU-only capture, or the GPU activities were not recorded), or only copies
        # and memsets did (no compute to be idle between): no GPU cause can be named; the reason is in
        # ``unavailable``.
        from traceread.frame.sanity import missing_gpu_activity
        from traceread.metrics.copies import data_movement_only

        reasons = [(t.meta.path.rsplit("/", 1)[-1], data_movement_only(t) or missing_gpu_activity(t))
                   for t in work.traces]
        refusal = reasons[0][1] if len(reasons) == 1 else "; ".join(f"{n}: {r}" for n, r in reasons)
        return Verdict(NO_GPU_ACTIVITY, 0.0, run.second, run.second_share, refusal)
    return Verdict(run.cause, run.share, run.second, run.second_share)


def _mfu(work: Work, hooks: Hooks) -> Mfu:
    assert work.tables is not None
    return Mfu(*pipe.run_mfu(work.options.workload, list(work.traces), work.tables.steps, work.cfg,
                             work.unavailable))


def _groups(work: Work, hooks: Hooks) -> list[Any] | None:
    """The inputs' ranks grouped into jobs/captures, or None for a single rank."""
    from traceread.analysis import _groups as group

    return pipe.guarded("job grouping", lambda: group(work.traces, work.cfg, work.options.rank_pattern),
                        work.unavailable)


def _removal(work: Work, hooks: Hooks) -> Removal | None:
    from traceread.analysis import _removal as removal
    from traceread.analysis import _step_groups

    assert work.tables is not None and work.verdict is not None and work.mfu is not None
    steps = work.tables.steps
    return removal(steps, work.verdict.cause, work.mfu.result, _step_groups(steps, work.groups, work.traces))


def _launch(work: Work, hooks: Hooks) -> pipe.LaunchStats | None:
    assert work.tables is not None and work.verdict is not None
    v = work.verdict
    return pipe.launch_stats(list(work.traces), work.tables.gaps, v.cause, v.second, v.second_share, work.cfg,
                             work.unavailable)


def _analysis(work: Work, hooks: Hooks) -> Analysis:
    """The tables and figures as an :class:`~traceread.analysis.Analysis` (without the what-if and job yet)."""
    from traceread.analysis import Analysis, _dominant_evidence, _summarize

    assert work.tables is not None and work.verdict is not None and work.mfu is not None
    per, tb, v = work.classified or [], work.tables, work.verdict
    summaries = tuple(_summarize(i, t, p.step_source) for i, (t, p) in enumerate(zip(work.traces, per, strict=True)))
    return Analysis(
        traces=summaries, steps=tb.steps, gaps=tb.gaps, attribution=tb.attribution,
        dominant_cause=v.cause, dominant_cost_share=v.share,
        second_cause=v.second, second_cost_share=v.second_share, removal=work.removal,
        mfu=work.mfu.result, mfu_hint=work.mfu.hint, kernels=tb.kernels, collectives=tb.collectives,
        launch_stats=work.launch,
        notes=tuple(dict.fromkeys(work.notes)), unavailable=tuple(dict.fromkeys(work.unavailable)),
        cfg=work.cfg, top_gaps=work.options.top_gaps, failures=tuple(work.options.failures),
        inputs=tuple(work.traces), dominant_evidence=_dominant_evidence(per, tb.gaps, v.cause), refusal=v.refusal,
        tables=tuple(p.compact_tables for p in per),
    )


def _whatif(work: Work, hooks: Hooks) -> tuple[WhatIf | None, tuple[str, ...]]:
    """What each fix would buy and the replay's unavailable lines: the runner's replay (None without one)."""
    return hooks.replayed()


def _job(work: Work, hooks: Hooks) -> Analysis:
    """The analysis with its what-if and, for several ranks, the job's section (alignment, stragglers) and
    its notes; the dominant cause's evidence is a stage or a rank when most of it is waiting for one."""
    from traceread.analysis import _job_section, _waiting_evidence

    assert work.analysis is not None and work.whatif is not None
    whatif, failed = work.whatif
    result = dataclasses.replace(work.analysis, whatif=whatif,
                                 unavailable=tuple(dict.fromkeys(work.analysis.unavailable + failed)))
    if work.groups is None:
        return result
    groups, cfg, notes = work.groups, work.cfg, work.notes
    unavailable = list(result.unavailable)
    section = pipe.guarded("job section (alignment, stragglers)",
                           lambda: _job_section(result, cfg, work.options.rank_pattern, groups, hooks.between),
                           unavailable)
    for rep in (r for r in (section.reports if section is not None else ()) if r is not None):
        for s in rep.stragglers:
            if s.others_comm_bound_waiting_ns > 0:
                notes.append(Note.of(STRAGGLER_COMM_BOUND, job=rep.name, rank=s.rank, cause=s.cause,
                                     waiting_ns=s.others_comm_bound_waiting_ns))
        wf = rep.waiting_for
        if wf is not None and wf.kind in ("rank", "stage") and wf.cls and wf.class_share:
            notes.append(Note.of(WAITING_FOR, idle_class=wf.cls, share=wf.class_share, job=rep.name,
                                 waits_on=wf.kind, who=wf.who))
    return dataclasses.replace(result, job=section, notes=tuple(dict.fromkeys(notes)),
                               unavailable=tuple(dict.fromkeys(unavailable)),
                               dominant_evidence=_waiting_evidence(section, result.dominant_cause)
                               or result.dominant_evidence)


# The analysis, in order. The runner walks this list (traceread.runner.run) and names the stages it acts after.
STAGES: tuple[Stage, ...] = (
    Stage("steps", _steps),
    Stage("groups", _groups),
    Stage("classified", _classified),
    Stage("tables", _tables),
    Stage("verdict", _verdict),
    Stage("mfu", _mfu),
    Stage("removal", _removal),
    Stage("launch", _launch),
    Stage("analysis", _analysis),
    Stage("whatif", _whatif),
    Stage("job", _job),
)
NAMES = tuple(s.name for s in STAGES)


def walk(work: Work, hooks: Hooks, stages: tuple[Stage, ...] = STAGES,
         after: dict[str, Callable[[Work], None]] | None = None) -> Work:
    """Run ``stages`` in order on ``work``, each result kept under its stage's name; ``after[name](work)`` is
    called once that stage is done (the runner's business between two stages)."""
    for stage in stages:
        setattr(work, stage.name, stage.run(work, hooks))
        if after and stage.name in after:
            after[stage.name](work)
    return work
