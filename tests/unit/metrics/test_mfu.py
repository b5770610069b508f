"""MFU/HFU against hand-computed values, and the guardrails against the classic mistakes."""

from __future__ import annotations

import pytest
from scoreboard_frames import ev, kernel, make_trace, steps_frame

from traceread import schema
from traceread.config import Thresholds
from traceread.errors import MissingInputError, UsageError
from traceread.metrics.mfu import compute_mfu
from traceread.metrics.workload import Workload
from traceread.render.notes import text as words  # notes are data; the reports word them

H100_BF16 = 989.5e12
H100_BW = 3.35e12
CFG = Thresholds()


def _trace(world_size: int | None = 64, rows: list | None = None, **kw):
    return make_trace(rows or [kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn", 0, 10)], world_size=world_size, **kw)


def _steps(ms: float = 2000.0, n: int = 6, **kw):
    return steps_frame([ms] * n, **kw)


def test_hand_computed_training_mfu() -> None:
    job = Workload(params=7e9, global_batch=512, seq_len=2048, dtype="bf16")
    res = compute_mfu(job, [_trace()], _steps(), CFG)
    useful = 6 * 7e9 * 512 * 2048
    expected = useful / (2.0 * 64 * H100_BF16)
    assert res.mfu == pytest.approx(expected)
    assert res.hfu == pytest.approx(expected)
    assert res.tflops_per_gpu == pytest.approx(useful / 2.0 / 64 / 1e12)
    assert res.tokens_per_s == pytest.approx(512 * 2048 / 2.0)
    assert res.headroom_to_50 == pytest.approx(0.5 - expected)
    assert res.step_time_ns == 2_000_000_000
    assert res.inputs["num_gpus"] == {"value": 64, "source": "trace world size (distributedInfo)"}
    assert res.inputs["tokens_per_optimizer_step"]["value"] == 512 * 2048
    assert "989.5 TFLOP/s dense bf16" in res.formula and f"{expected:.2%}" in res.formula


def test_gradient_accumulation_and_data_parallel_tokens() -> None:
    job = Workload(params=1.3e9, micro_batch=4, grad_accum=8, dp=16, seq_len=4096, dtype="bf16")
    # No world size in the trace and no --gpus: refused, never guessed.
    with pytest.raises(MissingInputError, match="--gpus"):
        compute_mfu(job, [_trace(world_size=None)], _steps(1500.0), CFG)
    job = Workload(params=1.3e9, micro_batch=4, grad_accum=8, dp=16, seq_len=4096, dtype="bf16", gpus=32)
    res = compute_mfu(job, [_trace(world_size=None)], _steps(1500.0), CFG)
    tokens = 4 * 8 * 16 * 4096
    assert res.inputs["tokens_per_optimizer_step"]["value"] == tokens
    assert res.mfu == pytest.approx(6 * 1.3e9 * tokens / (1.5 * 32 * H100_BF16))


def test_recompute_is_never_useful() -> None:
    base = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16")
    full = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", recompute="full")
    sel = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", recompute="selective", recompute_factor=1.1)
    r0, r1, r2 = (compute_mfu(j, [_trace()], _steps(), CFG) for j in (base, full, sel))
    assert r0.mfu == r1.mfu == r2.mfu
    assert r1.hfu == pytest.approx(r0.mfu * 8 / 6)
    assert r2.hfu == pytest.approx(r0.mfu * 1.1)
    with pytest.raises(UsageError, match="no default"):
        Workload(params=7e9, tokens_per_step=2**20, recompute="selective")


def test_inference_mode_and_mbu() -> None:
    job = Workload(params=8e9, tokens_per_step=64, dtype="bf16", mode="inference")
    res = compute_mfu(job, [_trace(world_size=1)], _steps(20.0), CFG)
    assert res.mfu == pytest.approx(2 * 8e9 * 64 / (0.020 * 1 * H100_BF16))
    assert res.mbu == pytest.approx(8e9 * 2 / 0.020 / H100_BW)
    given = Workload(params=8e9, tokens_per_step=64, dtype="bf16", mode="inference", bytes_per_step=20e9)
    assert compute_mfu(given, [_trace(world_size=1)], _steps(20.0), CFG).mbu == pytest.approx(20e9 / 0.020 / H100_BW)


def test_step_time_excludes_warmup_and_outliers() -> None:
    steps = steps_frame([9000, 2000, 2100, 1900, 6000, 2000], warmup=(0,), outlier=(4,))
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace()], steps, CFG)
    assert res.step_time_ns == 2_000_000_000
    assert res.timing["n_steady"] == 4 and res.timing["n_warmup"] == 1 and res.timing["n_outlier"] == 1
    assert any("outlier" in n for n in map(words, res.notes))


