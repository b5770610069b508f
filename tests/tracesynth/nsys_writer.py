"""Write a Scenario as an Nsight Systems SQLite export (``nsys export --type sqlite`` look-alike).

Two schema generations, with the column sets of real exports (table and column names, order,
types and NOT NULL flags copied from files listed in trace-formats.md §C; comments left out):

* ``"2026"``: export schema 3.25.0 (nsys 2026.2): ``META_DATA_EXPORT``, ENUM_* tables,
  ``greenContextId``, ``TARGET_INFO_CUDA_DEVICE``, ``systemClockNs``, ``NVTX_EVENTS.binaryData``.
* ``"2022"``: export schema 2.9.1 (nsys 2022.2): ``EXPORT_META_DATA`` (with its OUTUPT typo), no
  ENUM tables, no green contexts, 2022 sync-type numbering.

Time base: every ``start``/``end`` is the scenario's own ns (session timeline) and
``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` is ``scenario.origin_epoch_ns``; the Kineto writer
uses the same origin as ``baseTimeNanoseconds``, so both files carry identical raw ns.

Whole CUDA graphs are written to ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` (graph trace mode; columns
after CUPTI's ``CUpti_ActivityGraphTrace2`` and the 2026.4 schema), in both generations.

Large exports (benchmarks) skip the Scenario objects: build column arrays and call
:func:`write_nsys_columns` directly (see scripts/gen_nsys.py).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tracesynth.model import Scenario

SCHEMAS = ("2026", "2022")

_K = "CUPTI_ACTIVITY_KIND_"
_GPU_COMMON_2026 = ("start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
                    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
                    "correlationId INTEGER, globalPid INTEGER")
_GPU_COMMON_2022 = _GPU_COMMON_2026.replace("greenContextId INTEGER, ", "")
_KERNEL_2022_TAIL = (
    "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
    "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
    "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
    "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER")
_KERNEL_2026_TAIL = _KERNEL_2022_TAIL + (
    ", qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER, "
    "clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER, "
    "maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER, "
    "tensorSizeMinusOneElements TEXT NOT NULL")
_MEMCPY_TAIL = ("bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
                "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, "
                "dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER")
_NVTX_2022 = ("start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
              "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
              "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
              "floatValue REAL, jsonTextId INTEGER, jsonText TEXT")
_GPU_INFO = (
    "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, "
    "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, "
    "pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT, "
    "ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER, "
    "maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, "
    "maxShmemPerSm INTEGER, maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, "
    "maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER, "
    "maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, maxGridDimY INTEGER, "
    "maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, smMajor INTEGER, smMinor INTEGER")
_ENUM = "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT"

_COMMON_DDL = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    _K + "RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
                    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
                    "callchainId INTEGER",
    "OSRT_API": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
                "nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, "
                "callchainId INTEGER NOT NULL",
    "TARGET_INFO_GPU": _GPU_INFO,
    "TARGET_INFO_CUDA_STREAM": "streamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, "
                               "processId INTEGER NOT NULL, contextId INTEGER NOT NULL, priority INTEGER NOT NULL, "
                               "flag INTEGER NOT NULL",
}
DDL: dict[str, dict[str, str]] = {
    "2026": {
        **_COMMON_DDL,
        "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
        "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER",
        "TARGET_INFO_CUDA_DEVICE": "gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL, uuid TEXT, "
                                   "numMultiprocessors INTEGER",
        _K + "KERNEL": f"{_GPU_COMMON_2026}, {_KERNEL_2026_TAIL}",
        _K + "MEMCPY": f"{_GPU_COMMON_2026}, {_MEMCPY_TAIL}, copyCount INTEGER",
        _K + "MEMSET": f"{_GPU_COMMON_2026}, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, "
                       "memKind INTEGER",
        _K + "SYNCHRONIZATION": f"{_GPU_COMMON_2026}, deprecatedSyncType INTEGER, syncType INTEGER NOT NULL, "
                                "eventId INTEGER NOT NULL, eventSyncId INTEGER",
        _K + "GRAPH_TRACE": f"{_GPU_COMMON_2026}, graphId INTEGER NOT NULL, graphExecId INTEGER",
        "NVTX_EVENTS": _NVTX_2022 + ", binaryData TEXT",
        **{name: _ENUM for name in (
            "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUPTI_SYNC_TYPE", "ENUM_NSYS_EVENT_TYPE",
            "ENUM_NSYS_EVENT_CLASS", "ENUM_CUDA_KERNEL_LAUNCH_TYPE", "ENUM_CUPTI_STREAM_TYPE")},
    },
    "2022": {
        **_COMMON_DDL,
        "EXPORT_META_DATA": "name TEXT NOT NULL, value TEXT",
        "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
        _K + "KERNEL": f"{_GPU_COMMON_2022}, {_KERNEL_2022_TAIL}",
        _K + "MEMCPY": f"{_GPU_COMMON_2022}, {_MEMCPY_TAIL}",
        _K + "MEMSET": f"{_GPU_COMMON_2022}, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, "
                       "memKind INTEGER",
        _K + "SYNCHRONIZATION": f"{_GPU_COMMON_2022}, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL",
        _K + "GRAPH_TRACE": f"{_GPU_COMMON_2022}, graphId INTEGER NOT NULL, graphExecId INTEGER",
        "NVTX_EVENTS": _NVTX_2022,
    },
}
VERSIONS = {"2026": ("2026.2.1.210", "3.25.0"), "2022": ("2022.2.1.31", "2.9.1")}

# nsys numbering (trace-formats.md B.4); the mem-kind enum is shifted by one from CUPTI's.
COPY_KINDS = {"Unknown": 0, "HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
              "DtoD": 8, "HtoH": 9, "PtoP": 10}
MEM_KINDS = {"Pageable": 0, "Pinned": 1, "Device": 2, "Array": 3, "Managed": 4, "Device Static": 5,
             "Managed Static": 6, "Unknown": 7}
# syncType as each generation's exporter numbered it (observed, not the enum; see B.4).
SYNC_TYPES = {"2026": {"event": 1, "wait_event": 2, "stream": 3, "context": 4},
              "2022": {"context": 1, "event": 2, "stream": 3, "wait_event": 2}}
_ENUM_ROWS = {
    "ENUM_CUDA_MEMCPY_OPER": [(v, f"CUDA_MEMCPY_KIND_{k.upper()}", k) for k, v in COPY_KINDS.items()],
    "ENUM_CUDA_MEM_KIND": [(v, "CUDA_MEMOPR_MEMORY_KIND_" + k.upper().replace(" ", "_"), k)
                           for k, v in MEM_KINDS.items()],
    "ENUM_CUPTI_SYNC_TYPE": [(0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
                             (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
                             (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
                             (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
                             (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync")],
    "ENUM_NSYS_EVENT_TYPE": [(i, n, n) for i, n in ((33, "NvtxCategory"), (34, "NvtxMark"), (39, "NvtxThread"),
                                                    (59, "NvtxPushPopRange"), (60, "NvtxStartEndRange"),
                                                    (75, "NvtxDomainCreate"))],
    "ENUM_NSYS_EVENT_CLASS": [(0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
                              (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
                              (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
                              (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA backtrace")],
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": [(0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
                                     (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular")],
    "ENUM_CUPTI_STREAM_TYPE": [(1, "CUPTI_STREAM_TYPE_DEFAULT", "Default"),
                               (2, "CUPTI_STREAM_TYPE_NON_BLOCKING", "Non-blocking"),
                               (3, "CUPTI_STREAM_TYPE_NULL", "Null")],
}
# Runtime API version suffixes as nsys writes them (driver calls carry none).
_API_SUFFIX = {"cudaLaunchKernel": "_v7000", "cudaLaunchKernelExC": "_v11060", "cudaGraphLaunch": "_v10000",
               "cudaMallocAsync": "_v11020", "cudaFreeAsync": "_v11020"}
_API_SUFFIX_DEFAULT = "_v3020"
NO_STREAM = 4294967295  # streamId/eventId sentinel of device-level records
VM_ID = 1
_CHUNK = 200_000  # rows per executemany


def global_pid(pid: int | np.ndarray) -> int | np.ndarray:
    """nsys serialized process id: VM id in bits 48-55, pid in bits 24-47 (tid 0)."""
    return (VM_ID << 48) | (pid << 24)


def global_tid(pid: int | np.ndarray, tid: int | np.ndarray) -> int | np.ndarray:
    return global_pid(pid) | tid


def api_name(name: str) -> tuple[str, int]:
    """(name as nsys stores it, eventClass): runtime calls get their ``_vNNNN`` suffix, class 0."""
    if name.startswith("cuda"):
        return name + _API_SUFFIX.get(name, _API_SUFFIX_DEFAULT), 0
    return name, 1


def short_name(name: str) -> str:
    """nsys ``shortName``: the base function name, no return type, templates or arguments."""
    head = name.split("(", 1)[0]
    while "<" in head:
        new = re.sub(r"<[^<>]*>", "", head)
        if new == head:
            break
        head = new
    head = head.strip().split(" ")[-1]
    return head or name


class StringTable:
    """``StringIds``: each distinct string once, ids in first-seen order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, value: str) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.ids)
        return self.ids[value]

    def ids_of(self, values: Sequence[str]) -> np.ndarray:
        """Vectorized ids: one dict lookup per distinct value."""
        uniq, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True)
        return np.array([self.id(str(v)) for v in uniq], dtype=np.int64)[inverse] if len(uniq) else \
            np.zeros(0, dtype=np.int64)


