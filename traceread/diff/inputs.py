"""What a side of ``traceread diff`` is on disk: a trace file (one capture of one job).

Directories (the ranks of one capture, repeated runs, ``scan`` output) need the job grouping of
``traceread.ranks`` / ``traceread.scan``; until those are part of the build a directory is a usage
error that says so.
"""

from __future__ import annotations

import os

from traceread.errors import UsageError
from traceread.loaders import load
from traceread.trace import Trace


def load_side(path: str, step_range: str | None = None) -> list[list[Trace]]:
    """The captures of one side (each a list of traces); raises TraceReadError / UsageError."""
    if os.path.isdir(path):
        raise UsageError(f"{path}: directory inputs need the job grouping of `traceread scan` (traceread.ranks), "
                         "which this build does not have yet; give one trace file per side")
    return [[load(path, progress=True, step_range=step_range)]]