def test_single_step_and_noisy_timing_are_flagged() -> None:
    job = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16")
    one = compute_mfu(job, [_trace()], steps_frame([2000]), CFG)
    assert any("only 1 steady step" in w for w in map(words, one.warnings))
    noisy = compute_mfu(job, [_trace()], steps_frame([1000, 2000, 1500, 2500, 1200]), CFG)
    assert any("vary" in w for w in map(words, noisy.warnings))
    steady = compute_mfu(job, [_trace()], _steps(), CFG)
    assert not steady.warnings


def _markers(n_steps: int, per_step: list[str], ms: float = 2000.0) -> list[dict]:
    rows = [kernel("sm90_xmma_gemm_bf16", 0, 10)]
    for i in range(n_steps):
        base = int(i * ms * 1e6)
        for j, name in enumerate(per_step if isinstance(per_step[0], str) else per_step[i]):
            rows.append(ev(schema.LANE_CPU_ANNOTATION, name, base + 1000 * (j + 1), base + 1000 * (j + 1) + 500))
    return rows


def test_several_optimizer_steps_per_profiler_step() -> None:
    rows = _markers(6, ["Optimizer.step#AdamW.step", "Optimizer.step#AdamW.step"])
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace(rows=rows)], _steps(), CFG)
    assert res.step_time_ns == 1_000_000_000
    assert res.timing["optimizer_steps_per_profiler_step"] == 2
    assert any("2 optimizer steps" in w for w in map(words, res.warnings))


def test_profiler_steps_that_are_micro_batches() -> None:
    # An optimizer step every 4th profiler step: the optimizer-step period is 4 profiler steps.
    per = [["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"]
           + (["Optimizer.step#AdamW.step"] if i % 4 == 3 else []) for i in range(8)]
    rows = _markers(8, per)
    job = Workload(params=7e9, micro_batch=1, grad_accum=4, dp=64, seq_len=4096, dtype="bf16")
    res = compute_mfu(job, [_trace(rows=rows)], _steps(n=8), CFG)
    assert res.step_time_ns == 8_000_000_000
    assert res.timing["micro_batches_per_optimizer_step"] == 4
    assert any("4 micro-batches per optimizer step" in n for n in map(words, res.notes))
    assert not any("disagree" in w for w in map(words, res.warnings))


def test_grad_accum_disagreement_is_detected() -> None:
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    rows = _markers(6, [loader] * 4 + ["Optimizer.step#SGD.step"])
    wrong = Workload(params=7e9, micro_batch=2, grad_accum=8, dp=64, seq_len=2048, dtype="bf16")
    res = compute_mfu(wrong, [_trace(rows=rows)], _steps(), CFG)
    assert any("disagree" in w and "--grad-accum 8" in w for w in map(words, res.warnings))
    unknown = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16")
    res = compute_mfu(unknown, [_trace(rows=rows)], _steps(), CFG)
    assert any("4 micro-batches" in w for w in map(words, res.warnings))


def test_unknown_gpu_asks_for_a_peak() -> None:
    job = Workload(params=7e9, tokens_per_step=2**20, dtype="bf16")
    tr = _trace(device_name="AMD Radeon Graphics")
    with pytest.raises(MissingInputError, match="--gpu NAME"):
        compute_mfu(job, [tr], _steps(), CFG)
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", gpu="MI250"), [tr], _steps(), CFG)
    assert res.peak["gpu"] == "MI250"
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", peak_tflops=181.05), [tr], _steps(),
                      CFG)
    assert res.peak["source"] == "--peak-tflops"


def test_sparse_peak_refused_and_fp8_against_bf16_peak_warned() -> None:
    with pytest.raises(UsageError, match="sparse"):
        compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", peak_tflops=1979), [_trace()],
                    _steps(), CFG)
    fp8_rows = [kernel("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128", 0, 10)]
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace(rows=fp8_rows)], _steps(),
                      CFG)
    assert any("fp8 GEMMs" in w for w in map(words, res.warnings))
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="fp8", peak_tflops=989.5), [_trace()],
                      _steps(), CFG)
    assert any("bf16 peak" in w for w in map(words, res.warnings))


