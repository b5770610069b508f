"""The JSON report's tables (schema 2.0: an object of equal-length columns) written column by column
read as the frames they came from.

``jsonout.dumps`` writes the gap and step tables a chunk of rows at a time (``render.json_tables``);
``jsonout.encode(jsonout.to_report(a))`` lays out the same tables from lists. Both must give the same
document, pandas must read each table back in one call with its values, and hostile text must be
escaped, on generated and real analyses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from _frames import table_rows
from conftest import SHARED_TRACES
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load
from traceread.render import json_tables, json_text, jsonout
from traceread.render.names import scrub_paths
from traceread.runner import analyze
from traceread.vocabulary import GAP_CLASSES, part_col


def _same_document(a) -> dict:
    new = jsonout.dumps(a)
    old = jsonout.encode(jsonout.to_report(a))
    doc = orjson.loads(new)
    assert doc == orjson.loads(old)
    assert new.count(b"\n") == old.count(b"\n")  # one line per column in both
    gaps, steps = pd.DataFrame(doc["gaps"]), pd.DataFrame(doc["steps"])  # one call each
    assert len(gaps) == len(a.gaps) and len(steps) == len(a.steps)
    for c in ("start_ns", "end_ns", "dur_ns", "offset_ns", "cpu_runtime_ns", "launch_count"):
        assert gaps[c].dtype == np.int64 and gaps[c].tolist() == a.gaps[c].astype(np.int64).tolist()
    assert gaps["class"].tolist() == a.gaps["class"].astype(str).tolist()
    assert not [c for c in doc["gaps"] if c.endswith("_frac")] and "evidence" not in doc["gaps"]
    assert (steps[[part_col(c) for c in GAP_CLASSES]].sum(axis=1) == steps["idle_ns"]).all()
    # the table's lines: one per column, each a JSON value of its own
    at = new.index(b'\n  "gaps": {\n') + len(b'\n  "gaps": {\n')
    lines = new[at:new.index(b"\n  }", at)].split(b"\n")
    assert len(lines) == len(doc["gaps"])
    assert all(orjson.loads(b"{" + ln.rstrip(b",") + b"}") for ln in lines)
    return doc


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_generated_report_tables_read_as_the_frames(fmt: str, tmp_path: Path) -> None:
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
    doc = _same_document(a)
    assert len(table_rows(doc["gaps"])) == len(a.gaps)


@pytest.mark.parametrize("name", ["kineto/hta_nccl_a100_rank0of2.json.gz", "kineto/param_linear_rtx2080ti.json.gz",
                                  "nsys/nvfuser_h100_2024.sqlite"])
def test_real_report_tables_read_as_the_frames(name: str) -> None:
    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"{src} not present")
    _same_document(analyze([load(str(src))]))


def test_hostile_cells_encode_as_the_lists() -> None:
    """Controls (C0, C1, DEL), quotes, %, non-ASCII, missing text, NaN, float32, sparse zeros and a
    categorical with missing values: each column reads back as its values (text '' where missing,
    paths scrubbed, NaN as null), and the bytes are those :func:`json_tables.table_text` lays out."""
    text = ["a\x1b]0;x\x07", 'q"uo\\te', "100% %b %s", "\u009b\u00b5s /home/u/x.py", None, float("nan"), "", "\x7f"]
    n = len(text)
    frame = pd.DataFrame({
        "i": np.arange(n, dtype=np.int64) * 10**15, "j": np.arange(n, dtype=np.int32) - 3,
        "f": np.array([0.1, 1e-7, 1e15, np.nan, 2.5, -0.0, 1 / 3, 123456.789], dtype=np.float64),
        "h": np.linspace(0, 1, n).astype(np.float32), "b": np.arange(n) % 2 == 0,
        "s": pd.Series(text, dtype=object),
        "c": pd.Categorical(["x", None, "y\x9b", "x", "%", None, "y\x9b", "z"]),
        "z": pd.arrays.SparseArray(np.array([0, 0, 5, 0, 0, 0, 7, 0], dtype=np.int64), fill_value=0),
    })
    fields = tuple(json_tables.Field(c, frame[c], text=scrub_paths if c == "s" else None) for c in frame.columns)
    got = b"".join(json_tables.document_chunks({"before": 1, "rows": None, "after": "z"}, {"rows": (fields, n)}))

    def cell(c: str, v):
        if c in ("s", "c"):
            v = "" if v is None or (isinstance(v, float) and v != v) else str(v)
            return scrub_paths(v) if c == "s" else v
        if c in ("f", "h"):
            return None if v != v else float(v)
        return v.item() if isinstance(v, np.generic) else v

    columns = {c: [cell(c, v) for v in frame[c].astype(object).tolist()] for c in frame.columns}
    doc = orjson.loads(got)
    assert doc == {"before": 1, "rows": columns, "after": "z"}
    assert b"\\u009b" in got and b"\\u007f" in got and b"\xc2\x9b" not in got and b"\x7f" not in got
    assert got == json_text.dumps({"before": 1, "rows": "@", "after": "z"}).replace(
        b'"@"', json_tables.table_text(columns))
    assert pd.DataFrame(doc["rows"])["i"].dtype == np.int64


def test_repeated_text_encodes_as_the_list() -> None:
    """A text column given a chunk at a time whose rows share a few values reads as the list, controls
    escaped and paths scrubbed."""
    values = ["a\x1b]0;x\x07", "\u009b\u00b5s /home/u/x.py", "", "\x7f", 'q"', "\u65e5"]
    column = np.array([values[i % len(values)] for i in range(50)], dtype=object)
    fields = (json_tables.Field("s", chunk=lambda lo, hi: column[lo:hi], text=scrub_paths),)
    got = b"".join(json_tables.document_chunks({"rows": None}, {"rows": (fields, len(column))}))
    assert orjson.loads(got) == {"rows": {"s": [scrub_paths(v) for v in column.tolist()]}}


def test_chunked_rows_join_like_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows cut into several chunks read as one column (commas between chunks, none after the last);
    a table without columns is ``{}``, one without rows has its columns, empty."""
    monkeypatch.setattr(json_tables, "CHUNK_ROWS", 3)
    v = np.arange(10, dtype=np.int64)
    c = pd.Categorical(list("abcabcabca"))
    fields = (json_tables.Field("v", v), json_tables.Field("c", c))
    got = b"".join(json_tables.document_chunks({"t": None}, {"t": (fields, 10)}))
    assert got == json_text.dumps({"t": "@"}).replace(b'"@"', json_tables.table_text({"v": v.tolist(), "c": list(c)}))
    empty = b"".join(json_tables.document_chunks({"t": None}, {"t": ((), 0)}))
    assert empty == json_text.dumps({"t": {}})
    no_rows = b"".join(json_tables.document_chunks({"t": None}, {"t": ((json_tables.Field("v", v[:0]),), 0)}))
    assert orjson.loads(no_rows) == {"t": {"v": []}}


