"""MFU on real traces: world size, GPU and step time come from the file; hand-computed result."""

from __future__ import annotations

import gzip
import json
import statistics
from decimal import Decimal

import pytest
from conftest import SHARED_TRACES, needs_shared

import traceread
from traceread.config import Thresholds
from traceread.engine.steps import find_steps
from traceread.errors import MissingInputError
from traceread.metrics.mfu import compute_mfu
from traceread.metrics.workload import Workload
from traceread.render.notes import text as words  # notes are data; the reports word them


@needs_shared
def test_nccl_a100_trace() -> None:
    path = SHARED_TRACES / "kineto" / "hta_nccl_a100_rank0of2.json.gz"
    with gzip.open(path, "rt") as fh:
        events = json.load(fh, parse_float=Decimal)["traceEvents"]
    step_ns = statistics.median(int(Decimal(e["dur"]) * 1000) for e in events
                                if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    tr = traceread.load(path)
    steps = find_steps(tr, Thresholds()).steps
    # The matmuls take fp32: fp32 or tf32 is the user's call, never guessed.
    with pytest.raises(MissingInputError, match="tf32"):
        compute_mfu(Workload(params=25.6e6, tokens_per_step=512), [tr], steps)
    res = compute_mfu(Workload(params=25.6e6, tokens_per_step=512, dtype="tf32"), [tr], steps)
    assert res.inputs["num_gpus"]["value"] == 2  # distributedInfo.world_size
    assert res.peak["gpu"] == "A100-SXM4-40GB" and res.peak["device_name"] == "NVIDIA A100-PG509-200"
    assert res.step_time_ns == step_ns
    assert res.mfu == pytest.approx(6 * 25.6e6 * 512 / (step_ns / 1e9 * 2 * 156e12))
    assert res.timing["optimizer_steps_per_profiler_step"] == 1


@needs_shared
def test_single_rank_trace_without_world_size_is_refused() -> None:
    tr = traceread.load(SHARED_TRACES / "kineto" / "tracelens_qwen_0p5b_h100.json.gz")
    steps = find_steps(tr, Thresholds()).steps
    with pytest.raises(MissingInputError, match="--gpus"):
        compute_mfu(Workload(params=0.5e9, tokens_per_step=8944, mode="inference"), [tr], steps)
    res = compute_mfu(Workload(params=0.5e9, tokens_per_step=8944, mode="inference", gpus=1), [tr], steps)
    assert res.inputs["dtype"]["value"] == "bf16" and any("only 1 steady step" in w for w in map(words, res.warnings))
