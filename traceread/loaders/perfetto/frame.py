"""Decoded Perfetto tracks and slices -> the normalized events frame.

Where a slice sits, from its track (and the track's ancestors):

* rocprofv3 (rocprofiler-sdk ``--output-format pftrace``): ``COMPUTE AGENT [n] STREAM [s] (GPU)``
  and, grouped by queue, ``COMPUTE <GPU> [n] QUEUE [q] ...`` are GPU streams; ``COPY to AGENT [n]
  STREAM|THREAD [s] (GPU)`` are copy lanes; ``THREAD k (tid)`` and thread descriptors are host
  threads. Categories ``kernel_dispatch``, ``memory_copy``, ``hip_api``, ``hsa_api``, ``marker_api``,
  ``rccl_api``. The device is the ``agent`` annotation's GPU index when it has one (``GPU-0``),
  else the agent's node id from the track name.
* Kineto's Perfetto output (PyTorch's CUPTI backend): thread tracks named ``stream N`` under a
  device process (pid = the device) are GPU streams; other threads are host threads; each activity
  sits on a child track of its resource. Its ``metadata`` annotation (JSON) gives device, stream,
  correlation and External id.

Lanes: kernels on ``gpu_compute`` or ``gpu_comm`` (communication kernels by name, as everywhere),
copies and memsets on their lanes; host calls as ``runtime`` (hip*/cuda*), ``driver`` (hsa_*, cu*),
``user_annotation`` (markers, ProfilerStep#N) or ``cpu_op``; instants on ``instant``. Correlation:
the ``corr_id``/``correlation_id``/``correlation`` annotation or ``TrackEvent.correlation_id``,
else a flow id shared by a host call and a GPU op.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.kernel_classes import is_communication
from traceread.limits import INT64_MAX
from traceread.loaders.perfetto.decode import Decoded, Track
from traceread.trace import shown_path

_COMPUTE = re.compile(r"^COMPUTE (?:AGENT|[A-Za-z]+) \[(\d+)\] (?:STREAM|QUEUE) \[(\d+)\]")
_COPY = re.compile(r"^COPY to AGENT \[(\d+)\] (?:STREAM|THREAD) \[(\d+)\]")
_ROCP_THREAD = re.compile(r"^THREAD \d+ \((\d+)\)")
_STREAM = re.compile(r"^stream (\d+)", re.IGNORECASE)
_AGENT_GPU = re.compile(r"GPU\D{0,3}(\d+)", re.IGNORECASE)
_STEP = re.compile(r"^ProfilerStep#\d+$")
GPU_CATEGORIES = {"kernel_dispatch": "kernel", "memory_copy": "copy", "kernel": "kernel", "gpu_memcpy": "copy",
                  "gpu_memset": "memset"}
HOST_CATEGORIES = {"hip_api": S.CAT_RUNTIME, "hsa_api": S.CAT_DRIVER, "marker_api": S.CAT_USER_ANNOTATION,
                   "rccl_api": S.CAT_CPU_OP, "cuda_runtime": S.CAT_RUNTIME, "cuda_driver": S.CAT_DRIVER,
                   "user_annotation": S.CAT_USER_ANNOTATION, "cpu_op": S.CAT_CPU_OP}


@dataclass(frozen=True)
class Place:
    gpu: str  # "" for a host track, else "kernel" (a stream or queue) or "copy"
    device: int
    stream: int
    pid: int
    tid: int


def place_of(uuid: int, tracks: dict[int, Track]) -> Place:
    """Where a track's slices ran, from its name and its ancestors' (nearest first)."""
    pid = tid = -1
    seen: set[int] = set()
    t = tracks.get(uuid)
    while t is not None and t.uuid not in seen:
        seen.add(t.uuid)
        if m := _COMPUTE.match(t.name):
            return Place("kernel", int(m.group(1)), int(m.group(2)), -1, int(m.group(2)))
        if m := _COPY.match(t.name):
            return Place("copy", int(m.group(1)), int(m.group(2)), -1, int(m.group(2)))
        if t.kind == "thread" and (m := _STREAM.match(t.name)):
            dev = t.pid if t.pid is not None else -1
            return Place("kernel", dev, int(m.group(1)), dev, int(m.group(1)))
        if m := _ROCP_THREAD.match(t.name):
            tid = int(m.group(1)) if tid < 0 else tid
        if t.kind == "thread":
            tid = t.tid if tid < 0 and t.tid is not None else tid
            pid = t.pid if pid < 0 and t.pid is not None else pid
        if t.kind == "process" and pid < 0 and t.pid is not None:
            pid = t.pid
        t = tracks.get(t.parent) if t.parent else None
    return Place("", -1, -1, pid, tid if tid >= 0 else uuid & 0x7FFF_FFFF)


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v <= INT64_MAX else None
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return _int(int(v))
    return None


def _metadata(args: dict[str, Any]) -> dict[str, Any]:
    """Kineto's ``metadata`` annotation: the activity's args as its Chrome JSON writes them inside
    ``"args": {...}`` (``"device": 0, "stream": 7, ...``, without the braces; {} when absent or bad)."""
    text = args.get("metadata")
    if not isinstance(text, str) or not text.strip():
        return {}
    text = text.strip()
    try:
        value = json.loads(text if text.startswith("{") else "{" + text + "}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def build(path: str, d: Decoded, rank: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The events frame (of ``rank``) and facts for meta: devices used, host pid."""
    sl = d.slices
    n = len(sl.start)
    places = {u: place_of(u, d.tracks) for u in set(sl.track)}
    start = np.array(sl.start, dtype=object)
    end = np.array(sl.end, dtype=object)
    if n and (max(sl.end) > INT64_MAX or min(sl.start) < 0):
        raise ValueError("a timestamp past 2^63-1 ns")
    start_ns = start.astype(np.int64) if n else np.zeros(0, np.int64)
    end_ns = end.astype(np.int64) if n else np.zeros(0, np.int64)
    gpu = np.empty(n, dtype=object)
    device = np.full(n, -1, np.int32)
    stream = np.full(n, -1, np.int64)
    pid = np.full(n, -1, np.int64)
    tid = np.full(n, -1, np.int64)
    corr = np.full(n, -1, np.int64)
    ext = np.full(n, -1, np.int64)
    gpu_of_node: dict[int, int] = {}  # rocprofv3: an agent's node id -> its index among GPUs
    unnamed: list[int] = []  # GPU rows whose slice names no agent
    for i, (trk, cat, args, c) in enumerate(zip(sl.track, sl.category, sl.args, sl.correlation, strict=True)):
        p = places[trk]
        kind = p.gpu or ("kernel" if GPU_CATEGORIES.get(cat) == "kernel" else "")
        if not kind and GPU_CATEGORIES.get(cat) in ("copy", "memset"):
            kind = "copy"
        gpu[i] = kind
        meta = _metadata(args) if "metadata" in args else {}
        dev, strm = p.device, p.stream
        agent = args.get("agent", args.get("dst_agent"))
        if kind and isinstance(agent, str) and (m := _AGENT_GPU.search(agent)):
            dev = int(m.group(1))
            gpu_of_node.setdefault(p.device, dev)
        elif kind and p.gpu:
            unnamed.append(i)
        if kind and (v := _int(meta.get("device"))) is not None:
            dev = v
        if kind and (v := _int(meta.get("stream"))) is not None:
            strm = v
        device[i] = dev if kind and 0 <= dev < 1 << 31 else -1
        stream[i] = strm if kind else -1
        pid[i], tid[i] = p.pid, (strm if kind else p.tid)
        for key in ("corr_id", "correlation_id", "correlation"):
            v = _int(args.get(key)) if key in args else None
            if v is not None:
                c = v
                break
        else:
            v = _int(meta.get("correlation"))
            if v is not None:
                c = v
        corr[i] = c
        e = _int(meta.get("External id"))
        if e is not None:
            ext[i] = e
    for i in unnamed:  # a track's agent node id, as the GPU index its other slices named
        node = places[sl.track[i]].device
        if node in gpu_of_node:
            device[i] = gpu_of_node[node]
    if n and not (corr >= 0).any():
        _flow_correlation(sl.flows, gpu, corr)
    names = pd.Series(sl.name, dtype=object)
    cats = pd.Series(sl.category, dtype=object)
    lane, category = _lanes(names, cats, gpu, np.array(sl.instant, dtype=bool))
    host_pids = pid[(gpu == "") & (pid >= 0)]
    main_pid = -1
    if len(host_pids):  # the process most host slices ran in
        values, counts = np.unique(host_pids, return_counts=True)
        main_pid = int(values[int(np.argmax(counts))])
    pid[(gpu != "") & (pid < 0)] = main_pid
    events = pd.DataFrame({
        "trace": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([shown_path(path)])),
        "rank": np.full(n, rank, np.int32),
        "lane": pd.Categorical(lane, categories=list(S.LANES)),
        "device": device,
        "stream": stream,
        "pid": pid,
        "tid": tid,
        "name": pd.Categorical(names),
        "category": pd.Categorical(category, categories=list(S.CATEGORIES)),
        "raw_category": pd.Categorical(cats),
        "start_ns": start_ns,
        "end_ns": end_ns,
        "correlation": corr,
        "external_id": ext,
    })
    events["lane"] = events["lane"].cat.remove_unused_categories()
    events["category"] = events["category"].cat.remove_unused_categories()
    order = np.lexsort((events["start_ns"].to_numpy(), (gpu == "").astype(np.int8)))  # GPU rows first, by time
    events = events.iloc[order].reset_index(drop=True)
    facts = {"devices": sorted({int(x) for x in device if x >= 0}), "pid": main_pid if main_pid >= 0 else None}
    return events, facts


