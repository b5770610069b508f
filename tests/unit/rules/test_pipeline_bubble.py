"""pipeline-bubble periodicity under step-to-step variation, on hand-built gaps frames.

Every step of a pipeline stage has a fill wait at its start, a wait after the first chunk's
forwards (interleaved schedules) at a fixed offset from the start, and a drain wait near its end.
Each wait's length varies uniformly by up to +-20% from step to step, the step length by up to
+-20% (work after the middle wait varies: the middle wait's phase moves from about 0.33 to 0.5),
and a one-off wait of similar length lands at a random place in some steps. Nothing visible
covers the waits (a cross-stream dependency), so only periodicity can say which are the schedule's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceread.config import Thresholds
from traceread.render.notes import text as words
from traceread.rules import classify

CFG = Thresholds()
US = 1_000


def _frame(n_steps: int, jitter: float, seed: int, evidence: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    u = lambda: 1.0 + rng.uniform(-jitter, jitter)  # noqa: E731
    fill, drain, tail = 900 * US, 600 * US, 300 * US
    rows, truth, starts, ends = [], [], [], []
    t = 1_000 * US
    for k in range(n_steps):
        length = int(20_000 * US * u())
        starts.append(t)
        ends.append(t + length)
        mid = t + int(8_000 * US * (1 + rng.uniform(-0.02, 0.02)))  # a sum of ~40 jittered kernels
        waits = [(t, int(fill * u()), True), (mid, int(700 * US * u()), True),
                 (t + length - tail - int(drain * u()) - int(200 * US * u()), int(drain * u()), True)]
        if rng.random() < 0.3:  # a one-off wait somewhere else (gaps never overlap: at least 1.5 ms apart)
            lo, hi = t + int(length * 0.1), waits[2][0] - 3_000 * US
            s1 = int(rng.uniform(lo, hi))
            if abs(s1 - mid) < 2_500 * US:
                s1 = mid - 2_500 * US if s1 < mid else mid + 2_500 * US
            waits.append((s1, int(rng.uniform(500, 1_200) * US), False))
        for s, d, is_bubble in waits:
            rows.append(dict(rank=0, device=0, step=k, start_ns=s, end_ns=s + d, dur_ns=d, offset_ns=s - t,
                             phase=(s - t) / length, next_launch_start_ns=s - 30 * US, next_launch_end_ns=s - 25 * US,
                             launch_after_gap_start=False, queue_depth=3, step_p2p_count=8 if evidence else 0))
            truth.append(is_bubble)
        t += length
    steps = pd.DataFrame({"rank": np.int32(0), "device": np.int32(0), "step": np.arange(n_steps),
                          "start_ns": starts, "end_ns": ends, "cpu_start_ns": starts, "cpu_end_ns": ends,
                          "busy_ns": 0, "idle_ns": 0, "warmup": np.arange(n_steps) == 0, "outlier": False})
    gaps = pd.DataFrame(rows).sort_values("start_ns", ignore_index=True)
    order = np.argsort([r["start_ns"] for r in rows], kind="stable")
    return gaps, steps, np.asarray(truth)[order]


@pytest.mark.parametrize("n_steps", [5, 8, 12, 16])
@pytest.mark.parametrize("jitter", [0.1, 0.2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fill_and_drain_are_periodic_under_jitter_and_one_offs_are_not(n_steps, jitter, seed):
    gaps, steps, truth = _frame(n_steps, jitter, seed)
    out = classify(gaps, steps, None, CFG)
    bubble = (out["class"] == "pipeline-bubble").to_numpy()
    dur = gaps["dur_ns"].to_numpy()
    recall = dur[bubble & truth].sum() / dur[truth].sum()
    precision = dur[bubble & truth].sum() / max(dur[bubble].sum(), 1)
    assert recall >= 0.95 and precision >= 0.95, (recall, precision)


def test_four_steps_leave_too_few_analysed_steps_to_judge():
    gaps, steps, _ = _frame(4, 0.2, 0)  # step 0 is warmup: 3 analysed steps
    out = classify(gaps, steps, None, CFG)
    assert (out["class"] != "pipeline-bubble").all()
    assert any("cannot be judged" in words(n) for n in out.attrs["notes"])


def test_without_pipeline_evidence_the_same_waits_are_not_bubbles():
    gaps, steps, _ = _frame(12, 0.2, 0, evidence=False)
    out = classify(gaps, steps, None, CFG)
    assert (out["class"] == "unattributed").all()



def _with_one_off_before_the_warmup_drain(seed: int, times_drain: float) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
    """``_frame(8, 0.1, seed)`` plus a queued wait ``times_drain`` x the analysed drains' median length,
    ending 30 us before the warmup step's drain (same place, same waiting signature)."""
    gaps, steps, truth = _frame(8, 0.1, seed)
    drain = gaps[gaps["step"] == 0].sort_values("start_ns").iloc[-1]
    drains = gaps.loc[truth & (gaps["step"] > 0)].sort_values("start_ns").groupby("step")["dur_ns"].last()
    d = int(times_drain * float(drains.median()))
    s = int(drain["start_ns"]) - 30 * US - d
    w0, w1 = int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[0])
    one_off = drain.copy()
    one_off["start_ns"], one_off["end_ns"], one_off["dur_ns"] = s, s + d, d
    one_off["next_launch_start_ns"], one_off["next_launch_end_ns"] = s - 30 * US, s - 25 * US
    one_off["offset_ns"], one_off["phase"] = s - w0, (s - w0) / (w1 - w0)
    gaps = pd.concat([gaps, one_off.to_frame().T.astype(gaps.dtypes)]).sort_values("start_ns", ignore_index=True)
    return gaps, steps, s, int(drain["start_ns"])


@pytest.mark.parametrize("times_drain", [1.45, 1.5])
def test_a_longer_wait_beside_the_warmup_drain_is_not_the_drain(times_drain):
    # The same place and waiting signature as the drain, but not a similar duration (within 1.4x): in
    # this frame the window's duration bins reach 1.5x, and the warmup step is not in the statistics.
    gaps, steps, one_off, drain = _with_one_off_before_the_warmup_drain(3, times_drain)
    out = classify(gaps, steps, None, CFG)
    assert out.loc[out["start_ns"] == one_off, "class"].tolist() == ["unattributed"]
    assert out.loc[out["start_ns"] == drain, "class"].tolist() == ["pipeline-bubble"]
    # A wait of the drain's own length there is read as the drain.
    gaps, steps, one_off, _ = _with_one_off_before_the_warmup_drain(3, 1.2)
    out = classify(gaps, steps, None, CFG)
    assert out.loc[out["start_ns"] == one_off, "class"].tolist() == ["pipeline-bubble"]
