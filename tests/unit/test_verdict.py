"""One verdict for one split of step time, whichever path computes it (docs/rules.md "Run level").

analyze of one trace or several, a scan job (``scan.jobs._aggregate``) and a diff side (from the
scan reports, and pooled captures) all sum their units and call ``attribution.verdict``. The cases
below are where the former second verdict (``pipeline.overall_dominant``, removed, used for several traces
and for scan jobs and diff sides) disagreed: it tested idle ``<`` the healthy threshold and named
unattributed only when every other idle class was zero (a 16-rank job was told "launch-bound: 0%
of step time" while 54% of it was unattributed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _frames import kernel, make_events

from traceread.analysis import pipeline as pipe
from traceread.attribution import Verdict, table_verdict, verdict
from traceread.config import Thresholds
from traceread.diff.side import capture_from_reports, summarize_side
from traceread.runner import analyze
from traceread.scan.jobs import _aggregate
from traceread.scan.work import Outcome
from traceread.vocabulary import PARTS, part_col

CFG = Thresholds()
STEP_NS = 10_000_000

CASES = {
    # 54% unattributed, 0.4% launch-bound: unattributed is the largest idle class.
    "unattributed largest": ({"compute-bound": 0.456, "launch-bound": 0.004, "unattributed": 0.54},
                             Verdict("unattributed", 0.54, "launch-bound", 0.004)),
    # idle exactly at the healthy threshold is healthy (<=), not its largest idle class.
    "idle at the threshold": ({"compute-bound": 1 - CFG.healthy_max_idle, "sync-stall": CFG.healthy_max_idle},
                              Verdict("healthy", CFG.healthy_max_idle, "sync-stall", CFG.healthy_max_idle)),
    "comm-bound with memory-bound busy time": ({"memory-bound": 0.5, "comm-bound": 0.3, "data-starved": 0.2},
                                               Verdict("comm-bound", 0.3, "memory-bound", 0.5)),
    # issue 42: 81% busy, idle mostly first-call cost: healthy on its steady-state idle (1.1%), never
    # "launch-bound 1.1%"; the one-time cost stays the runner-up (under one_time_verdict_share).
    "one-time idle never makes a run unhealthy": (
        {"compute-bound": 0.81, "one-time-cost": 0.179, "launch-bound": 0.011},
        Verdict("healthy", 0.011, "one-time-cost", 0.179)),
    # one-time work over one_time_verdict_share: the window is not steady state, whatever the rest.
    "mostly one-time work is not steady state": ({"compute-bound": 0.6, "one-time-cost": 0.35, "sync-stall": 0.05},
                                                 Verdict("one-time-cost", 0.35, "sync-stall", 0.05)),
    # steady idle over the threshold: its largest cause, one-time cost aside.
    "steady idle over the threshold": ({"compute-bound": 0.7, "one-time-cost": 0.15, "sync-stall": 0.12,
                                        "launch-bound": 0.03},
                                       Verdict("sync-stall", 0.12, "one-time-cost", 0.15)),
}


def _shares(given: dict[str, float]) -> dict[str, float]:
    return {p: given.get(p, 0.0) for p in PARTS}


def _units(given: dict[str, float], n: int) -> list[dict[str, int]]:
    """``n`` units (rank, device) of one step each, every one with the split ``given``."""
    out = []
    for i in range(n):
        row = {"rank": i, "device": 0, "step_ns": STEP_NS, **{part_col(p): 0 for p in PARTS}}
        row.update({part_col(p): round(s * STEP_NS) for p, s in given.items()})
        out.append(row)
    return out


def _same(v: tuple[str, float], want: Verdict) -> None:
    assert v[0] == want.cause and v[1] == pytest.approx(want.share), (v, want)


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdict_of_the_shares(case):
    given, want = CASES[case]
    got = verdict(_shares(given), CFG)
    assert (got.cause, got.second) == (want.cause, want.second)
    assert got.share == pytest.approx(want.share) and got.second_share == pytest.approx(want.second_share)


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_analyze_one_trace_or_several(monkeypatch, case, n):
    given, want = CASES[case]

    def finish_one(index, trace, cfg, out, classified=None, between=None, beside=None):
        table = pd.DataFrame(_units(given, 1)).assign(rank=0)
        table.insert(0, "trace", np.int32(index))
        out.attribution = table
        return out

    monkeypatch.setattr(pipe, "found_steps", lambda *args: pipe.PerTrace())
    monkeypatch.setattr(pipe, "finish_one", finish_one)
    traces = [make_events([kernel(0, STEP_NS, rank=0)]) for _ in range(n)]
    a = analyze(traces, cfg=CFG)
    _same((a.dominant_cause, a.dominant_cost_share), want)
    assert a.second_cause == want.second


@pytest.mark.parametrize("case", sorted(CASES))
def test_scan_job_of_several_traces(case):
    given, want = CASES[case]
    members = [Outcome(rel=f"r{i}.json", path=f"/s/r{i}.json", status="ok",
                       row={"units": [u], "dominant_cause": "?", "dominant_cost_share": 0.0})
               for i, u in enumerate(_units(given, 4))]
    job = _aggregate(members, CFG)
    _same((job["dominant_cause"], job["dominant_cost_share"]), want)


def _report(given: dict[str, float]) -> dict:
    parts = {p: {"ns": round(given.get(p, 0.0) * STEP_NS)} for p in PARTS}
    return {"traces": [], "steps": [], "attribution": [{"rank": 0, "device": 0, "step_ns": STEP_NS, "parts": parts}],
            "dominant_cause": "?", "dominant_cost_share": 0.0}


@pytest.mark.parametrize("case", sorted(CASES))
def test_diff_side_of_several_traces_and_captures(case):
    given, want = CASES[case]
    capture = capture_from_reports([_report(given), _report(given)], CFG)
    _same((capture.dominant_cause, capture.dominant_cost_share), want)
    side = summarize_side("before", [capture, capture], None, CFG)
    _same((side.dominant_cause, side.dominant_cost_share), want)


def test_no_step_time_is_unattributed():
    assert table_verdict(pd.DataFrame(columns=["step_ns"] + [part_col(p) for p in PARTS]), CFG) == \
        Verdict("unattributed", 0.0)