@dataclass
class GpuSpec:
    """One GPU row of TARGET_INFO_GPU (and TARGET_INFO_CUDA_DEVICE for each process using it)."""

    id: int
    name: str = "NVIDIA H100 80GB HBM3"
    sm_count: int = 132
    memory_bytes: int = 85_520_809_984
    compute: tuple[int, int] = (9, 0)
    pids: list[int] = field(default_factory=list)


def write_nsys(scenario: Scenario, path: str | os.PathLike[str], schema: str = "2026") -> str:
    """Write ``scenario`` as an nsys SQLite export at ``path`` (atomically) and return the path.

    One process per rank (pid ``rank.pid``); NVTX push/pop ranges (eventType 59) for host ranges,
    with PyTorch's ``, op_id = N`` (and ``, seq = N`` on every other op) on CPU-op ranges.
    """
    from tracesynth._nsys_columns import scenario_columns

    if schema not in DDL:
        raise ValueError(f"unknown nsys schema {schema!r}; choose one of {SCHEMAS}")
    strings = StringTable()
    tables = scenario_columns(scenario, strings, schema)
    gpus: dict[int, GpuSpec] = {}
    for rank in scenario.ranks:
        for dev in rank.devices:
            spec = gpus.setdefault(dev, GpuSpec(id=dev, name=rank.device_name))
            spec.pids.append(rank.pid)
    processes = [(r.pid, "python3") for r in scenario.ranks]
    return write_nsys_columns(path, tables=tables, strings=strings, schema=schema, processes=processes,
                              gpus=list(gpus.values()), origin_epoch_ns=scenario.origin_epoch_ns)


