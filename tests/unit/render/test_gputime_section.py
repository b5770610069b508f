"""The report's "Where the GPU time went" section and ``analyze --json``'s ``kernels_tables``: the first rows
of ``traceread kernels``' tables, checked against that command's JSON and against an independent read of
the file (plain gzip/json for Kineto, sqlite3 for Nsight Systems): the per-op GPU time sums to the
kernel total, the copies' bytes are the raw rows' bytes."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from conftest import FIXTURES, SHARED_TRACES, needs_shared

import traceread
from traceread.cli import main
from traceread.metrics.compact import REPORT_TABLES, TOP_ROWS, compact_tables
from traceread.metrics.durations import by_name, top_by_name
from traceread.metrics.tables import kernel_tables
from traceread.render import jsonout
from traceread.render.fmt import dur, pct
from traceread.render.gputime import TITLE
from traceread.render.markdown import to_markdown

NCCL = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
RESNET = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
SGLANG = FIXTURES / "tracelens_sglang_decode_mi300x.json.gz"
H100 = SHARED_TRACES / "nsys" / "nsysai_h100_2gpu_window_2026.sqlite"


def _section(md: str) -> str:
    assert md.count(TITLE) == 1
    return md.split(TITLE, 1)[1].split("\n## ", 1)[0]


def _rows(text: str, after: str) -> list[list[str]]:
    """The body rows of the first table after the paragraph starting ``after``."""
    block = text.split(after, 1)[1].split("\n\n", 2)[1]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines()[2:]]


def _kernels_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["kernels", str(path), "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)["tables"]


def _raw_kineto(path: Path) -> tuple[int, dict[str, list[int]]]:
    """Kernel ns in total, and per copy kind [count, bytes], straight from the file."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    kernels, copies = 0, defaultdict(lambda: [0, 0])
    for e in doc["traceEvents"] if isinstance(doc, dict) else doc:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") != "X":
            continue
        if cat == "kernel":
            kernels += int(Decimal(e["dur"]) * 1000)
        elif cat in ("gpu_memcpy", "memcpy", "gpu_memset", "memset"):
            kind = "memset" if "memset" in cat else {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D"}.get(
                e["name"].split()[1], e["name"].split()[1])
            copies[kind][0] += 1
            copies[kind][1] += int(e["args"]["bytes"])
    return kernels, copies


