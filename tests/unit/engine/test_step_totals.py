"""``step_totals.step_totals`` sums each column by the gaps' step without a group-by of the frame (which made
every sparse overlap column dense at once): the same table as that group-by, on real and edge inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traceread.config import Thresholds
from traceread.engine.gaps import OVERLAP_KINDS, find_gaps
from traceread.engine.step_totals import step_totals
from traceread.engine.steps import find_steps
from traceread.loaders import load

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
KEYS = ["rank", "device", "step"]
SUMS = [f"{k}_ns" for k in OVERLAP_KINDS] + ["launch_count"]


def grouped(steps_df: pd.DataFrame, gaps_df: pd.DataFrame) -> pd.DataFrame:
    """The group-by and merge step_totals used to be: the independent computation."""
    agg = gaps_df.groupby(KEYS, observed=True)[SUMS].sum()
    agg["gap_count"] = gaps_df.groupby(KEYS, observed=True).size()
    out = steps_df[KEYS + ["busy_ns", "idle_ns"]].copy()
    out.insert(3, "step_ns", steps_df["end_ns"] - steps_df["start_ns"])
    out = out.merge(agg.reset_index(), on=KEYS, how="left")
    out[SUMS + ["gap_count"]] = out[SUMS + ["gap_count"]].fillna(0).astype("int64")
    return out


@pytest.mark.parametrize("name", ["hta_nccl_a100_rank0of2.json.gz", "kineto2021_resnet50_bare_list.pt.trace.json.gz",
                                  "tracelens_sglang_decode_mi300x.json.gz"])
def test_same_as_the_group_by_on_real_traces(name: str) -> None:
    cfg = Thresholds()
    tr = load(str(FIXTURES / name))
    steps = find_steps(tr, cfg).steps
    gaps = find_gaps(tr, steps, cfg)
    assert len(gaps) and any(isinstance(gaps[c].dtype, pd.SparseDtype) for c in SUMS)  # the sparse path is taken
    pd.testing.assert_frame_equal(step_totals(steps, gaps), grouped(steps, gaps), check_exact=True)


def test_edges_gaps_of_no_step_repeated_steps_fill_and_dense_columns() -> None:
    rng = np.random.default_rng(5)
    n = 5_000
    steps = pd.DataFrame({"rank": [0, 0, 1, 1, 1], "device": [0, 0, 3, 3, 3], "step": [1, 2, 1, 2, 2],
                          "start_ns": [0, 10, 0, 10, 10], "end_ns": [10, 20, 10, 20, 20],
                          "busy_ns": [5, 6, 7, 8, 8], "idle_ns": [5, 4, 3, 2, 2]})
    gaps = pd.DataFrame({"rank": rng.integers(0, 3, n).astype(np.int32), "device": rng.choice([0, 3, 7], n),
                         "step": rng.integers(-1, 4, n)})  # rank 2, device 7, steps -1/0/3: no listed step
    for i, c in enumerate(SUMS):
        values = np.where(rng.random(n) < 0.1, rng.integers(0, 2**40, n), 0)
        if i % 3 == 0:
            gaps[c] = pd.arrays.SparseArray(values, fill_value=0)
        elif i % 3 == 1:
            gaps[c] = pd.arrays.SparseArray(values + 7, fill_value=7)  # a fill value that is not 0
        else:
            gaps[c] = values.astype(np.int32 if c == "launch_count" else np.int64)
    pd.testing.assert_frame_equal(step_totals(steps, gaps), grouped(steps, gaps), check_exact=True)
    no_gaps = gaps.iloc[:0]
    pd.testing.assert_frame_equal(step_totals(steps, no_gaps), grouped(steps, no_gaps), check_exact=True)
