"""Kernel-to-kernel turnarounds in integer-microsecond Kineto traces (PyTorch 1.13-2.3).

The planted all-to-all job has sub-3 us turnarounds (truth: unattributed) while collectives run on
the communication stream. Written with float timestamps they read as under 3 us; rounded to whole
microseconds some read as exactly 3 us, which the turnaround test (``turnaround_max_ns``) must still
take for a turnaround, not a wait on the collective (one timestamp tick more)."""

from __future__ import annotations

import numpy as np
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.pipeline_schedules import AllToAllSpec, plant_all_to_all
from tracesynth.planted import classify_file, truth_for

from traceread import load
from traceread.config import Thresholds

CFG = Thresholds()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_rounded_turnaround_is_not_a_wait(tmp_path, seed):
    planted = plant_all_to_all(AllToAllSpec(seed=seed, steps=8, jitter=0.1, broken_ext=seed % 2 == 0))
    for path in write_kineto(planted.scenario, str(tmp_path / "t.rank{rank}.pt.trace.json"), generation="int-us"):
        assert load(path).meta.extra["timestamp_quantum_ns"] == 1_000
        gaps = classify_file(path, CFG)
        truth = truth_for(planted.truth, gaps, planted.scenario.origin_epoch_ns)
        rank = int(gaps["rank"].iloc[0])
        t = truth[truth["rank"] == rank]
        short = gaps[(gaps["dur_ns"] == 3_000) & ~gaps["launch_after_gap_start"].astype(bool)]
        assert len(short) > 0  # the rounding this is about happens here
        # every one of them lies in a planted turnaround and is read as one
        k = np.searchsorted(t["start_ns"].to_numpy(), short["start_ns"].to_numpy() + 1_500, side="right") - 1
        assert set(t["class"].to_numpy()[k]) == {"unattributed"}
        assert (short["class"] == "unattributed").all()
        assert short["evidence"].str.startswith("kernel-to-kernel turnaround").all()
