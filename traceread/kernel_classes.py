"""Kernel classification by name: the one place that says what a GPU kernel is.

Shared by the loaders (which put communication kernels on the ``gpu_comm`` lane), the interval
engine (communication is not compute) and the kernel table / roofline.

Patterns are tried in order; the first match wins. Users extend them with
``register_pattern(cls, regex)`` or the ``[kernel_patterns]`` table of a config file; user patterns
are tried before the built-in ones.

Classes and why they sit where they do:

* ``communication``: NCCL/RCCL (``nccl*`` up to the first ``(``), NCCL symmetric kernels, DeepEP
  (``dpsk::ep::``), vLLM/sglang custom all-reduce (``cross_device_reduce``), MSCCL++/quick-reduce.
* ``gemm``: cuBLAS/cuBLASLt (``gemm``, ``sgemm``, ``gemv``), CUTLASS, Hopper ``nvjet``/``sm90_xmma``,
  ROCm Tensile/hipBLASLt (``Cijk_``), Triton matmul templates.
* ``attention``: flash / fmha / SDPA / paged attention.
* ``convolution``: cuDNN conv kernels (``implicit_gemm``-style conv names, ``wgrad``, ``dgrad``).
* ``normalization``, ``softmax``, ``reduction``, ``elementwise``: the memory-bound families.
* ``triton``: other ``triton_`` kernels (torch.compile fused pointwise/reduction).
* ``memcpy``: copy/memset kernels launched as kernels.
* ``other``: nothing matched; listed in the kernel table so users can add a pattern.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:  # imported where used: the loader imports this module before pandas (runner.prefetch)
    import pandas as pd

CLS_COMMUNICATION = "communication"
CLS_GEMM = "gemm"
CLS_ATTENTION = "attention"
CLS_CONVOLUTION = "convolution"
CLS_NORMALIZATION = "normalization"
CLS_SOFTMAX = "softmax"
CLS_REDUCTION = "reduction"
CLS_ELEMENTWISE = "elementwise"
CLS_TRITON = "triton"
CLS_MEMCPY = "memcpy"
CLS_OTHER = "other"

KERNEL_CLASSES: tuple[str, ...] = (
    CLS_GEMM,
    CLS_ATTENTION,
    CLS_CONVOLUTION,
    CLS_ELEMENTWISE,
    CLS_REDUCTION,
    CLS_NORMALIZATION,
    CLS_SOFTMAX,
    CLS_COMMUNICATION,
    CLS_MEMCPY,
    CLS_TRITON,
    CLS_OTHER,
)

# Busy time of these classes counts as compute-bound (tensor-core shaped work); ``other`` (no pattern
# matched) counts as unclassified busy time, since nothing is known of it; all other
# non-communication classes count as memory-bound busy time.
COMPUTE_BOUND_CLASSES: frozenset[str] = frozenset({CLS_GEMM, CLS_ATTENTION, CLS_CONVOLUTION})

# Communication-collective subtype, from a communication kernel's name.
COLL_ALL_REDUCE = "all-reduce"
COLL_ALL_GATHER = "all-gather"
COLL_REDUCE_SCATTER = "reduce-scatter"
COLL_ALL_TO_ALL = "all-to-all"
COLL_BROADCAST = "broadcast"
COLL_REDUCE = "reduce"
COLL_SEND_RECV = "send-recv"  # point-to-point, direction unknown (a SendRecv kernel, batch_isend_irecv)
COLL_SEND = "send"  # point-to-point, named by the host (c10d::send, nccl:send)
COLL_RECV = "recv"
COLL_OTHER = "other-comm"
COLLECTIVE_TYPES: tuple[str, ...] = (
    COLL_ALL_REDUCE,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALL_TO_ALL,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_SEND_RECV,
    COLL_SEND,
    COLL_RECV,
    COLL_OTHER,
)
P2P_TYPES: frozenset[str] = frozenset({COLL_SEND_RECV, COLL_SEND, COLL_RECV})

_I = re.IGNORECASE

# (class, compiled regex). Order matters: communication first (NCCL names contain "Reduce"),
# attention before gemm (fmha kernels contain "gemm"), normalization/softmax before reduction.
_BUILTIN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (CLS_COMMUNICATION, re.compile(r"^\s*(void\s+)?(nccl|rccl)[^(]*", _I)),
    (CLS_COMMUNICATION, re.compile(r"dpsk::ep::|deep_ep|cross_device_reduce|custom_?all_?reduce|"
                                   r"quickreduce|mscclpp|allreduce_kernel|all_reduce_kernel|"
                                   r"userbuffers|one_shot_all_reduce|two_shot_all_reduce", _I)),
    (CLS_MEMCPY, re.compile(r"^(Memcpy|Memset)\b|memcpy_kernel|copy_buffer|__amd_rocclr_copy|"
                            r"__amd_rocclr_fill|CatArrayBatchedCopy", _I)),
    # torch.compile's generated pointwise/reduction/persistent kernels stay "triton" whatever ops
    # their names list (``triton_poi_fused_mul_silu`` is a fusion, not a silu kernel).
    (CLS_TRITON, re.compile(r"^triton_(poi|red|per)_", _I)),
    # Names that the families below would misread: RNG ("normal" distribution), layout transforms
    # inside cuDNN/MIOpen, quantize kernels in the fbgemm namespace.
    (CLS_ELEMENTWISE, re.compile(r"distribution_elementwise|normal_and_transform|uniform_and_transform|"
                                 r"philox|curand|nchwToNhwc|nhwcToNchw|SubTensorOp|Op[1-5]dTensor|"
                                 r"quantize", _I)),
    (CLS_NORMALIZATION, re.compile(r"(layer|rms|group|batch|instance)_?norm(?!al_)|nvfuser_(inner|outer)_persistent",
                                   _I)),
    (CLS_GEMM, re.compile(r"nvfuser_matmul", _I)),
    (CLS_ELEMENTWISE, re.compile(r"nvfuser_pointwise", _I)),
    (CLS_REDUCTION, re.compile(r"nvfuser_reduction", _I)),
    (CLS_ATTENTION, re.compile(r"flash|fmha|attention|attn|sdpa|paged_?attention|"
                               r"mha_(fwd|bwd)|_fwd_kernel|_bwd_kernel|fused_mha", _I)),
    (CLS_CONVOLUTION, re.compile(r"conv|cudnn::(?!.*(bn|norm))|wgrad|dgrad|fprop|winograd|"
                                 r"implicit_convolve|im2col|col2im|MIOpen|miopenSp|[sh]cudnn|"
                                 r"igemm_(fwd|bwd|wrw)|fft2d_|cask_cudnn", _I)),
    (CLS_GEMM, re.compile(r"(?<!fb)gemm|gemv|cutlass|nvjet|xmma|sm\d+_xmma|Cijk_|Tensile|"
                          r"hipblaslt|cublas|matmul|_mm_|\bmm_|triton_tem_fused|splitK|"
                          r"s884|s1688|s16816|h884|h1688|h16816|wmma|ampere_.*(gemm|s16816)|"
                          r"volta_.*gemm|turing_.*gemm", _I)),
    (CLS_NORMALIZATION, re.compile(r"norm(?!al_|al\b|al<)|rms|bn_fw|bn_bw", _I)),
    (CLS_SOFTMAX, re.compile(r"softmax|log_softmax", _I)),
    (CLS_REDUCTION, re.compile(r"reduce|reduction|sum_kernel|mean_kernel|argmax|argmin|"
                               r"max_kernel|min_kernel|norm_kernel|cub::|DeviceReduce|DeviceScan|"
                               r"scan|topk|sort|radix|max_pool|avg_pool|average_pool|adaptive_\w*pool", _I)),
    (CLS_ELEMENTWISE, re.compile(r"elementwise|vectorized|unrolled|pointwise|fill_kernel|"
                                 r"copy_kernel|index|gather|scatter|embedding|dropout|gelu|relu|"
                                 r"silu|swiglu|act_and_mul|sigmoid|tanh|add_kernel|mul_kernel|"
                                 r"where|cat_|clamp|rotary|rope|adam|sgd|foreach|multi_tensor|"
                                 r"cast|convert|transpose|permute", _I)),
    (CLS_TRITON, re.compile(r"^triton_|^triton\b|_triton_", _I)),
]

_USER_PATTERNS: list[tuple[str, re.Pattern[str]]] = []


def register_pattern(cls: str, regex: str) -> None:
    """Add a user pattern (tried before the built-in ones)."""
    if cls not in KERNEL_CLASSES:
        raise ValueError(f"unknown kernel class {cls!r}; choose one of {', '.join(KERNEL_CLASSES)}")
    _USER_PATTERNS.append((cls, re.compile(regex, _I)))
    classify_name.cache_clear()


def clear_user_patterns() -> None:
    _USER_PATTERNS.clear()
    classify_name.cache_clear()


# A kernel's class shows in its first few KB (real names, templates included, stay well under
# this); a hostile multi-MB name is classified on this prefix instead of every regex scanning it.
NAME_CLASSIFY_CHARS = 16_384


def register_patterns_from_config(table: dict, source: str = "config") -> int:
    """Register a config file's ``[kernel_patterns]`` table: ``class = "regex"`` or ``class = [regexes]``.

    Returns the number of patterns added; raises UsageError (naming ``source``) on an unknown class
    or a regex that does not compile.
    """
    from traceread.errors import UsageError

    added = 0
    for cls, value in table.items():
        regexes = [value] if isinstance(value, str) else value
        if cls not in KERNEL_CLASSES or not isinstance(regexes, list):
            raise UsageError(f"{source}: [kernel_patterns] {cls!r}: expected one of {', '.join(KERNEL_CLASSES)} "
                             "= \"regex\" or [\"regex\", ...]")
        for rx in regexes:
            from traceread import bounds

            try:
                re.compile(str(rx))
            except re.error as exc:
                raise UsageError(f"{source}: [kernel_patterns] {cls}: bad regex {rx!r} ({exc})") from None
            # a pattern that can backtrack for ever on a trace's names is refused (bounds.user_pattern)
            bounds.user_pattern(str(rx), f"{source}: [kernel_patterns] {cls}", re.IGNORECASE)
            register_pattern(cls, str(rx))
            added += 1
    return added


@functools.lru_cache(maxsize=65_536)
def classify_name(name: str) -> str:
    """The class of one kernel name (cached: the same few names recur in every table)."""
    name = name[:NAME_CLASSIFY_CHARS]
    for cls, pat in (*_USER_PATTERNS, *_BUILTIN_PATTERNS):
        if pat.search(name):
            return cls
    return CLS_OTHER


def _per_unique(names: pd.Series | np.ndarray, fn) -> np.ndarray:
    """Apply ``fn`` once per distinct name and broadcast back (names are few, kernels many)."""
    import pandas as pd

    if isinstance(getattr(names, "dtype", None), pd.CategoricalDtype):
        # a categorical dtype means a Categorical, bare or under a Series
        cat = cast(pd.Categorical, names.array if isinstance(names, pd.Series) else names)
        cats, codes = np.asarray(cat.categories, dtype=object), np.asarray(cat.codes)
    else:  # factorize on objects: a Categorical of plain names would convert them to Arrow strings first
        codes, cats = pd.factorize(np.asarray(names, dtype=object))
    mapped = np.array([fn(str(c)) for c in cats], dtype=object)
    out = np.empty(len(codes), dtype=object)
    valid = codes >= 0
    out[valid] = mapped[codes[valid]] if len(mapped) else None
    out[~valid] = fn("")
    return out


def classify(names: pd.Series | np.ndarray) -> np.ndarray:
    """Vectorized: the class of every kernel name (object array of class strings)."""
    return _per_unique(names, classify_name)


def is_communication(names: pd.Series | np.ndarray) -> np.ndarray:
    """Boolean array: which kernel names are communication kernels."""
    return _per_unique(names, _is_communication_name).astype(bool)


def _is_communication_name(name: str) -> bool:
    # a communication pattern must match at all before the full ordered classification is
    # worth running (most names match none of them: one search instead of every pattern)
    name = name[:NAME_CLASSIFY_CHARS]
    if not any(pat.search(name) for cls, pat in (*_USER_PATTERNS, *_BUILTIN_PATTERNS) if cls == CLS_COMMUNICATION):
        return False
    return classify_name(name) == CLS_COMMUNICATION


_COLL_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (COLL_SEND_RECV, re.compile(r"sendrecv|send|recv|p2p|ppsend|pprecv", _I)),
    (COLL_ALL_REDUCE, re.compile(r"all_?reduce|cross_device_reduce|quickreduce", _I)),
    (COLL_REDUCE_SCATTER, re.compile(r"reduce_?scatter", _I)),
    (COLL_ALL_GATHER, re.compile(r"all_?gather", _I)),
    (COLL_ALL_TO_ALL, re.compile(r"all_?to_?all|alltoall|dispatch|combine", _I)),
    (COLL_BROADCAST, re.compile(r"broadcast|bcast", _I)),
    (COLL_REDUCE, re.compile(r"reduce", _I)),
]


def collective_type_name(name: str) -> str:
    """Collective subtype of one communication kernel name (all-reduce, send-recv, ...)."""
    head = name[:NAME_CLASSIFY_CHARS].split("(", 1)[0]
    for typ, pat in _COLL_PATTERNS:
        if pat.search(head):
            return typ
    return COLL_OTHER


def collective_type(names: pd.Series | np.ndarray) -> np.ndarray:
    """Vectorized collective subtype of communication kernel names."""
    return _per_unique(names, collective_type_name)


def is_compute_bound_class(classes: np.ndarray) -> np.ndarray:
    """Boolean array: which kernel classes count as compute-bound busy time."""
    return np.isin(classes, list(COMPUTE_BOUND_CLASSES))


def name_mask(names: pd.Series, pattern: str) -> np.ndarray:
    """Boolean array: which names match ``pattern`` (case-insensitive), evaluated once per distinct name."""
    cat = names.astype("category")
    rx = re.compile(pattern, re.IGNORECASE)
    hit = np.array([bool(rx.search(str(c))) for c in cat.cat.categories], dtype=bool)
    codes = cat.cat.codes.to_numpy()
    return np.where(codes >= 0, hit[np.maximum(codes, 0)] if len(hit) else False, False)
