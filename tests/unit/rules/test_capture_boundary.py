"""Capture boundaries and honest refusals (issue 24), on planted traces in both formats.

* Idle at the capture's edges (GPU busy with work issued before the capture; a blocking call at its
  start; the profiler shutting down after the last step) is ``capture-boundary``: a part of step
  time, out of the verdict, counted in a note.
* A trace with no GPU activity says what is missing, from evidence in the file: kernel records lost,
  a counter-only capture, a file cut before its GPU records, a CPU-only capture.
"""

from __future__ import annotations

import gzip
import io
import json
import re

import pytest
from tracesynth.capture import KINDS, data_movement_only, lost_kernel_records
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, classify_file, plant

from traceread import load
from traceread.attribution import verdict
from traceread.config import Thresholds
from traceread.render.markdown import render
from traceread.render.notes import text as words
from traceread.runner import analyze
from traceread.vocabulary import PARTS, VERDICTS

CFG = Thresholds()
MS = 1_000_000


def _write(planted, fmt: str, tmp_path, name: str = "t") -> str:
    sc = planted.scenario if hasattr(planted, "scenario") else planted
    if fmt == "nsys":
        return write_nsys(sc, str(tmp_path / f"{name}.sqlite"))
    return write_kineto(sc, str(tmp_path / (name + ".rank{rank}.pt.trace.json")))[0]


def _spec(lead: str, **kw) -> PlantSpec:
    return PlantSpec(seed=3, ranks=1, steps=6, jitter=0.2, jitter_dist="uniform",
                     weights={"launch-bound": 1.0, "sync-stall": 1.0, "data-starved": 1.0}, capture_lead=lead,
                     capture_lead_ns=80 * MS, capture_tail_ns=60 * MS, **kw)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("lead", KINDS)
def test_the_capture_edges_are_capture_boundary_and_out_of_the_verdict(tmp_path, fmt, lead):
    planted = plant(_spec(lead))
    path = _write(planted, fmt, tmp_path)
    gaps = classify_file(path, CFG)
    edge = gaps[gaps["class"] == "capture-boundary"]
    kinds = set(edge["evidence_kind"])
    assert "shutdown" in kinds and kinds & {"uncaptured-work", "blocking-call"}
    # Both planted stretches, nothing else: 80 ms at the start (+-20%), 60 ms at the end.
    assert 100 * MS <= int(edge["dur_ns"].sum()) <= 170 * MS
    a = analyze([load(path)], cfg=CFG)
    assert a.dominant_cause != "capture-boundary" and a.dominant_cause in VERDICTS
    assert a.attribution["capture_boundary_ns"].sum() > 0
    parts = sum(int(a.attribution[p.replace("-", "_") + "_ns"].sum()) for p in PARTS)
    assert parts == int(a.attribution["step_ns"].sum())  # the parts still sum to the steps
    assert any(words(n).startswith("capture boundary:") for n in a.notes)


def test_the_verdict_is_taken_on_the_captured_time():
    shares = {p: 0.0 for p in PARTS} | {"compute-bound": 0.3, "capture-boundary": 0.6, "launch-bound": 0.1}
    v = verdict(shares, CFG)
    assert v.cause == "launch-bound" and v.share == pytest.approx(0.25)
    # Without the boundary the same split of captured time is healthy busy time plus 25% launch-bound.
    assert verdict({p: 0.0 for p in PARTS} | {"compute-bound": 1.0, "capture-boundary": 0.0}, CFG).cause == "healthy"


def test_a_trace_without_edges_has_no_capture_boundary(tmp_path):
    planted = plant(_spec(""))
    gaps = classify_file(_write(planted, "kineto", tmp_path), CFG)
    # The tail is still planted: only the shutdown stretch is a boundary, the start is not.
    assert set(gaps.loc[gaps["class"] == "capture-boundary", "evidence_kind"]) == {"shutdown"}
    planted = plant(PlantSpec(seed=3, ranks=1, steps=6, jitter=0.2))
    gaps = classify_file(_write(planted, "kineto", tmp_path, "plain"), CFG)
    assert not (gaps["class"] == "capture-boundary").any()


def _verdict_text(path: str) -> str:
    a = analyze([load(path)], cfg=CFG)
    assert a.dominant_cause == "no-gpu-activity"
    out = io.StringIO()
    render(a, out)
    return out.getvalue().split("## Verdict", 1)[1].split("##", 1)[0]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_lost_kernel_records_are_named(tmp_path, fmt):
    sc = lost_kernel_records(plant(PlantSpec(seed=1, ranks=1, steps=4)).scenario)
    text = _verdict_text(_write(sc, fmt, tmp_path))
    assert "kernel records lost" in text and "CPU-only" not in text


def _kineto_doc(tmp_path, events: list[dict]) -> str:
    path = tmp_path / "hand.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "traceEvents": events}, fh)
    return str(path)


