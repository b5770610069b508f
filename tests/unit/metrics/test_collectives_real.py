"""The collective table on a real 2-rank NCCL trace, against sizes and times read from the file."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest
from conftest import SHARED_TRACES, needs_shared

import traceread
from traceread.config import Thresholds
from traceread.engine.steps import find_steps
from traceread.metrics.collectives import collective_table

TRACE = "hta_nccl_a100_rank0of2.json.gz"


@needs_shared
def test_all_reduce_row_matches_the_file() -> None:
    path = SHARED_TRACES / "kineto" / TRACE
    with gzip.open(path, "rt") as fh:
        events = json.load(fh, parse_float=Decimal)["traceEvents"]
    ar = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")]
    nbytes = sum(e["args"]["In msg nelems"] * 4 for e in ar)  # dtype Float
    ns = int(sum(Decimal(e["dur"]) * 1000 for e in ar))
    tr = traceread.load(path)
    table = collective_table(tr, None).set_index(["collective", "group"])
    row = table.loc[("all-reduce", "0")]
    assert row["count"] == len(ar) == 15 and row["total_ns"] == pytest.approx(ns, abs=len(ar))
    assert row["group_size"] == 2 and row["group_desc"] == "default_pg" and row["dtype"] == "Float"
    assert row["algbw_gbps"] == pytest.approx(nbytes / ns, rel=1e-6)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])  # 2(n-1)/n = 1 for n = 2
    assert 0 < row["exposed_ns"] <= row["total_ns"]
    # Restricting to the (non-warmup) profiler steps keeps only kernels inside them.
    steps = find_steps(tr, Thresholds()).steps
    inside = collective_table(tr, steps)
    assert 0 < inside["count"].sum() <= table["count"].sum()
