"""rocprofv3 JSON (rocprofiler-sdk ``--output-format json``) -> the normalized events frame.

The file is ``{"rocprofiler-sdk-tool": [tool, ...]}``, one ``tool`` per profiled process: ``metadata``
(pid, init/fini times), ``agents`` (CPU and GPU agents: ``type`` 2 is a GPU, its index among the GPUs
``logical_node_type_id``, ``product_name`` "AMD Instinct MI350X", ``cu_count``, ``mem_banks``),
``kernel_symbols`` (by ``kernel_id``), ``strings.buffer_records`` (per record ``kind`` its name and its
operations' names) and ``buffer_records``: ``kernel_dispatch`` (agent, queue, stream, kernel id, grid and
workgroup sizes in work-items), ``memory_copy`` (source and destination agents, bytes), and the host
API tables ``hip_api``, ``hsa_api``, ``rccl_api``, ``marker_api`` (thread, operation). A launch call and
its dispatch share ``correlation_id.internal``.

Rows: kernels on ``gpu_compute``/``gpu_comm`` (RCCL by name), ``tid`` = ``stream`` = the HIP stream handle
(the hardware queue is kept in ``meta.extra``); copies on ``memcpy``; HIP/HSA/RCCL calls on ``cpu_thread``
(``runtime``); roctx ranges on ``cpu_annotation``, marks ``instant``. Times are the records' timestamps,
exact ns of the profiled node's monotonic clock (time base ``relative``: the file gives no epoch).

Decoding: msgspec into typed records (unknown fields skipped), columns taken with ``operator.attrgetter``
through ``np.fromiter``: no Python bytecode runs per record.
"""

from __future__ import annotations

import os
from itertools import chain
from operator import attrgetter, methodcaller
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders.rocprof.frame import COPY_KINDS, Parts, block, build, copy_block, intern, kernel_lanes
from traceread.note import MONOTONIC_CLOCK, NO_HOST_API, Note
from traceread.trace import DeviceInfo, Trace

FORMAT = "rocprofv3-json"
WHAT = "rocprofv3 JSON"
GPU_AGENT = 2  # rocprofiler_agent_type_t: 1 CPU, 2 GPU


class Handle(msgspec.Struct, gc=False):
    handle: int = -1


class Corr(msgspec.Struct, gc=False):
    internal: int = -1


class Dim(msgspec.Struct, gc=False):
    x: int = -1
    y: int = -1
    z: int = -1


class DispatchInfo(msgspec.Struct, gc=False):
    agent_id: Handle = msgspec.field(default_factory=Handle)
    queue_id: Handle = msgspec.field(default_factory=Handle)
    kernel_id: int = -1
    group_segment_size: int = -1
    workgroup_size: Dim = msgspec.field(default_factory=Dim)
    grid_size: Dim = msgspec.field(default_factory=Dim)


