"""The rule context's memory-bounded paths against the plain computations they replace: API calls
that read ``end``/``tid`` from the view, per-rank selections split from one pass, the capture
boundary kept at its gaps' positions, a drain-sync's queued wait at the held gaps only, and one
string object per text column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

import traceread
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.rules import _calls, capture_boundary, classify, sync_stall
from traceread.rules._base import texts
from traceread.rules._calls import API
from traceread.vocabulary import UNATTRIBUTED


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> traceread.Trace:
    path = Path(tmp_path_factory.mktemp("ctxmem")) / "two.sqlite"
    write_nsys(plant(PlantSpec(seed=4, ranks=2, steps=6, weights={c: 1.0 for c in CLASSES})).scenario, str(path))
    return traceread.load(str(path))


def test_api_calls_read_end_and_tid_from_the_view(two_ranks) -> None:
    ev = two_ranks.events
    with _calls.shared(two_ranks):
        for rank in _calls.api_ranks(two_ranks):
            calls = _calls.api_calls(two_ranks, rank)
            assert calls._end is None and calls._tid is None  # not kept: 16 bytes a call
            want = ev.iloc[calls.rows]
            assert np.array_equal(calls.end, want["end_ns"].to_numpy(np.int64))
            assert np.array_equal(calls.tid, want["tid"].to_numpy(np.int64))
            keep = np.arange(len(calls.rows)) % 3 == 0
            sub = calls.where(keep)
            assert np.array_equal(sub.rows, calls.rows[keep]) and np.array_equal(sub.start, calls.start[keep])
            assert np.array_equal(sub.end, calls.end[keep]) and np.array_equal(sub.tid, calls.tid[keep])
            assert np.array_equal(sub.where(sub.start > 0).end, sub.end[sub.start > 0])


def test_rank_selections_split_from_one_pass_keep_no_whole_copy(two_ranks) -> None:
    with _calls.shared(None):
        plain = {r: _calls.select(two_ranks, API, r) for r in (0, 1, 5)}
        ranks = _calls.api_ranks(two_ranks)  # in order of their first call
    with _calls.shared(two_ranks):
        for r in (0, 1, 5):
            assert np.array_equal(_calls.select(two_ranks, API, r), plain[r])
        kept = _calls._scope(two_ranks)
        assert ("select", API, None, ()) not in kept  # the whole selection was not asked for: not kept
        assert _calls.api_ranks(two_ranks) == ranks and sorted(ranks) == [0, 1]
        _calls.release(two_ranks)
        assert not kept


def _edges() -> pd.DataFrame:
    row = dict(rank=0, device=0, lead_start_ns=0, lead_end_ns=50, lead_kind="queued", lead_op="k", lead_call="c",
               lead_wait_ns=1000, tail_start_ns=40, tail_end_ns=100, tail_other_ns=5)
    other = dict(row, device=1, lead_kind="blocking", tail_start_ns=-1, tail_end_ns=-1)
    return pd.DataFrame([row, other])


def test_capture_cover_at_is_cover_at_its_positions() -> None:
    rng = np.random.default_rng(1)
    n = 400
    start = rng.integers(0, 95, n)
    gaps = pd.DataFrame({"rank": np.zeros(n, np.int32), "device": rng.integers(0, 3, n).astype(np.int32),
                         "start_ns": start, "end_ns": start + rng.integers(1, 10, n)})
    kind, text = capture_boundary.cover(gaps, _edges())
    # the plain assignment, edge by edge (a tail overrides a lead on the same gap)
    want_kind = np.array([""] * n, dtype=object)
    for e in _edges().itertuples():
        here = (gaps["rank"] == e.rank) & (gaps["device"] == e.device)
        lead = (here & (gaps["start_ns"] >= e.lead_start_ns) & (gaps["end_ns"] <= e.lead_end_ns)).to_numpy()
        want_kind[lead] = "uncaptured-work" if e.lead_kind == "queued" else "blocking-call"
        if e.tail_start_ns >= 0:
            tail = (here & (gaps["start_ns"] >= e.tail_start_ns) & (gaps["end_ns"] <= e.tail_end_ns)).to_numpy()
            want_kind[tail] = "shutdown"
    assert np.array_equal(kind, want_kind)
    assert {"uncaptured-work", "blocking-call", "shutdown"} <= set(kind)
    at, kind_at, text_at = capture_boundary.cover_at(gaps, _edges())
    assert np.array_equal(at, np.flatnonzero(kind != "")) and np.all(np.diff(at) > 0)
    assert np.array_equal(kind_at, kind[at]) and np.array_equal(text_at, text[at])
    assert all(t.startswith("capture boundary: ") for t in text_at)


def test_queued_wait_at_the_held_gaps_is_the_whole_computation() -> None:
    rng = np.random.default_rng(2)
    n = 300
    start = np.sort(rng.integers(0, 10_000_000, n))
    gaps = pd.DataFrame({"rank": rng.integers(0, 2, n).astype(np.int32), "device": rng.integers(0, 2, n).astype(np.int32),
                         "start_ns": start, "end_ns": start + rng.integers(1, 20_000, n)})
    held = rng.random(n) < 0.3
    sync_start = np.where(held, start - rng.integers(0, 200_000, n), -1)
    unrecorded = rng.random(n) < 0.1
    whole = sync_stall.queued_wait(gaps, held, sync_start, unrecorded=unrecorded)
    assert (whole > 0).any()
    rows = np.flatnonzero(held | (rng.random(n) < 0.5))
    part = sync_stall.queued_wait(gaps, held[rows], sync_start[rows], unrecorded=unrecorded, at=rows)
    assert np.array_equal(part, whole[rows])


def test_one_string_object_per_text_column(two_ranks) -> None:
    a = texts(1000, UNATTRIBUTED)
    assert len({id(x) for x in a}) == 1 and a[0] == UNATTRIBUTED
    cfg = Thresholds()
    steps = find_steps(two_ranks, cfg).steps.reset_index(drop=True)
    out = classify(find_gaps(two_ranks, steps, cfg), steps, two_ranks, cfg, text=False)
    kinds = out["evidence_kind"].to_numpy()
    assert len({id(x) for x in kinds}) <= len(set(kinds.tolist())) + 8  # (one per distinct kind, a few per rule)
