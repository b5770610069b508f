"""The time contract: every JSON the tool writes says, per trace, how to map its times to Unix epoch.

A gap planted at a known epoch time must be found again: ``start_ns + traces[i].epoch_offset_ns``.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from _frames import table_rows
from tracesynth.kineto_writer import write_kineto
from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario
from tracesynth.nsys_writer import write_nsys

from traceread.cli import main
from traceread.render import jsonout

US = 1_000
ORIGIN = 1_735_632_360_000_000_000
GAP_EPOCH_NS = 1_735_632_360_002_000_000  # the gap starts 2 ms after the origin


def scenario() -> Scenario:
    rk = Rank(rank=0, pid=4242, devices=[0])
    rk.host_ranges = [HostRange(1, "ProfilerStep#1", 500 * US, 4_000 * US)]
    rk.host_calls = [HostCall(1, "cudaLaunchKernel", 600 * US, 605 * US, 11),
                     HostCall(1, "cudaLaunchKernel", 2_300 * US, 2_305 * US, 12)]
    rk.kernels = [Kernel(0, 7, "sm90_xmma_gemm", 1_000 * US, 2_000 * US, 11),
                  Kernel(0, 7, "sm90_xmma_gemm", 2_500 * US, 3_500 * US, 12)]
    return Scenario([rk], world_size=1, origin_epoch_ns=ORIGIN)


def _write(kind: str, tmp_path) -> str:
    if kind == "nsys":
        return write_nsys(scenario(), tmp_path / "t.sqlite")
    return write_kineto(scenario(), tmp_path / "t.json", generation=kind)[0]


def _epoch_starts(doc: dict) -> list[int]:
    traces = {t["index"]: t for t in doc["traces"]}
    out = []
    for g in table_rows(doc["gaps"]):
        t = traces[g.get("trace", 0)]
        assert t["time_base"] == "epoch" and t["epoch_offset_ns"] is not None
        out.append(g["start_ns"] + t["epoch_offset_ns"])
    return out


@pytest.mark.parametrize("kind", ["2024", "int-us", "nsys"])
def test_planted_gap_maps_back_to_its_epoch_time(tmp_path, kind):
    path = _write(kind, tmp_path)
    a_json, g_json = tmp_path / "a.json", tmp_path / "g.json"
    assert main(["analyze", path, "--json", str(a_json), "-o", str(tmp_path / "a.md")]) == 0
    assert main(["gaps", path, "--json", str(g_json)]) == 0
    analyze_doc, gaps_doc = json.loads(a_json.read_text()), json.loads(g_json.read_text())
    jsonschema.validate(analyze_doc, jsonout.schema())
    for doc in (analyze_doc, gaps_doc):
        assert GAP_EPOCH_NS in _epoch_starts(doc)
        t = doc["traces"][0]
        assert t["start_epoch_ns"] == t["start_ns"] + t["epoch_offset_ns"]
    # gaps --json carries the same traces header as analyze
    assert gaps_doc["traces"] == analyze_doc["traces"]
    assert gaps_doc["schema_version"] == analyze_doc["schema_version"]


def test_relative_time_base_says_null(tmp_path):
    """A Kineto file with relative timestamps and no baseTimeNanoseconds: the epoch is unknown."""
    path = tmp_path / "rel.json"
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000.5, "dur": 100.0,
               "args": {"device": 0, "stream": 7, "correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1300.5, "dur": 100.0,
               "args": {"device": 0, "stream": 7, "correlation": 2}}]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    out = tmp_path / "g.json"
    assert main(["gaps", str(path), "--json", str(out)]) == 0
    t = json.loads(out.read_text())["traces"][0]
    assert t["time_base"] == "relative" and t["epoch_offset_ns"] is None and t["start_epoch_ns"] is None