def write_nsys_columns(path: str | os.PathLike[str], *, tables: dict[str, dict[str, Sequence]],
                       strings: StringTable, schema: str, processes: list[tuple[int, str]],
                       gpus: list[GpuSpec], origin_epoch_ns: int) -> str:
    """Low-level writer: ``tables`` maps table name -> {column: equal-length sequence}.

    Columns not given are NULL (or 0 / '' where the real DDL says NOT NULL). Only tables present
    in ``tables`` (plus the identification tables) are created, as nsys's lazy export does.
    """
    if schema not in DDL:
        raise ValueError(f"unknown nsys schema {schema!r}; choose one of {SCHEMAS}")
    path = os.fspath(path)
    ddl = DDL[schema]
    fd, tmp = tempfile.mkstemp(prefix=".traceread-", suffix=".sqlite", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        product, version = VERSIONS[schema]
        meta_table = "META_DATA_EXPORT" if schema == "2026" else "EXPORT_META_DATA"
        meta = [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", product),
                ("EXPORT_SCHEMA_VERSION", version), ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
                ("EXPORT_PARAM_TIME_SHIFT", "0"),
                ("EXPORT_INPUT_FILE" if schema == "2022" else "EXPORT_PARAM_INPUT_FILE", "synthetic.nsys-rep"),
                ("EXPORT_OUTUPT_FILE" if schema == "2022" else "EXPORT_PARAM_OUTPUT_FILE", "synthetic.sqlite")]
        rows: dict[str, dict[str, Sequence]] = {
            meta_table: _cols(("name", "value"), meta),
            "TARGET_INFO_SESSION_START_TIME": {"utcEpochNs": [origin_epoch_ns], "utcTime": ["synthetic"],
                                               "localTime": ["synthetic"]},
            "PROCESSES": {"globalPid": [global_pid(p) for p, _ in processes], "pid": [p for p, _ in processes],
                          "name": [n for _, n in processes]},
            "TARGET_INFO_GPU": _gpu_rows(gpus),
        }
        if schema == "2026":
            rows["TARGET_INFO_SESSION_START_TIME"]["systemClockNs"] = [1_000_000_000]
            dev_rows = [(g.id, g.id, pid, f"GPU-{g.id:08d}", g.sm_count) for g in gpus for pid in g.pids]
            rows["TARGET_INFO_CUDA_DEVICE"] = _cols(("gpuId", "cudaId", "pid", "uuid", "numMultiprocessors"),
                                                    dev_rows)
            for name, enum_rows in _ENUM_ROWS.items():
                rows[name] = _cols(("id", "name", "label"), enum_rows)
        rows.update(tables)
        items = sorted(strings.ids.items(), key=lambda kv: kv[1])
        rows["StringIds"] = {"id": [i for _, i in items], "value": [s for s, _ in items]}
        for table, cols in rows.items():
            _insert(conn, table, ddl[table], cols)
        conn.commit()
        conn.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it 0600; an export is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _cols(names: Sequence[str], rows: list[tuple]) -> dict[str, list]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _gpu_rows(gpus: list[GpuSpec]) -> dict[str, list]:
    return {
        "vmId": [VM_ID] * len(gpus), "id": [g.id for g in gpus], "name": [g.name for g in gpus],
        "busLocation": [f"0000:{0x18 + g.id:02x}:00.0" for g in gpus], "isDiscrete": [1] * len(gpus),
        "totalMemory": [g.memory_bytes for g in gpus], "smCount": [g.sm_count for g in gpus],
        "clockRate": [1_980_000_000] * len(gpus), "memoryBandwidth": [3_352_320_000_000] * len(gpus),
        "cuDevice": [g.id for g in gpus], "uuid": [f"GPU-{g.id:08d}" for g in gpus],
        "computeMajor": [g.compute[0] for g in gpus], "computeMinor": [g.compute[1] for g in gpus],
        "smMajor": [g.compute[0] for g in gpus], "smMinor": [g.compute[1] for g in gpus],
        "threadsPerWarp": [32] * len(gpus),
    }


def _insert(conn: sqlite3.Connection, table: str, ddl: str, cols: dict[str, Sequence]) -> None:
    """CREATE TABLE with the real DDL, then executemany in chunks (bounded memory for 5M-row tables)."""
    conn.execute(f"CREATE TABLE {table} ({ddl})")
    specs = [c.strip() for c in ddl.split(",")]
    names = [s.split()[0] for s in specs]
    unknown = set(cols) - set(names)
    if unknown:
        raise ValueError(f"{table} has no columns {sorted(unknown)}")
    n = len(next(iter(cols.values()))) if cols else 0
    defaults = {name: ("" if " TEXT" in spec else 0) for spec, name in zip(specs, names, strict=True)
                if name not in cols and "NOT NULL" in spec}
    order = [name for name in names if name in cols or name in defaults]
    sql = f"INSERT INTO {table} ({', '.join(order)}) VALUES ({', '.join('?' * len(order))})"
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        parts = []
        for c in order:
            if c in defaults:
                parts.append(itertools.repeat(defaults[c], hi - lo))
            else:
                v = cols[c][lo:hi]
                parts.append(v.tolist() if isinstance(v, np.ndarray) else v)
        conn.executemany(sql, zip(*parts, strict=False))  # repeat() columns are endless
