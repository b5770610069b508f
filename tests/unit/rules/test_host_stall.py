"""Long child-free host stretches inside an op (issue 42): one-time cost when they do not recur, never
launch overhead. Hand-built timelines (gap [100 us, 100 us + dur) on rank 0 / device 0, see
test_rules.gap) and the planted ``host-side`` scenario (both formats)."""

from __future__ import annotations

import pandas as pd
import pytest
from _frames import api, kernel, make_events, op
from test_rules import CFG, US, gap, one
from tracesynth.one_time import plant_scenario
from tracesynth.planted import classify_file, truth_for

from traceread.rules import host_stall

MS = 1_000 * US


def _steps(n: int, length: int) -> pd.DataFrame:
    return pd.DataFrame({"rank": 0, "device": 0, "step": range(n), "start_ns": [i * length for i in range(n)],
                         "end_ns": [(i + 1) * length for i in range(n)], "warmup": False, "outlier": False})


def _stalled_op(start: int, quiet: int, name: str = "delta_r2") -> list[dict]:
    """``name`` holds the thread ``quiet`` ns with no child, then launches (a 5 us launch call)."""
    return [op(name, start, start + quiet + 10 * US), api("cudaLaunchKernel", start + quiet, start + quiet + 5 * US)]


def test_a_long_child_free_stretch_in_one_call_is_a_one_time_cost_not_launch_overhead():
    """The host sits inside ``delta_r2`` for 20 ms with no child op or CUDA call (a scripted function
    compiling its fusion), then launches: before issue 42 this read as launch-bound (host inside the op)."""
    trace = make_events([kernel(0, 100 * US), *_stalled_op(90 * US, 20 * MS), kernel(20_200 * US, 20_300 * US)])
    row = one(gap(dur=20 * MS, next_launch_start_ns=20_090 * US, next_launch_end_ns=20_095 * US), trace=trace)
    assert row["class"] == "one-time-cost" and row["evidence_kind"] == "host-stall"
    assert "delta_r2: 20.0 ms with no child op or CUDA call" in row["evidence"]


def test_a_short_op_overhead_stays_launch_bound():
    """Under host_stall_min_ns the op's own time is dispatch overhead (cuDNN planning): launch-bound."""
    quiet = CFG.host_stall_min_ns // 2
    trace = make_events([kernel(0, 100 * US), *_stalled_op(90 * US, quiet, "aten::conv2d")])
    row = one(gap(dur=quiet, next_launch_start_ns=90 * US + quiet, next_launch_end_ns=95 * US + quiet), trace=trace)
    assert row["class"] == "launch-bound"


def test_a_blocking_call_is_not_a_host_stall():
    """A thread inside ``aten::item`` blocked in a long cudaStreamSynchronize is waiting, not stalling."""
    trace = make_events([op("aten::item", 90 * US, 20 * MS), api("cudaStreamSynchronize", 95 * US, 19 * MS)])
    assert len(host_stall.stalls(trace, None, CFG).start) == 0


def test_stalls_in_every_step_recur_and_are_host_work():
    """The same op stalls 8 ms in each of 4 steps: its host work every step (recurs), not one-time, and
    not launch overhead either: launch-bound with evidence kind host-work (the CPU the bottleneck)."""
    length = 20 * MS
    rows = []
    for i in range(4):
        rows += [kernel(i * length, i * length + 100 * US), *_stalled_op(i * length + 90 * US, 8 * MS, "update_metrics")]
    trace = make_events(rows)
    found = host_stall.stalls(trace, _steps(4, length), CFG)
    assert len(found.start) == 4 and found.recurs.all() and set(found.op) == {"update_metrics"}
    row = one(gap(dur=8 * MS, next_launch_start_ns=8_090 * US, next_launch_end_ns=8_095 * US), trace=trace,
              steps=_steps(4, length))
    assert row["class"] == "launch-bound" and row["evidence_kind"] == "host-work"
    assert "update_metrics (no child op or CUDA call)" in row["evidence"]


def test_planted_host_stalls_are_classified_in_both_formats(tmp_path):
    """tracesynth's host-side scenario: a first-call stall in step 1 (one-time-cost, kind host-stall) and an
    op's host work every step (launch-bound, kind host-work: never dispatch), read back from Kineto and nsys."""
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.nsys_writer import write_nsys

    planted = plant_scenario("host-side", seed=3, jitter=0.1, steps=6, ranks=1, uniform=True)
    paths = write_kineto(planted.scenario, str(tmp_path / "h.rank{rank}.pt.trace.json"))
    paths += [write_nsys(planted.scenario, str(tmp_path / "h.sqlite"))]
    for path in paths:
        got = classify_file(path, CFG)
        truth = truth_for(planted.truth, got, planted.scenario.origin_epoch_ns)
        stalls = got[got["evidence_kind"].astype(str) == "host-stall"]
        assert len(stalls) and (stalls["class"].astype(str) == "one-time-cost").all(), path
        work = got[got["evidence_kind"].astype(str) == "host-work"]
        assert (work["class"].astype(str) == "launch-bound").all()
        # every planted op stall (one per step, named) is host work, none dispatch
        named = work[work["dur_ns"] >= CFG.host_stall_min_ns]
        assert len(named) >= 6, (path, len(named))
        t = truth[truth["class"] == "one-time-cost"]
        lb = got[got["class"].astype(str) == "launch-bound"]
        overlap = sum(max(0, min(e, te) - max(s, ts)) for s, e in zip(lb["start_ns"], lb["end_ns"], strict=True)
                      for ts, te in zip(t["start_ns"], t["end_ns"], strict=True))
        assert overlap == 0, path


@pytest.mark.parametrize("sorted_search_min", [1024, 0])  # 0: sorted boundaries searched by the windows' ends
def test_quiet_stretches_equal_those_of_every_boundary_sorted(monkeypatch, sorted_search_min):
    """The windowed search finds exactly the stretches that sorting every boundary of the thread finds (from the
    first host start on), on random nested host rows and calls with ties, at several thresholds."""
    import numpy as np

    monkeypatch.setattr(host_stall, "_SORTED_SEARCH_MIN", sorted_search_min)

    rng = np.random.default_rng(7)
    for trial in range(200):
        n, c = int(rng.integers(1, 60)), int(rng.integers(0, 40))
        hs = np.sort(rng.integers(0, 2_000, n)).astype(np.int64)
        he = hs + rng.integers(0, 300, n)
        cs = np.sort(rng.integers(-200, 2_200, c)).astype(np.int64)
        ce = cs + rng.integers(0, 50 if trial % 2 else 5, c)  # ends in order (odd trials: not always)
        for min_ns in (0, 1, 40, 150, 400):
            b = np.sort(np.concatenate((hs, he, cs, ce)))
            k = np.flatnonzero((np.diff(b) >= min_ns) & (b[:-1] >= hs[0]))
            qs, qe = host_stall.quiet_stretches(hs, he, cs, ce, min_ns)
            assert qs.tolist() == b[k].tolist() and qe.tolist() == b[k + 1].tolist(), (trial, min_ns)
