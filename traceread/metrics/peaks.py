"""The peak table: dense throughput per precision and memory bandwidth of each GPU, with sources.

Every number is the **dense** figure (never the 2:4 structured-sparse one datasheets headline) for
**one PyTorch device**: an MI250/MI250X package is two devices (GCDs), so its row holds half the
package figure. ``fp32`` is the non-tensor-core FP32 rate on NVIDIA and the FP32 matrix rate on AMD
(what an fp32 GEMM can reach); ``tf32`` is absent where the chip has no TF32 path.

Matching goes by the names traces really carry (Kineto ``deviceProperties[].name``, nsys
``TARGET_INFO_GPU.name``): ``NVIDIA H100 80GB HBM3``, ``NVIDIA A100-PG509-200``,
``Tesla V100-DGXS-32GB``, ``AMD Instinct MI300X``. A name that matches no row (``AMD Radeon
Graphics``, ``''``, an accelerator we do not know) is never guessed: :func:`resolve_peak` raises a
:class:`~traceread.errors.MissingInputError` asking for ``--gpu NAME`` or the two ``--peak-*`` flags.
The Kineto loader names a ROCm device whose properties entry has no name (or the ``AMD Radeon
Graphics`` placeholder) from its architecture, compute units and memory when they identify one part
(``AMD Instinct MI300X (gfx942, 304 compute units, 192 GB; ...)``), so such names match here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from traceread.errors import MissingInputError, UsageError
from traceread.note import DEVICE_NAMES_UNRECOGNISED, PEAK_OF_OTHER_DTYPE, Note

DTYPES: tuple[str, ...] = ("fp8", "bf16", "fp16", "tf32", "fp32")
TERA = 1e12

# Datasheet sources, cited per row so a reader can check each number.
_NV_V100 = "NVIDIA Tesla V100 datasheet (2020), tensor FP16 / FP32 / HBM2"
_NV_A100 = "NVIDIA A100 datasheet (2021), dense columns (sparse figures are 2x)"
_NV_A10 = "NVIDIA A10 datasheet (2021), dense = half the 'with sparsity' figures"
_NV_L4 = "NVIDIA L4 datasheet (2023), dense = half the 'with sparsity' figures"
_NV_L40S = "NVIDIA L40S datasheet (2023), dense = half the 'with sparsity' figures"
_NV_H100 = "NVIDIA H100 datasheet (2023), dense = half the 'with sparsity' figures"
_NV_H800 = "NVIDIA H800 product brief (2023): H100 compute, same dense tensor rates"
_NV_H200 = "NVIDIA H200 datasheet (2024), dense = half the 'with sparsity' figures"
_NV_GH200 = "NVIDIA GH200 datasheet (2024), H100 compute with 96 GB HBM3"
_NV_B200 = "NVIDIA HGX B200 datasheet (2024), per GPU, dense = half the sparse figures"
_NV_GB200 = "NVIDIA GB200 NVL72 datasheet (2024), per GPU (/72), dense = half the sparse figures"
_AMD_MI210 = "AMD Instinct MI210 datasheet, peak dense matrix FP16/BF16/FP32, HBM2e"
_AMD_MI250 = "AMD Instinct MI250/MI250X datasheets; per GCD (one PyTorch device) = half the package"
_AMD_MI300 = "AMD Instinct MI300X/MI325X datasheets, dense (sparse figures are 2x)"
_AMD_MI355 = "AMD Instinct MI355X datasheet (2025), dense matrix rates"
_NV_GP100 = "NVIDIA Quadro GP100 datasheet: FP32 10.3, FP16 (2x rate, no tensor cores) 20.7, 717 GB/s"
_NV_TURING = "NVIDIA Turing whitepaper: RTX 2080 Ti FP16 tensor with FP32 accumulate (what PyTorch uses)"
_NV_GA102 = "NVIDIA Ampere GA102 whitepaper: tensor FP16/BF16 with FP32 accumulate, dense"
_GOOGLE_TPU = "Google Cloud TPU documentation (system architecture), per chip: peak BF16 compute, HBM bandwidth"


@dataclass(frozen=True, eq=False)  # rows are singletons: identity equality and hashing
class GpuPeak:
    """One row of the peak table: dense TFLOP/s per precision and HBM bandwidth of one device."""

    key: str  # table key, accepted by --gpu (case-insensitive)
    pattern: str  # regex matched against the device name as traces write it
    tflops: dict[str, float]  # dense TFLOP/s per dtype in DTYPES; missing: no such path
    bandwidth_tbs: float  # memory bandwidth, TB/s (1e12 bytes/s)
    source: str
    note: str = ""

    def peak_flops(self, dtype: str) -> float | None:
        """Dense FLOP/s for ``dtype``, or None when the chip has no such path."""
        v = self.tflops.get(dtype)
        return v * TERA if v else None

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_tbs * TERA

    def ridge(self, dtype: str) -> float | None:
        """FLOP/byte where the compute and bandwidth ceilings meet."""
        p = self.peak_flops(dtype)
        return p / self.bandwidth_bytes_per_s if p else None


def _row(key: str, pattern: str, bw: float, src: str, note: str = "", **tflops: float) -> GpuPeak:
    return GpuPeak(key, pattern, dict(tflops), bw, src, note)


# Order matters: the first matching pattern wins, so specific variants come before families.
PEAK_TABLE: tuple[GpuPeak, ...] = (
    _row("V100S-PCIE", r"V100S", 1.134, _NV_V100, fp16=130.0, fp32=16.4),
    _row("V100-PCIE", r"V100.*PCIE", 0.9, _NV_V100, fp16=112.0, fp32=14.0),
    _row("V100-SXM2", r"V100.*(SXM|DGXS)", 0.9, _NV_V100,
         "DGX Station (DGXS) boards run SXM2-class clocks", fp16=125.0, fp32=15.7),
    _row("A100-PCIE-40GB", r"A100.*(PCIE.*40GB|40GB PCIE)", 1.555, _NV_A100,
         bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    _row("A100-PCIE-80GB", r"A100.*(80GB PCIE|PCIE.*80GB)", 1.935, _NV_A100,
         bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    _row("A100-SXM4-80GB", r"A100.*SXM.*80GB|A100-PG509-210|A100 80GB", 2.039, _NV_A100,
         "PG509-210 is the 80 GB SXM4 board", bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    _row("A100-SXM4-40GB", r"A100.*SXM.*40GB|A100-PG509-200|A100-SXM4$|A100 40GB", 1.555, _NV_A100,
         "PG509-200 is the 40 GB SXM4 board (108 SMs, 40 GB in traces)",
         bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    _row("A10", r"\bA10\b", 0.6, _NV_A10, bf16=125.0, fp16=125.0, tf32=62.5, fp32=31.2),
    _row("L40S", r"\bL40S\b", 0.864, _NV_L40S, fp8=733.0, bf16=362.05, fp16=362.05, tf32=183.0, fp32=91.6),
    _row("L4", r"\bL4\b", 0.3, _NV_L4, fp8=242.5, bf16=121.0, fp16=121.0, tf32=60.0, fp32=30.3),
    _row("H100-NVL", r"H100.*NVL", 3.9, _NV_H100, fp8=1670.5, bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0),
    _row("H100-PCIE", r"H100.*(PCIE|HBM2e)", 2.0, _NV_H100, fp8=1513.0, bf16=756.0, fp16=756.0,
         tf32=378.0, fp32=51.0),
    _row("H100-SXM", r"H100.*(SXM|HBM3\b)", 3.35, _NV_H100, "'NVIDIA H100 80GB HBM3' is the SXM5 part",
         fp8=1979.0, bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0),
    _row("H800-PCIE", r"H800.*PCIE", 2.0, _NV_H800, fp8=1513.0, bf16=756.0, fp16=756.0, tf32=378.0, fp32=51.0),
    _row("H800-SXM", r"H800(?!.*PCIE)", 3.35, _NV_H800, fp8=1979.0, bf16=989.5, fp16=989.5, tf32=494.5,
         fp32=67.0),
    _row("H200-NVL", r"(?<!G)H200.*NVL", 4.8, _NV_H200, fp8=1670.5, bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0),
    _row("H200-SXM", r"(?<!G)H200(?!.*NVL)", 4.8, _NV_H200, fp8=1979.0, bf16=989.5, fp16=989.5, tf32=494.5,
         fp32=67.0),
    _row("GH200-HBM3E", r"GH200.*(144G|HBM3e)", 4.9, _NV_GH200 + "; 144 GB HBM3e version",
         fp8=1979.0, bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0),
    _row("GH200", r"GH200", 4.0, _NV_GH200, fp8=1979.0, bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0),
    _row("GB200", r"GB200", 8.0, _NV_GB200, fp8=5000.0, bf16=2500.0, fp16=2500.0, tf32=1250.0, fp32=80.0),
    _row("B200", r"(?<!G)B200", 8.0, _NV_B200, fp8=4500.0, bf16=2250.0, fp16=2250.0, tf32=1125.0, fp32=75.0),
    _row("MI210", r"MI210", 1.6384, _AMD_MI210, bf16=181.0, fp16=181.0, fp32=45.3),
    _row("MI250X", r"MI250X(?!\s*/)", 1.6384, _AMD_MI250, "per GCD: package 383 TFLOP/s bf16, 3.2768 TB/s",
         bf16=191.5, fp16=191.5, fp32=47.85),
    _row("MI250", r"^(?!.*MI250X).*MI250\b", 1.6384, _AMD_MI250, "per GCD: package 362.1 TFLOP/s bf16, 3.2768 TB/s",
         bf16=181.05, fp16=181.05, fp32=45.25),
    _row("MI300X", r"MI300X", 5.3, _AMD_MI300, fp8=2614.9, bf16=1307.4, fp16=1307.4, tf32=653.7, fp32=163.4),
    _row("MI325X", r"MI325X", 6.0, _AMD_MI300, fp8=2614.9, bf16=1307.4, fp16=1307.4, tf32=653.7, fp32=163.4),
    _row("MI355X", r"MI355X", 8.0, _AMD_MI355, fp8=5033.2, bf16=2516.6, fp16=2516.6, fp32=157.3),
    _row("GP100", r"GP100", 0.717, _NV_GP100, fp16=20.7, fp32=10.3),
    _row("RTX-2080-TI", r"RTX 2080 Ti", 0.616, _NV_TURING, fp16=53.8, fp32=13.4),
    _row("RTX-3090", r"RTX 3090(?! Ti)", 0.936, _NV_GA102, bf16=71.0, fp16=71.0, tf32=35.6, fp32=35.6),
    _row("RTX-3080", r"RTX 3080(?! Ti)", 0.76, _NV_GA102, bf16=59.5, fp16=59.5, tf32=29.8, fp32=29.8),
    # TPUs as their xplanes name them (device_type_string; JAX's device_kind): "TPU v6 Lite" is v6e.
    # The xplane also carries the chip's own peak (meta.extra["device_peaks"]), which these match.
    _row("TPU-v6e", r"^TPU v6 ?(lite|e)\b", 1.64, _GOOGLE_TPU, bf16=918.0),
    _row("TPU-v5e", r"^TPU v5 ?(lite|e)\b", 0.819, _GOOGLE_TPU, bf16=197.0),
    _row("TPU-v5p", r"^TPU v5p?$|^TPU v5p\b", 2.765, _GOOGLE_TPU, bf16=459.0),
    _row("TPU-v4", r"^TPU v4\b", 1.2, _GOOGLE_TPU, bf16=275.0),
)

_COMPILED = tuple((row, re.compile(row.pattern, re.IGNORECASE)) for row in PEAK_TABLE)
_BY_KEY = {row.key.lower(): row for row in PEAK_TABLE}


def match_gpu(name: str) -> GpuPeak | None:
    """The table row for a device name as a trace writes it (or a table key), or None."""
    name = (name or "").strip()
    if not name:
        return None
    if name.lower() in _BY_KEY:
        return _BY_KEY[name.lower()]
    for row, pat in _COMPILED:
        if pat.search(name):
            return row
    return None


def table_keys() -> list[str]:
    return [row.key for row in PEAK_TABLE]


@dataclass(frozen=True)
class PeakChoice:
    """The peak an MFU/roofline computation uses, and where each number came from."""

    dtype: str
    peak_flops: float  # dense FLOP/s per device for dtype
    bandwidth_bytes_per_s: float | None
    gpu_key: str | None  # table row used, None for user-given peaks
    device_name: str  # as the trace wrote it ('' unknown)
    source: str  # "table: <row source>" or "--peak-tflops"
    warnings: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes

    @property
    def ridge(self) -> float | None:
        return self.peak_flops / self.bandwidth_bytes_per_s if self.bandwidth_bytes_per_s else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype, "peak_tflops": self.peak_flops / TERA,
            "bandwidth_tbs": (self.bandwidth_bytes_per_s / TERA) if self.bandwidth_bytes_per_s else None,
            "ridge_flop_per_byte": self.ridge, "gpu": self.gpu_key, "device_name": self.device_name,
            "source": self.source, "warnings": list(self.warnings),
        }


def _unknown_message(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names) if names else "no GPU name"
    return (f"the trace names its GPU {shown}, which is not in the peak table; pass --gpu NAME "
            f"(one of {', '.join(table_keys())}) or both --peak-tflops and --peak-bandwidth")


def _check_user_peak(user_tflops: float, dtype: str, row: GpuPeak | None, tol: float) -> list[Note]:
    """Guardrails for a hand-given peak: the sparse figure is refused, another precision's is warned."""
    if row is None:
        return []
    close = lambda a, b: abs(a - b) <= tol * b  # noqa: E731
    dense = row.tflops.get(dtype)
    if dense and close(user_tflops, 2 * dense):
        raise UsageError(
            f"--peak-tflops {user_tflops:g} is the 2:4-sparse {dtype} figure of the {row.key} "
            f"(dense: {dense:g}); MFU uses the dense peak, so pass --peak-tflops {dense:g}")
    if dense and close(user_tflops, dense):
        return []
    out: list[Note] = []
    for other, val in row.tflops.items():
        if other == dtype or not close(user_tflops, val):
            continue
        out.append(Note.of(PEAK_OF_OTHER_DTYPE, tflops=user_tflops, gpu=row.key, other=other, dtype=dtype,
                           dense=dense, other_tflops=val))
    return out


