"""Renderers on a hand-built Analysis: section order, sums, escaping, privacy, JSON schema, Perfetto, plot.

The Analysis is written by hand (no loader, engine or rules involved), so every expected number
below is known independently of the pipeline.
"""

from __future__ import annotations

import dataclasses
import io
import re
from types import SimpleNamespace

import jsonschema
import numpy as np
import orjson
import pandas as pd
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PfTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

from traceread import schema
from traceread.analysis import GAP_CLASSES, PARTS, SCHEMA_VERSION, Analysis, TraceSummary, _removal, part_col
from traceread.config import Thresholds
from traceread.render import json_text, jsonout, markdown, perfetto, plot, timeline
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

T0 = 1_700_000_000_000_000_000  # epoch-like trace start
MS = 1_000_000
NASTY = "void my::kernel<a|b, `tick`, <script>alert(1)</script>>(int)"
FRAME = "/home/alice/proj/train.py(42): forward"
SECTIONS = ["# traceread diagnosis", "## Verdict", "## Scoreboard", "## Where the step time goes",
            "## What removing the dominant cause would buy", "## Largest gaps", "## Kernels, collectives and launches",
            "## Per step", "## What to do next", "## Method notes"]


def _events(rows: list[tuple]) -> pd.DataFrame:
    """rows: (lane, device, stream, tid, name, category, start_ms, end_ms)."""
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    df = pd.DataFrame({
        "trace": pd.Categorical(["t.json"] * n), "rank": np.zeros(n, np.int32),
        "lane": pd.Categorical(cols[0]), "device": np.array(cols[1], np.int32),
        "stream": np.array(cols[2], np.int64), "pid": np.full(n, 7, np.int64), "tid": np.array(cols[3], np.int64),
        "name": pd.Categorical(cols[4]), "category": pd.Categorical(cols[5]), "raw_category": pd.Categorical(cols[5]),
        "start_ns": T0 + (np.array(cols[6], float) * MS).astype(np.int64),
        "end_ns": T0 + (np.array(cols[7], float) * MS).astype(np.int64),
        "correlation": np.full(n, -1, np.int64), "external_id": np.full(n, -1, np.int64)})
    schema.validate(df)
    return df


