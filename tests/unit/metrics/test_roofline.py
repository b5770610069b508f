"""Roofline: the lesson's worked numbers, op FLOP/byte formulas, and innermost-op attribution."""

from __future__ import annotations

import pytest
from scoreboard_frames import ev, kernel, make_trace

from traceread import schema
from traceread.config import Thresholds
from traceread.errors import UsageError
from traceread.metrics.peaks import match_gpu
from traceread.metrics.roofline import intensity, matmul_cost, op_cost, roofline

BF16 = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]


def test_lesson_mlp_matmul_intensity() -> None:
    # [M, 8192] x [8192, 32768] in bf16: ~1 FLOP/byte at M = 1 (decode), ~2,500 at M = 4096.
    assert intensity(*matmul_cost(1, 8192, 32768, 2)) == pytest.approx(1.0, rel=0.01)
    assert intensity(*matmul_cost(4096, 8192, 32768, 2)) == pytest.approx(2520, rel=0.01)
    ridge = match_gpu("NVIDIA H100 80GB HBM3").ridge("bf16")
    assert ridge == pytest.approx(295, rel=0.01)
    assert intensity(*matmul_cost(1, 8192, 32768, 2)) < ridge < intensity(*matmul_cost(4096, 8192, 32768, 2))


@pytest.mark.parametrize(("name", "dims", "types", "flops", "nbytes"), [
    ("aten::mm", [[64, 128], [128, 256]], BF16, 2 * 64 * 128 * 256, 2 * (64 * 128 + 128 * 256 + 64 * 256)),
    ("aten::addmm", [[256], [64, 128], [128, 256], [], []], BF16 + ["Scalar", "Scalar"], 2 * 64 * 128 * 256,
     2 * (64 * 128 + 128 * 256 + 64 * 256 + 256)),
    ("aten::bmm", [[4, 64, 128], [4, 128, 32]], BF16, 2 * 4 * 64 * 128 * 32, 2 * 4 * (64 * 128 + 128 * 32 + 64 * 32)),
    ("aten::linear", [[16, 559, 1024], [2816, 1024], []], ["c10::BFloat16", "c10::BFloat16", ""],
     2 * 16 * 559 * 1024 * 2816, 2 * (16 * 559 * 1024 + 1024 * 2816 + 16 * 559 * 2816)),
    ("aten::matmul", [[8, 16, 64, 32], [8, 16, 32, 64]], ["float", "float"], 2 * 128 * 64 * 32 * 64,
     4 * 128 * (64 * 32 + 32 * 64 + 64 * 64)),
    ("aten::_scaled_mm", [[64, 128], [128, 256], [], []], ["c10::Float8_e4m3fn"] * 2 + ["float", "float"],
     2 * 64 * 128 * 256, 64 * 128 + 128 * 256 + 2 * 64 * 256),
])
def test_op_costs(name, dims, types, flops, nbytes) -> None:
    got = op_cost(name, dims, types)
    assert got is not None and got[0] == flops and got[1] == nbytes


def test_attention_costs_in_both_layouts() -> None:
    b, h, lq, e = 16, 16, 559, 64
    bhle = [[b, h, lq, e]] * 3
    blhe = [[b, lq, h, e]] * 3
    fwd = 4 * b * h * lq * lq * e
    nbytes = 2 * 4 * b * h * lq * e
    assert op_cost("aten::_scaled_dot_product_flash_attention", bhle, BF16)[:2] == (fwd, nbytes)
    assert op_cost("aten::_flash_attention_forward", blhe, BF16)[:2] == (fwd, nbytes)
    bwd = op_cost("aten::_scaled_dot_product_flash_attention_backward", [[b, h, lq, e]] * 5, BF16 * 2)
    assert bwd[0] == 2.5 * fwd
    assert op_cost("aten::mm", [[64]], BF16) is None  # malformed shapes are skipped, not guessed


def _linear_trace():
    # linear (0..100) > addmm (10..90) > kernel; plus an outer matmul whose own copy kernel must not
    # make it a second FLOP owner; plus a decode-shaped mm.
    rows = [
        ev(schema.LANE_CPU_THREAD, "aten::linear", 0, 100_000, external_id=1),  # 0
        ev(schema.LANE_CPU_THREAD, "aten::addmm", 10_000, 90_000, external_id=2),  # 1
        kernel("sm90_xmma_gemm_bf16bf16", 200_000, 1_200_000, external_id=2),  # 2: 1 ms
        ev(schema.LANE_CPU_THREAD, "aten::matmul", 300_000, 400_000, external_id=3),  # 3
        ev(schema.LANE_CPU_THREAD, "aten::copy_", 310_000, 320_000, external_id=4),  # 4
        ev(schema.LANE_CPU_THREAD, "aten::mm", 330_000, 390_000, external_id=5),  # 5
        kernel("void at::native::elementwise_kernel<copy>", 1_300_000, 1_310_000, external_id=4),  # 6
        kernel("gemv_bf16", 1_400_000, 1_500_000, external_id=5),  # 7: 0.1 ms
    ]
    side = {"op_shapes": [
        {"row": 0, "input_dims": [[4096, 8192], [32768, 8192], [32768]], "input_types": BF16},
        {"row": 1, "input_dims": [[32768], [4096, 8192], [8192, 32768], [], []], "input_types": BF16},
        {"row": 3, "input_dims": [[1, 8192], [8192, 32768]], "input_types": BF16[:2]},
        {"row": 5, "input_dims": [[1, 8192], [8192, 32768]], "input_types": BF16[:2]},
    ]}
    return make_trace(rows, side=side)


def test_innermost_op_owns_the_flops() -> None:
    r = roofline(_linear_trace(), Thresholds())
    t = r.table
    assert set(t["op"]) == {"aten::addmm", "aten::mm"}  # no linear, no matmul: counted once
    addmm = t[t["op"] == "aten::addmm"].iloc[0]
    flops = 2 * 4096 * 8192 * 32768
    assert addmm["flops"] == flops and addmm["kernel_ns"] == 1_000_000
    assert addmm["tflops"] == pytest.approx(flops / 1e-3 / 1e12)
    assert addmm["bound"] == "compute" and addmm["intensity"] > addmm["ridge"]
    assert addmm["pct_of_peak"] == pytest.approx(addmm["tflops"] / 989.5)
    mm = t[t["op"] == "aten::mm"].iloc[0]
    assert mm["bound"] == "memory" and mm["intensity"] == pytest.approx(1.0, rel=0.01)
    assert mm["kernel_ns"] == 100_000  # the copy kernel belongs to aten::copy_ inside matmul, not to mm
    assert t["share"].sum() == pytest.approx(1.0)
    assert r.ridges["bf16"] == pytest.approx(295, rel=0.01)


def test_unknown_gpu_still_reports_intensity() -> None:
    tr = _linear_trace()
    tr.meta.devices = [type(d)(rank=d.rank, id=d.id, name="AMD Radeon Graphics") for d in tr.meta.devices]
    r = roofline(tr)
    assert r.gpu is None and (r.table["bound"] == "").all() and r.table["intensity"].notna().all()
    assert roofline(tr, gpu="MI250").gpu == "MI250"
    with pytest.raises(UsageError):
        roofline(tr, gpu="no-such-gpu")


def test_no_shapes() -> None:
    r = roofline(make_trace([kernel("gemm", 0, 10, external_id=1)]))
    from traceread.render.notes import texts

    assert r.table.empty and any("record_shapes" in n for n in texts(r.notes))
