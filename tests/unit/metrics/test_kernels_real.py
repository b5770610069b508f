"""The kernel table on real traces: counts and GPU time against an independent read of each file."""

from __future__ import annotations

import gzip
import json
import sqlite3
from decimal import Decimal

import pytest
from conftest import SHARED_TRACES, needs_shared

import traceread
from traceread.metrics.kernels import kernel_report

KINETO = ["hta_nccl_a100_rank0of2.json.gz", "tracelens_qwen_0p5b_h100.json.gz", "param_linear_rtx2080ti.json.gz",
          "hta_rocm_mi250_train.json.gz", "tracelens_compile_triton_mi300x.json.gz"]
NSYS = ["nvfuser_h100_2024.sqlite", "nsysai_h100_2gpu_window_2026.sqlite", "pipit_saxpy_mpi_a100_2022.sqlite"]


def _kineto_kernels(path) -> tuple[int, int]:
    """Kernel count and total ns, read straight from the JSON (durations as exact decimals)."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    durs = [max(Decimal(e.get("dur", 0)), Decimal(0)) for e in events
            if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X"]
    return len(durs), int(sum(d * 1000 for d in durs))


@needs_shared
@pytest.mark.parametrize("name", KINETO)
def test_kineto_kernel_table_matches_the_file(name: str) -> None:
    path = SHARED_TRACES / "kineto" / name
    n, total = _kineto_kernels(path)
    rep = kernel_report(traceread.load(path))
    assert int(rep.table["count"].sum()) == n
    assert int(rep.table["total_ns"].sum()) == pytest.approx(total, abs=n)  # <= 1 ns rounding per kernel
    assert rep.classes["share"].sum() == pytest.approx(1.0)
    assert 0 < rep.launch["linked"] <= rep.launch["kernels"]


@needs_shared
@pytest.mark.parametrize("name", NSYS)
def test_nsys_kernel_table_matches_the_file(name: str) -> None:
    path = SHARED_TRACES / "nsys" / name
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        n, total = con.execute("SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    finally:
        con.close()
    rep = kernel_report(traceread.load(path))
    assert int(rep.table["count"].sum()) == n and int(rep.table["total_ns"].sum()) == total


@needs_shared
def test_pageable_copies_in_the_mpi_trace() -> None:
    rep = kernel_report(traceread.load(SHARED_TRACES / "nsys" / "pipit_saxpy_mpi_a100_2022.sqlite"))
    kinds = {h["copy_kind"]: h for h in rep.hints if h["kind"] == "pageable-copy"}
    assert set(kinds) == {"HtoD", "DtoH"} and 5 < kinds["HtoD"]["gbps"] < 30  # PCIe-class pageable rates
