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
