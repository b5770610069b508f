"""The normalized event frame: the one contract every loader produces and every analysis reads.

A loaded trace is a :class:`traceread.trace.Trace`: ``events`` (one row per timed event, columns
below), ``meta`` (devices, ranks, time base, steps, warnings) and ``side`` (side tables of bulky or
rare args, keyed by ``row`` = the event's position in ``events``).

Both loaders (Kineto JSON and Nsight Systems SQLite) produce exactly these lanes and units, so every
analysis runs unchanged on both.

Times are exact int64 nanoseconds in the trace's own time base (see ``TIME_BASES``): the value as the
file wrote it, converted to ns without float rounding. ``meta.epoch_offset_ns`` converts to Unix
epoch ns when the time base is ``epoch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:  # imported where used: see traceread.runner.prefetch
    import pandas as pd

# --- lanes --------------------------------------------------------------------------------------
# What kind of timeline row an event sits on. Analyses select on lane, never on raw category.
LANE_CPU_THREAD = "cpu_thread"  # host thread: CPU ops, runtime/driver calls, python functions, OS calls
LANE_GPU_COMPUTE = "gpu_compute"  # compute kernels on a GPU stream
LANE_GPU_COMM = "gpu_comm"  # communication kernels (NCCL/RCCL, DeepEP, custom all-reduce)
LANE_MEMCPY = "memcpy"  # GPU copies (any direction)
LANE_MEMSET = "memset"  # GPU memsets
LANE_GPU_SYNC = "gpu_sync"  # CUPTI synchronization records (stream/event/context sync, wait event)
LANE_CPU_ANNOTATION = "cpu_annotation"  # user ranges on the host: ProfilerStep#N, record_function, NVTX
LANE_GPU_ANNOTATION = "gpu_annotation"  # user ranges projected onto GPU streams
LANE_INSTANT = "instant"  # zero-length markers ([memory], Iteration Start, Record Window End)

LANES: tuple[str, ...] = (
    LANE_CPU_THREAD,
    LANE_GPU_COMPUTE,
    LANE_GPU_COMM,
    LANE_MEMCPY,
    LANE_MEMSET,
    LANE_GPU_SYNC,
    LANE_CPU_ANNOTATION,
    LANE_GPU_ANNOTATION,
    LANE_INSTANT,
)
GPU_LANES: tuple[str, ...] = (LANE_GPU_COMPUTE, LANE_GPU_COMM, LANE_MEMCPY, LANE_MEMSET, LANE_GPU_SYNC)

# --- normalized categories ----------------------------------------------------------------------
# What an event is, independent of the format generation that wrote it.
CAT_KERNEL = "kernel"  # GPU kernel (compute or communication; the lane tells which)
CAT_GRAPH = "cuda_graph"  # a whole CUDA graph execution traced as one interval (nsys graph trace)
CAT_RUNTIME = "runtime"  # CUDA/HIP runtime API call on a host thread
CAT_DRIVER = "driver"  # CUDA driver API call (cuLaunchKernel...)
CAT_MEMCPY = "memcpy"
CAT_MEMSET = "memset"
CAT_SYNC = "sync"  # GPU-side synchronization record
CAT_CPU_OP = "cpu_op"  # ATen / framework operator
CAT_USER_ANNOTATION = "user_annotation"  # record_function / ProfilerStep / NVTX range on the host
CAT_GPU_ANNOTATION = "gpu_annotation"
CAT_PYTHON = "python_function"  # with_stack Python frames
CAT_OS_RUNTIME = "os_runtime"  # nsys OS runtime calls (osrt)
CAT_INSTANT = "instant"
CAT_TRACE_SPAN = "trace_span"  # the profiler's own span ("PyTorch Profiler (0)")
CAT_OVERHEAD = "overhead"  # CUPTI overhead records
CAT_OTHER = "other"  # anything else the file carried (other backends' categories)

CATEGORIES: tuple[str, ...] = (
    CAT_KERNEL,
    CAT_GRAPH,
    CAT_RUNTIME,
    CAT_DRIVER,
    CAT_MEMCPY,
    CAT_MEMSET,
    CAT_SYNC,
    CAT_CPU_OP,
    CAT_USER_ANNOTATION,
    CAT_GPU_ANNOTATION,
    CAT_PYTHON,
    CAT_OS_RUNTIME,
    CAT_INSTANT,
    CAT_TRACE_SPAN,
    CAT_OVERHEAD,
    CAT_OTHER,
)

# --- time bases ---------------------------------------------------------------------------------
TIME_EPOCH = "epoch"  # start_ns + meta.epoch_offset_ns is Unix-epoch ns
TIME_SESSION = "session"  # relative to a known profiling-session start, epoch unknown
TIME_RELATIVE = "relative"  # no epoch can be known
TIME_BASES: tuple[str, ...] = (TIME_EPOCH, TIME_SESSION, TIME_RELATIVE)

NO_ID = -1  # missing integer id (device, stream, correlation, external id, pid, tid)

# --- the events frame ---------------------------------------------------------------------------
# column -> (dtype, meaning and unit). Order here is the column order loaders produce.
EVENT_COLUMNS: dict[str, tuple[str, str]] = {
    "trace": ("category", "source trace file (path as given)"),
    "rank": ("int32", "distributed rank of the process that produced the event"),
    "lane": ("category", f"lane kind, one of {LANES}"),
    "device": ("int32", "GPU device index; -1 for host events"),
    "stream": ("int64", "GPU stream id; -1 for host events"),
    "pid": ("int64", "process id (GPU rows: Kineto's pid as written, nsys: the owning process)"),
    "tid": ("int64", "thread id (host) or stream id (GPU); string tids are mapped to ints, see meta"),
    "name": ("category", "event name as written (NVTX op ranges: without the ', op_id = ...' suffix)"),
    "category": ("category", f"normalized category, one of {CATEGORIES}"),
    "raw_category": ("category", "category as the file wrote it (Kineto cat, nsys table name)"),
    "start_ns": ("int64", "start time, exact ns in the trace's time base"),
    "end_ns": ("int64", "end time, exact ns (end_ns >= start_ns; negative durations clamped, see meta)"),
    "correlation": ("int64", "CUPTI/roctracer correlation id linking a launch call and its GPU op; -1"),
    "external_id": ("int64", "Kineto External id linking a CPU op and its runtime call/GPU op; -1"),
}
EVENT_DTYPES: dict[str, str] = {k: v[0] for k, v in EVENT_COLUMNS.items()}

# --- side tables (keyed by ``row``: the event's position in the events frame) ---------------------
SIDE_TABLES: dict[str, dict[str, tuple[str, str]]] = {
    "kernel_args": {
        "row": ("int64", "event row"),
        "grid_x": ("int64", "grid dim x (blocks); -1 unknown"),
        "grid_y": ("int64", "grid dim y"),
        "grid_z": ("int64", "grid dim z"),
        "block_x": ("int64", "block dim x (threads); -1 unknown"),
        "block_y": ("int64", "block dim y"),
        "block_z": ("int64", "block dim z"),
        "registers": ("int64", "registers per thread; -1 unknown"),
        "shared_mem_bytes": ("int64", "static + dynamic shared memory per block, bytes; -1 unknown"),
    },
    "copy_args": {
        "row": ("int64", "event row (memcpy or memset)"),
        "bytes": ("int64", "bytes copied or set; -1 unknown"),
        "copy_kind": ("category", "HtoD, DtoH, DtoD, HtoH, PtoP, ... ('' for memset)"),
        "src_kind": ("category", "source memory kind: Pageable, Pinned, Device, Managed, ... ('' unknown)"),
        "dst_kind": ("category", "destination memory kind ('' unknown)"),
    },
    "collective_args": {
        "row": ("int64", "event row (a communication kernel or its record_param_comms op)"),
        "collective": ("category", "collective name as recorded (allreduce, all_gather, send...)"),
        "in_nelems": ("int64", "input message elements; -1 unknown"),
        "out_nelems": ("int64", "output message elements; -1 unknown"),
        "dtype": ("category", "element dtype as recorded ('' unknown)"),
        "group_size": ("int64", "process group size; -1 unknown"),
        "group_name": ("category", "process group name/id ('' unknown)"),
        "group_desc": ("category", "process group description ('' unknown)"),
        "seq": ("int64", "the collective's sequence number in its process group (Kineto 'Seq'); -1 unknown"),
    },
    "event_waits": {
        "row": ("int64", "event row (a GPU-side stream wait: Kineto's Stream Wait Event cuda_sync record)"),
        "wait_on_stream": ("int64", "the stream the waited event was recorded on; -1 unknown"),
        "record_correlation": ("int64", "correlation of the event's record call (cudaEventRecord); -1 unknown"),
    },
    "op_shapes": {
        "row": ("int64", "event row (cpu_op)"),
        "input_dims": ("object", "Input Dims as recorded (list of lists)"),
        "input_types": ("object", "Input type as recorded (list of dtype strings)"),
    },
    "cpu_samples": {  # nsys CPU sampling (loaders.nsys.samples); sorted by rank, tid, time_ns
        "rank": ("int32", "rank of the sampled process"),
        "tid": ("int64", "sampled host thread (the events' tid)"),
        "time_ns": ("int64", "when the sample was taken"),
        "function": ("category", "the innermost frame's function ('' unresolved; never a path)"),
    },
}

# --- analysis records (interval engine output; rules add columns) ---------------------------------
STEP_COLUMNS: dict[str, tuple[str, str]] = {
    "rank": ("int32", "rank"),
    "device": ("int32", "GPU device index"),
    "step": ("int64", "step number (ProfilerStep#N's N, or 0.. for inferred steps)"),
    "start_ns": ("int64", "step start on this device, ns (extended for GPU lag)"),
    "end_ns": ("int64", "step end on this device, ns"),
    "cpu_start_ns": ("int64", "step start on the host, ns"),
    "cpu_end_ns": ("int64", "step end on the host, ns"),
    "busy_ns": ("int64", "union of compute kernels inside the step, ns"),
    "idle_ns": ("int64", "step length minus busy_ns"),
    "warmup": ("bool", "step is warmup (excluded from medians and MFU)"),
    "outlier": ("bool", "step is longer than 1.5x the median (excluded from medians)"),
}


def empty_events() -> pd.DataFrame:
    """An events frame with no rows and the canonical columns and dtypes."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in EVENT_DTYPES.items()})


