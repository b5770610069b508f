"""What the ROCm readers share: their rows as frame blocks, the frame, ranks, devices and steps.

Each reader turns its tables into :class:`traceread.loaders.nsys.blocks.Block` parts (numpy columns,
names as codes into a per-table name list) and hands them to :func:`build`, which writes them into
the events frame with the Nsight Systems reader's :class:`FrameWriter` (the same lanes, categories,
side tables and dtypes), makes one rank per process and reads steps from ``ProfilerStep#N`` markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.kernel_classes import is_communication
from traceread.limits import int_text
from traceread.loaders.nsys.blocks import Block, whole
from traceread.loaders.nsys.frame import FrameWriter
from traceread.note import ODD_DEVICE_IDS_INT32, Note
from traceread.trace import DeviceInfo, RankInfo, SideTables, Trace, TraceMeta

STEP = re.compile(r"^ProfilerStep#(\d+)$")
LANE = {lane: i for i, lane in enumerate(S.LANES)}
CAT = {cat: i for i, cat in enumerate(S.CATEGORIES)}
# copy direction as the ROCm tools spell it -> the frame's copy_kind (Kineto's and nsys' names)
COPY_KINDS = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
              "HOST_TO_HOST": "HtoH", "PEER_TO_PEER": "PtoP",
              "HostToDevice": "HtoD", "DeviceToHost": "DtoH", "DeviceToDevice": "DtoD", "HostToHost": "HtoH",
              "PeerToPeer": "PtoP"}
_COPY_NAMES = {"HtoD": "Memcpy HtoD", "DtoH": "Memcpy DtoH", "DtoD": "Memcpy DtoD", "HtoH": "Memcpy HtoH",
               "PtoP": "Memcpy PtoP", "": "Memcpy"}


def intern(values: np.ndarray | list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct names as an object array, each value's code into them): one hash pass."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    return np.asarray(uniques, dtype=object), codes.astype(np.int64)


def ints(values: Any, n: int) -> np.ndarray:
    """``values`` (an array, or one value for every row) as an int64 column of ``n`` rows."""
    arr = np.asarray(values, dtype=np.int64)
    return np.broadcast_to(arr, (n,)).copy() if arr.ndim == 0 else arr


def block(raw: str, lane: str | np.ndarray, cat: str, names: np.ndarray, code: np.ndarray, start: np.ndarray,
          end: np.ndarray, pid: Any, tid: Any, device: Any = S.NO_ID, stream: Any = S.NO_ID,
          correlation: Any = S.NO_ID, side: dict[str, dict[str, np.ndarray]] | None = None) -> Block:
    """One table's rows as a frame block; ``lane`` a lane name or per-row lane codes. Ends before
    their start (a damaged record) are clamped to the start, as the other readers do."""
    n = len(start)
    start = np.asarray(start, dtype=np.int64)
    lanes = np.full(n, LANE[lane], dtype=np.int8) if isinstance(lane, str) else lane.astype(np.int8)
    return Block(raw=raw, lane=lanes, category=np.full(n, CAT[cat], dtype=np.int8), names=names,
                 name_code=code, start=start, end=np.maximum(np.asarray(end, dtype=np.int64), start),
                 pid=ints(pid, n), tid=ints(tid, n), device=ints(device, n), stream=ints(stream, n),
                 correlation=ints(correlation, n), side=side or {})


def kernel_lanes(names: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Per-row lane codes of kernels: communication (RCCL, by name) or compute, decided once per name."""
    comm = is_communication(pd.Series(names, dtype=object)) if len(names) else np.zeros(0, dtype=bool)
    per_name = np.where(comm, LANE[S.LANE_GPU_COMM], LANE[S.LANE_GPU_COMPUTE]).astype(np.int8)
    return per_name[code] if len(code) else np.zeros(0, dtype=np.int8)


def copy_block(raw: str, kinds: np.ndarray, start: np.ndarray, end: np.ndarray, pid: Any, tid: Any,
               device: Any, stream: Any, correlation: Any, nbytes: Any) -> Block:
    """Copies named as Kineto names them ("Memcpy HtoD"), side table copy_args; ``kinds`` the frame's
    copy kinds ('' unknown)."""
    n = len(start)
    kinds = np.asarray(kinds, dtype=object)
    names, code = intern(pd.Series(kinds, dtype=object).map(_COPY_NAMES).fillna("Memcpy").to_numpy(dtype=object))
    empty = np.full(n, "", dtype=object)
    side = {"copy_args": {"bytes": ints(nbytes, n), "copy_kind": kinds,
                          "src_kind": empty, "dst_kind": empty}}
    return block(raw, S.LANE_MEMCPY, S.CAT_MEMCPY, names, code, start, end, pid, tid, device, stream,
                 correlation, side)


