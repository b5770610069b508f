"""attribution.evidence_split sums by category code: the same split, in the same order, as summing
by each gap's kind string (pandas' ``astype(str)``, missing kinds included) on random frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceread.attribution import evidence_split


def by_strings(gaps: pd.DataFrame, cause: str) -> dict[str, int]:
    g = gaps.loc[(gaps["class"] == cause).to_numpy(), ["dur_ns", "evidence_kind"]]
    sums = g["dur_ns"].astype(np.int64).groupby(g["evidence_kind"].astype(str).to_numpy()).sum()
    return {str(k): int(v) for k, v in sums.sort_values(ascending=False, kind="stable").items()}


@pytest.mark.parametrize("seed", range(40))
def test_split_by_codes_equals_split_by_strings(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    kinds = rng.choice(np.array(["allocator", "host-sync", "nan", "", "zz", None], dtype=object), size=n)
    gaps = pd.DataFrame({"class": pd.Categorical(rng.choice(["sync-stall", "launch-bound"], size=n)),
                         "dur_ns": rng.choice([1, 2, 5, 1000], size=n).astype(np.int64),
                         "evidence_kind": pd.Categorical(kinds)})
    assert list(evidence_split(gaps, "sync-stall").items()) == list(by_strings(gaps, "sync-stall").items())


@pytest.mark.parametrize("seed", range(40))
def test_split_of_object_kinds_equals_split_by_strings(seed):
    """The rules' object column (str kinds, missing ones as None or NaN) is summed by factorized code
    with the same split and order as by each gap's string."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    kinds = rng.choice(np.array(["allocator", "host-sync", "nan", "None", "", "zz", None, np.nan], dtype=object),
                       size=n)
    gaps = pd.DataFrame({"class": pd.Categorical(rng.choice(["sync-stall", "launch-bound"], size=n)),
                         "dur_ns": rng.choice([1, 2, 5, 1000], size=n).astype(np.int64),
                         "evidence_kind": pd.Series(kinds, dtype=object)})
    assert list(evidence_split(gaps, "sync-stall").items()) == list(by_strings(gaps, "sync-stall").items())


def test_split_of_mixed_object_kinds_keeps_their_text():
    """1 and 1.0 factorize as one kind but read as two texts: such a column is split by its strings."""
    gaps = pd.DataFrame({"class": ["x"] * 3, "dur_ns": np.array([1, 2, 4], np.int64),
                         "evidence_kind": pd.Series([1, 1.0, "a"], dtype=object)})
    assert evidence_split(gaps, "x") == by_strings(gaps, "x") == {"a": 4, "1.0": 2, "1": 1}


def test_classified_kinds_are_a_code_per_gap_and_read_as_the_kinds() -> None:
    """rules.classify keeps the evidence kinds as a categorical (a code per gap, not a pointer: 37 MB on a
    5M-gap export): equal texts held by distinct objects are one category; kinds not all text stay objects."""
    from traceread.rules import _kinds_column

    kinds = np.array(["queued", "".join(["que", "ued"]), "late", "queued"], dtype=object)
    s = _kinds_column(kinds, pd.RangeIndex(4))
    assert isinstance(s.dtype, pd.CategoricalDtype) and s.cat.codes.dtype == np.int8
    assert s.tolist() == kinds.tolist() and sorted(s.cat.categories) == ["late", "queued"]
    odd = np.array(["a", None, 1.0], dtype=object)
    assert _kinds_column(odd, pd.RangeIndex(3)).dtype == object
