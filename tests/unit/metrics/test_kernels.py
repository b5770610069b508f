"""Kernel table, class shares, launch statistics and hints on hand-built and synthesized traces."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scoreboard_frames import ev, kernel, launch, make_trace
from tracesynth.model import Copy, HostCall, Kernel, Rank, Scenario
from tracesynth.nsys_writer import write_nsys

from traceread import kernel_classes as kc
from traceread import schema
from traceread.cli import main
from traceread.config import Thresholds
from traceread.metrics.kernels import class_shares, kernel_report, kernel_table, launch_stats

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >(int)"
SGEMM = "ampere_sgemm_128x64_nn"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _mixed_trace():
    rows, t = [], 0
    rng = np.random.default_rng(7)
    durs = {GEMM: 5000, ADD: 800, SGEMM: 1200}
    counts = {GEMM: 12, ADD: 30, SGEMM: 5}
    corr = 0
    for name, n in counts.items():
        for _ in range(n):
            corr += 1
            d = int(durs[name] + rng.integers(0, 50))
            rows.append(launch("cudaLaunchKernel", t, t + 3000, corr))
            rows.append(kernel(name, t + 4000, t + 4000 + d, correlation=corr))
            t += 4000 + d + 100
    rows.append(ev(schema.LANE_GPU_COMM, NCCL, t, t + 9000))
    return make_trace(rows), rows


def test_table_counts_and_totals_match_an_independent_count() -> None:
    tr, rows = _mixed_trace()
    t = kernel_table(tr)
    gpu = [r for r in rows if r["lane"] in (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM)]
    for name in (GEMM, ADD, SGEMM, NCCL):
        mine = [r["end_ns"] - r["start_ns"] for r in gpu if r["name"] == name]
        got = t[t["name"] == name].iloc[0]
        assert got["count"] == len(mine) and got["total_ns"] == sum(mine)
        assert got["mean_ns"] == pytest.approx(np.mean(mine))
    assert list(t["total_ns"]) == sorted(t["total_ns"], reverse=True)
    assert t["share"].sum() == pytest.approx(1.0)
    assert dict(zip(t["name"], t["class"], strict=True)) == {GEMM: "gemm", ADD: "elementwise", SGEMM: "gemm",
                                                             NCCL: "communication"}


def test_class_shares() -> None:
    tr, _ = _mixed_trace()
    cs = class_shares(kernel_table(tr)).set_index("class")
    assert cs["share"].sum() == pytest.approx(1.0)
    assert cs.loc["gemm", "count"] == 17 and cs.loc["communication", "count"] == 1


def test_launch_statistics() -> None:
    tr, rows = _mixed_trace()
    st = launch_stats(tr)
    # Communication kernels are not launch-overhead material; every compute kernel is linked.
    assert st["kernels"] == 47 and st["linked"] == 47
    # Launch calls last 3000 ns: the ADD kernels (800 ns) and SGEMMs (1200 ns) are shorter.
    assert st["shorter_than_launch"] == 35
    assert st["shorter_than_launch_share"] == pytest.approx(35 / 47)
    assert st["launch_latency_ns"]["p50"] == 4000 and st["launch_latency_ns"]["max"] == 4000
    assert st["median_launch_call_ns"] == 3000


def test_partial_wave_hint_uses_the_device_sm_count() -> None:
    rows = [kernel(GEMM, 0, 10_000), kernel(GEMM, 20_000, 30_000), kernel(ADD, 40_000, 41_000)]
    grids = [{"row": 0, "grid_x": 8, "grid_y": 2, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1},
             {"row": 1, "grid_x": 8, "grid_y": 2, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1},
             {"row": 2, "grid_x": 4096, "grid_y": 1, "grid_z": 1, "block_x": 128, "block_y": 1, "block_z": 1}]
    hints = kernel_report(make_trace(rows, sm_count=132, side={"kernel_args": grids})).hints
    waves = [h for h in hints if h["kind"] == "partial-wave"]
    assert len(waves) == 1 and waves[0]["name"] == GEMM and waves[0]["blocks"] == 16 and waves[0]["count"] == 2
    # Same grid on a 16-SM device fills it: no hint.
    hints = kernel_report(make_trace(rows, sm_count=16, side={"kernel_args": grids})).hints
    assert not [h for h in hints if h["kind"] == "partial-wave"]


def test_rocm_grids_are_work_items() -> None:
    rows = [kernel("Cijk_Alik_Bljk_BBS_BH_MT256x192x64", 0, 10_000)]
    grid = [{"row": 0, "grid_x": 256 * 64, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1}]
    tr = make_trace(rows, device_name="AMD Instinct MI300X", sm_count=304, side={"kernel_args": grid})
    waves = [h for h in kernel_report(tr).hints if h["kind"] == "partial-wave"]
    assert waves and waves[0]["blocks"] == 64


def test_fp32_gemm_hint_only_in_half_precision_runs() -> None:
    tr, _ = _mixed_trace()
    bf16 = [h for h in kernel_report(tr, dtype="bf16").hints if h["kind"] == "fp32-gemm"]
    assert len(bf16) == 1 and bf16[0]["names"] == [SGEMM] and bf16[0]["count"] == 5
    # The trace's own half-precision GEMM names say "bf16" when no dtype is given.
    assert [h for h in kernel_report(tr).hints if h["kind"] == "fp32-gemm"]
    assert not [h for h in kernel_report(tr, dtype="fp32").hints if h["kind"] == "fp32-gemm"]


def test_pageable_copy_hint_reports_achieved_bandwidth() -> None:
    rows = [kernel(GEMM, 0, 10), ev(schema.LANE_MEMCPY, "Memcpy HtoD (Pageable -> Device)", 0, 1_000_000),
            ev(schema.LANE_MEMCPY, "Memcpy HtoD (Pinned -> Device)", 2_000_000, 2_100_000)]
    copies = [{"row": 1, "bytes": 10_000_000, "copy_kind": "HtoD", "src_kind": "Pageable", "dst_kind": "Device"},
              {"row": 2, "bytes": 2_500_000, "copy_kind": "HtoD", "src_kind": "Pinned", "dst_kind": "Device"}]
    hints = [h for h in kernel_report(make_trace(rows, side={"copy_args": copies})).hints
             if h["kind"] == "pageable-copy"]
    assert len(hints) == 1
    assert hints[0]["gbps"] == pytest.approx(10.0) and hints[0]["pinned_gbps"] == pytest.approx(25.0)


def test_unknown_names_are_listed_and_config_patterns_apply(tmp_path) -> None:
    tr = make_trace([kernel("saxpy(double*, double*)", 0, 100)])
    assert kernel_report(tr).unknown == ("saxpy(double*, double*)",)
    try:
        kc.register_patterns_from_config({"elementwise": ["^saxpy"]}, "cfg.toml")
        assert kernel_report(tr).unknown == ()
    finally:
        kc.clear_user_patterns()


def _scenario() -> Scenario:
    kernels, calls = [], []
    t = 1_000_000
    for i in range(40):
        name = GEMM if i % 4 == 0 else ADD
        d = 20_000 if name == GEMM else 2_000
        calls.append(HostCall(tid=11, name="cudaLaunchKernel", start_ns=t, end_ns=t + 5_000, correlation=i + 1))
        kernels.append(Kernel(device=0, stream=7, name=name, start_ns=t + 6_000, end_ns=t + 6_000 + d,
                              correlation=i + 1, grid=(264, 1, 1)))
        t += 6_000 + d + 1_000
    copies = [Copy(device=0, stream=7, kind="HtoD", start_ns=t, end_ns=t + 100_000, correlation=999,
                   bytes=1_000_000, src_kind="Pageable")]
    calls.append(HostCall(tid=11, name="cudaMemcpyAsync", start_ns=t - 1000, end_ns=t + 100_500, correlation=999))
    return Scenario(ranks=[Rank(rank=0, pid=4242, kernels=kernels, host_calls=calls, copies=copies)])


def test_cli_on_a_synthesized_nsys_export(tmp_path, capsys) -> None:
    path = write_nsys(_scenario(), tmp_path / "run.sqlite")
    out_json = tmp_path / "k.json"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[thresholds]\nkernel_hint_min_share = 0.001\n[kernel_patterns]\nother = "^no_such_kernel$"\n')
    assert main(["kernels", str(path), "--json", str(out_json), "--top", "5", "--config", str(cfg)]) == 0
    text = capsys.readouterr().out
    assert "gemm" in text and "launch-to-start latency" in text and "pageable HtoD" in text
    assert "roofline: " in text and "record_shapes" in text  # nsys exports carry no shapes
    data = json.loads(out_json.read_text())
    top = {k["name"]: k for k in data["kernels"]}
    assert top[GEMM]["count"] == 10 and top[GEMM]["total_ns"] == 10 * 20_000
    assert top[ADD]["count"] == 30 and data["launch"]["linked"] == 40
    assert data["launch"]["shorter_than_launch"] == 30
    assert any(h["kind"] == "pageable-copy" and h["gbps"] == pytest.approx(10.0) for h in data["hints"])
    assert not kc._USER_PATTERNS  # the CLI leaves no patterns behind
    assert data["roofline"]["ops"] == []


def test_cli_refuses_bad_pattern_config(tmp_path, capsys) -> None:
    path = write_nsys(_scenario(), tmp_path / "run.sqlite")
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[kernel_patterns]\nnot_a_class = "x"\n')
    assert main(["kernels", str(path), "--config", str(cfg)]) == 2
    assert "kernel_patterns" in capsys.readouterr().err


def test_empty_trace() -> None:
    tr = make_trace([ev(schema.LANE_CPU_THREAD, "aten::add", 0, 10)])
    rep = kernel_report(tr, Thresholds())
    assert rep.table.empty and rep.launch["kernels"] == 0 and rep.hints == ()


def test_table_text_names_the_op_inside_collapsed_templates() -> None:
    from traceread.render.kernels import render_kernel_report

    mul = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
           "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >("
           "at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16> const&)::{lambda(int)#1}>(int, T)")
    add = mul.replace("MulFunctor", "AddFunctor")
    text = render_kernel_report(kernel_report(make_trace([kernel(mul, 0, 20), kernel(add, 30, 40)])))
    assert "MulFunctor" in text and "AddFunctor" in text and "BFloat16, c10" not in text
