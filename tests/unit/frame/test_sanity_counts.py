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
