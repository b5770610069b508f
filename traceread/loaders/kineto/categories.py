"""Kineto ``cat`` strings of every generation -> (lane, normalized category).

Sources: libkineto's ``ActivityType`` names (``libkineto/include/ActivityType.h``; the ``cat``
string since 2021-06), the hard-coded names written before them, and the ROCm and MTIA builds'.
Lookups are case-sensitive first, then lowercased, so ``Kernel``/``kernel`` and
``gpu_user_Annotation``/``gpu_user_annotation`` both land where they belong.
"""

from __future__ import annotations

from traceread import schema as s

# lane and category per raw category (lowercased keys)
RAW_CATEGORIES: dict[str, tuple[str, str]] = {
    # GPU activity
    "kernel": (s.LANE_GPU_COMPUTE, s.CAT_KERNEL),
    "mtia_ccp_events": (s.LANE_GPU_COMPUTE, s.CAT_KERNEL),  # MTIA kernels (HTA's kernel list)
    "gpu_memcpy": (s.LANE_MEMCPY, s.CAT_MEMCPY),
    "memcpy": (s.LANE_MEMCPY, s.CAT_MEMCPY),
    "gpu_memset": (s.LANE_MEMSET, s.CAT_MEMSET),
    "memset": (s.LANE_MEMSET, s.CAT_MEMSET),
    "cuda_sync": (s.LANE_GPU_SYNC, s.CAT_SYNC),
    "xpu_sync": (s.LANE_GPU_SYNC, s.CAT_SYNC),
    "gpu_user_annotation": (s.LANE_GPU_ANNOTATION, s.CAT_GPU_ANNOTATION),
    "user": (s.LANE_GPU_ANNOTATION, s.CAT_GPU_ANNOTATION),  # 2020-12..2021-06 GPU user span
    # host
    "cuda_runtime": (s.LANE_CPU_THREAD, s.CAT_RUNTIME),
    "runtime": (s.LANE_CPU_THREAD, s.CAT_RUNTIME),
    "mtia_runtime": (s.LANE_CPU_THREAD, s.CAT_RUNTIME),
    "xpu_runtime": (s.LANE_CPU_THREAD, s.CAT_RUNTIME),
    "privateuse1_runtime": (s.LANE_CPU_THREAD, s.CAT_RUNTIME),
    "cuda_driver": (s.LANE_CPU_THREAD, s.CAT_DRIVER),
    "xpu_driver": (s.LANE_CPU_THREAD, s.CAT_DRIVER),
    "privateuse1_driver": (s.LANE_CPU_THREAD, s.CAT_DRIVER),
    "cpu_op": (s.LANE_CPU_THREAD, s.CAT_CPU_OP),
    "operator": (s.LANE_CPU_THREAD, s.CAT_CPU_OP),
    "python_function": (s.LANE_CPU_THREAD, s.CAT_PYTHON),
    "user_annotation": (s.LANE_CPU_ANNOTATION, s.CAT_USER_ANNOTATION),
    "trace": (s.LANE_CPU_ANNOTATION, s.CAT_TRACE_SPAN),  # the "PyTorch Profiler (0)" span
    "overhead": (s.LANE_CPU_THREAD, s.CAT_OVERHEAD),
    "cpu_instant_event": (s.LANE_INSTANT, s.CAT_INSTANT),
    "cuda_event": (s.LANE_INSTANT, s.CAT_OTHER),  # cudaEventRecord markers (2025-11+)
}
DEFAULT = (s.LANE_CPU_THREAD, s.CAT_OTHER)

# raw categories whose rows sit on a GPU (device from args.device else pid, stream from
# args.stream else tid)
GPU_LANES = frozenset(s.GPU_LANES) | {s.LANE_GPU_ANNOTATION}

PROFILER_STEP_PREFIX = "ProfilerStep#"

# Kineto 2026-04+ (output_json.cpp, ``kSyncStreamTidOffset``) writes CUPTI "Stream Sync" records on a
# row of their own, ``tid = stream + 1,000,000`` (thread name "stream <id> (sync)"), so that a viewer
# does not draw them over the stream's kernels; ``args.stream`` keeps the real stream. Such a row is
# a synchronization of that stream, never work on stream 1,000,000+.
STREAM_SYNC_NAME = "Stream Sync"
SYNC_STREAM_TID_OFFSET = 1_000_000


def lookup(raw: str) -> tuple[str, str]:
    """(lane, category) of one raw Kineto category."""
    return RAW_CATEGORIES.get(raw.lower(), DEFAULT)


def is_gpu(raw: str) -> bool:
    return lookup(raw)[0] in GPU_LANES


def is_kernel(raw: str) -> bool:
    return lookup(raw)[1] == s.CAT_KERNEL


def is_copy(raw: str) -> bool:
    return lookup(raw)[1] in (s.CAT_MEMCPY, s.CAT_MEMSET)


def is_sync(raw: str) -> bool:
    return lookup(raw)[1] == s.CAT_SYNC


def is_cpu_op(raw: str) -> bool:
    return lookup(raw)[1] in (s.CAT_CPU_OP, s.CAT_USER_ANNOTATION)
