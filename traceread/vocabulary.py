"""The names every layer shares: gap classes, busy parts, verdicts, and their column names.

One home for the names of the diagnosis, so that the engine, the rules, attribution, the job
analysis, the renderers, scan and diff cannot drift apart (a copy without ``one-time-cost`` once
reported a straggler's compile time as "short-gaps"). The names and their order are read off the cause
records (``traceread.causes``): this module imports nothing else of traceread.

* ``GAP_CLASSES``: what a compute-idle gap is classified as (``traceread.rules``), in report order;
  ``unattributed`` last.
* ``CAPTURE_BOUNDARY``: the one gap class that is not a cause: idle at the capture's edges (work
  issued before the capture began, the profiler shutting down). ``IDLE_CAUSES``: the other gap classes,
  the only ones a verdict can name.
* ``BUSY_PARTS``: the parts of busy time (``traceread.attribution``): compute-bound, memory-bound, and
  unclassified (kernels no pattern names: neither bound is claimed for them, so no lever is drawn).
* ``PARTS``: busy parts then gap classes: the split of step time, summing to it.
* ``VERDICTS``: what a run's dominant cause can be: an idle class, or ``memory-bound`` /
  ``healthy`` when idle time is small (``NO_GPU_ACTIVITY`` when nothing ran on a GPU).
"""

from __future__ import annotations

from traceread.causes import BOUNDARY, BUSY, CAUSES, GAP_KINDS
from traceread.causes.builtin import (
    CAPTURE_BOUNDARY,
    COMM_BOUND,
    COMPUTE_BOUND,
    DATA_STARVED,
    HEALTHY,
    LAUNCH_BOUND,
    MEMORY_BOUND,
    ONE_TIME_COST,
    PIPELINE_BUBBLE,
    SYNC_STALL,
    UNATTRIBUTED,
    UNCLASSIFIED,
)

# The tuples below are read off the cause records (traceread.causes), in their report order.
GAP_CLASSES: tuple[str, ...] = tuple(c.name for c in CAUSES if c.kind in GAP_KINDS)
# Idle classes that are causes (report schema 1.2: capture-boundary is a part of step time, never a cause).
IDLE_CAUSES: tuple[str, ...] = tuple(c.name for c in CAUSES if c.kind in GAP_KINDS and c.kind != BOUNDARY)

BUSY_PARTS: tuple[str, ...] = tuple(c.name for c in CAUSES if c.kind == BUSY)
PARTS: tuple[str, ...] = BUSY_PARTS + GAP_CLASSES

VERDICTS: tuple[str, ...] = IDLE_CAUSES + tuple(c.name for c in CAUSES if c.verdict and c.kind not in GAP_KINDS)
# dominant_cause of a report whose traces hold no GPU activity at all (report schema 1.1).
NO_GPU_ACTIVITY = "no-gpu-activity"


def part_col(part: str) -> str:
    """Column name of a part's nanoseconds (``memory-bound`` -> ``memory_bound_ns``)."""
    return part.replace("-", "_") + "_ns"


def share_col(part: str) -> str:
    """Column name of a part's share of step time (``memory-bound`` -> ``memory_bound_share``)."""
    return part.replace("-", "_") + "_share"


def part_of_col(column: str) -> str:
    """The part a ``part_col`` column holds (``memory_bound_ns`` -> ``memory-bound``)."""
    return column.removesuffix("_ns").replace("_", "-")


__all__ = ["GAP_CLASSES", "IDLE_CAUSES", "CAPTURE_BOUNDARY", "BUSY_PARTS", "PARTS", "VERDICTS", "NO_GPU_ACTIVITY",
           "LAUNCH_BOUND", "COMM_BOUND",
           "DATA_STARVED", "PIPELINE_BUBBLE", "SYNC_STALL", "ONE_TIME_COST", "UNATTRIBUTED", "COMPUTE_BOUND",
           "MEMORY_BOUND", "UNCLASSIFIED", "HEALTHY", "part_col", "share_col", "part_of_col"]
