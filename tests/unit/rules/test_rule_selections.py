"""rules._calls: the rule context's selections over the event view against pandas on the events frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread import schema
from traceread.host_calls import KERNEL_LAUNCH, SYNC, calls_matching
from traceread.rules import _calls
from traceread.rules._calls import API, CPU_OPS, HOST_WORK


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> traceread.Trace:
    path = Path(tmp_path_factory.mktemp("sel")) / "two.sqlite"  # one export, both ranks
    write_nsys(plant(PlantSpec(seed=3, ranks=2, steps=4, jitter=0.1)).scenario, str(path))
    return traceread.load(str(path))


def _frame_rows(ev: pd.DataFrame, spec: _calls.Spec, rank: int | None) -> np.ndarray:
    keep = np.zeros(len(ev), dtype=bool)
    for lane, cats, negate in spec:
        in_cats = ev["category"].isin(list(cats)).to_numpy()
        keep |= (ev["lane"] == lane).to_numpy() & (~in_cats if negate else in_cats)
    if rank is not None:
        keep &= (ev["rank"] == rank).to_numpy()
    return np.flatnonzero(keep)


@pytest.mark.parametrize("shared", [False, True])
def test_selections_are_the_frames_rows(two_ranks, shared) -> None:
    ev = two_ranks.events
    ranges: _calls.Spec = ((schema.LANE_CPU_THREAD, (schema.CAT_RUNTIME, schema.CAT_PYTHON), True),)
    with _calls.shared(two_ranks if shared else None):
        for spec in (API, CPU_OPS, HOST_WORK, ranges):
            for rank in (None, 0, 1, 7):
                want = _frame_rows(ev, spec, rank)
                assert np.array_equal(_calls.select(two_ranks, spec, rank), want), (spec, rank)
        assert len(_calls.select(two_ranks, API, 0)) > 0 and len(_calls.select(two_ranks, API, 1)) > 0
        assert _calls.api_ranks(two_ranks) == [int(r) for r in pd.unique(ev["rank"].to_numpy()[_frame_rows(ev, API, None)])]


def test_api_calls_are_sorted_as_pandas_sorts_them(two_ranks) -> None:
    ev = two_ranks.events
    with _calls.shared(two_ranks):
        for rank in (0, 1):
            calls = _calls.api_calls(two_ranks, rank)
            want = ev.iloc[_frame_rows(ev, API, rank)].sort_values("start_ns", kind="stable")
            assert np.array_equal(calls.start, want["start_ns"].to_numpy())
            assert np.array_equal(calls.tid, want["tid"].to_numpy())
            for rx in (SYNC, KERNEL_LAUNCH):
                hits = _calls.matching(two_ranks, calls, rx)
                assert np.array_equal(hits, calls_matching(want["name"], rx))
            assert _calls.matching(two_ranks, calls, KERNEL_LAUNCH).sum() > 0


def test_distinct_is_sorted_unique() -> None:
    for values in (np.array([5, 5, 5]), np.array([3, -1, 3, 7, -1]), np.zeros(0, np.int64)):
        assert _calls.distinct(values) == np.unique(values).tolist()
