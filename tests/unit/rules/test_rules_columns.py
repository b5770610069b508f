"""The rules' column cache (``rules._columns``): an object handed to the rules in the frame's place, which
converts each column once and shares it, and keeps nothing once its block ends."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.rules import _columns
from traceread.rules._columns import ColumnCache, Rows, col, column_cache, frac


def _gaps() -> pd.DataFrame:
    dur = np.array([10, 0, 40, 5], dtype=np.int64)
    sparse = pd.arrays.SparseArray(np.array([5, 0, 0, 5], dtype=np.int64), fill_value=0)
    return pd.DataFrame({"dur_ns": dur, "comm_ns": sparse, "queued": [True, False, True, True]})


def test_each_column_is_converted_once_and_shared(monkeypatch) -> None:
    gaps = _gaps()
    converted: list[str] = []
    real = _columns._column
    monkeypatch.setattr(_columns, "_column", lambda g, name, *a: converted.append(name) or real(g, name, *a))
    with column_cache(gaps) as cols:
        first = col(cols, "comm_ns", dtype=np.int64)
        assert col(cols, "comm_ns", dtype=np.int64) is first  # the same array to every reader
        assert not first.flags.writeable  # shared: no reader may change it
        assert col(cols, "comm_ns", dtype=np.float64) is not first  # another dtype: another array
        share = frac(cols, "comm")
        assert frac(cols, "comm") is share
        np.testing.assert_array_equal(share, [0.5, 0.0, 0.0, 1.0])  # dur 0 reads as 1 ns
        np.testing.assert_array_equal(Rows(cols, np.array([3, 0]))["comm_ns"], [5, 5])
        np.testing.assert_array_equal(Rows(cols, np.array([0]))["comm_ns"], [5])
        # one conversion per (column, dtype): comm_ns as int64, float64 (frac's too) and as stored (Rows)
        assert converted == ["comm_ns", "comm_ns", "dur_ns", "comm_ns"]
        cols.forget()
        assert col(cols, "comm_ns", dtype=np.int64) is not first  # converted again after forget()
    assert cols.arrays == {}  # the block's end frees what it converted


def test_a_plain_frame_reads_the_same_values_uncached() -> None:
    gaps = _gaps()
    with column_cache(gaps) as cols:
        for name in ("dur_ns", "comm_ns", "queued", "absent"):
            np.testing.assert_array_equal(col(gaps, name, 7), col(cols, name, 7))
        np.testing.assert_array_equal(frac(gaps, "comm"), frac(cols, "comm"))
        idx = np.array([2, 1])
        np.testing.assert_array_equal(Rows(gaps, idx)["comm_ns"], Rows(cols, idx)["comm_ns"])
    # outside a cache the frame is read as it is (pandas 2 may hand back the same block either way)
    np.testing.assert_array_equal(col(gaps, "dur_ns"), gaps["dur_ns"].to_numpy())
    assert isinstance(cols, ColumnCache) and cols.frame is gaps and len(cols) == 4
