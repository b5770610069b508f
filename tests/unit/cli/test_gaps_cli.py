"""``traceread gaps``: a Kineto file written from a scenario in the test, table / JSON / CSV out."""

from __future__ import annotations

import csv
import json

import pandas as pd
from _frames import table_rows
from tracesynth.kineto_writer import write_kineto
from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario

from traceread.cli import main
from traceread.vocabulary import GAP_CLASSES, part_col

US = 1_000


def scenario() -> Scenario:
    rk = Rank(rank=0, pid=4242, devices=[0])
    rk.host_ranges = [HostRange(1, "ProfilerStep#3", 0, 100 * US), HostRange(1, "ProfilerStep#4", 100 * US, 200 * US)]
    rk.host_calls = [HostCall(1, "cudaLaunchKernel", 2 * US, 5 * US, 11), HostCall(1, "cudaLaunchKernel", 50 * US, 55 * US, 12),
                     HostCall(1, "cudaStreamSynchronize", 120 * US, 180 * US, 13)]
    rk.kernels = [Kernel(0, 7, "sm90_xmma_gemm", 10 * US, 40 * US, 11), Kernel(0, 7, "sm90_xmma_gemm", 70 * US, 90 * US, 12)]
    return Scenario([rk], world_size=1)


def test_gaps_cli_table_json_and_csv(tmp_path, capsys):
    path = write_kineto(scenario(), tmp_path / "rank0.pt.trace.json")[0]
    out_json, out_csv = tmp_path / "gaps.json", tmp_path / "gaps.csv"
    out_derived = tmp_path / "derived.csv"
    assert main(["gaps", path, "--json", str(out_json), "--csv", str(out_csv)]) == 0
    assert main(["gaps", path, "--csv", str(out_derived), "--derived"]) == 0
    table = capsys.readouterr().out
    assert "ProfilerStep" in table and "gaps" in table
    data = json.loads(out_json.read_text())
    steps, gaps = table_rows(data["steps"]), table_rows(data["gaps"])
    assert [s["step"] for s in steps] == [3, 4]
    assert set(data["steps"]) == {"rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns",
                                  "warmup", "outlier", *(part_col(c) for c in GAP_CLASSES)}
    for st in steps:  # the classes split the step's idle time exactly
        assert sum(st[part_col(c)] for c in GAP_CLASSES) == st["idle_ns"]
    got = [(g["step"], g["start_ns"], g["end_ns"]) for g in gaps]
    assert got == [(3, 0, 10 * US), (3, 40 * US, 70 * US), (3, 90 * US, 100 * US), (4, 100 * US, 200 * US)]
    last = gaps[-1]
    assert last["sync_ns"] == 60 * US and last["dur_ns"] == 100 * US
    # schema 2.0: no fraction of the duration and no sentence made from the columns
    assert not [c for c in data["gaps"] if c.endswith("_frac")] and "evidence" not in data["gaps"]
    assert all(g["class"] and g["evidence_kind"] for g in gaps)
    assert gaps[1]["next_launch_start_ns"] == 50 * US and gaps[1]["launch_after_gap_start"]
    assert pd.DataFrame(data["gaps"])["start_ns"].dtype == "int64"  # pandas reads the table in one call
    with open(out_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and rows[1]["next_kernel_name"] == "sm90_xmma_gemm"
    assert list(rows[0]) == list(data["gaps"])  # the JSON's columns, in its order
    with open(out_derived, newline="") as fh:
        derived = list(csv.DictReader(fh))
    assert derived[-1]["evidence"] and float(derived[-1]["sync_frac"]) == 0.6  # --derived: both made
    assert [{k: r[k] for k in rows[0]} for r in derived] == rows


def test_gaps_cli_json_to_stdout_replaces_the_table(tmp_path, capsys):
    path = write_kineto(scenario(), tmp_path / "rank0.pt.trace.json")[0]
    assert main(["gaps", path, "--json", "-", "--warmup-steps", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"]["warmup"] == [True, False]


def test_gaps_cli_unreadable_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("not a trace")
    assert main(["gaps", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