@pytest.mark.parametrize("path", [NCCL, RESNET, SGLANG], ids=lambda p: p.name)
def test_section_rows_are_the_kernels_tables_first_rows(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = traceread.analyze(str(path))
    full = _kernels_json(path, capsys)
    doc = json.loads(jsonout.dumps(a))
    jsonschema.validate(doc, jsonout.schema())
    (got,) = doc["kernels_tables"]
    assert got["trace"] == 0
    for name in REPORT_TABLES:
        want = full[name]["rows"]
        assert got[name]["total_rows"] == len(want)
        assert got[name]["rows"] == want[:TOP_ROWS], name  # the same rows, columns and values
        assert got[name]["note"] == full[name]["note"]
    sec = _section(to_markdown(a))
    ops = full["ops"]["rows"]
    shown = _rows(sec, "GPU time by launching op")
    assert len(shown) == min(TOP_ROWS, len(ops))
    assert (f"GPU time by launching op (top {TOP_ROWS} of {len(ops)};" in sec) == (len(ops) > TOP_ROWS)
    for row, want in zip(shown, ops, strict=False):
        assert row[0].strip("`") == want["op"]
        assert row[1:] == [f"{want['kernels']:,}", f"{want['calls']:,}", dur(want["total_ns"]), pct(want["share"])]
    api = _rows(sec, "Host API calls")
    for row, want in zip(api, full["host_api"]["rows"], strict=False):
        assert row == [f"`{want['api']}`", f"{want['count']:,}", dur(want["total_ns"]), dur(want["median_ns"]),
                       dur(want["p90_ns"])]
    assert f"`traceread kernels {path.name}`" in sec


@pytest.mark.parametrize("path", [NCCL, RESNET], ids=lambda p: p.name)
def test_op_time_sums_to_the_kernel_total_and_copy_bytes_to_the_raw_rows(path: Path) -> None:
    kernel_ns, copies = _raw_kineto(path)
    trace = traceread.load(path)
    t = compact_tables(trace)
    ops = kernel_tables(trace).frames["ops"]
    assert t.rows["ops"] == len(ops) and t.frames["ops"].equals(ops.head(TOP_ROWS))
    # every op row (the section shows the first ones) sums to the file's kernel time (<= 1 ns per kernel)
    n_kernels = int(ops["kernels"].sum())
    assert int(ops["total_ns"].sum()) == pytest.approx(kernel_ns, abs=n_kernels)
    # shares are of that total: the shown rows' shares are their time over it
    shown = t.frames["ops"]
    assert list(shown["share"]) == pytest.approx(list(shown["total_ns"] / ops["total_ns"].sum()))
    c = t.frames["copies"]
    assert t.rows["copies"] == len(c)  # a single GPU: fewer kinds than rows shown
    got = {k: [int(g["count"].sum()), int(g["bytes"].sum())] for k, g in c.groupby("kind")}
    assert got == {k: v for k, v in copies.items()}
    for r in c.itertuples():
        assert r.gbps == pytest.approx(r.bytes / r.total_ns, rel=1e-9)


@needs_shared
def test_h100_export_section_shows_the_pinned_copies_per_gpu() -> None:
    """The real H100 export's ~25 GB of pinned host-to-device copies per GPU, with bytes from the raw table."""
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    try:
        raw = dict(con.execute("SELECT deviceId, SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEM_KIND k "
                               "ON k.id = m.srcKind WHERE k.label = 'Pinned' AND m.copyKind = 1 GROUP BY 1").fetchall())
        kernel_ns = con.execute("SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()
    a = traceread.analyze(str(H100))
    (t,) = a.tables
    assert t is not None
    ops = kernel_tables(traceread.load(H100)).frames["ops"]
    assert int(ops["total_ns"].sum()) == kernel_ns
    c = t.frames["copies"]
    pinned = c[(c["kind"] == "H2D") & (c["host_memory"] == "Pinned")]
    assert {int(r.device): int(r.bytes) for r in pinned.itertuples()} == raw and min(raw.values()) > 25e9
    sec = _section(to_markdown(a))
    rows = _rows(sec, "Copies and memsets by kind")
    for r in pinned.itertuples():
        row = next(x for x in rows if x[0] == f"{r.rank} / {r.device}" and x[1:3] == ["H2D", "Pinned"])
        assert row[4] == f"{r.bytes / 1e9:,.2f} GB" and row[6] == f"{r.gbps:,.2f}"


def test_top_rows_equal_the_full_summary_on_ties_and_one_name() -> None:
    code = pd.Series([0, 1, 1, 2, 2, 3, 3, 3, 4]).to_numpy()
    names = pd.Series(["b", "a", "d", "c", "e"]).to_numpy(dtype=object)
    dur = pd.Series([5, 2, 3, 4, 1, 1, 1, 3, 0]).to_numpy()  # a, b, c, d tie at 5 ns: by name
    full = by_name(code, names, dur, label="api")
    for top in (1, 2, 4, 5, 9):
        rows, n = top_by_name(code, names, dur, top, label="api")
        assert n == len(full) == 5
        pd.testing.assert_frame_equal(rows, full.head(top).reset_index(drop=True))
    assert list(full["api"][:4]) == ["a", "b", "c", "d"]


def test_many_inputs_show_four_blocks_and_count_the_rest(tmp_path: Path) -> None:
    paths = []
    for i in range(5):
        p = tmp_path / f"rank{i}.json.gz"
        p.write_bytes(NCCL.read_bytes())
        paths.append(str(p))
    a = traceread.analyze(paths)
    assert len(a.tables) == 5 and all(t is not None for t in a.tables)
    sec = _section(to_markdown(a))
    assert sec.count("\n### ") == 4 and "1 other input not shown here" in sec
    assert [t["trace"] for t in json.loads(jsonout.dumps(a))["kernels_tables"]] == [0, 1, 2, 3, 4]


def test_a_failing_table_is_an_unavailable_line_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import traceread.metrics.compact as compact

    def broken(trace, top=TOP_ROWS):
        raise ValueError("planted")

    monkeypatch.setattr(compact, "compact_tables", broken)
    a = traceread.analyze(str(NCCL))
    assert a.tables == (None,)
    assert any(u.startswith("where the GPU time went") and "planted" in u for u in a.unavailable)
    md = to_markdown(a)
    assert TITLE not in md and "## Per step" in md
    doc = json.loads(jsonout.dumps(a))
    jsonschema.validate(doc, jsonout.schema())
    assert doc["kernels_tables"] == [None]
