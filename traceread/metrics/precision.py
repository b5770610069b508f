"""Precision evidence: recorded element types and the matmul ops' input types, fp8 GEMM kernel names.

Read by the MFU (the run's precision when ``--dtype`` is not given), the kernel hints (fp32 GEMMs)
and the byte counts of collectives and the roofline (element sizes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import kernel_classes, schema
from traceread.kernel_classes import name_mask
from traceread.trace import Trace

# Recorded element types (Kineto "Input type", collective "dtype") -> the run's precision and bytes.
TORCH_DTYPES: dict[str, tuple[str | None, int]] = {
    "float": ("fp32", 4), "float32": ("fp32", 4), "bfloat16": ("bf16", 2), "c10::bfloat16": ("bf16", 2),
    "half": ("fp16", 2), "c10::half": ("fp16", 2), "float16": ("fp16", 2), "double": (None, 8),
    "float8_e4m3fn": ("fp8", 1), "float8_e5m2": ("fp8", 1), "float8_e4m3fnuz": ("fp8", 1),
    "float8_e5m2fnuz": ("fp8", 1), "c10::float8_e4m3fn": ("fp8", 1), "c10::float8_e5m2": ("fp8", 1),
    "long": (None, 8), "int64": (None, 8), "int": (None, 4), "int32": (None, 4), "short": (None, 2),
    "char": (None, 1), "byte": (None, 1), "unsigned char": (None, 1), "bool": (None, 1), "int8": (None, 1),
    "uint8": (None, 1),
}
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MATMUL_OPS: frozenset[str] = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
    "aten::_scaled_mm", "aten::addmv", "aten::mv"})
_FP8_KERNEL = r"e4m3|e5m2|fp8|f8f8"
_PRECISION_SAMPLE = 20_000  # matmul ops read for the precision evidence
_MATMUL_RE = "^(?:" + "|".join(sorted(MATMUL_OPS)) + ")$"


def matmul_precisions(traces: list[Trace]) -> dict[str, int]:
    """Evidence of the run's GEMM precision: matmul ops per precision (recorded shapes) and fp8 GEMM kernels."""
    out: dict[str, int] = {}
    for trace in traces:
        ev = trace.events
        shapes = trace.side_table("op_shapes")
        if len(shapes):
            rows = shapes["row"].to_numpy()
            keep = np.flatnonzero(name_mask(ev["name"].iloc[rows], _MATMUL_RE))
            # Evidence, not an inventory: an evenly strided sample bounds the per-op work.
            keep = keep[::max(1, len(keep) // _PRECISION_SAMPLE)]
            first = pd.Series(shapes["input_types"].to_numpy()[keep], dtype=object).str[0]
            for typ, n in first.value_counts().items():
                prec = TORCH_DTYPES.get(str(typ).lower(), (None, 0))[0]
                if prec:
                    out[prec] = out.get(prec, 0) + int(n)
        kern = ev["name"][(ev["lane"] == schema.LANE_GPU_COMPUTE).to_numpy()]
        if len(kern):
            fp8 = name_mask(kern, _FP8_KERNEL) & (kernel_classes.classify(kern) == kernel_classes.CLS_GEMM)
            if fp8.any():
                out["fp8-kernels"] = int(fp8.sum())
    return out
