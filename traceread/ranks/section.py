"""The job section of an ``analyze`` report: how the inputs group into jobs, and each job's alignment
and stragglers. ``job_section(traces, summary_of, cfg, rank_pattern) -> JobSection | None`` (None for
a single rank: there is no job to speak of). The analysis layer calls it with a function that gives a
rank's :class:`~traceread.ranks.summary.RankSummary` from the tables it computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traceread.config import Thresholds
from traceread.ranks.grouping import JobGroup, group_jobs
from traceread.ranks.identity import RankIdentity, identify
from traceread.ranks.job import JobReport, analyze_job
from traceread.ranks.summary import RankSummary


@dataclass(frozen=True, eq=False)
class JobSection:
    """``groups`` in report order; ``reports[i]`` is the JobReport of ``groups[i]`` (None: one rank)."""

    groups: tuple[JobGroup, ...]
    reports: tuple[JobReport | None, ...]
    summary: str

    @property
    def separate(self) -> bool:
        return len(self.groups) > 1

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "separate": self.separate,
                "groups": [{**g.to_dict(), "report": r.to_dict() if r is not None else None}
                           for g, r in zip(self.groups, self.reports, strict=True)]}


def identities(traces: list[Any] | tuple[Any, ...], rank_pattern: str | None = None) -> list[RankIdentity]:
    return [i for t in traces for i in identify(t, rank_pattern=rank_pattern)]


def group_of_units(groups: list[JobGroup] | tuple[JobGroup, ...], paths: list[str]) -> dict[tuple[int, int], int]:
    """(trace index, frame rank) -> group index, for tables keyed by the analysis' units."""
    index = {p: i for i, p in enumerate(paths)}
    out = {}
    for gi, g in enumerate(groups):
        for m in g.members:
            if m.path in index:
                out[(index[m.path], m.frame_rank)] = gi
    return out


def job_section(traces: list[Any] | tuple[Any, ...], summary_of: Callable[[RankIdentity], RankSummary],
                cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen
                rank_pattern: str | None = None,
                groups: list[JobGroup] | None = None) -> JobSection | None:
    """Group the inputs' ranks and analyse every group holding two ranks or more.

    ``summary_of(identity)`` is that rank's summary (:func:`traceread.ranks.summary.summarize` over
    the analysed tables of its trace).
    """
    ids = identities(traces, rank_pattern)
    if len(ids) < 2:
        return None
    groups = groups if groups is not None else group_jobs(ids, rank_pattern, cfg)
    reports: list[JobReport | None] = []
    for g in groups:
        if len(g.members) < 2:
            reports.append(None)
            continue
        reports.append(analyze_job([summary_of(m) for m in g.members], cfg, group=g))
    if len(groups) == 1:
        g = groups[0]
        summary = (f"the input{'s' if len(traces) > 1 else ''} hold{'' if len(traces) > 1 else 's'} "
                   f"{len(ids)} ranks of one job ({g.rule} rule), world size {g.world_size or 'unknown'}")
    else:
        listed = "; ".join(f"{g.name}: {len(g.members)} trace(s)" for g in groups[:6])
        more = f"; and {len(groups) - 6} more" if len(groups) > 6 else ""
        summary = (f"the inputs are {len(groups)} separate jobs or captures, not one job: each is grouped and "
                   f"aligned on its own, never blended ({listed}{more})")
    return JobSection(tuple(groups), tuple(reports), summary)
