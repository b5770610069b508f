"""Gap frames of several traces keep their evidence data types when concatenated (rules.evidence.aligned)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from traceread.loaders import load
from traceread.rules.evidence import aligned, evidence_text, is_data
from traceread.runner import analyze

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


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


def test_a_flag_most_rows_hold_is_stored_left_out_as_true_and_concatenates_with_the_others() -> None:
    """A flag most gaps hold (a 5M-gap export's ``queued``: 93%) is stored with True left out; frames whose
    flag leaves out False concatenate with it without pandas' mixed-fill warning, every value kept."""
    from traceread.rules.evidence import _fill

    assert _fill(np.array([True, True, False])) and not _fill(np.array([True, False]))
    mostly = pd.DataFrame({"evidence.queued": pd.arrays.SparseArray(np.array([True, True, False]), fill_value=True)})
    rarely = pd.DataFrame({"evidence.queued": _flag([False, True])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for frames, first in (([mostly, rarely], True), ([rarely, mostly, pd.DataFrame({"x": [1]})], False)):
            out = pd.concat(aligned(frames), ignore_index=True)
            assert out["evidence.queued"].dtype == pd.SparseDtype(bool, first)
            want = [v for f in frames for v in (f["evidence.queued"].tolist() if "evidence.queued" in f else [False])]
            assert out["evidence.queued"].tolist() == want