def resolve_peak(
    device_names: list[str],
    dtype: str,
    gpu: str | None = None,
    peak_tflops: float | None = None,
    peak_bandwidth_tbs: float | None = None,
    tolerance: float = 0.03,
    need_bandwidth: bool = False,
) -> PeakChoice:
    """Pick the dense peak for ``dtype`` on the run's GPU.

    ``gpu`` (a table key or device name) overrides the trace's names; ``peak_tflops`` /
    ``peak_bandwidth_tbs`` override the table numbers. Raises MissingInputError when the GPU is
    unknown (and no peak was given) or has no ``dtype`` path; UsageError for a sparse peak.
    """
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    names = sorted({n for n in device_names if n is not None})
    warnings: list[Note] = []
    row: GpuPeak | None = None
    if gpu:
        row = match_gpu(gpu)
        if row is None:
            raise UsageError(f"--gpu {gpu!r} is not in the peak table; known: {', '.join(table_keys())}")
    else:
        rows = {r for n in names if n and (r := match_gpu(n)) is not None}
        if len(rows) > 1:
            raise MissingInputError(
                f"the trace lists several GPU models ({', '.join(sorted(r.key for r in rows))}); "
                "pass --gpu NAME for the one the job ran on")
        if rows and all(match_gpu(n) for n in names if n):
            row = rows.pop()
        elif rows:
            row = rows.pop()
            warnings.append(Note.of(DEVICE_NAMES_UNRECOGNISED, names=tuple(names), gpu=row.key))
    name = names[0] if len(names) == 1 else ", ".join(names)

    if peak_tflops is not None:
        if peak_tflops <= 0:
            raise UsageError("--peak-tflops must be positive")
        warnings += _check_user_peak(peak_tflops, dtype, row, tolerance)
        flops, source = peak_tflops * TERA, "--peak-tflops"
    elif row is None:
        raise MissingInputError(_unknown_message(names))
    else:
        flops_opt = row.peak_flops(dtype)
        if flops_opt is None:
            raise MissingInputError(
                f"the {row.key} has no dense {dtype} path in the peak table "
                f"(has {', '.join(row.tflops)}); check --dtype or pass --peak-tflops")
        flops, source = flops_opt, f"table {row.key}: {row.source}"
    if peak_bandwidth_tbs is not None:
        if peak_bandwidth_tbs <= 0:
            raise UsageError("--peak-bandwidth must be positive")
        bw: float | None = peak_bandwidth_tbs * TERA
    else:
        bw = row.bandwidth_bytes_per_s if row else None
    if bw is None and need_bandwidth:
        raise MissingInputError(_unknown_message(names).replace("both --peak-tflops and ", ""))
    return PeakChoice(dtype, flops, bw, row.key if row else None, name, source, tuple(warnings))
