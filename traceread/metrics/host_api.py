"""The host API summary, as ``nsys stats --report cuda_api_sum`` gives it: one row per CUDA/HIP
runtime or driver call name.

Columns: ``api, role, count, total_ns, mean_ns, median_ns, p90_ns, p99_ns, min_ns, max_ns, share``.
Percentiles are numpy's ``linear`` ones (:mod:`traceread.metrics.durations`); ``share`` is each call's
total over all API time (nsys' "Time (%)"). ``role`` is what :mod:`traceread.host_calls` calls the API
(launch, sync, memory, or '' for anything else), the same patterns the gap engine and the rules read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema
from traceread.engine.lanes import API_CATS, event_view
from traceread.host_calls import LAUNCH, MEMORY, SYNC
from traceread.metrics.durations import by_name, top_by_name
from traceread.trace import Trace

COLUMNS = ["api", "role", "count", "total_ns", "mean_ns", "median_ns", "p90_ns", "p99_ns", "min_ns", "max_ns",
           "share"]


def role(name: str) -> str:
    """launch, sync (launch+sync for a call that is both), memory, or ''."""
    parts = [r for r, rx in (("launch", LAUNCH), ("sync", SYNC)) if rx.search(name)]
    if not parts and MEMORY.search(name):
        parts = ["memory"]
    return "+".join(parts)


def _calls(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The names (every name of the view: those of no call count no row), each call's name code among them
    (int64; -1, a missing name, is the trailing '') and its duration. The codes, not positions among the
    distinct names: the same groups in the same order, without renumbering every call."""
    v = event_view(trace)
    rows = v.rows((schema.LANE_CPU_THREAD,), cats=API_CATS)
    code = v.name[rows].astype(np.int64)
    code[code < 0] = len(v.names) - 1
    return v.names, code, (v.end[rows] - v.start[rows]).astype(np.int64, copy=False)


def host_api_summary(trace: Trace) -> pd.DataFrame:
    """One row per runtime/driver API name (``COLUMNS``), by total time; empty when none was traced."""
    names, at, dur = _calls(trace)
    return _with_role(by_name(at, names, dur, label="api"))


def host_api_top(trace: Trace, top: int) -> tuple[pd.DataFrame, int]:
    """The first ``top`` rows of :func:`host_api_summary` and its number of rows."""
    names, at, dur = _calls(trace)
    rows, n = top_by_name(at, names, dur, top, label="api")
    return _with_role(rows), n


def _with_role(out: pd.DataFrame) -> pd.DataFrame:
    out.insert(1, "role", [role(n) for n in out["api"]])  # one per distinct name
    return out[COLUMNS]
