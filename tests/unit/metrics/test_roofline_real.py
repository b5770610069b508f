"""The roofline on a real H100 trace with recorded shapes (Qwen1.5-0.5B, record_shapes=True)."""

from __future__ import annotations

import pytest
from conftest import SHARED_TRACES, needs_shared

import traceread
from traceread.config import Thresholds
from traceread.metrics.roofline import roofline


@needs_shared
def test_qwen_roofline() -> None:
    tr = traceread.load(SHARED_TRACES / "kineto" / "tracelens_qwen_0p5b_h100.json.gz")
    r = roofline(tr, Thresholds())
    t = r.table
    assert r.gpu == "H100-SXM" and r.ridges["bf16"] == pytest.approx(295.4, rel=0.01)
    # linear -> addmm/matmul -> mm and sdpa -> flash -> _flash_attention_forward: innermost only.
    assert not set(t["op"]) & {"aten::linear", "aten::matmul", "aten::scaled_dot_product_attention",
                               "aten::_scaled_dot_product_flash_attention"}
    mlp = t[(t["op"] == "aten::mm") & (t["input_dims"] == "[[8944, 1024], [1024, 2816]]")].iloc[0]
    m, k, n = 8944, 1024, 2816
    assert mlp["calls"] == 48 and mlp["flops"] == 2 * m * k * n
    assert mlp["bytes"] == 2 * (m * k + k * n + m * n)
    assert mlp["bound"] == "compute" and 0.3 < mlp["pct_of_peak"] < 1.0
    attn = t[t["op"] == "aten::_flash_attention_forward"].iloc[0]
    assert attn["calls"] == 24 and attn["flops"] == 4 * 16 * 16 * 559 * 559 * 64
    heavy = r.heavy(Thresholds())
    assert set(heavy["bound"]) <= {"compute", "memory"} and len(heavy) >= 4