def _flow_correlation(flows: list[tuple[int, ...]], gpu: np.ndarray, corr: np.ndarray) -> None:
    """Correlation from flows: a flow id on both a host slice and a GPU slice links them."""
    rows: dict[int, list[int]] = {}
    for i, ids in enumerate(flows):
        for f in ids:
            rows.setdefault(f, []).append(i)
    for f, members in rows.items():
        kinds = {gpu[i] != "" for i in members}
        if len(kinds) == 2:
            for i in members:
                corr[i] = f & INT64_MAX


def _lanes(names: pd.Series, cats: pd.Series, gpu: np.ndarray, instant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(names)
    lane = np.full(n, S.LANE_CPU_THREAD, dtype=object)
    category = np.full(n, S.CAT_CPU_OP, dtype=object)
    low = names.str.lower()
    is_gpu = gpu != ""
    copy = (gpu == "copy") | (is_gpu & (low.str.startswith("memcpy") | low.str.startswith("memory_copy")).to_numpy())
    memset = is_gpu & low.str.startswith("memset").to_numpy() | (cats == "gpu_memset").to_numpy()
    copy &= ~memset
    kernel = is_gpu & ~copy & ~memset
    comm = kernel & is_communication(names.to_numpy(dtype=object))
    lane[kernel & ~comm], category[kernel] = S.LANE_GPU_COMPUTE, S.CAT_KERNEL
    lane[comm] = S.LANE_GPU_COMM
    lane[copy], category[copy] = S.LANE_MEMCPY, S.CAT_MEMCPY
    lane[memset], category[memset] = S.LANE_MEMSET, S.CAT_MEMSET
    host = ~is_gpu
    mapped = cats.map(HOST_CATEGORIES).to_numpy(dtype=object)
    has = host & pd.notna(mapped)
    category[has] = mapped[has]
    runtime = host & ~has & low.str.match(r"^(hip|cuda)[a-z]").to_numpy()
    driver = host & ~has & (low.str.startswith("hsa_") | names.str.match(r"^cu[A-Z]")).to_numpy()
    category[runtime], category[driver] = S.CAT_RUNTIME, S.CAT_DRIVER
    step = host & names.str.match(_STEP.pattern).to_numpy()
    category[step] = S.CAT_USER_ANNOTATION
    annotation = host & (category == S.CAT_USER_ANNOTATION)
    lane[annotation] = S.LANE_CPU_ANNOTATION
    inst = host & instant
    lane[inst], category[inst] = S.LANE_INSTANT, S.CAT_INSTANT
    return lane, category


def device_names(tracks: dict[int, Track]) -> dict[int, str]:
    """Kineto's device processes (pid = the device) named ``<name> [<label>]``: device -> name."""
    out: dict[int, str] = {}
    for t in tracks.values():
        if t.kind == "process" and t.pid is not None and t.name and not t.name.startswith(("Device ", "Kineto ")):
            if any(c.kind == "thread" and c.parent == t.uuid and _STREAM.match(c.name) for c in tracks.values()):
                out[t.pid] = t.name.split(" [")[0]
    return out