def validate(events: pd.DataFrame) -> None:
    """Raise AssertionError if ``events`` breaks the contract (columns, dtypes, invariants)."""
    import pandas as pd

    missing = [c for c in EVENT_COLUMNS if c not in events.columns]
    assert not missing, f"events frame lacks columns {missing}"
    for col, dtype in EVENT_DTYPES.items():
        got = str(events[col].dtype)
        assert got == dtype, f"column {col!r} has dtype {got}, expected {dtype}"
    if len(events):
        assert bool((events["end_ns"].to_numpy() >= events["start_ns"].to_numpy()).all()), "end_ns < start_ns"
        lanes = set(events["lane"].cat.categories)
        assert lanes <= set(LANES), f"unknown lanes {lanes - set(LANES)}"
        cats = set(events["category"].cat.categories)
        assert cats <= set(CATEGORIES), f"unknown categories {cats - set(CATEGORIES)}"
    assert isinstance(events.index, pd.RangeIndex) and events.index.start == 0, "index must be 0..n-1"


def rank_device_rows(events: pd.DataFrame, **groupby: Any) -> dict[tuple[Any, Any], np.ndarray]:
    """Row positions per (rank, device): ``groupby(["rank", "device"]).indices`` with its key type."""
    return cast("dict[tuple[Any, Any], np.ndarray]", events.groupby(["rank", "device"], **groupby).indices)


def lane_is(events: pd.DataFrame, lane: str) -> np.ndarray:
    """Boolean per row: whether it is on ``lane``. Compares the category codes: comparing the
    column with a string makes pandas 3 build an Arrow string array of the categories first
    (a copy per call, at every one of many calls)."""
    col = events["lane"].cat
    code = col.categories.get_loc(lane) if lane in col.categories else -2
    return col.codes.to_numpy() == code
