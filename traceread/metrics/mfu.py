"""MFU and HFU, computed the honest way and refusing the classic mistakes.

    MFU = flops_per_token x tokens_per_optimizer_step / (optimizer_step_time x num_gpus x dense_peak)

``flops_per_token`` is 6N for training (2 forward + 4 backward per parameter) and 2N for inference;
``dense_peak`` is the dense (never 2:4-sparse) peak of the run's precision. HFU multiplies by the
executed/useful ratio (8/6 for full recompute, ``--recompute-factor`` for selective schemes); the
recompute FLOPs never enter MFU. Attention score/context FLOPs, when asked for, are reported as a
separate, labelled number (PaLM convention), never mixed into 6ND. For ``--mode inference`` the
memory-bandwidth utilization (MBU) is reported as well: bytes read per step over step time and
peak bandwidth.

Inputs the trace cannot give (N, tokens) come from :class:`~traceread.metrics.workload.Workload`; the GPU model,
GPU count (world size) and step time come from the traces. A missing GPU count, unknown GPU name or
missing precision is a :class:`~traceread.errors.MissingInputError`, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from traceread.config import Thresholds
from traceread.errors import MissingInputError
from traceread.metrics.peaks import PeakChoice, resolve_peak
from traceread.metrics.precision import DTYPE_BYTES, matmul_precisions
from traceread.metrics.steptime import StepTiming, step_timing
from traceread.metrics.workload import Workload
from traceread.note import (
    DP_EXCEEDS_GPUS,
    FP8_GEMMS_SEEN,
    FP8_NOT_SEEN,
    GPUS_DIFFER,
    GRAD_ACCUM_DISAGREES,
    MBU_BYTES_ESTIMATE,
    MBU_NEEDS_BYTES,
    MFU_OVER_100,
    MICRO_BATCHES,
    NO_PEAK_BANDWIDTH,
    TOKENS_COVER_MICRO_BATCHES,
    Note,
)
from traceread.trace import Trace


def _infer_dtype(evidence: dict[str, int]) -> tuple[str, str]:
    counts = {k: v for k, v in evidence.items() if k in DTYPE_BYTES}
    if not counts:
        raise MissingInputError("the trace records no matmul input types to read the precision from; "
                                "pass --dtype bf16|fp16|fp8|tf32|fp32")
    best = max(counts, key=lambda k: counts[k])
    if best == "fp32":
        raise MissingInputError("the matmuls take fp32 inputs, which run as fp32 or tf32 depending on "
                                "torch.backends.cuda.matmul.allow_tf32; pass --dtype fp32 or --dtype tf32")
    return best, f"inferred from the recorded matmul ops ({counts[best]} of {sum(counts.values())} read are {best})"


def _precision_warnings(dtype: str, evidence: dict[str, int]) -> list[Note]:
    out = []
    fp8 = evidence.get("fp8", 0) + evidence.get("fp8-kernels", 0)
    if dtype != "fp8" and fp8:
        out.append(Note.of(FP8_GEMMS_SEEN, dtype=dtype, count=fp8))
    if dtype == "fp8" and not fp8 and (evidence.get("bf16") or evidence.get("fp16")):
        out.append(Note.of(FP8_NOT_SEEN))
    return out


@dataclass(frozen=True)
class MfuResult:
    """MFU/HFU and everything needed to recompute them by hand. Fractions in [0, 1]."""

    mfu: float
    hfu: float
    tflops_per_gpu: float  # achieved useful TFLOP/s per GPU
    hfu_tflops_per_gpu: float  # executed TFLOP/s per GPU (incl. recompute)
    tokens_per_s: float
    headroom_to_50: float  # MFU points to the "very good" mark (0 when above it)
    step_time_ns: int  # optimizer-step time used
    formula: str  # the computation with its numbers
    inputs: dict[str, Any]  # every input with its value and source
    timing: dict[str, Any]
    peak: dict[str, Any]
    mfu_with_attention: float | None = None  # 6ND + attention FLOPs (PaLM convention), labelled
    mbu: float | None = None  # inference: memory-bandwidth utilization
    warnings: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes
    notes: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes


def _num_gpus(workload: Workload, traces: list[Trace], warnings: list[Note]) -> tuple[int, str]:
    sizes = [t.meta.world_size for t in traces if t.meta.world_size]
    world = max(sizes) if sizes else None
    if workload.gpus is not None:
        if world is not None and world != workload.gpus:
            warnings.append(Note.of(GPUS_DIFFER, gpus=workload.gpus, world=world))
        return workload.gpus, "--gpus"
    if world is not None:
        return world, "trace world size (distributedInfo)"
    raise MissingInputError("the trace does not say how many GPUs the job used (no world size); pass "
                            "--gpus N (profiling one rank of many is normal, so it is never guessed)")


def _device_names(traces: list[Trace]) -> list[str]:
    devs = [d for t in traces for d in t.meta.devices]
    used = [d for d in devs if d.used]
    return [d.name for d in (used or devs)]


def _check_grad_accum(workload: Workload, timing: StepTiming, warnings: list[Note], notes: list[Note]) -> None:
    m = timing.micro_batches_per_optimizer_step
    if m is None:
        return
    seen = int(round(m))
    if seen > 1:
        notes.append(Note.of(MICRO_BATCHES, count=m))
    if workload.grad_accum is not None and seen != workload.grad_accum:
        warnings.append(Note.of(GRAD_ACCUM_DISAGREES, grad_accum=workload.grad_accum, count=m))
    elif workload.grad_accum is None and seen > 1:
        warnings.append(Note.of(TOKENS_COVER_MICRO_BATCHES, count=m))


def compute_mfu(workload: Workload, traces: list[Trace], steps_df: pd.DataFrame,
                cfg: Thresholds = Thresholds()) -> MfuResult:  # noqa: B008 - frozen
    """MFU/HFU of the job that produced ``traces`` (one job; several ranks allowed).

    ``steps_df`` is the steps frame (``schema.STEP_COLUMNS``, optional ``trace`` column: index into
    ``traces``). Raises MissingInputError for inputs neither the trace nor ``workload`` gives.
    """
    warnings: list[Note] = []
    notes: list[Note] = []
    fpt = workload.flops_per_token_model()
    if fpt is None:
        raise MissingInputError("MFU needs the model size: pass --params N or --flops-per-token")
    tok = workload.tokens()
    if tok is None:
        raise MissingInputError("MFU needs tokens per optimizer step: --tokens-per-step, or --global-batch "
                                "with --seq-len, or --micro-batch, --grad-accum, --dp and --seq-len")
    evidence = matmul_precisions(traces)
    if workload.dtype:
        dtype, dtype_src = workload.dtype, "--dtype"
        warnings += _precision_warnings(dtype, evidence)
    else:
        dtype, dtype_src = _infer_dtype(evidence)
    gpus, gpus_src = _num_gpus(workload, traces, warnings)
    if workload.dp is not None and workload.dp > gpus:
        warnings.append(Note.of(DP_EXCEEDS_GPUS, dp=workload.dp, gpus=gpus))
    peak: PeakChoice = resolve_peak(_device_names(traces), dtype, workload.gpu, workload.peak_tflops,
                                    workload.peak_bandwidth, cfg.peak_match_tolerance)
    warnings += peak.warnings
    timing = step_timing(traces, steps_df, cfg, training=workload.mode == "train")
    warnings += timing.warnings
    notes += timing.notes
    if workload.mode == "train":
        _check_grad_accum(workload, timing, warnings, notes)

    flops_tok, fpt_how = fpt
    tokens, tok_how = tok
    t_s = timing.step_time_ns / 1e9
    useful = flops_tok * tokens
    per_gpu = useful / t_s / gpus
    mfu = per_gpu / peak.peak_flops
    mult, mult_how = workload.recompute_multiplier()
    hfu = mfu * mult
    if mfu > 1:
        warnings.append(Note.of(MFU_OVER_100, mfu=mfu))
    attn = workload.attention_flops_per_token()
    mfu_attn = (flops_tok + attn) * tokens / t_s / gpus / peak.peak_flops if attn else None
    mbu = None
    if workload.mode == "inference":
        mbu = _mbu(workload, dtype, t_s, gpus, peak, warnings, notes)
    formula = (f"MFU = {flops_tok:.4g} FLOP/token x {tokens} tokens / ({timing.step_time_ns / 1e6:.4g} ms "
               f"x {gpus} GPUs x {peak.peak_flops / 1e12:.4g} TFLOP/s dense {dtype}) = {mfu:.2%}; "
               f"HFU = MFU x {mult:.4g} = {hfu:.2%}")
    inputs = {
        "mode": workload.mode,
        "flops_per_token": {"value": flops_tok, "source": fpt_how},
        "tokens_per_optimizer_step": {"value": tokens, "source": tok_how},
        "num_gpus": {"value": gpus, "source": gpus_src},
        "dtype": {"value": dtype, "source": dtype_src},
        "peak_tflops": {"value": peak.peak_flops / 1e12, "source": peak.source},
        "step_time_ns": {"value": timing.step_time_ns, "source": "median of steady optimizer steps"},
        "recompute_multiplier": {"value": mult, "source": mult_how},
        "attention_flops_per_token": {"value": attn, "source": "12·L·d·T (PaLM)" if attn else "not asked"},
        "job": {k: v for k, v in workload.to_dict().items() if v is not None and v is not False},
    }
    return MfuResult(
        mfu=mfu, hfu=hfu, tflops_per_gpu=per_gpu / 1e12, hfu_tflops_per_gpu=per_gpu * mult / 1e12,
        tokens_per_s=tokens / t_s, headroom_to_50=max(0.0, cfg.mfu_very_good - mfu),
        step_time_ns=timing.step_time_ns, formula=formula, inputs=inputs, timing=timing.to_dict(),
        peak=peak.to_dict(), mfu_with_attention=mfu_attn, mbu=mbu,
        warnings=tuple(dict.fromkeys(warnings)), notes=tuple(dict.fromkeys(notes)))


def _mbu(workload: Workload, dtype: str, t_s: float, gpus: int, peak: PeakChoice,
         warnings: list[Note], notes: list[Note]) -> float | None:
    """Memory-bandwidth utilization: bytes read per step / (step time x GPUs x peak bandwidth)."""
    if peak.bandwidth_bytes_per_s is None:
        warnings.append(Note.of(NO_PEAK_BANDWIDTH))
        return None
    if workload.bytes_per_step is not None:
        nbytes = workload.bytes_per_step
    elif workload.params is not None:
        nbytes = workload.params * DTYPE_BYTES[dtype]
        notes.append(Note.of(MBU_BYTES_ESTIMATE, bytes_per_param=DTYPE_BYTES[dtype]))
    else:
        warnings.append(Note.of(MBU_NEEDS_BYTES))
        return None
    return nbytes / t_s / (gpus * peak.bandwidth_bytes_per_s)
