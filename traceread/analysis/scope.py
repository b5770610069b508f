"""Which units a verdict speaks for: one trace, one job, or several inputs together.

Every verdict comes from one rule (:func:`traceread.attribution.table_verdict`) applied to the
attribution rows of the units it covers, so two outputs give the same verdict exactly when they
cover the same units. This module names those units for the reader:

* ``trace``: one input file (an nsys export may hold several ranks; their rank/GPU pairs are summed);
* ``job``: several files grouped into one job (``traceread.ranks``: its ranks, and repeated
  captures of it, summed), the scope of a ``scan`` job row and of a ``diff`` side that is a directory;
* ``inputs``: several files of several jobs (or none), summed as one; ``scan`` gives each job's own;
* ``rank``: one rank/GPU pair (the per-rank rows of a report, ``attribution`` rows).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceread.analysis import Analysis

TRACE, JOB, INPUTS, RANK = "trace", "job", "inputs", "rank"
SCOPES = (TRACE, JOB, INPUTS, RANK)


@dataclass(frozen=True)
class VerdictScope:
    """What a verdict covers: ``kind`` (one of ``SCOPES``), a ``name`` (file or job name), and how
    many ``traces`` and rank/GPU ``units`` were summed for it."""

    kind: str
    name: str
    traces: int
    units: int
    jobs: int = 1

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "name": self.name, "traces": self.traces, "units": self.units, "jobs": self.jobs}

    def text(self, quote: Callable[[str], str] = lambda s: f"`{s}`") -> str:
        """``for the trace `x` (1 rank/GPU pair)``: the phrase the reports put before a verdict
        (``quote`` formats the name; the rest is plain text)."""
        pairs = f"{self.units} rank/GPU pair" + ("s summed" if self.units != 1 else "")
        if self.kind == TRACE:
            return f"for the trace {quote(self.name)} ({pairs})"
        if self.kind == JOB:
            return f"for the job {quote(self.name)} ({_count(self.traces, 'trace')}, {pairs})"
        if self.kind == RANK:
            return f"for {self.name}"
        return (f"over all {self.traces} inputs together ({self.jobs} job{'' if self.jobs == 1 else 's'} or "
                f"capture{'' if self.jobs == 1 else 's'}, {pairs}; "
                "traceread scan gives each its own)")


def analysis_scope(a: Analysis) -> VerdictScope:
    """The scope of ``a``'s verdict (module doc): its inputs, grouped as its job section groups them."""
    units = len(a.attribution)
    if len(a.traces) == 1:
        return VerdictScope(TRACE, a.traces[0].name, 1, units)
    groups = tuple(a.job.groups) if a.job is not None else ()
    grouped = {m.path for g in groups for m in g.members}
    # One capture of one job is what a scan job row covers; two captures (or jobs) are summed here
    # but reported apart by scan.
    if len(groups) == 1 and all(t.path in grouped for t in a.traces):
        return VerdictScope(JOB, groups[0].name, len(a.traces), units)
    return VerdictScope(INPUTS, "", len(a.traces), units, jobs=max(len(groups), 1))


def side_scope(paths: tuple[str, ...] | list[str], units: int, name: str = "") -> VerdictScope:
    """The scope of a ``diff`` side: one trace file, else a job (one job's directory or scan job)."""
    if len(paths) == 1:
        return VerdictScope(TRACE, os.path.basename(paths[0]), 1, units)
    return VerdictScope(JOB, name or (os.path.basename(os.path.commonpath(list(paths))) if paths else ""),
                        len(paths), units)


def _count(n: int, noun: str) -> str:
    # render.fmt.plural's rule; this module sits below the renderers (tests/test_layers.py)
    return f"{n} {noun}{'' if n == 1 else 's'}"