@dataclass
class Parts:
    """What a reader found, before it becomes a Trace."""

    fmt: str  # TraceMeta.format
    generation: str
    time_base: str
    blocks: list[Block] = field(default_factory=list)
    devices: dict[int, DeviceInfo] = field(default_factory=dict)  # device id -> description (rank set later)
    device_pid: int | None = None  # the process that owns listed devices without work (one-process files)
    warnings: list[Note | str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def build(path: str, parts: Parts) -> Trace:
    """The Trace of ``parts``: frame, one rank per process, devices, steps."""
    blocks = [b for b in parts.blocks if len(b)]
    out = FrameWriter(sum(len(b) for b in blocks))
    for b in blocks:
        out.add(whole(b))
    used = out.used_pairs()
    first_dev: dict[int, int] = {}
    for p, d in used:
        first_dev[p] = min(first_dev.get(p, d), d)
    big = np.iinfo(np.int64).max
    order = sorted(out.pids, key=lambda p: (first_dev.get(p, big), p))
    source = "process order" if len(order) > 1 else "default"
    ranks = [RankInfo(rank=i, rank_source=source, world_size=None, world_size_source="unknown", pid=p)
             for i, p in enumerate(order)]
    if not ranks and blocks:  # no process id in the file: one rank, as a one-process file has
        ranks = [RankInfo(rank=0, rank_source="default", world_size=None, world_size_source="unknown")]
    pid_rank = {p: i for i, p in enumerate(order)}
    events, side = out.finish(path, pid_rank)
    devices = _devices(parts, ranks, pid_rank, used)
    warnings = list(parts.warnings)
    if out.odd_devices:
        warnings.append(Note.of(ODD_DEVICE_IDS_INT32, count=out.odd_devices))
    meta = TraceMeta(path=path, format=parts.fmt, generation=parts.generation, time_base=parts.time_base,
                     devices=devices, ranks=ranks, warnings=warnings, extra=dict(parts.extra),
                     profiler_options=dict(parts.options))
    meta.steps = steps(events)
    return Trace(events=events, meta=meta, side=SideTables(dict(side)))


def _devices(parts: Parts, ranks: list[RankInfo], pid_rank: dict[int, int],
             used: set[tuple[int, int]]) -> list[DeviceInfo]:
    """Each rank's devices: those it ran work on, plus every listed device for a one-process file."""
    out: dict[tuple[int, int], DeviceInfo] = {}
    for p, d in sorted(used):
        rank = pid_rank.get(p, 0)
        info = parts.devices.get(d)
        out[(rank, d)] = _with(info, rank, d, True)
    owner = pid_rank.get(parts.device_pid, 0) if parts.device_pid is not None else (0 if len(ranks) == 1 else None)
    if owner is not None:
        for d, info in parts.devices.items():
            out.setdefault((owner, d), _with(info, owner, d, False))
    return [out[k] for k in sorted(out)]


def _with(info: DeviceInfo | None, rank: int, dev: int, used: bool) -> DeviceInfo:
    if info is None:
        return DeviceInfo(rank=rank, id=dev, name="", used=used)
    return DeviceInfo(rank=rank, id=dev, name=info.name, sm_count=info.sm_count, memory_bytes=info.memory_bytes,
                      compute_capability=info.compute_capability, used=used)


def steps(events: pd.DataFrame) -> pd.DataFrame | None:
    """Host step ranges (rank, step, name, start_ns, end_ns) from ``ProfilerStep#N`` ranges, or None."""
    names = events["name"].cat.categories
    hits = {i: int_text(m.group(1), 0) for i, nm in enumerate(names) if (m := STEP.match(str(nm)))}
    if not hits:
        return None
    lookup = np.full(len(names), -1, dtype=np.int64)
    lookup[list(hits)] = [-1 if v is None else v for v in hits.values()]
    code = events["name"].cat.codes.to_numpy()
    host = np.isin(events["lane"].cat.codes.to_numpy(), [LANE[S.LANE_CPU_ANNOTATION], LANE[S.LANE_CPU_THREAD]])
    rows = np.flatnonzero(host & np.isin(code, list(hits)))
    if not len(rows):
        return None
    sel = events.iloc[rows]
    df = pd.DataFrame({"rank": sel["rank"].to_numpy(), "step": lookup[code[rows]],
                       "name": sel["name"].astype(str).to_numpy(), "start_ns": sel["start_ns"].to_numpy(),
                       "end_ns": sel["end_ns"].to_numpy()}).sort_values(["rank", "start_ns"], kind="stable")
    if (df["step"] < 0).any():  # a number past int64: number every step in time order instead
        df["step"] = df.groupby("rank").cumcount().to_numpy().astype(np.int64)
    return df.reset_index(drop=True)
