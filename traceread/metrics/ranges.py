"""The annotation range summary, as ``nsys stats --report nvtx_sum`` gives it: one row per range name.

Ranges are the host's user annotations (``cpu_annotation`` lane, ``user_annotation`` category):
NVTX ranges of an Nsight Systems export, ``record_function`` ranges and ``ProfilerStep#N`` of a
Kineto trace. PyTorch's ``emit_nvtx`` operator ranges are operators (``cpu_op``), not annotations:
the per-op table has them. The numbered step markers ``ProfilerStep#N`` form one row,
``ProfilerStep#*`` (one name per step would be one row per step). ``share`` is each name's total
over the trace's wall time (first event start to last event end), so nested ranges can sum past 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema
from traceread.engine.lanes import event_view
from traceread.host_calls import PROFILER_STEP_RE
from traceread.metrics.durations import by_name, top_by_name
from traceread.trace import Trace

COLUMNS = ["range", "count", "total_ns", "mean_ns", "median_ns", "p90_ns", "p99_ns", "min_ns", "max_ns", "share"]
STEP_ROW = "ProfilerStep#*"


def wall_ns(trace: Trace) -> int:
    """The trace's wall time: first event start to last event end (0 when empty)."""
    v = event_view(trace)
    return int(v.end.max() - v.start.min()) if len(v.start) else 0


def _ranges(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct range labels (the step markers as one), each range's position among them and its
    duration."""
    v = event_view(trace)
    rows = v.rows((schema.LANE_CPU_ANNOTATION,), cats=(schema.CAT_USER_ANNOTATION,))
    labels, at = v.distinct_names(rows)
    # numbered step markers: one label (a test per distinct name, not per event)
    labels = np.array([STEP_ROW if PROFILER_STEP_RE.match(str(x)) else str(x) for x in labels], dtype=object)
    uniq, code = np.unique(labels, return_inverse=True) if len(labels) else (labels, np.zeros(0, np.int64))
    dur = (v.end[rows] - v.start[rows]).astype(np.int64)
    return uniq, np.asarray(code, np.int64).reshape(-1)[at] if len(rows) else np.zeros(0, np.int64), dur


def range_summary(trace: Trace) -> pd.DataFrame:
    """One row per annotation range name (``COLUMNS``), by total time; empty when the trace has none."""
    uniq, code, dur = _ranges(trace)
    return by_name(code, uniq, dur, share_of=wall_ns(trace) or None, label="range")[COLUMNS]


def range_top(trace: Trace, top: int) -> tuple[pd.DataFrame, int]:
    """The first ``top`` rows of :func:`range_summary` and its number of rows."""
    uniq, code, dur = _ranges(trace)
    rows, n = top_by_name(code, uniq, dur, top, share_of=wall_ns(trace) or None, label="range")
    return rows[COLUMNS], n
