"""Sanity notes count repeated GPU activities and stream overlaps as an independent count does: rows
with the same start but another stream, name or correlation are not repeats; host rows never count."""

from __future__ import annotations

import random
import re

from scoreboard_frames import ev, make_trace

from traceread import schema
from traceread.config import Thresholds
from traceread.frame.sanity import _KEY, sanity_notes
from traceread.render.notes import text as words


def _count(notes: list[str], marker: str) -> int:
    hit = [n for n in notes if marker in n]
    return int(re.match(r"(\d+)", hit[0]).group(1)) if hit else 0  # type: ignore[union-attr]


def test_repeats_and_overlaps_match_an_independent_count() -> None:
    rng = random.Random(7)
    rows = []
    for i in range(400):
        start = rng.choice([0, 10, 10, 20, 30]) + 40 * rng.randrange(30)  # many shared starts
        lane = rng.choice([schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMPUTE, schema.LANE_MEMCPY,
                           schema.LANE_CPU_THREAD])
        row = ev(lane, rng.choice(["a", "b"]), start, start + rng.choice([5, 8]),
                 stream=rng.choice([7, 8]), correlation=rng.choice([1, 2, i]))
        rows.append(row)
        if rng.random() < 0.2:
            rows.append(dict(row))  # a planted repeat
    trace = make_trace(rows)
    notes = [words(n) for n in sanity_notes(trace, Thresholds())]  # data, as the reports word it

    seen: set[tuple] = set()
    repeats = 0
    kept = []
    for r in rows:
        if r["lane"] not in schema.GPU_LANES:
            continue
        key = tuple(r[c] for c in _KEY)
        if key in seen:
            repeats += 1
            continue
        seen.add(key)
        if r["lane"] == schema.LANE_GPU_COMPUTE:
            kept.append(r)
    overlaps = 0
    for stream in {r["stream"] for r in kept}:
        reach = None
        for r in sorted((r for r in kept if r["stream"] == stream), key=lambda r: r["start_ns"]):
            overlaps += reach is not None and r["start_ns"] < reach
            reach = r["end_ns"] if reach is None else max(reach, r["end_ns"])
    assert repeats > 20 and overlaps > 20  # the case exercises both
    assert _count(notes, "appear more than once") == repeats
    assert _count(notes, "start before the previous kernel") == overlaps


def test_run_maxima_and_codes_are_pandas_own() -> None:
    # the stream order's numbering and the running end within each stream, against pandas' factorize and
    # group-by cummax, over small and wide integer ranges
    import numpy as np
    import pandas as pd

    from traceread.frame.sanity import _running_max_by_run, _sorted_codes

    rng = np.random.default_rng(11)
    for trial in range(500):
        n = int(rng.integers(1, 60))
        wide = trial % 3 == 0
        values = rng.integers(-(2**40) if wide else -5, 2**40 if wide else 40, n)
        for dtype in (np.int64, np.int32, np.uint8):
            v = values.astype(dtype)
            codes, count = _sorted_codes(v)
            want, uniques = pd.factorize(v, sort=True)
            assert np.array_equal(codes, want) and count == len(uniques)
        run = np.cumsum(np.r_[1, rng.random(n - 1) < 0.3]).astype(np.int64)
        assert np.array_equal(_running_max_by_run(values, run), pd.Series(values).groupby(run).cummax().to_numpy())