@pytest.mark.parametrize("name", ["kineto/hta_nccl_a100_rank0of2.json.gz", "nsys/pipit_saxpy_mpi_a100_2022.sqlite"])
def test_scan_gap_rows_from_columns_equal_rows_from_the_report(name: str, tmp_path: Path) -> None:
    """scan's parquet gap rows made from the frame's columns (gap_numbers + gap_texts) are the rows
    the report's gap table gives (the evidence sentence, not in the report, from the texts)."""
    import pyarrow as pa

    from traceread.scan.tables import gap_numbers, gap_table, gap_texts

    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"{src} not present")
    a = analyze([load(str(src))])
    row = {"epoch_offset_ns": None, "rank_of_frame": {"0": 0}}
    texts = gap_texts(a.gaps, a.cfg)
    old = gap_table(jsonout.to_report(a), row, "t", texts={"evidence": texts["evidence"]})
    new = gap_table({"gaps": {}}, row, "t", gap_numbers(a.gaps), texts)
    assert len(new) == len(a.gaps) > 0
    assert new.equals(old)
    assert isinstance(new, pa.Table)


@pytest.mark.parametrize("share", [0.001, 0.01, 0.5])
def test_text_values_scrub_exactly_the_values_holding_a_separator(share: float) -> None:
    """Few or many values holding '/' or '\\', at the ends too: exactly those are scrubbed, as
    ``scrub_paths`` of every value would."""
    rng = np.random.default_rng(4)
    words = ["launch-bound gap", "\u00e9t\u00e9", "a/b/c.py:3", "C:\\x\\y.py", "/home/u/t.py", "x/"]
    values = [str(words[int(rng.integers(2, 6))] if rng.random() < share else words[int(rng.integers(0, 2))])
              for _ in range(3000)]
    values[0], values[-1] = "/usr/lib/a.py", "z\\"
    assert json_tables.text_values(values, scrub_paths) == [scrub_paths(v) for v in values]


def test_late_values_are_made_after_the_tables_before_them_and_encode_in_place() -> None:
    """A late key (the what-if, read while its replay may still run) is made only once the text
    before it is written, and the document is the one ``json_text.dumps`` writes around the table."""
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
    expected = json_text.dumps({**doc, "rows": "@", "whatif": whatif, "unavailable": ["x: failed"]})
    assert first + rest == expected.replace(b'"@"', json_tables.table_text({"v": [0, 1, 2]}))


def test_a_table_of_zeros_reads_back_with_orjson() -> None:
    """Columns of zeros (the overlaps of most gaps) are the densest text a table holds; orjson's reader
    refuses some such pretty-printed documents when the cells are only a comma apart: these read."""
    n = 50_000
    zeros = np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(3)
    columns = {"zeros": zeros, "bits": rng.integers(0, 2, n), "two_digits": rng.integers(10, 100, n),
               "flags": rng.random(n) < 0.5, "sparse": pd.arrays.SparseArray(np.where(rng.random(n) < 0.01, 7, 0))}
    fields = tuple(json_tables.Field(f"{name}{i}", v) for i in range(4) for name, v in columns.items())
    got = b"".join(json_tables.document_chunks({"a": 1, "gaps": None}, {"gaps": (fields, n)}))
    doc = orjson.loads(got)
    assert pd.DataFrame(doc["gaps"]).shape == (n, len(fields))
    assert doc["gaps"]["two_digits0"] == columns["two_digits"].tolist()
