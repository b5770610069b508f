"""Rough edges a first day finds: gap tables skip gaps no rule can judge, a multi-input kernel
table sums each kernel once, launch statistics keep one scope, ``gaps`` prints viewer times,
``analyze`` takes a folder and refuses a scan output."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
from conftest import FIXTURES
from test_gaps_cli import scenario
from test_render import make_analysis
from tracesynth.kineto_writer import write_kineto

import traceread
from traceread.cli import main
from traceread.render import markdown


def test_largest_gaps_skip_gaps_below_the_smallest_judged_gap() -> None:
    a = make_analysis()
    tiny = a.gaps.iloc[:1].copy()
    tiny[["dur_ns"]] = 1
    tiny["end_ns"] = tiny["start_ns"] + 1
    many = pd.concat([a.gaps] + [tiny] * 11, ignore_index=True)
    text = markdown.to_markdown(dataclasses.replace(a, gaps=many, top_gaps=10))
    block = text.split("## Largest gaps")[1].split("\n## ")[0]
    assert f"The {len(a.gaps)} longest of {len(many)} compute-idle gaps (11 under 1.0 us" in block
    assert "| 1 ns |" not in block
    assert block.count("\n| ") - 2 == len(a.gaps)  # rows = the judged gaps only (header, rule excluded)


def test_kernel_table_of_several_inputs_sums_each_kernel_once() -> None:
    a = make_analysis()
    k = a.kernels
    two = pd.concat([k, k.assign(trace=1)], ignore_index=True)
    text = markdown.to_markdown(dataclasses.replace(a, kernels=two))
    block = text.split("### Top kernels by GPU time")[1].split("###")[0]
    assert "| Inputs |" in block and "Summed over the 2 inputs" in block
    name = "ampere\\_sgemm\\_128x64\\_nn" if "ampere\\_sgemm" in block else "ampere_sgemm_128x64_nn"
    rows = [ln for ln in block.splitlines() if name in ln]
    assert len(rows) == 1 and rows[0].rstrip().endswith("| 2 of 2 |")
    count = int(k.loc[k["name"] == "ampere_sgemm_128x64_nn", "count"].sum())
    assert f"| {2 * count:,} |" in rows[0]


def test_launch_statistics_and_gaps_share_one_trace() -> None:
    paths = [str(FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"),
             str(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")]
    both = traceread.analyze(paths)
    st = both.launch_stats
    assert st is not None and st.trace == 0
    lb = both.gaps[(both.gaps["class"] == "launch-bound") & (both.gaps["trace"] == 0)]
    assert st.launch_bound_gaps == len(lb) and st.launch_bound_idle_ns == int(lb["dur_ns"].sum())
    alone = traceread.analyze(paths[0]).launch_stats
    assert alone is not None and alone.trace is None
    assert (alone.kernels, alone.launch_bound_gaps) == (st.kernels, st.launch_bound_gaps)
    assert "Of `kineto2021_resnet50_bare_list.pt.trace.json.gz`, gaps and kernels alike." in both.to_markdown()


def test_gaps_text_shows_viewer_times_and_json_keeps_ns(tmp_path, capsys) -> None:
    path = write_kineto(scenario(), tmp_path / "rank0.pt.trace.json")[0]
    assert main(["gaps", path]) == 0
    text = capsys.readouterr().out
    assert "times are ms from the trace's first event, as Perfetto shows them" in text
    assert "start_ns" not in text and "dur_ns" not in text
    assert " 0.100 ms " in text  # step 4 starts 100 us after the first event
    assert main(["gaps", path, "--json", "-"]) == 0
    assert 100_000 in json.loads(capsys.readouterr().out)["gaps"]["start_ns"]  # the trace's own ns


def test_analyze_folder_and_scan_output_refused(tmp_path, capsys) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    write_kineto(scenario(), d / "rank0.pt.trace.json")
    (d / "notes.txt").write_text("not a trace\n")
    assert main(["analyze", str(d)]) == 0
    assert "rank0.pt.trace.json" in capsys.readouterr().out
    out = tmp_path / "scanout"
    (out / "jobs").mkdir(parents=True)
    (out / "traces").mkdir()
    (out / "index.json").write_text("{}")
    assert main(["analyze", str(out)]) == 2
    assert "scan` output directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 2
    assert "no trace files" in capsys.readouterr().err