def make_analysis(cfg: Thresholds = Thresholds()) -> Analysis:  # noqa: B008
    """Three 10 ms steps on rank 0 / GPU 0 (step 0 warmup); per step 6 ms compute, 4 ms idle."""
    ev = []
    gaps = []
    for i in range(3):
        b = 10 * i
        ev += [("gpu_compute", 0, 7, -1, "ampere_sgemm_128x64_nn", "kernel", b + 0, b + 4),
               ("gpu_compute", 0, 7, -1, NASTY, "kernel", b + 7, b + 9),
               ("gpu_comm", 0, 20, -1, "ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", b + 4, b + 6.5),
               ("cpu_thread", -1, -1, 11, "aten::mm", "cpu_op", b + 0, b + 1),
               ("cpu_thread", -1, -1, 11, "cudaLaunchKernel", "runtime", b + 0.2, b + 0.4),
               ("cpu_annotation", -1, -1, 11, f"ProfilerStep#{i}", "user_annotation", b, b + 10)]
        gaps += [dict(step=i, start=b + 4, end=b + 7, cls="comm-bound", ev="all-reduce covers 83% of the gap"),
                 dict(step=i, start=b + 9, end=b + 10, cls="data-starved" if i < 2 else "sync-stall",
                      ev="data loader covers the gap")]
    events = _events(ev)
    meta = TraceMeta(path="/home/alice/runs/t.json", format="kineto", generation="kineto 2024+", time_base="epoch",
                     devices=[DeviceInfo(0, 0, "NVIDIA H100 80GB HBM3", used=True)],
                     ranks=[RankInfo(0, "distributedInfo", 1, "distributedInfo")])
    tr = Trace(events, meta)
    g = pd.DataFrame(gaps)
    gdf = pd.DataFrame({
        "rank": np.zeros(len(g), np.int32), "device": np.zeros(len(g), np.int32), "step": g["step"].astype("int64"),
        "start_ns": T0 + (g["start"] * MS).astype("int64"), "end_ns": T0 + (g["end"] * MS).astype("int64")})
    gdf["dur_ns"] = gdf["end_ns"] - gdf["start_ns"]
    gdf["offset_ns"] = gdf["start_ns"] - (T0 + gdf["step"] * 10 * MS)
    gdf["phase"] = gdf["offset_ns"] / (10 * MS)
    gdf["comm_collective_frac"] = np.where(g["cls"] == "comm-bound", 0.83, 0.0)
    gdf["launch_count"] = 0
    gdf["longest_cpu_name"] = "cudaStreamSynchronize"
    gdf["longest_cpu_ns"] = 500_000
    gdf["python_frame"] = FRAME
    gdf["class"] = g["cls"]
    gdf["evidence"] = g["ev"] + " near " + FRAME
    gdf.insert(0, "trace", np.int32(0))
    steps = pd.DataFrame({"trace": np.zeros(3, np.int32), "rank": np.zeros(3, np.int32),
                          "device": np.zeros(3, np.int32), "step": np.arange(3, dtype=np.int64),
                          "start_ns": T0 + np.arange(3) * 10 * MS, "end_ns": T0 + (np.arange(3) + 1) * 10 * MS})
    steps["cpu_start_ns"], steps["cpu_end_ns"] = steps["start_ns"], steps["end_ns"]
    steps["busy_ns"], steps["idle_ns"] = 6 * MS, 4 * MS
    steps["warmup"], steps["outlier"] = [True, False, False], False
    for c in GAP_CLASSES:
        steps[part_col(c)] = np.array([0, 0, 0])
    steps[part_col("comm-bound")] = 3 * MS
    steps[part_col("data-starved")] = [MS, MS, 0]
    steps[part_col("sync-stall")] = [0, 0, MS]
    attr = pd.DataFrame([{"trace": 0, "rank": 0, "device": 0, "step_ns": 20 * MS}])
    for p in PARTS:
        attr[part_col(p)] = 0
    attr[part_col("compute-bound")] = 8 * MS
    attr[part_col("unclassified")] = 4 * MS  # NASTY's 2 ms per step: a kernel of unknown class
    attr[part_col("comm-bound")] = 6 * MS
    attr[part_col("data-starved")] = MS
    attr[part_col("sync-stall")] = MS
    kernels = pd.DataFrame({"trace": [0, 0], "name": ["ampere_sgemm_128x64_nn", NASTY], "class": ["gemm", "other"],
                            "count": [3, 3], "total_ns": [12 * MS, 6 * MS], "mean_ns": [4e6, 2e6],
                            "share": [2 / 3, 1 / 3]})
    summary = TraceSummary(0, meta.path, "kineto", "kineto 2024+", "epoch",
                           (meta.devices[0].to_dict(),), (0,), 1, T0, T0 + 30 * MS, "ProfilerStep")
    return Analysis(
        traces=(summary,), steps=steps, gaps=gdf, attribution=attr, dominant_cause="comm-bound",
        dominant_cost_share=0.3, second_cause="data-starved", second_cost_share=0.05,
        removal=_removal(steps, "comm-bound", None), mfu=None, mfu_hint="MFU not computed: pass --params",
        kernels=kernels, collectives=pd.DataFrame({"trace": []}), launch_stats=None, notes=("a note",),
        unavailable=("pipeline bubbles not assessed: 2 steps, 4 needed",), cfg=cfg, inputs=(tr,))


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return make_analysis()


def test_sections_in_issue_order(analysis: Analysis) -> None:
    text = markdown.to_markdown(analysis)
    pos = [text.find(s + "\n") for s in SECTIONS]
    assert all(p >= 0 for p in pos), [s for s, p in zip(SECTIONS, pos, strict=True) if p < 0]
    assert pos == sorted(pos)


def test_where_table_sums_to_100_percent(analysis: Analysis) -> None:
    text = markdown.to_markdown(analysis)
    block = text.split("## Where the step time goes")[1].split("##")[0]
    shares = [float(m) for m in re.findall(r"^\| (?:busy|idle)[^|]*\| [^|]+\| ([0-9.]+)%", block, re.M)]
    assert len(shares) == len(PARTS)
    assert sum(shares) == pytest.approx(100.0, abs=0.5)
    assert "| idle: comm-bound | 6.000 ms | 30.0% |" in block  # 6 of 20 ms
    assert "| busy: unclassified kernels | 4.000 ms | 20.0% |" in block


def test_where_table_hides_unclassified_when_every_kernel_has_a_class(analysis: Analysis) -> None:
    attr = analysis.attribution.copy()
    attr[part_col("memory-bound")], attr[part_col("unclassified")] = attr[part_col("unclassified")], 0
    text = markdown.to_markdown(dataclasses.replace(analysis, attribution=attr))
    block = text.split("## Where the step time goes")[1].split("##")[0]
    assert "unclassified" not in block and "| busy: memory-bound kernels | 4.000 ms | 20.0% |" in block


