"""The JSON report's tables written column-wise are the bytes the per-row records gave.

``jsonout.dumps`` lays the gap and step tables out column by column (``render.json_tables``);
``jsonout.encode(jsonout.to_report(a))`` builds a dict per row and lets orjson indent it. Both must
give the same bytes, on generated and real analyses and on hostile cell values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from conftest import SHARED_TRACES
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load
from traceread.render import json_tables, json_text, jsonout
from traceread.render.names import scrub_paths
from traceread.runner import analyze


def _same_bytes(a) -> None:
    new = jsonout.dumps(a)
    old = jsonout.encode(jsonout.to_report(a))
    assert new == old
    doc = orjson.loads(new)
    assert len(doc["gaps"]) == len(a.gaps) and len(doc["steps"]) == len(a.steps)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_generated_report_bytes_equal_records(fmt: str, tmp_path: Path) -> None:
    spec = PlantSpec(seed=21, ranks=2, steps=5, weights={c: 1.0 for c in CLASSES})
    p = plant(spec)
    if fmt == "nsys":
        path = tmp_path / "t.sqlite"
        write_nsys(p.scenario, str(path))
        traces = [load(str(path))]
    else:
        paths = write_kineto(p.scenario, str(tmp_path / "t.pt.trace.json"))
        traces = [load(x) for x in paths]
    a = analyze(traces)
    assert len(a.gaps) > 50
    _same_bytes(a)


@pytest.mark.parametrize("name", ["kineto/hta_nccl_a100_rank0of2.json.gz", "kineto/param_linear_rtx2080ti.json.gz",
                                  "nsys/nvfuser_h100_2024.sqlite"])
def test_real_report_bytes_equal_records(name: str) -> None:
    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"{src} not present")
    _same_bytes(analyze([load(str(src))]))


def test_hostile_cells_encode_as_records() -> None:
    """Controls (C0, C1, DEL), quotes, %, non-ASCII, missing text, NaN, float32 and a categorical with
    missing values: the same text as orjson writes for the records, nested at the same depth."""
    text = ["a\x1b]0;x\x07", 'q"uo\\te', "100% %b %s", "\u009b\u00b5s /home/u/x.py", None, float("nan"), "", "\x7f"]
    n = len(text)
    frame = pd.DataFrame({
        "i": np.arange(n, dtype=np.int64) * 10**15, "j": np.arange(n, dtype=np.int32) - 3,
        "f": np.array([0.1, 1e-7, 1e16, np.nan, 2.5, -0.0, 1 / 3, 123456.789], dtype=np.float64),
        "h": np.linspace(0, 1, n).astype(np.float32), "b": np.arange(n) % 2 == 0,
        "s": pd.Series(text, dtype=object),
        "c": pd.Categorical(["x", None, "y\x9b", "x", "%", None, "y\x9b", "z"]),
    })
    fields = tuple(json_tables.Field(c, frame[c], text=scrub_paths if c == "s" else None) for c in frame.columns)
    fields += (json_tables.Field("nested", group=(json_tables.Field("k", frame["j"]),
                                                   json_tables.Field("t", frame["c"]))),)
    got = json_tables.document_chunks({"before": 1, "rows": None, "after": "z"}, {"rows": (fields, n)})

    def cell(c: str, v):
        if c in ("s", "c"):
            v = "" if v is None or (isinstance(v, float) and v != v) else str(v)
            return scrub_paths(v) if c == "s" else v
        return v.item() if isinstance(v, np.generic) else v

    records = []
    for i in range(n):
        r = {c: cell(c, frame[c].astype(object).iloc[i] if c in ("s", "c") else
                     (float(frame[c].iloc[i]) if c == "h" else frame[c].iloc[i])) for c in frame.columns}
        r["nested"] = {"k": int(frame["j"].iloc[i]), "t": cell("c", frame["c"].astype(object).iloc[i])}
        records.append(r)
    assert b"".join(got) == json_text.dumps({"before": 1, "rows": records, "after": "z"})


@pytest.mark.parametrize("raw", [False, True])
def test_repeated_text_encodes_as_records(raw: bool) -> None:
    """A text column whose rows share a few values (as the evidence sentences do: encoded once per
    distinct value, then spread) reads as the records, controls escaped and paths scrubbed."""
    values = ["a\x1b]0;x\x07", "\u009b\u00b5s /home/u/x.py", "", "\x7f", 'q"', "\u65e5"]
    column = np.array([values[i % len(values)] for i in range(50)], dtype=object)
    fields = (json_tables.Field("s", chunk=lambda lo, hi: column[lo:hi], raw=raw,
                                text=None if raw else scrub_paths),)
    got = b"".join(json_tables.document_chunks({"rows": None}, {"rows": (fields, len(column))}))
    records = [{"s": v if raw else scrub_paths(v)} for v in column.tolist()]
    assert got == json_text.dumps({"rows": records})


def test_chunked_rows_join_like_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows cut into several chunks read as one list (separators between chunks, none after the last)."""
    monkeypatch.setattr(json_tables, "CHUNK_ROWS", 3)
    v = np.arange(10, dtype=np.int64)
    got = b"".join(json_tables.document_chunks({"t": None}, {"t": ((json_tables.Field("v", v),), 10)}))
    assert got == json_text.dumps({"t": [{"v": int(x)} for x in v]})
    empty = b"".join(json_tables.document_chunks({"t": None}, {"t": ((), 0)}))
    assert empty == json_text.dumps({"t": []})


