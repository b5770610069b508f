"""Each fix removes what its cause's rule attributed, and only that (issue 43)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import traceread
from traceread import intervals, schema
from traceread.engine.lanes import event_view
from traceread.runner import analyze
from traceread.whatif import model as mdl
from traceread.whatif.fixes import Context, Fix
from traceread.whatif.fixes import _dispatch_union as dispatch_union

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RESNET = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
ALEXNET = FIXTURES / "hta_alexnet_a100.json.gz"


def _overlap(us: np.ndarray, ue: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union ``(us, ue)`` inside the union of the ranges ``(starts, ends)`` (independently
    counted: a boolean timeline would not fit, so each range's overlap with the sorted union)."""
    os_, oe = intervals.union(starts.astype(np.int64), ends.astype(np.int64))
    return int(intervals.overlap_with_union(os_, oe, us, ue).sum())


@pytest.mark.parametrize("path", [RESNET, ALEXNET], ids=["resnet50", "alexnet"])
def test_cuda_graph_fix_removes_dispatch_not_data_loading_nor_driver_work(path: Path) -> None:
    """The launch-bound fix's host cut covers no DataLoader range and no CUDA call over launch_call_max_ns (lazy
    module loading, context set-up): CUDA graphs remove neither."""
    trace = traceread.load(str(path))
    a = analyze([trace])
    v = event_view(trace)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    us, ue = dispatch_union(m, Fix("launch-bound"), Context(v, a.gaps, a.cfg))
    assert len(us) and int((ue - us).sum()) > 0
    ev = trace.events
    host = ev[ev["lane"] == schema.LANE_CPU_THREAD]
    loader = host[host["name"].astype(str).str.startswith("enumerate(DataLoader)")]
    api = host[host["category"].isin([schema.CAT_RUNTIME, schema.CAT_DRIVER])]
    long_calls = api[(api["end_ns"] - api["start_ns"]) > a.cfg.launch_call_max_ns]
    if path == RESNET:
        assert len(loader) >= 6  # one per step: the test covers something
    else:
        assert len(long_calls) >= 1
    assert _overlap(us, ue, loader["start_ns"].to_numpy(), loader["end_ns"].to_numpy()) == 0
    assert _overlap(us, ue, long_calls["start_ns"].to_numpy(), long_calls["end_ns"].to_numpy()) == 0


def test_cuda_graph_fix_buys_nothing_where_the_idle_is_one_time_work() -> None:
    """AlexNet's capture is one long lazy start-up (one-time cost nearly all its idle): CUDA graphs would not
    shorten it, and launch-bound must not be predicted to (it was 14.5% before the fix was scoped)."""
    a = analyze([traceread.load(str(ALEXNET))])
    assert a.whatif is not None
    shares = a.shares()
    p = a.whatif.prediction("launch-bound")
    assert p is not None and p.saving_share is not None
    assert shares.get("one-time-cost", 0.0) > 0.5
    assert p.saving_share <= max(2 * shares.get("launch-bound", 0.0), 0.001)
