"""Golden Markdown reports: three generated scenarios (always) and real traces from ../shared (when present).

A report changes only deliberately: rerun with ``TRACEREAD_UPDATE_GOLDEN=1`` to rewrite the files in
tests/golden/, then read the diff before committing it.
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, SHARED_TRACES, needs_shared
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread.cli import main

GOLDEN = REPO / "tests" / "golden"
UPDATE = os.environ.get("TRACEREAD_UPDATE_GOLDEN") == "1"


def _only(**w: float) -> dict[str, float]:
    return {c: w.get(c.replace("-", "_"), 0.0) for c in CLASSES}


# name -> (planted spec, file format): each scenario has one dominant planted cause
SCENARIOS = {
    "planted_data_starved": (PlantSpec(seed=11, ranks=1, steps=6, weights=_only(data_starved=1.0, unattributed=0.3)),
                             "nsys"),
    "planted_launch_bound": (PlantSpec(seed=12, ranks=1, steps=5, weights=_only(launch_bound=3.0)), "kineto"),
    "planted_comm_bound_2ranks": (PlantSpec(seed=13, ranks=2, steps=6,
                                            weights=_only(comm_bound=2.0, sync_stall=0.5)), "nsys"),
}
REAL = {
    "real_nsysai_h100_2gpu": "nsys/nsysai_h100_2gpu_window_2026.sqlite",
    "real_nvfuser_h100": "nsys/nvfuser_h100_2024.sqlite",
    "real_pipit_saxpy_mpi": "nsys/pipit_saxpy_mpi_a100_2022.sqlite",
    "real_kineto_resnet50": "kineto/kineto2021_resnet50_bare_list.pt.trace.json.gz",
    "real_kineto_nccl_a100": "kineto/hta_nccl_a100_rank0of2.json.gz",
}


def _report(path: Path, tmp_path: Path) -> str:
    out = tmp_path / "report.md"
    rc = main(["analyze", str(path), "-o", str(out)])
    assert rc == 0
    return out.read_text(encoding="utf-8")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; create it with TRACEREAD_UPDATE_GOLDEN=1"
    want = path.read_text(encoding="utf-8")
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "now", n=1))
        pytest.fail(f"report differs from {path.name} (TRACEREAD_UPDATE_GOLDEN=1 rewrites it):\n{diff[:6000]}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_generated_scenario_report(name: str, tmp_path: Path) -> None:
    spec, fmt = SCENARIOS[name]
    p = plant(spec)
    if fmt == "nsys":
        trace = tmp_path / f"{name}.sqlite"
        write_nsys(p.scenario, str(trace))
    else:
        trace = tmp_path / f"{name}.pt.trace.json"
        write_kineto(p.scenario, str(trace))
    text = _report(trace, tmp_path)
    truth = p.truth.assign(dur=p.truth["end_ns"] - p.truth["start_ns"]).groupby("class")["dur"].sum()
    planted_top = truth.drop(labels=["unattributed"], errors="ignore").idxmax()
    assert f"## Verdict\n\n{planted_top.capitalize()}" in text or planted_top in text.split("## Verdict")[1][:200]
    check_golden(name, text)


@needs_shared
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_trace_report(name: str, tmp_path: Path) -> None:
    src = SHARED_TRACES / REAL[name]
    if not src.exists():
        pytest.skip(f"{src} not present")
    local = tmp_path / src.name  # same file name wherever ../shared lives
    shutil.copyfile(src, local)
    check_golden(name, _report(local, tmp_path))


EXAMPLE = REPO / "docs" / "example-report.md"


def test_the_readme_example_report_is_the_fixture_report(tmp_path: Path) -> None:
    """docs/example-report.md, linked from the README as the full report, is the report of the fixture the
    README analyses, as the code makes it today (TRACEREAD_UPDATE_GOLDEN=1 rewrites it with the goldens)."""
    text = _report(REPO / "fixtures" / "kineto2021_resnet50_bare_list.pt.trace.json.gz", tmp_path)
    if UPDATE:
        EXAMPLE.write_text(text, encoding="utf-8")
        return
    want = EXAMPLE.read_text(encoding="utf-8")
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), "docs", "now", n=1))
        pytest.fail(f"{EXAMPLE.name} is stale (TRACEREAD_UPDATE_GOLDEN=1 rewrites it):\n{diff[:6000]}")