@pytest.mark.parametrize("name", ["kineto/hta_nccl_a100_rank0of2.json.gz", "nsys/pipit_saxpy_mpi_a100_2022.sqlite"])
def test_scan_gap_rows_from_columns_equal_rows_from_records(name: str, tmp_path: Path) -> None:
    """scan's parquet gap rows made from the frame's columns (gap_numbers + gap_texts) are the rows the
    report's gap dicts gave."""
    import pyarrow as pa

    from traceread.scan.tables import gap_numbers, gap_table, gap_texts

    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"{src} not present")
    a = analyze([load(str(src))])
    row = {"epoch_offset_ns": None, "rank_of_frame": {"0": 0}}
    old = gap_table(jsonout.to_report(a), row, "t")
    new = gap_table({"gaps": []}, row, "t", gap_numbers(a.gaps), gap_texts(a.gaps, a.cfg))
    assert len(new) == len(a.gaps) > 0
    assert new.equals(old)
    assert isinstance(new, pa.Table)


@pytest.mark.parametrize("share", [0.001, 0.01, 0.5])
def test_text_values_scrub_exactly_the_values_holding_a_separator(share: float) -> None:
    """Few or many values holding '/' or '\\' (found by ``str.find`` or by numpy), at the ends too:
    exactly those are scrubbed, as ``scrub_paths`` of every value would."""
    rng = np.random.default_rng(4)
    words = ["launch-bound gap", "\u00e9t\u00e9", "a/b/c.py:3", "C:\\x\\y.py", "/home/u/t.py", "x/"]
    values = [str(words[int(rng.integers(2, 6))] if rng.random() < share else words[int(rng.integers(0, 2))])
              for _ in range(3000)]
    values[0], values[-1] = "/usr/lib/a.py", "z\\"
    assert json_tables.text_values(values, scrub_paths) == [scrub_paths(v) for v in values]


def test_late_values_are_made_after_the_tables_before_them_and_encode_in_place() -> None:
    """A late key (the what-if, read while its replay may still run) is made only once the text
    before it is written, and the document is the one ``json_text.dumps`` writes."""
    from traceread.render import json_text

    made: list[str] = []
    whatif = {"fixes": [{"fix": "launch-bound", "step_ns": 12, "note": "\x9b\u00b5s"}], "empty": {}, "none": None}

    def late(name, value):
        def make():
            made.append(name)
            return value
        return make

    col = pd.Series(np.arange(3, dtype=np.int64))
    doc = {"a": 1, "rows": None, "whatif": None, "tail": [1, 2], "unavailable": None}
    pieces = json_tables.document_chunks(
        doc, {"rows": ((json_tables.Field("v", col),), 3)},
        {"whatif": late("whatif", whatif), "unavailable": late("unavailable", ["x: failed"])})
    first = next(pieces)  # the text before the table: no late value needed yet
    assert made == []
    rest = b"".join(pieces)
    assert made == ["whatif", "unavailable"]
    expected = json_text.dumps({**doc, "rows": [{"v": 0}, {"v": 1}, {"v": 2}], "whatif": whatif,
                                "unavailable": ["x: failed"]})
    assert first + rest == expected