def test_precision_read_from_recorded_matmuls() -> None:
    rows = [kernel("sm90_xmma_gemm_bf16", 0, 10), ev(schema.LANE_CPU_THREAD, "aten::mm", 0, 5)]
    side = {"op_shapes": [{"row": 1, "input_dims": [[4096, 8192], [8192, 8192]],
                           "input_types": ["c10::BFloat16", "c10::BFloat16"]}]}
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20), [_trace(rows=rows, side=side)], _steps(), CFG)
    assert res.inputs["dtype"]["value"] == "bf16" and "inferred" in res.inputs["dtype"]["source"]
    side["op_shapes"][0]["input_types"] = ["float", "float"]
    with pytest.raises(MissingInputError, match="tf32"):
        compute_mfu(Workload(params=7e9, tokens_per_step=2**20), [_trace(rows=rows, side=side)], _steps(), CFG)
    with pytest.raises(MissingInputError, match="--dtype"):
        compute_mfu(Workload(params=7e9, tokens_per_step=2**20), [_trace()], _steps(), CFG)


def test_attention_flops_are_a_separate_labelled_number() -> None:
    job = Workload(params=7e9, global_batch=512, seq_len=4096, dtype="bf16", attention_flops=True, layers=32,
                    hidden=4096)
    res = compute_mfu(job, [_trace()], _steps(), CFG)
    plain = compute_mfu(Workload(params=7e9, global_batch=512, seq_len=4096, dtype="bf16"), [_trace()], _steps(), CFG)
    assert res.mfu == plain.mfu
    attn = 12 * 32 * 4096 * 4096
    assert res.mfu_with_attention == pytest.approx(plain.mfu * (6 * 7e9 + attn) / (6 * 7e9))


def test_impossible_mfu_is_flagged_and_missing_inputs_refused() -> None:
    res = compute_mfu(Workload(params=7e11, tokens_per_step=2**24, dtype="bf16"), [_trace(world_size=1)], _steps(),
                      CFG)
    assert res.mfu > 1 and any("exceeds 100%" in w for w in map(words, res.warnings))
    with pytest.raises(MissingInputError, match="--params"):
        compute_mfu(Workload(tokens_per_step=2**20, dtype="bf16"), [_trace()], _steps(), CFG)
    with pytest.raises(MissingInputError, match="tokens"):
        compute_mfu(Workload(params=7e9, dtype="bf16"), [_trace()], _steps(), CFG)
    with pytest.raises(MissingInputError, match="steps"):
        compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace()], _steps().iloc[:0], CFG)


def test_world_size_and_gpus_disagreement_warned() -> None:
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16", gpus=128), [_trace(world_size=64)],
                      _steps(), CFG)
    assert res.inputs["num_gpus"]["value"] == 128 and any("differs" in w for w in map(words, res.warnings))


def test_a_marker_recorded_twice_counts_once() -> None:
    rows = _markers(6, ["Optimizer.step#AdamW.step"])
    # The same optimizer step also recorded as a CPU op nested in its annotation.
    rows += [ev(schema.LANE_CPU_THREAD, "Optimizer.step#AdamW.step", r["start_ns"] + 10, r["end_ns"] - 10)
             for r in list(rows) if r["name"].startswith("Optimizer")]
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace(rows=rows)], _steps(), CFG)
    assert res.step_time_ns == 2_000_000_000 and res.timing["optimizer_steps_per_profiler_step"] == 1


def test_two_optimizers_stepped_together_are_one_optimizer_step() -> None:
    rows = _markers(6, ["Optimizer.step#Shampoo.step", "Optimizer.step#EMAOptimizer.step"])
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [_trace(rows=rows)], _steps(), CFG)
    assert res.step_time_ns == 2_000_000_000 and res.timing["optimizer_steps_per_profiler_step"] == 1


def test_several_ranks_take_the_slowest_device_per_step() -> None:
    import pandas as pd

    r0 = make_trace([kernel("sm90_xmma_gemm_bf16", 0, 10)], world_size=2, ranks=(0,))
    r1 = make_trace([kernel("sm90_xmma_gemm_bf16", 0, 10, rank=1)], world_size=2, ranks=(1,))
    s0 = steps_frame([2000.0] * 4).assign(trace=0)
    s1 = steps_frame([2000.0, 2400.0, 2400.0, 2400.0], rank=1).assign(trace=1)
    res = compute_mfu(Workload(params=7e9, tokens_per_step=2**20, dtype="bf16"), [r0, r1],
                      pd.concat([s0, s1], ignore_index=True), CFG)
    assert res.inputs["num_gpus"]["value"] == 2 and res.step_time_ns == 2_400_000_000


def test_dp_larger_than_the_job_is_warned() -> None:
    job = Workload(params=7e9, micro_batch=1, grad_accum=1, dp=128, seq_len=4096, dtype="bf16")
    res = compute_mfu(job, [_trace(world_size=64)], _steps(), CFG)
    assert any("--dp 128 exceeds" in w for w in map(words, res.warnings))
