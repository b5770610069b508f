"""Gap frames of several traces keep their evidence data types when concatenated (rules.evidence.aligned)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from traceread.analysis import analyze
from traceread.loaders import load
from traceread.rules.evidence import aligned, evidence_text, is_data

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _flag(values: list[bool]) -> pd.arrays.SparseArray:
    return pd.arrays.SparseArray(np.array(values), fill_value=False)


def test_a_missing_data_column_is_added_as_zeros_of_its_type() -> None:
    a = pd.DataFrame({"x": [1, 2], "evidence.late": _flag([True, False]),
                      "evidence.api_call_ns": pd.arrays.SparseArray(np.array([5, 0]), fill_value=0)})
    b = pd.DataFrame({"x": [3]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas 2 warns (then fails on '&') where NaN fills a flag column
        out = pd.concat([f for f in aligned([a, None, b]) if f is not None], ignore_index=True)
    assert out["evidence.late"].dtype == pd.SparseDtype(bool, False)
    assert out["evidence.late"].tolist() == [True, False, False]
    assert out["evidence.api_call_ns"].dtype == pd.SparseDtype(np.int64, 0)
    assert out["evidence.api_call_ns"].tolist() == [5, 0, 0]
    assert "evidence.late" not in b.columns  # inputs untouched


def test_multi_trace_analysis_keeps_number_and_flag_columns_typed() -> None:
    # The fixtures' traces have different gap classes, so each lacks some of the others' data columns.
    paths = sorted(p for p in FIXTURES.iterdir() if p.suffix in (".json", ".gz"))[:4]
    a = analyze([load(str(p)) for p in paths])
    data = [c for c in a.gaps.columns if is_data(c)]
    assert data
    for c in data:
        dt = a.gaps[c].dtype
        if isinstance(dt, pd.SparseDtype):
            assert dt.subtype != np.dtype(object) and not pd.isna(dt.fill_value), (c, dt)
    text = evidence_text(a.gaps, None, a.cfg)  # every sentence made from the concatenated data
    assert len(text) == len(a.gaps) and all(isinstance(t, str) and t for t in text[a.gaps["class"].notna()])
