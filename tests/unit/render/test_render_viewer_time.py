"""Markdown times read as the trace's own viewer shows them: nsys seconds since the session start,
Kineto ms from the trace's first event (Perfetto); the JSON keeps raw ns."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from decimal import Decimal

import orjson
import pytest
from _frames import table_rows
from conftest import FIXTURES, SHARED_TRACES, needs_shared
from tracesynth.nsys_writer import write_nsys
from tracesynth.repeating import loop

from traceread.loaders import load
from traceread.render import jsonout
from traceread.render.fmt import ViewerClock
from traceread.render.markdown import to_markdown
from traceread.runner import analyze

_GAP_ROW = re.compile(r"^\| ([\d,.]+) (s|ms) \| ", re.M)


def test_clock_formats() -> None:
    assert ViewerClock("nsys", 5_000)(155_360_295_935) == "155.360296 s"
    assert ViewerClock("kineto", 1_000_000)(3_500_000) == "2.500 ms"
    assert "Nsight Systems" in ViewerClock("nsys", 0).meaning and "Perfetto" in ViewerClock("kineto", 0).meaning


def _first_gap_start(md: str) -> tuple[float, str]:
    m = _GAP_ROW.search(md.split("## Largest gaps", 1)[1])
    assert m, "no gap row"
    return float(m.group(1).replace(",", "")), m.group(2)


def test_nsys_times_are_session_seconds(tmp_path) -> None:
    """A synthetic export: events at t ns after the session start show as t / 1e9 s."""
    path = tmp_path / "loop.sqlite"
    write_nsys(loop(steps=4, seed=1, profiler=True).scenario, path)
    a = analyze([load(path)])
    md = to_markdown(a)
    assert "seconds since the session start, as the Nsight Systems timeline shows them" in md
    shown, unit = _first_gap_start(md)
    top = a.gaps.nlargest(a.top_gaps, "dur_ns", keep="first").iloc[0]
    assert unit == "s" and shown == pytest.approx(int(top["start_ns"]) / 1e9, abs=1e-6)
    doc = orjson.loads(jsonout.dumps(a))
    assert any(g["start_ns"] == int(top["start_ns"]) for g in table_rows(doc["gaps"]))  # JSON: raw ns


@needs_shared
def test_real_nsys_window_matches_the_export() -> None:
    """nvfuser_h100_2024: the window starts at the first kernel's start as the export stores it."""
    path = SHARED_TRACES / "nsys" / "nvfuser_h100_2024.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        first = conn.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    md = to_markdown(analyze([load(path)]))
    window = re.search(r"- Window: ([\d.]+) s to", md)
    assert window and float(window.group(1)) == pytest.approx(first / 1e9, abs=2e-6)


def test_kineto_times_are_ms_from_the_first_event() -> None:
    """The first event of the file (read here from the JSON itself) is 0 ms, as in Perfetto."""
    path = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    first_us = min(Decimal(str(e["ts"])) for e in doc["traceEvents"] if "ts" in e and e.get("ph") != "M")
    a = analyze([load(path)])
    md = to_markdown(a)
    assert "ms from the trace's first event, as Perfetto shows them" in md
    shown, unit = _first_gap_start(md)
    top = a.gaps.nlargest(a.top_gaps, "dur_ns", keep="first").iloc[0]
    assert unit == "ms"
    assert a.traces[0].start_ns == int(first_us * 1000)  # the loader keeps ts as written (relative here)
    assert shown == pytest.approx((int(top["start_ns"]) - int(first_us * 1000)) / 1e6, abs=1e-3)
