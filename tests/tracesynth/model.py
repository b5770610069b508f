"""A format-neutral scenario: the flat list of events a profiler would have recorded.

Writers (``kineto_writer``, ``nsys_writer``) serialize one Scenario into each file format so that
both loaders must produce the same frame from it. All times are int64 ns from the scenario origin.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Kernel:
    device: int
    stream: int
    name: str
    start_ns: int
    end_ns: int
    correlation: int
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    registers: int = 32
    shared_mem: int = 0
    external_id: int = -1


@dataclass
class Copy:
    """A memcpy (kind like 'HtoD') or a memset (kind 'memset')."""

    device: int
    stream: int
    kind: str  # HtoD, DtoH, DtoD, PtoP, memset
    start_ns: int
    end_ns: int
    correlation: int
    bytes: int
    src_kind: str = "Pageable"  # Pageable, Pinned, Device
    dst_kind: str = "Device"


@dataclass
class HostCall:
    """A CUDA runtime/driver API call on a host thread (launches link to GPU work by correlation)."""

    tid: int
    name: str  # cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize, ...
    start_ns: int
    end_ns: int
    correlation: int
    external_id: int = -1


@dataclass
class HostRange:
    """A host-side range: a CPU op (``is_op``) or a user annotation (ProfilerStep#N, DataLoader...)."""

    tid: int
    name: str
    start_ns: int
    end_ns: int
    is_op: bool = False
    external_id: int = -1
    input_dims: list | None = None  # recorded shapes (Kineto "Input Dims", record_shapes=True); None: not recorded
    input_types: list | None = None  # Kineto "Input type"
    python: bool = False  # a with_stack Python frame (Kineto python_function; nsys: an NVTX range, as
    # ``nsys --python-functions-trace`` records one)
    args: dict | None = None  # further Kineto args (record_param_comms: Collective name, Process Group Name,
    # Seq...); the nsys writer has no place for them


@dataclass
class GraphLaunch:
    """A whole CUDA graph execution traced as one interval (nsys --cuda-graph-trace=graph)."""

    device: int
    stream: int
    start_ns: int
    end_ns: int
    correlation: int
    graph_id: int = 1


@dataclass
class Sync:
    """A CUPTI synchronization record on the GPU side (Kineto ``cuda_sync``, nsys SYNCHRONIZATION).

    ``kind`` is one of ``stream``, ``event``, ``context``, ``wait_event``; ``correlation`` is that of
    the host API call (cudaStreamSynchronize...) that caused it; ``stream`` is -1 for context syncs.
    """

    device: int
    stream: int
    kind: str
    start_ns: int
    end_ns: int
    correlation: int
    # a ``wait_event``'s event, as Kineto records it (-1: not written): the stream it was recorded on and the
    # correlation of its cudaEventRecord call
    wait_on_stream: int = -1
    record_correlation: int = -1


@dataclass
class OsCall:
    """An OS runtime call on a host thread (nsys ``-t osrt`` only; Kineto has no such rows)."""

    tid: int
    name: str  # pthread_cond_wait, read, ioctl, ...
    start_ns: int
    end_ns: int


@dataclass
class Rank:
    rank: int
    pid: int
    devices: list[int] = field(default_factory=lambda: [0])
    device_name: str = "NVIDIA H100 80GB HBM3"
    kernels: list[Kernel] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    host_calls: list[HostCall] = field(default_factory=list)
    host_ranges: list[HostRange] = field(default_factory=list)
    graphs: list[GraphLaunch] = field(default_factory=list)
    syncs: list[Sync] = field(default_factory=list)
    os_calls: list[OsCall] = field(default_factory=list)


@dataclass
class Scenario:
    ranks: list[Rank]
    world_size: int | None = None
    origin_epoch_ns: int = 1_735_632_360_000_000_000  # a Kineto-style base (multiple of 7,889,238 s)
    pg_config: list | None = None  # Kineto distributedInfo.pg_config (pg_name, pg_desc, pg_size, ranks...)