def _host(name: str, cat: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": 10, "ts": ts, "dur": dur}


def test_a_counter_only_capture_is_named(tmp_path):
    events = [_host("aten::mm", "cpu_op", 0, 50), _host("cudaLaunchKernel", "cuda_runtime", 10, 5)]
    events += [{"ph": "X", "cat": "cuda_profiler_range", "name": f"range_{i}", "pid": 0, "tid": 0, "ts": 100 + i,
                "dur": 1, "args": {"sm__throughput.avg.pct_of_peak_sustained_elapsed": 42.0}} for i in range(3)]
    text = _verdict_text(_kineto_doc(tmp_path, events))
    assert "counter-only capture" in text and "kernel records lost" not in text


def test_a_cpu_only_capture_is_named(tmp_path):
    text = _verdict_text(_kineto_doc(tmp_path, [_host("aten::mm", "cpu_op", 0, 50),
                                                _host("aten::add", "cpu_op", 60, 20)]))
    assert "CPU-only capture" in text and "not one launch call" in text


def test_cuda_records_without_gpu_work_are_not_asked_whether_cuda_was_enabled(tmp_path):
    """Issue 42: runtime calls but no launch and no GPU op (the model ran on the CPU): the refusal says what
    the file holds, not "was ProfilerActivity.CUDA enabled?"."""
    events = [_host("aten::mm", "cpu_op", 0, 50), _host("cudaGetDeviceCount", "cuda_runtime", 1, 2),
              _host("cudaGetDeviceCount", "cuda_runtime", 5, 2), _host("cudaMalloc", "cuda_runtime", 10, 5)]
    text = _verdict_text(_kineto_doc(tmp_path, events))
    assert "CUDA was traced but no GPU work was issued: 3 CUDA runtime/driver calls" in text
    assert "cudaGetDeviceCount x2" in text and "ProfilerActivity.CUDA" not in text


def test_a_file_cut_before_its_kernel_records_names_the_truncation(tmp_path):
    planted = plant(PlantSpec(seed=1, ranks=1, steps=4))
    path = _write(planted, "kineto", tmp_path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    cut = text.index('"cat": "kernel"')  # Kineto writes the GPU records after the host events
    cut_path = tmp_path / "cut.json"
    cut_path.write_text(text[:cut + 12], encoding="utf-8")  # mid-record: the first kernel is cut
    trace = load(str(cut_path))
    assert trace.meta.truncated
    out = _verdict_text(str(cut_path))
    assert "truncated" in out and "CPU-only" not in out


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_blocking_copy_at_the_capture_start_stalls_what_follows_it(tmp_path, fmt):
    # The copy waited ~80 ms on work issued before the capture (the boundary); the copy itself and the
    # launch after it are idle only because that sync took the host's lead: a drain-sync stall.
    planted = plant(_spec("blocking-copy"))
    gaps = classify_file(_write(planted, fmt, tmp_path), CFG).sort_values("start_ns", ignore_index=True)
    lead = gaps.index[gaps["evidence_kind"] == "blocking-call"]
    assert len(lead) == 1
    after = gaps.loc[lead[0] + 1]
    truth = planted.truth[(planted.truth["start_ns"] < after["end_ns"]) & (planted.truth["end_ns"] > after["start_ns"])]
    assert set(truth["class"]) == {"sync-stall"}
    assert after["class"] == "sync-stall" and "cudaMemcpy" in after["evidence"]


def _movement(sc) -> dict[str, list[int]]:
    """Count and bytes per kind, straight from the scenario (what the writers put in the file)."""
    want: dict[str, list[int]] = {}
    for rk in sc.ranks:
        for c in rk.copies:
            kind = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P"}.get(c.kind, c.kind)
            w = want.setdefault(kind, [0, 0])
            w[0] += 1
            w[1] += c.bytes
    return want


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("memsets", [0, 3])
def test_copies_and_memsets_without_a_kernel_say_what_the_file_holds(tmp_path, fmt, memsets):
    """Issue 42: a capture whose only GPU records are copies and/or memsets is not "100% unattributed idle":
    the refusal counts them with their bytes by kind."""
    sc = data_movement_only(plant(PlantSpec(seed=2, ranks=1, steps=5, weights={"data-starved": 2.0})).scenario,
                            memsets=memsets)
    want = _movement(sc)
    assert "H2D" in want and ("memset" in want) == bool(memsets)
    text = _verdict_text(_write(sc, fmt, tmp_path))
    assert "data movement only" in text and "unattributed" not in text and "ProfilerActivity" not in text
    for kind, (n, nbytes) in want.items():
        noun = "memset" if kind == "memset" else f"{kind} cop"
        got = re.search(rf"([\d,]+) {noun}\w* \(([0-9.]+) (GB|MB|kB|B)\b", text)
        assert got is not None, (kind, text)
        assert int(got.group(1).replace(",", "")) == n
        scale = {"GB": 1e9, "MB": 1e6, "kB": 1e3, "B": 1}[got.group(3)]
        assert abs(float(got.group(2)) * scale - nbytes) <= 0.005 * scale, (kind, got.group(0), nbytes)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_one_memset_alone_is_named(tmp_path, fmt):
    """The issue's case: the only GPU record is one memset (and its call)."""
    sc = data_movement_only(plant(PlantSpec(seed=2, ranks=1, steps=4)).scenario, memsets=1, memset_bytes=512)
    sc.ranks[0].copies = [c for c in sc.ranks[0].copies if c.kind == "memset"]
    text = _verdict_text(_write(sc, fmt, tmp_path))
    assert "data movement only: 1 memset (512 B," in text and "not one kernel" in text
