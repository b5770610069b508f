"""The analysis' figures made on integer codes and the engine's view agree with the pandas
formulations they replaced: launch statistics, idle by class, the evidence split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_kernels import _mixed_trace

from traceread.analysis.pipeline import idle_by_class
from traceread.attribution import class_mask, evidence_split
from traceread.loaders import load
from traceread.metrics import kernels as km
from traceread.vocabulary import GAP_CLASSES, part_col

REAL = Path(__file__).resolve().parents[3] / "fixtures" / "hta_nccl_a100_rank0of2.json.gz"  # real, in every clone


def test_launch_stats_reads_the_view_not_a_kernel_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    tr, _ = _mixed_trace()
    given = km.launch_stats(tr, km.kernels_frame(tr))  # kernel_report's path: the frame it already has

    def no_frame(*_a: object, **_k: object) -> None:
        raise AssertionError("launch_stats built the kernels' frame")

    monkeypatch.setattr(km, "kernels_frame", no_frame)
    assert km.launch_stats(tr) == given
    assert given["kernels"] == 47 and given["linked"] == 47  # the comm kernel is left out


@pytest.mark.skipif(not REAL.exists(), reason="shared traces not present")
def test_launch_stats_paths_agree_on_a_real_trace() -> None:
    tr = load(str(REAL))
    assert km.launch_stats(tr) == km.launch_stats(tr, km.kernels_frame(tr))


def _reference_idle(steps: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """The group-by formulation idle_by_class had."""
    out = steps.copy()
    keys = ["rank", "device", "step"]
    pivot = gaps.groupby(keys + ["class"], observed=True)["dur_ns"].sum().unstack("class", fill_value=0)
    index = out.set_index(keys).index
    for cls in GAP_CLASSES:
        col = pivot[cls] if cls in pivot.columns else pd.Series(0, index=pivot.index, dtype="int64")
        out[part_col(cls)] = index.map(col).fillna(0).astype("int64").to_numpy()
    covered = out[[part_col(c) for c in GAP_CLASSES]].sum(axis=1).to_numpy()
    out[part_col("unattributed")] = out[part_col("unattributed")].to_numpy() + np.maximum(
        out["idle_ns"].to_numpy() - covered, 0)
    return out


@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("scale", [1, 1 << 46])  # sums past 2**53 ns: the exact integer path
@pytest.mark.parametrize("wide", [1, 10_000_019])  # step numbers too far apart for a dense key table
def test_idle_by_class_matches_the_group_by(categorical: bool, scale: int, wide: int) -> None:
    rng = np.random.default_rng(3)
    # two ranks, a device -1, a repeated step key, a step with no gap; gaps of a step not listed and of
    # a class that is no gap class
    steps = pd.DataFrame({"rank": np.array([0, 0, 0, 1, 1, 0], np.int32), "device": np.array([0, 0, 1, -1, -1, 0], np.int32),
                          "step": [1, 2, 1, 7, 8, 2], "idle_ns": [900, 50, 10, 5000, 0, 50]})
    n = 200
    gaps = pd.DataFrame({"rank": rng.choice([0, 1], n).astype(np.int32), "device": rng.choice([0, 1, -1], n).astype(np.int32),
                         "step": rng.choice([1, 2, 7, 8, 9], n), "dur_ns": rng.integers(1, 100, n) * scale + rng.integers(0, 2, n),
                         "class": rng.choice([*GAP_CLASSES, "not-a-class"], n)})
    if categorical:
        gaps["class"] = gaps["class"].astype("category")
    steps["step"] *= wide
    gaps["step"] *= wide
    got, want = idle_by_class(steps, gaps), _reference_idle(steps, gaps)
    pd.testing.assert_frame_equal(got, want)
    assert idle_by_class(steps, gaps.iloc[:0]).equals(_reference_idle(steps, gaps.iloc[:0]))


def _reference_split(gaps: pd.DataFrame, cause: str) -> dict[str, int]:
    g = gaps[(gaps["class"] == cause).to_numpy()]
    sums = g["dur_ns"].astype(np.int64).groupby(g["evidence_kind"].astype(str).to_numpy()).sum()
    return {str(k): int(v) for k, v in sums.sort_values(ascending=False, kind="stable").items()}


@pytest.mark.parametrize("dtype", ["object", "str", "category"])
def test_evidence_split_matches_the_group_by(dtype: str) -> None:
    kinds = np.array(["b", "a", None, "c", "a", "b", "", "c"], dtype=object)
    gaps = pd.DataFrame({"class": ["x", "x", "x", "y", "x", "x", "x", "x"], "dur_ns": [5, 7, 9, 1, 3, 2, 4, 12],
                         "evidence_kind": pd.Series(kinds, dtype=dtype)})
    for cause in ("x", "y", "z"):
        got = evidence_split(gaps, cause)
        assert list(got.items()) == list(_reference_split(gaps, cause).items())
    # largest first, ties in name order (a missing kind is named "None"/"nan" under pandas 2, left out under 3)
    assert [k for k in evidence_split(gaps, "x") if k not in ("None", "nan")] == ["c", "a", "b", ""]


def test_class_mask_on_codes_and_strings() -> None:
    s = pd.Series(["a", "b", None, "a"])
    for col in (s, s.astype("category")):
        assert class_mask(col, "a").tolist() == [True, False, False, True]
        assert not class_mask(col, "q").any()


def test_collective_args_ints_parse_each_distinct_value_as_one_by_one() -> None:
    from traceread.loaders.kineto.frame import _int, _ints

    values = (1, True, "1", " 7", 2**70, "x", None, float("nan"), 3.0, False, 0, "-5", "99999999999999999999", "1")
    assert _ints(values).tolist() == [_int(v) for v in values]
    assert _ints(values)[:3].tolist() == [1, -1, 1]  # True == 1 but is no count
    with_list = (*values, [1])  # unhashable: parsed one by one
    assert _ints(with_list).tolist() == [_int(v) for v in with_list]