def test_verdict_removal_and_levers(analysis: Analysis) -> None:
    text = markdown.to_markdown(analysis)
    verdict = text.split("## Verdict\n\n")[1].split("\n")[0]
    assert verdict.startswith("Comm-bound: 30% of step time")
    # steady steps 1 and 2 are 10 ms with 3 ms comm-bound idle each -> 7 ms without
    assert analysis.removal.step_time_ns == 10 * MS and analysis.removal.step_time_without_ns == 7 * MS
    assert "from 10.000 ms to 7.000 ms (1.43x faster)" in text
    # second cause is 5% < report_second_min_share (10%): no second lever list
    assert "Then **" not in text
    assert "pipeline bubbles not assessed: 2 steps, 4 needed" in text


def test_second_cause_listed_when_large() -> None:
    a = make_analysis(Thresholds().with_overrides({"report_second_min_share": 0.04}))
    assert "Then **Data-starved** (5% of step time)" in markdown.to_markdown(a)


def test_gap_table_times_from_trace_start_and_order(analysis: Analysis) -> None:
    text = markdown.to_markdown(analysis)
    rows = [r for r in text.split("## Largest gaps")[1].split("##")[0].splitlines() if r.startswith("| ") and "ms |" in r]
    assert len(rows) == 6  # all 6 gaps (top 10 requested)
    assert rows[0].startswith("| 4.000 ms | 3.00 ms |")  # longest first; ties in trace order
    assert "**comm-bound**" in rows[0]


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_escaping_keeps_tables_intact(analysis: Analysis) -> None:
    text = markdown.to_markdown(analysis)
    # HTML may appear only inside code spans, where Markdown shows it literally
    outside = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
    assert "<script>" in text and "<script>" not in outside and "<" not in outside
    for block in text.split("\n\n"):
        rows = _table_rows(block)
        if not rows:
            continue
        # cells are separated by pipes not preceded by a backslash
        widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
        assert len(widths) == 1, block
    assert r"my::kernel<a\|b, `tick`" in text  # inside a code span with a longer fence


def test_no_private_paths_anywhere(analysis: Analysis, tmp_path) -> None:
    md = markdown.to_markdown(analysis)
    js = jsonout.dumps(analysis).decode()
    buf = io.BytesIO()
    perfetto.render(analysis, buf, steps="all")
    for out in (md, js.replace(analysis.traces[0].path, ""), buf.getvalue().decode("latin-1")):
        assert "alice" not in out
    assert "train.py(42): forward" in md


def test_json_validates_and_keeps_full_names(analysis: Analysis) -> None:
    doc = orjson.loads(jsonout.dumps(analysis))
    jsonschema.validate(doc, jsonout.schema())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["kernels"][1]["name"] == NASTY
    assert doc["steps"]["comm_bound_ns"] == [3 * MS] * 3
    assert doc["gaps"]["offset_ns"][0] == 4 * MS
    parts = doc["attribution"][0]["parts"]
    assert sum(p["ns"] for p in parts.values()) == doc["attribution"][0]["step_ns"]
    assert parts["comm-bound"]["share"] == pytest.approx(0.3)


def test_schema_rejects_unknown_class(analysis: Analysis) -> None:
    doc = orjson.loads(jsonout.dumps(analysis))
    doc["gaps"]["class"][0] = "slow"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, jsonout.schema())


def test_key_windows_median_and_worst(analysis: Analysis) -> None:
    w = timeline.windows(analysis, "key")
    # steady steps 1, 2 are equal length: median is the first; worst (most idle, non-warmup) ties -> first
    assert w["step"].tolist() == [1] and w["label"].tolist() == ["median and worst step"]
    assert len(timeline.windows(analysis, "all")) == 3


def _decode(data: bytes) -> PfTrace:
    t = PfTrace()
    t.ParseFromString(data)
    return t


