"""Odd but valid traces: each gives a sensible result or a clear note, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from _frames import table_rows

from traceread.cli import main

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "traceread/data/report.schema.json").read_text())


def _k(name, ts, dur, corr=None, stream=7):
    args = {"device": 0, "stream": stream, **({"correlation": corr} if corr is not None else {})}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def _op(name, ts, dur, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
            "args": {"correlation": corr}}


def _steps(n, period=1000, base=0, first=0):
    evs = []
    for s in range(first, first + n):
        t = base + (s - first) * period
        evs.append(_op(f"ProfilerStep#{s}", t, period - 10, cat="user_annotation"))
        for i in range(5):
            evs += [_launch(t + 10 + i * 50, s * 100 + i), _k("gemm_kernel", t + 100 + i * 150, 120, s * 100 + i)]
    return evs


def _run(tmp_path, name, events):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events,
                                "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]}))
    out = tmp_path / f"{name}.out.json"
    assert main(["analyze", str(path), "--json", str(out), "-o", str(tmp_path / f"{name}.md")]) == 0
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc, (tmp_path / f"{name}.md").read_text()


def _idle(doc):
    return sorted((g["start_ns"], g["end_ns"], g["class"]) for g in table_rows(doc["gaps"]))


@pytest.fixture
def normal(tmp_path):
    return _run(tmp_path, "normal", _steps(6))[0]


def test_time_going_backwards_in_the_file(tmp_path, normal) -> None:
    doc, _ = _run(tmp_path, "backwards", list(reversed(_steps(6))))
    assert _idle(doc) == _idle(normal) and doc["dominant_cause"] == normal["dominant_cause"]


def test_duplicated_events_are_noted(tmp_path, normal) -> None:
    doc, md = _run(tmp_path, "dup", _steps(6) * 2)
    assert _idle(doc) == _idle(normal)  # busy time is a union: repeats do not change idle time
    assert any("30 GPU activities appear more than once" in n for n in doc["notes"])
    assert "appear more than once" in md


def test_overlapping_kernels_on_one_stream_are_noted(tmp_path) -> None:
    doc, _ = _run(tmp_path, "overlap", _steps(6) + [_k("gemm_kernel", 150, 500), _k("gemm_kernel", 160, 100)])
    assert any("start before the previous kernel on their stream ended" in n for n in doc["notes"])


def test_events_outside_the_steps(tmp_path, normal) -> None:
    doc, _ = _run(tmp_path, "outside", _steps(6) + [_k("stray", 10**7, 10), _op("stray_op", -5000, 10)])
    assert len(table_rows(doc["steps"])) == len(table_rows(normal["steps"])) and _idle(doc) == _idle(normal)


def test_clock_jump_is_noted(tmp_path) -> None:
    doc, _ = _run(tmp_path, "jump", _steps(3) + _steps(3, base=10**9, first=3))  # a 1000 s jump after step 2
    assert any("hole(s) of at least 60 s" in n for n in doc["notes"])


@pytest.mark.parametrize("events", [[], [_op("ProfilerStep#1", 0, 1000, "user_annotation"), _op("aten::add", 10, 100)]],
                         ids=["zero-events", "cpu-only"])
def test_no_gpu_activity(tmp_path, events) -> None:
    doc, md = _run(tmp_path, "cpu", events)
    assert doc["dominant_cause"] == "no-gpu-activity" and doc["unavailable"]
    assert "No GPU activity" in md


def test_steps_without_kernels(tmp_path) -> None:
    events = [_op(f"ProfilerStep#{s}", s * 1000, 990, "user_annotation") for s in range(4)]
    doc, _ = _run(tmp_path, "nokernels", events + [_k("gemm_kernel", 5000, 100)])
    assert doc["dominant_cause"] != "no-gpu-activity"


def test_step_marker_without_an_end(tmp_path, normal) -> None:
    events = _steps(6) + [{"ph": "B", "cat": "user_annotation", "name": "ProfilerStep#9", "pid": 1, "tid": 1,
                           "ts": 6000}, _k("gemm_kernel", 6100, 100)]
    doc, _ = _run(tmp_path, "noend", events)
    assert len(table_rows(doc["steps"])) == len(table_rows(normal["steps"]))
    doc, _ = _run(tmp_path, "nodur", _steps(6) + [_op("ProfilerStep#9", 6000, None, "user_annotation")])
    assert len(table_rows(doc["steps"])) == len(table_rows(normal["steps"]))
