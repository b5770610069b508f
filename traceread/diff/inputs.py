"""What a side of ``traceread diff`` is on disk: a trace file, or a directory of one job's traces.

A directory is grouped as ``scan`` groups it (:func:`traceread.ranks.group_jobs`): the ranks of one
capture form the job, several captures of the same job (repeated runs) pool their steps, and a
directory holding several different jobs is a usage error that lists them. Two ``scan`` output
directories are diffed job by job (:mod:`traceread.diff.scan_sides`); a scan output against
anything else is a usage error.
"""

from __future__ import annotations

import os

from traceread.errors import UsageError
from traceread.loaders import left_out_text, trace_files
from traceread.runner import load
from traceread.trace import Trace


def load_side(path: str, step_range: str | None = None,
              left_out: list[tuple[str, str]] | None = None) -> list[list[Trace]]:
    """The captures of one side (each a list of traces); raises TraceReadError / UsageError. What a
    directory held but could not be read goes to ``left_out`` (``loaders.trace_files``)."""
    if not os.path.isdir(path):
        return [[load(path, progress=True, step_range=step_range)]]
    from traceread.diff.scan_sides import is_scan_output

    if is_scan_output(path):
        raise UsageError(f"{path}: a `traceread scan` output directory; scan outputs are diffed job by job "
                         "against another scan output only")
    from traceread.ranks import group_jobs, identify

    skipped: list[tuple[str, str]] = []
    files = trace_files(path, skipped)
    if left_out is not None:
        left_out += skipped
    if not files:
        why = f" ({len(skipped)} left out: {left_out_text(skipped)})" if skipped else ""
        raise UsageError(f"{path}: no trace files in this directory{why}")
    traces = {f: load(f, progress=True, step_range=step_range) for f in files}
    identities = [i for f, t in traces.items() for i in identify(t, f)]
    groups = group_jobs(identities)
    jobs = list(dict.fromkeys(g.job_key for g in groups))
    if len(jobs) > 1:
        listed = "; ".join(f"{g.name} ({len(g.paths)} file(s))" for g in groups)
        raise UsageError(f"{path}: holds {len(jobs)} different jobs ({listed}); give one job's directory per side")
    groups = sorted(groups, key=lambda g: g.capture)
    return [[traces[p] for p in g.paths] for g in groups]