def test_perfetto_diagnosis_track_decodes(analysis: Analysis) -> None:
    buf = io.BytesIO()
    perfetto.render(analysis, buf, steps="all")
    t = _decode(buf.getvalue())
    names = {p.track_descriptor.uuid: p.track_descriptor.name for p in t.packet if p.HasField("track_descriptor")}
    diag = [u for u, n in names.items() if n.startswith("traceread diagnosis")]
    assert len(diag) == 1
    begins = [p.track_event for p in t.packet
              if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    diag_slices = [e for e in begins if e.track_uuid == diag[0]]
    assert [e.name for e in diag_slices] == analysis.gaps.sort_values("start_ns")["class"].tolist()
    ann = {a.name: a for a in diag_slices[0].debug_annotations}
    assert ann["evidence"].string_value.startswith("all-reduce covers 83%")
    kernels = [e.name for e in begins if names.get(e.track_uuid, "").startswith("GPU 0 stream")]
    assert kernels.count("ampere_sgemm_128x64_nn") == 3
    # every begin has its end on the same track
    ends = [p.track_event.track_uuid for p in t.packet
            if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_END]
    assert sorted(ends) == sorted(e.track_uuid for e in begins)


def test_perfetto_key_steps_only(analysis: Analysis) -> None:
    buf = io.BytesIO()
    perfetto.render(analysis, buf, steps="key")
    t = _decode(buf.getvalue())
    begins = [p.track_event.name for p in t.packet
              if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    assert begins.count("ampere_sgemm_128x64_nn") == 1 and "step 1 (median and worst step)" in begins


@pytest.mark.parametrize("ext,magic", [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_plot_writes_picture(analysis: Analysis, tmp_path, ext: str, magic: bytes) -> None:
    path = tmp_path / f"t.{ext}"
    plot.render(analysis, str(path))
    data = path.read_bytes()
    assert data.startswith(magic)
    if ext == "svg":
        text = data.decode()
        assert "comm-bound" in text and "alice" not in text


def test_window_events_yield_each_overlapping_event_once(analysis: Analysis) -> None:
    wins = timeline.windows(analysis, "all")
    got = [e for e in timeline.window_events(analysis, 0, 0, None, wins, timeline.HOST_LANES)]
    idx = np.concatenate([e.index.to_numpy() for e in got])
    assert len(idx) == len(set(idx))
    ev = analysis.inputs[0].events
    lo, hi = int(wins["start_ns"].min()), int(wins["end_ns"].max())
    want = ev[ev["lane"].isin(timeline.HOST_LANES) & (ev["end_ns"] > lo) & (ev["start_ns"] < hi)]
    assert sorted(idx) == sorted(want.index)
    assert [len(e) for e in got] == [3, 3, 3]  # op, launch call, ProfilerStep per step


@pytest.mark.parametrize("fmt", ["markdown", "json", "plot", "perfetto"])
def test_every_renderer_writes_through_write_outputs(analysis: Analysis, tmp_path, fmt: str) -> None:
    from traceread.render import write_outputs

    path = tmp_path / {"markdown": "r.md", "json": "r.json", "plot": "t.png", "perfetto": "t.pftrace"}[fmt]
    kwargs = {"markdown": str(path)} if fmt == "markdown" else {f"{fmt}_path" if fmt != "json" else "json_path":
                                                                  str(path)}
    write_outputs(analysis, **kwargs)
    assert path.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    if fmt == "json":
        assert orjson.loads(path.read_bytes()) == orjson.loads(orjson.dumps(jsonout.to_report(analysis)))


def test_per_step_table_is_capped(analysis: Analysis, monkeypatch) -> None:
    monkeypatch.setattr(markdown, "MAX_STEP_ROWS", 2)
    block = markdown.to_markdown(analysis).split("## Per step")[1].split("## ")[0]
    assert len([r for r in block.splitlines() if r.startswith("| ") and " ms |" in r]) == 2
    assert "The first 2 of 3 steps; every step is in the JSON." in block


def test_removal_takes_the_slowest_rank_per_step() -> None:
    rows = []
    # step 1: rank 0 is 10 ms with 4 ms data-starved, rank 1 is 12 ms with 1 ms; step 2 likewise
    for step in (1, 2):
        for rank, length, cost in ((0, 10, 4), (1, 12, 1)):
            row = {"trace": rank, "rank": rank, "device": 0, "step": step, "start_ns": 0, "end_ns": length * MS,
                   "warmup": False, "outlier": False}
            row.update({part_col(c): 0 for c in GAP_CLASSES})
            row[part_col("data-starved")] = cost * MS
            rows.append(row)
    r = _removal(pd.DataFrame(rows), "data-starved", SimpleNamespace(mfu=0.3))  # an MfuResult's mfu
    # before: max(10, 12) = 12 ms; after: max(10 - 4, 12 - 1) = 11 ms
    assert (r.step_time_ns, r.step_time_without_ns) == (12 * MS, 11 * MS)
    assert r.mfu_without == pytest.approx(0.3 * 12 / 11)
    assert _removal(pd.DataFrame(rows), "memory-bound", None) is None


def test_one_json_encoder_and_one_sanitizer():
    """render.json_text: every JSON file's bytes (reports, scan, diff, --json) and plain values."""
    doc = {"a": np.int64(3), "b": [np.float64("nan"), float("inf"), 0.5], "c": (True, None), 1: "int key"}
    assert json_text.plain(doc) == {"a": 3, "b": [None, None, 0.5], "c": [True, None], "1": "int key"}
    assert orjson.loads(json_text.dumps({1: np.arange(2)})) == {"1": [0, 1]}
    assert json_text.dumps({"x": 1}) == b'{\n  "x": 1\n}'