class Dispatch(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    thread_id: int = -1
    correlation_id: Corr = msgspec.field(default_factory=Corr)
    dispatch_info: DispatchInfo = msgspec.field(default_factory=DispatchInfo)
    stream_id: Handle = msgspec.field(default_factory=Handle)


class Api(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    kind: int = -1
    operation: int = -1
    thread_id: int = -1
    correlation_id: Corr = msgspec.field(default_factory=Corr)


class Copy(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    kind: int = -1
    operation: int = -1
    thread_id: int = -1
    correlation_id: Corr = msgspec.field(default_factory=Corr)
    dst_agent_id: Handle = msgspec.field(default_factory=Handle)
    src_agent_id: Handle = msgspec.field(default_factory=Handle)
    bytes: int = -1
    stream_id: Handle = msgspec.field(default_factory=Handle)


class MemBank(msgspec.Struct, gc=False):
    size_in_bytes: int = 0


class Agent(msgspec.Struct, gc=False):
    id: Handle = msgspec.field(default_factory=Handle)
    type: int = 0
    cu_count: int = 0
    name: str = ""
    product_name: str = ""
    logical_node_type_id: int = -1
    mem_banks: list[MemBank] = msgspec.field(default_factory=list)


class Symbol(msgspec.Struct, gc=False):
    kernel_id: int = -1
    formatted_kernel_name: str = ""
    demangled_kernel_name: str = ""
    kernel_name: str = ""


class KindNames(msgspec.Struct, gc=False):
    kind: str = ""
    operations: list[str] = msgspec.field(default_factory=list)


class Strings(msgspec.Struct, gc=False):
    buffer_records: list[KindNames] = msgspec.field(default_factory=list)
    marker_api: list[Any] = msgspec.field(default_factory=list)


class Metadata(msgspec.Struct, gc=False):
    pid: int = -1
    init_time: int = -1
    fini_time: int = -1


class Buffers(msgspec.Struct, gc=False):
    kernel_dispatch: list[Dispatch] = msgspec.field(default_factory=list)
    memory_copy: list[Copy] = msgspec.field(default_factory=list)
    hip_api: list[Api] = msgspec.field(default_factory=list)
    hsa_api: list[Api] = msgspec.field(default_factory=list)
    rccl_api: list[Api] = msgspec.field(default_factory=list)
    marker_api: list[Api] = msgspec.field(default_factory=list)


class Tool(msgspec.Struct, gc=False):
    metadata: Metadata = msgspec.field(default_factory=Metadata)
    agents: list[Agent] = msgspec.field(default_factory=list)
    strings: Strings = msgspec.field(default_factory=Strings)
    kernel_symbols: list[Symbol] = msgspec.field(default_factory=list)
    buffer_records: Buffers = msgspec.field(default_factory=Buffers)


class Document(msgspec.Struct, gc=False):
    tools: list[Tool] = msgspec.field(name="rocprofiler-sdk-tool")


_DECODER = msgspec.json.Decoder(Document)
HEAD_KEY = b'"rocprofiler-sdk-tool"'


def looks_like_rocprofv3_json(head: bytes) -> bool:
    """Whether the first uncompressed bytes of a file are a rocprofv3 JSON's (its top-level key first)."""
    return head.lstrip()[:1] == b"{" and HEAD_KEY in head[:256]


def col(records: list, attr: str) -> np.ndarray:
    """One int64 column of ``records`` (a dotted attribute path), read in C."""
    return np.fromiter(map(attrgetter(attr), records), dtype=np.int64, count=len(records))


def cols(records: list, *attrs: str) -> list[np.ndarray]:
    """Several int64 columns of ``records`` in one pass (read in C: attrgetter, chain, fromiter)."""
    if len(attrs) == 1:
        return [col(records, attrs[0])]
    flat = np.fromiter(chain.from_iterable(map(attrgetter(*attrs), records)), dtype=np.int64,
                       count=len(records) * len(attrs))
    table = flat.reshape(-1, len(attrs))
    return [np.ascontiguousarray(table[:, i]) for i in range(len(attrs))]


def load_rocprofv3_json(path: str | os.PathLike[str], progress: bool = False, data: bytes | None = None) -> Trace:
    """Load a rocprofv3 JSON file (plain or gzip; ``data``: its bytes, already read). Raises TraceReadError
    naming the format on bad input. ``progress`` is accepted for the loader table (one decode of the
    whole file, with no stages to report: nothing to show)."""
    from traceread.loaders.kineto.source import read_whole

    path = os.fspath(path)
    if data is None:
        data = read_whole(path, WHAT)
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceReadError(path, f"not a readable {WHAT} file ({' '.join(str(exc).split())[:200]})") from None
    except msgspec.DecodeError as exc:
        why = "truncated" if "truncated" in str(exc).lower() else " ".join(str(exc).split())[:200]
        raise TraceReadError(path, f"not a readable {WHAT} file ({why})") from None
    if not doc.tools:
        raise TraceReadError(path, f"a {WHAT} file with no profiled process in it")
    parts = Parts(fmt=FORMAT, generation="rocprofv3 JSON (rocprofiler-sdk)", time_base=S.TIME_RELATIVE,
                  options={"kernel_trace": False, "hip_trace": False, "marker_trace": False})
    queues: set[int] = set()
    try:
        for tool in doc.tools:
            _tool(tool, parts, queues)
    except (OverflowError, ValueError, TypeError) as exc:  # an integer past int64 (msgspec reads uint64)
        raise TraceReadError(path, f"not a readable {WHAT} file (a value out of range: "
                                   f"{' '.join(str(exc).split())[:120]})") from None
    if len(doc.tools) == 1:
        parts.device_pid = doc.tools[0].metadata.pid
    parts.extra["queues"] = len(queues)
    parts.warnings.append(Note.of(MONOTONIC_CLOCK))
    if not parts.options["hip_trace"]:
        parts.warnings.append(Note.of(NO_HOST_API))
    return build(path, parts)


def _tool(tool: Tool, parts: Parts, queues: set[int]) -> None:
    pid = tool.metadata.pid
    agents = {a.id.handle: a for a in tool.agents}
    gpu_of = {h: a.logical_node_type_id for h, a in agents.items() if a.type == GPU_AGENT}
    for h, dev in gpu_of.items():
        a = agents[h]
        mem = sum(b.size_in_bytes for b in a.mem_banks) or None
        parts.devices.setdefault(dev, DeviceInfo(rank=0, id=dev, name=a.product_name or a.name,
                                                 sm_count=a.cu_count or None, memory_bytes=mem,
                                                 compute_capability=a.name or None))
    parts.extra["agents"] = parts.extra.get("agents", 0) + len(tool.agents)
    parts.extra["gpu_agents"] = parts.extra.get("gpu_agents", 0) + len(gpu_of)
    kinds = tool.strings.buffer_records
    buf = tool.buffer_records
    if buf.kernel_dispatch:
        parts.options["kernel_trace"] = True
        parts.blocks.append(_kernels(buf.kernel_dispatch, tool.kernel_symbols, gpu_of, pid, queues))
    if buf.memory_copy:
        parts.blocks.append(_copies(buf.memory_copy, kinds, gpu_of, pid))
    for table in ("hip_api", "hsa_api", "rccl_api"):
        recs = getattr(buf, table)
        if recs:
            parts.options["hip_trace"] = True
            parts.blocks.append(_api(table, recs, kinds, pid, S.LANE_CPU_THREAD, S.CAT_RUNTIME))
    if buf.marker_api:
        parts.options["marker_trace"] = True
        parts.blocks.extend(_markers(buf.marker_api, kinds, tool.strings.marker_api, pid))


def _device(handles: np.ndarray, gpu_of: dict[int, int]) -> np.ndarray:
    """Agent handles -> GPU index (-1 for a CPU or unknown agent)."""
    keys = np.array(sorted(gpu_of), dtype=np.int64)
    vals = np.array([gpu_of[int(k)] for k in keys] + [S.NO_ID], dtype=np.int64)
    if not len(keys):
        return np.full(len(handles), S.NO_ID, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, handles), len(keys) - 1)
    return np.where(keys[pos] == handles, vals[pos], S.NO_ID)


def _kernels(recs: list[Dispatch], symbols: list[Symbol], gpu_of: dict[int, int], pid: int,
             queues: set[int]) -> Any:
    (kid, queue, stream, agent, start, end, corr, wgx, wgy, wgz, gx, gy, gz, lds) = cols(
        recs, "dispatch_info.kernel_id", "dispatch_info.queue_id.handle", "stream_id.handle",
        "dispatch_info.agent_id.handle", "start_timestamp", "end_timestamp", "correlation_id.internal",
        "dispatch_info.workgroup_size.x", "dispatch_info.workgroup_size.y", "dispatch_info.workgroup_size.z",
        "dispatch_info.grid_size.x", "dispatch_info.grid_size.y", "dispatch_info.grid_size.z",
        "dispatch_info.group_segment_size")
    sym_ids = np.array([s.kernel_id for s in symbols], dtype=np.int64)
    sym_names = np.array([s.formatted_kernel_name or s.demangled_kernel_name or s.kernel_name for s in symbols]
                         + [""], dtype=object)
    uniq, inv = np.unique(kid, return_inverse=True)
    order = np.argsort(sym_ids, kind="stable")
    pos = np.searchsorted(sym_ids[order], uniq) if len(sym_ids) else np.zeros(len(uniq), dtype=np.int64)
    pos = np.minimum(pos, max(len(sym_ids) - 1, 0))
    found = (sym_ids[order][pos] == uniq) if len(sym_ids) else np.zeros(len(uniq), dtype=bool)
    uname = np.where(found, sym_names[order][pos] if len(sym_ids) else "", "")
    uname = np.where(uname == "", pd.Series(uniq).map(lambda k: f"kernel {k}").to_numpy(dtype=object), uname)
    names, ucode = intern(uname.astype(object))
    code = ucode[inv.reshape(-1)]
    queues.update(pd.unique(queue).tolist())
    wg, grid = [wgx, wgy, wgz], [gx, gy, gz]
    # HSA grid sizes count work-items; the frame counts blocks (workgroups)
    blocks_ = [np.where(w > 0, -(-g // np.maximum(w, 1)), -1) for g, w in zip(grid, wg, strict=True)]
    n = len(recs)
    side = {"kernel_args": {"grid_x": blocks_[0], "grid_y": blocks_[1], "grid_z": blocks_[2], "block_x": wg[0],
                            "block_y": wg[1], "block_z": wg[2], "registers": np.full(n, -1, dtype=np.int64),
                            "shared_mem_bytes": lds}}
    return block("kernel_dispatch", kernel_lanes(names, code), S.CAT_KERNEL, names, code,
                 start, end, pid, stream, _device(agent, gpu_of), stream, corr, side)


def _op_names(kinds: list[KindNames], kind: np.ndarray, op: np.ndarray) -> np.ndarray:
    """Each record's operation name from strings.buffer_records (index = kind, then operation); decided
    once per distinct (kind, operation)."""
    pairs, inv = np.unique(np.stack([kind, op]), axis=1, return_inverse=True)
    names = []
    for k, o in pairs.T.tolist():
        ops = kinds[k].operations if 0 <= k < len(kinds) else []
        names.append(ops[o] if 0 <= o < len(ops) else f"operation {o} of kind {k}")
    return np.array(names + [""], dtype=object)[:-1][inv.reshape(-1)]


def _copies(recs: list[Copy], kinds: list[KindNames], gpu_of: dict[int, int], pid: int) -> Any:
    kind, op, start, end, corr, dst_h, src_h, nbytes, stream = cols(
        recs, "kind", "operation", "start_timestamp", "end_timestamp", "correlation_id.internal",
        "dst_agent_id.handle", "src_agent_id.handle", "bytes", "stream_id.handle")
    direction = pd.Series(_op_names(kinds, kind, op), dtype=object).str.replace("MEMORY_COPY_", "", regex=False)
    copy_kind = direction.map(COPY_KINDS).fillna("").to_numpy(dtype=object)
    dst, src = _device(dst_h, gpu_of), _device(src_h, gpu_of)
    return copy_block("memory_copy", copy_kind, start, end, pid, stream, np.where(dst >= 0, dst, src), stream, corr,
                      nbytes)


_API_COLS = ("kind", "operation", "start_timestamp", "end_timestamp", "thread_id", "correlation_id.internal")


def _api(table: str, recs: list[Api], kinds: list[KindNames], pid: int, lane: str, cat: str) -> Any:
    kind, op, start, end, tid, corr = cols(recs, *_API_COLS)
    names, code = intern(_op_names(kinds, kind, op))
    return block(table, lane, cat, names, code, start, end, pid, tid, correlation=corr)


def _markers(recs: list[Api], kinds: list[KindNames], messages: list[Any], pid: int) -> list[Any]:
    """roctx ranges (annotations named by their message) and marks (instants)."""
    kind, op, start, end, tid, corr = cols(recs, *_API_COLS)
    ops = _op_names(kinds, kind, op)
    msg = pd.Series(corr).map(_messages(messages)).to_numpy(dtype=object)
    label = np.where(pd.isna(msg), ops, msg).astype(object)
    instant = end <= start
    out = []
    for mask, lane, cat in ((~instant, S.LANE_CPU_ANNOTATION, S.CAT_USER_ANNOTATION),
                            (instant, S.LANE_INSTANT, S.CAT_INSTANT)):
        if mask.any():
            names, code = intern(label[mask])
            out.append(block("marker_api", lane, cat, names, code, start[mask], end[mask], pid, tid[mask]))
    return out


def _messages(messages: list[Any]) -> pd.Series:
    """roctx messages by correlation id: strings.marker_api is the tool's map, written as
    ``[{"key": id, "value": message}, ...]``; entries of another shape are left out."""
    try:
        keys = pd.to_numeric(pd.Series(list(map(methodcaller("get", "key"), messages)), dtype=object),
                             errors="coerce")
        values = pd.Series(list(map(methodcaller("get", "value"), messages)), dtype=object)
    except (AttributeError, TypeError):  # not a list of objects: no messages
        return pd.Series(dtype=object)
    ok = keys.notna().to_numpy() & values.map(type).eq(str).to_numpy()
    out = pd.Series(values[ok].to_numpy(), index=keys[ok].astype(np.int64).to_numpy())
    return out[~out.index.duplicated(keep="last")]
