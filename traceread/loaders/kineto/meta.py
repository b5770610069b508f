"""Trace-level facts of a Kineto file: rank, devices, time base, generation, options, distributed info.

Only whitelisted keys are copied out of the file's top level: traces carry user names, host
names and paths (``traceName``) that must never reach a report.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # only annotations here: see traceread.runner.prefetch
    import pandas as pd

import traceread.loaders.kineto.categories as cats
from traceread import schema
from traceread.limits import EPOCH_NS_MAX, RANK_MAX, int_text
from traceread.loaders.kineto.scan import codes_in
from traceread.note import (
    BASE_TIME_NOT_A_TIME,
    EPOCH_UNKNOWN,
    EVENTS_BEFORE_EPOCH,
    FILE_NAME_RANK_OUT_OF_RANGE,
    GPU_NOT_DESCRIBED,
    RANK_CLAIM_OUT_OF_RANGE,
    WORLD_SIZE_OUT_OF_RANGE,
    Note,
)
from traceread.trace import DeviceInfo, RankInfo

PROFILER_OPTIONS = ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops")
VERSION_KEYS = ("cuda_runtime_version", "cuda_driver_version", "cupti_version", "hip_runtime_version",
                "hip_driver_version", "roctracer_version", "schemaVersion", "displayTimeUnit")
DISTRIBUTED_KEYS = ("backend", "rank", "world_size", "pg_count", "nccl_version")
PG_KEYS = ("pg_name", "pg_desc", "backend_config", "pg_size", "ranks")
_RANK_PATTERNS = (re.compile(r"rank[-_]?([0-9]+)", re.I), re.compile(r"worker[-_]?([0-9]+)", re.I))
# Unix-epoch microseconds between 2001-09 and 2100: integer-us traces (and the rare absolute
# float ones) in this range are wall-clock times; relative float traces are far below it
EPOCH_US_MIN, EPOCH_US_MAX = 1.0e15, 4.1e15


def rank_of(path: str, top: dict[str, Any], notes: list[Note | str] | None = None) -> tuple[int, str, int | None, str]:
    """(rank, where it came from, world size or None, where that came from).

    A rank or world size outside 0..2^31-1 (the frame's int32 ``rank``; see ``limits``) is not
    used: the next source decides, and ``notes`` says what was ignored.
    """
    info = top.get("distributedInfo")
    rank, source = 0, "default"
    world, world_source = None, "unknown"
    notes = notes if notes is not None else []
    if isinstance(info, dict):
        claimed, size = info.get("rank"), info.get("world_size")
        if isinstance(claimed, int) and not isinstance(claimed, bool):
            if 0 <= claimed <= RANK_MAX:
                rank, source = claimed, "distributedInfo"
            else:
                notes.append(Note.of(RANK_CLAIM_OUT_OF_RANGE, value=_shown(claimed), max=RANK_MAX))
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            if size <= RANK_MAX:
                world, world_source = size, "distributedInfo"
            else:
                notes.append(Note.of(WORLD_SIZE_OUT_OF_RANGE, value=_shown(size), max=RANK_MAX))
    if source == "default":
        base = os.path.basename(path)
        for pat in _RANK_PATTERNS:
            m = pat.search(base)
            if m:
                named = int_text(m.group(1), 0, RANK_MAX)
                if named is None:
                    notes.append(Note.of(FILE_NAME_RANK_OUT_OF_RANGE, value=_shown(m.group(1)), max=RANK_MAX))
                    continue
                rank, source = named, "file name"
                break
    return rank, source, world, world_source


def _shown(value: Any) -> str:
    """A number as a note shows it: at most 40 characters (a hostile one may have thousands of digits)."""
    text = value if isinstance(value, str) else repr(value) if not isinstance(value, int) or value.bit_length() < 128 \
        else f"{'-' if value < 0 else ''}2^{value.bit_length() - 1}.."
    return text if len(text) <= 40 else text[:37] + "..."


def distributed(top: dict[str, Any]) -> dict[str, Any]:
    info = top.get("distributedInfo")
    if not isinstance(info, dict):
        return {}
    out = {k: info[k] for k in DISTRIBUTED_KEYS if k in info}
    pgs = info.get("pg_config")
    if isinstance(pgs, list):
        out["pg_config"] = [{k: pg[k] for k in PG_KEYS if k in pg} for pg in pgs if isinstance(pg, dict)]
    return out


# Kineto 2026+ copies these environment variables into the top level (libkineto/include/EnvMetadata.h);
# their values are strings. ``host_name``, written beside them, is never read.
JOB_KEYS = (("name", "PT_PROFILER_JOB_NAME"), ("version", "PT_PROFILER_JOB_VERSION"),
            ("attempt", "PT_PROFILER_JOB_ATTEMPT_INDEX"))
_ID_MAX = 1024  # characters: a longer value is no id a writer made


def _id_text(value: Any) -> str | None:
    """A metadata value as id text (a string or an integer), or None when it is none."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = value if isinstance(value, str) else str(value) if value.bit_length() < 128 else None
    return text if text and len(text) <= _ID_MAX else None


def job(top: dict[str, Any]) -> dict[str, str]:
    """The profiled job the file names ({} without ``PT_PROFILER_JOB_NAME``): name, version, attempt."""
    name = _id_text(top.get("PT_PROFILER_JOB_NAME"))
    if name is None:
        return {}
    out = {"name": name}
    for key, field_name in JOB_KEYS[1:]:
        text = _id_text(top.get(field_name))
        if text is not None:
            out[key] = text
    return out


def trace_id(top: dict[str, Any]) -> str | None:
    """The file's top-level ``trace_id`` (user metadata some writers add), or None."""
    return _id_text(top.get("trace_id"))


def profiler_options(top: dict[str, Any]) -> dict[str, Any]:
    return {k: top[k] for k in PROFILER_OPTIONS if k in top}


def versions(top: dict[str, Any]) -> dict[str, Any]:
    return {k: top[k] for k in VERSION_KEYS if k in top and isinstance(top[k], (int, str))}


# AMD Instinct parts by the properties ROCm Kineto writes when it leaves ``name`` empty: (architecture,
# compute units, memory GiB) -> product. The architecture is ``gcnArchName``'s gfx id, else ROCm's
# compute capability (gfx942 reports 9.4, gfx90a 9.0, gfx950 9.5). One PyTorch device each (an MI250X
# GCD has 110 CUs). MI210 and an MI250 GCD share gfx90a, 104 CUs and 64 GB: never guessed between.
_AMD_PARTS: dict[tuple[str, int, int], str] = {
    ("gfx942", 304, 192): "AMD Instinct MI300X",
    ("gfx942", 304, 256): "AMD Instinct MI325X",
    ("gfx942", 228, 128): "AMD Instinct MI300A",
    ("gfx950", 256, 288): "AMD Instinct MI355X",
    ("gfx90a", 110, 64): "AMD Instinct MI250X",
}
_AMD_AMBIGUOUS = {("gfx90a", 104, 64): "MI210 or one MI250 GCD"}
_ROCM_CC_ARCH = {"9.4": "gfx942", "9.0": "gfx90a", "9.5": "gfx950"}
# ROCm's placeholder when it cannot name the part: no better than no name.
_PLACEHOLDER_NAME = re.compile(r"^\s*(AMD Radeon Graphics)?\s*$")


def _amd_arch(p: dict[str, Any], cc: str | None) -> str | None:
    arch = p.get("gcnArchName")
    if isinstance(arch, str) and (m := re.match(r"gfx\w+", arch)):
        return m.group(0)
    amd = p.get("warpSize") == 64  # NVIDIA warps are 32 threads, AMD wavefronts 64 on Instinct
    return _ROCM_CC_ARCH.get(cc or "") if amd else None


def _name_from_properties(dev: DeviceInfo, p: dict[str, Any]) -> tuple[str, str | None]:
    """A nameless device's name from its architecture, compute units and memory; or '' and why not."""
    arch = _amd_arch(p, dev.compute_capability)
    gib = round(dev.memory_bytes / 2**30) if dev.memory_bytes else None
    what = f"{arch or 'architecture unknown'}, {dev.sm_count or '?'} compute units, {gib or '?'} GB"
    key = (arch or "", dev.sm_count or 0, gib or 0)
    if key in _AMD_PARTS:
        return f"{_AMD_PARTS[key]} ({what}; deviceProperties gives no model name)", None
    why = (f"fit the {_AMD_AMBIGUOUS[key]} alike" if key in _AMD_AMBIGUOUS else "match no known GPU")
    return "", (f"GPU {dev.id} has no model name in deviceProperties ({dev.name!r}) and its properties ({what}) {why}: "
                "pass --gpu NAME for MFU and the roofline")


def devices(top: dict[str, Any], events: pd.DataFrame, rank: int) -> tuple[list[DeviceInfo], list[Note | str]]:
    """Devices the trace lists (deviceProperties / 2021 computeProperties) plus any it used, and notes
    on a used device the trace does not name.

    A used device is described by its own properties entry (by id), or by the single entry when only
    one is listed (ROCm lists id 0 while the kernels run on device 2 or 9); a nameless one is named
    from its architecture, compute units and memory when they identify the part."""
    lane = events["lane"].cat
    on_gpu = codes_in(lane.codes.to_numpy(), [lane.categories.get_loc(x) for x in cats.GPU_LANES if x in lane.categories],
                      len(lane.categories))
    used = set(np.unique(events["device"].to_numpy()[on_gpu]).tolist()) - {-1}
    props = top.get("deviceProperties") or top.get("computeProperties") or []
    entries = {p["id"]: p for p in (props if isinstance(props, list) else [])
               if isinstance(p, dict) and isinstance(p.get("id"), int)}
    single = next(iter(entries.values())) if len(entries) == 1 else None
    out: dict[int, DeviceInfo] = {}
    notes: list[Note | str] = []
    for d in sorted(set(entries) | used):
        p = entries.get(d, single if d in used else None)
        if p is None:
            out[d] = DeviceInfo(rank=rank, id=d, name="", used=True)
            if entries:  # a file with no properties at all says so elsewhere (the device is "unknown")
                    notes.append(Note.of(GPU_NOT_DESCRIBED, device=d))
            continue
        major = p.get("computeMajor", p.get("major"))
        minor = p.get("computeMinor", p.get("minor"))
        sms = p.get("numSms", p.get("multiProcessorCount", p.get("maxComputeUnits")))
        mem = p.get("totalGlobalMem")
        dev = DeviceInfo(
            rank=rank, id=d, name=str(p.get("name", "")),
            sm_count=sms if isinstance(sms, int) else None,
            memory_bytes=mem if isinstance(mem, int) else None,
            compute_capability=f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
            used=d in used,
        )
        if _PLACEHOLDER_NAME.match(dev.name) and dev.used:
            name, why = _name_from_properties(dev, p)
            dev = dataclasses.replace(dev, name=name or dev.name)
            if why:
                notes.append(why)
        out[d] = dev
    return [out[k] for k in sorted(out)], notes


def time_base(top: dict[str, Any], events: pd.DataFrame) -> tuple[str, int | None, Note | None]:
    """(time base, epoch offset in ns, a note when the epoch could not be known)."""
    if not len(events):
        return schema.TIME_RELATIVE, None, None
    timed = ~schema.lane_is(events, schema.LANE_INSTANT)
    where = timed if timed.any() else True  # instants only: all rows count
    first_us = float(np.min(events["start_ns"].to_numpy(), where=where, initial=np.iinfo(np.int64).max)) / 1000
    if EPOCH_US_MIN <= first_us <= EPOCH_US_MAX:
        return schema.TIME_EPOCH, 0, None
    # One odd start (an event with a second "ts": a JSON reader keeps the last) must not make a
    # trace of epoch times "relative": the middle start decides, the ones before the range are noted.
    starts = events["start_ns"].to_numpy()[np.asarray(timed)] if timed.any() else events["start_ns"].to_numpy()
    if EPOCH_US_MIN <= float(np.median(starts)) / 1000 <= EPOCH_US_MAX:
        early = int((starts < EPOCH_US_MIN * 1000).sum())
        return schema.TIME_EPOCH, 0, Note.of(EVENTS_BEFORE_EPOCH, count=early)
    base = top.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 < base <= EPOCH_NS_MAX:
        return schema.TIME_EPOCH, base, None
    if base is not None and not isinstance(base, bool) and isinstance(base, (int, float, str)):
        return schema.TIME_RELATIVE, None, Note.of(BASE_TIME_NOT_A_TIME, base=_shown(base), max_ns=EPOCH_NS_MAX)
    return schema.TIME_RELATIVE, None, Note.of(EPOCH_UNKNOWN)


def generation(top: dict[str, Any], bare_list: bool, raw_cats: list[str], float_ts: bool) -> str:
    """A human-readable name for the format generation, from the file's own features."""
    legacy = {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"} & set(raw_cats)
    if bare_list:
        return "kineto 2020-21, bare event list (legacy categories)"
    if "computeProperties" in top:
        return "kineto 2021 (computeProperties, legacy categories)"
    if legacy and not float_ts:
        return "kineto 2020-22 (legacy categories, integer us)"
    if not float_ts:
        return "kineto 2022-24 (integer us)"
    if "baseTimeNanoseconds" in top:
        return "kineto 2024+ (float us relative to baseTimeNanoseconds)"
    return "kineto 2024 (float us, no base time)"


def thread_names(meta_rows: list[tuple], string_ids: dict[str, int]) -> dict[str, Any]:
    """Names from metadata rows (the last duplicate wins, as viewers show it)."""
    threads: dict[str, str] = {}
    processes: dict[str, str] = {}
    labels: dict[str, str] = {}

    def key(v: Any) -> str:
        if isinstance(v, str) and v in string_ids:
            return str(string_ids[v])
        return str(v)

    for name, pid, tid, arg_name, arg_labels in meta_rows:
        if name == "thread_name" and arg_name:
            threads[f"{key(pid)}:{key(tid)}"] = arg_name
        elif name == "process_name" and arg_name:
            processes[key(pid)] = arg_name
        elif name == "process_labels" and arg_labels:
            labels[key(pid)] = arg_labels
    return {"thread_names": threads, "process_names": processes, "process_labels": labels}


def rank_info(rank: int, source: str, world: int | None, world_source: str, events: pd.DataFrame) -> RankInfo:
    host = schema.lane_is(events, schema.LANE_CPU_THREAD)
    step = max(1, len(host) // 100_000)  # a sample of the rows finds the main process
    pids = events["pid"].to_numpy()[::step][host[::step]]
    pids = pids[pids >= 0]
    pid = None
    if len(pids):
        values, counts = np.unique(pids, return_counts=True)
        pid = int(values[np.argmax(counts)])
    return RankInfo(rank=rank, rank_source=source, world_size=world, world_size_source=world_source, pid=pid)
