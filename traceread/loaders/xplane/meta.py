"""Trace-level facts of an XSpace: devices and their peaks, the time base, steps.

Devices come from the device planes' stats: a GPU plane carries ``device_vendor``, ``core_count``,
``memory_size``, ``compute_cap_major``/``minor`` and, from XLA's CUPTI collector, ``gpu_device_name``;
without a name (ROCm) an AMD part is named from its architecture, compute units and memory when they
identify one (as the Kineto loader does for a
nameless ROCm device); a TPU plane carries ``device_type_string`` (``TPU v6 Lite``) and its peaks
(``peak_teraflops_per_second``, ``peak_hbm_bw_gigabytes_per_second``), kept in
``meta.extra["device_peaks"]`` beside the peak table's row for the same name.

Steps, where the file marks them: a device's ``Steps`` line (TensorFlow), else host events with a
``step_num`` stat (JAX ``StepTraceAnnotation``); else the runs of the XLA module run most often on
the first device with an ``XLA Modules`` line (a TPU), or timed on the host (``jit_f:XLA GPU module``
ranges of a GPU XSpace: run k is the k-th range on every per-device thread); step k runs from run k's
start to run k+1's start. Else none (the analysis infers them).

Only these stats are read: host names, paths and source locations some planes carry never reach
the meta.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.limits import EPOCH_NS_MAX
from traceread.loaders.xplane import model as M
from traceread.loaders.xplane.frame import device_of
from traceread.note import (
    DEVICES_NAMED_FROM_ARCH,
    DEVICES_UNNAMED,
    SESSION_TIME,
    STEPS_FROM_LINE,
    STEPS_FROM_MODULE,
    Note,
)
from traceread.trace import DeviceInfo

STEP_SOURCE_LINE = "xplane:Steps"
STEP_SOURCE_ANNOTATION = "StepTraceAnnotation"
STEP_SOURCE_MODULE = "inferred:xla-module:"
MIN_MODULE_RUNS = 2

# AMD Instinct parts by (architecture, compute units, memory GiB). gfx950 is left out: the MI350X and
# the MI355X share 256 compute units and 288 GB, and their peaks differ.
_AMD_PARTS = {("gfx942", 304, 192): "AMD Instinct MI300X", ("gfx942", 304, 256): "AMD Instinct MI325X",
              ("gfx942", 228, 128): "AMD Instinct MI300A", ("gfx90a", 110, 64): "AMD Instinct MI250X"}
_ROCM_CC_ARCH = {"9.4": "gfx942", "9.0": "gfx90a", "9.5": "gfx950"}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e9 else None


def _gpu_name(stats: dict[str, Any], cc: str | None) -> str:
    named = stats.get("gpu_device_name")  # XLA's CUPTI collector records cuDeviceGetName's answer
    if isinstance(named, str) and named.strip() and named.isprintable() and len(named) < 100:
        return named.strip()
    vendor = stats.get("device_vendor")
    vendor = vendor if isinstance(vendor, str) and vendor.isprintable() and len(vendor) < 40 else ""
    cores, mem = _int(stats.get("core_count")), _int(stats.get("memory_size"))
    gib = round(mem / 2**30) if mem else None
    if vendor.lower().startswith("amd") and cc in _ROCM_CC_ARCH:
        arch = _ROCM_CC_ARCH[cc]
        part = _AMD_PARTS.get((arch, cores or 0, gib or 0))
        what = f"{arch}, {cores or '?'} CUs, {gib or '?'} GB"
        return f"{part} ({what})" if part else f"AMD GPU ({what})"
    bits = [f"compute capability {cc}" if cc else "", f"{cores} SMs" if cores else "", f"{gib} GB" if gib else ""]
    detail = ", ".join(b for b in bits if b)
    label = {"nvidia": "NVIDIA GPU", "amd": "AMD GPU"}.get(vendor.lower(), "GPU")
    return f"{label} ({detail})" if detail else ""


def devices(d: M.Decoded, events: pd.DataFrame) -> tuple[list[DeviceInfo], dict[int, dict[str, Any]], list[Note]]:
    """Devices of the device planes (used: it holds a kernel, op, copy or memset), their file-given
    peaks by device id, and notes."""
    on_gpu = events["lane"].isin(list(S.GPU_LANES)).to_numpy()
    used = set(np.unique(events["device"].to_numpy()[on_gpu]).tolist()) - {S.NO_ID}
    out: dict[int, DeviceInfo] = {}
    peaks: dict[int, dict[str, Any]] = {}
    notes: list[Note] = []
    for plane in d.planes:
        dev = device_of(plane.name)
        if dev is None or dev[1] in out:
            continue
        kind, idx = dev
        st = plane.stats
        major, minor = _int(st.get("compute_cap_major")), st.get("compute_cap_minor")
        cc = f"{major}.{minor}" if major is not None and isinstance(minor, int) else None
        if kind == "TPU":
            typ = st.get("device_type_string")
            name = typ if isinstance(typ, str) and typ.isprintable() and len(typ) < 60 else "TPU"
            cc = None
        else:
            name = _gpu_name(st, cc)
        flops, bw = _num(st.get("peak_teraflops_per_second")), _num(st.get("peak_hbm_bw_gigabytes_per_second"))
        if flops or bw:
            peaks[idx] = {"peak_tflops": flops, "peak_bandwidth_gbs": bw, "source": "the xplane's device plane"}
        out[idx] = DeviceInfo(rank=0, id=idx, name=name, sm_count=_int(st.get("core_count")),
                              memory_bytes=_int(st.get("memory_size")), compute_capability=cc, used=idx in used)
    for idx in sorted(used - set(out)):
        out[idx] = DeviceInfo(rank=0, id=idx, name="", used=True)
    nameless = [i for i, dv in out.items() if dv.used and (dv.name in ("", "TPU") or dv.name.startswith(
        ("GPU", "NVIDIA GPU", "AMD GPU")))]
    derived = sorted(i for i, dv in out.items() if dv.used and dv.name.startswith("AMD Instinct"))
    if derived:
        notes.append(Note.of(DEVICES_NAMED_FROM_ARCH, devices=tuple(derived)))
    if nameless:
        notes.append(Note.of(DEVICES_UNNAMED, devices=tuple(sorted(nameless)), viewer=bool(d.from_viewer)))
    return [out[k] for k in sorted(out)], peaks, notes


def time_base(d: M.Decoded) -> tuple[str, int | None, Note | None]:
    """(time base, epoch offset, note). XSpace times are ns from the profile's start, which the
    ``Task Environment`` plane records as Unix-epoch ns."""
    if d.epoch_ns is not None and 0 < d.epoch_ns <= EPOCH_NS_MAX:
        return S.TIME_EPOCH, d.epoch_ns, None
    if d.n and 10**18 <= int(d.start_ns.min()) <= EPOCH_NS_MAX:
        return S.TIME_EPOCH, 0, None
    return S.TIME_SESSION, None, Note.of(SESSION_TIME, viewer=bool(d.from_viewer))


def _frame(rank: np.ndarray, step: np.ndarray, name: list[str], start: np.ndarray, end: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({"rank": rank.astype(np.int32), "step": step.astype(np.int64), "name": name,
                       "start_ns": start.astype(np.int64), "end_ns": end.astype(np.int64)})
    return df.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)


def steps(d: M.Decoded, events: pd.DataFrame) -> tuple[pd.DataFrame | None, str | None, Note | None]:
    """(host step frame or None, its source, a note) -- see module doc."""
    lines = _device_lines(d, "Steps")
    if lines:
        rows = np.flatnonzero(d.line == lines[0])
        names = [d.names[c] for c in d.name[rows].tolist()]
        nums = np.array([int(x) if x.isdigit() and len(x) < 18 else -1 for x in names], dtype=np.int64)
        if (nums < 0).any() or len(set(nums.tolist())) < len(nums):
            nums = np.arange(len(rows), dtype=np.int64)
        return (_frame(np.zeros(len(rows)), nums, names, d.start_ns[rows], d.end_ns[rows]), STEP_SOURCE_LINE,
                Note.of(STEPS_FROM_LINE, count=len(rows)))
    host = events["lane"].to_numpy() == S.LANE_CPU_ANNOTATION
    num = d.ints[M.STEP_NUM]
    rows = np.flatnonzero(host & (num >= 0))
    if len(rows):
        # nested annotations of one step: the longest one per step number
        dur = d.end_ns[rows] - d.start_ns[rows]
        order = np.lexsort((-dur, num[rows]))
        first = np.ones(len(order), dtype=bool)
        first[1:] = num[rows][order][1:] != num[rows][order][:-1]
        rows = rows[order[first]]
        names = [d.names[c] for c in d.name[rows].tolist()]
        return (_frame(np.zeros(len(rows)), num[rows], names, d.start_ns[rows], d.end_ns[rows]),
                STEP_SOURCE_ANNOTATION, None)
    return _module_steps(d)


def _device_lines(d: M.Decoded, name: str) -> list[int]:
    """Line indices named ``name`` on device planes, the lowest device first."""
    found = []
    for li, ln in enumerate(d.lines):
        dev = device_of(d.planes[ln.plane].name)
        if dev is not None and ln.name == name:
            found.append((dev[1], li))
    return [li for _, li in sorted(found)]


_MODULE_ID = re.compile(r"\(\d+\)$")


def _module_steps(d: M.Decoded) -> tuple[pd.DataFrame | None, str | None, Note | None]:
    for li in _device_lines(d, "XLA Modules"):
        rows = np.flatnonzero(d.line == li)
        if len(rows) < MIN_MODULE_RUNS:
            continue
        codes, counts = np.unique(d.name[rows], return_counts=True)
        best = int(codes[np.argmax(counts)])
        runs = rows[d.name[rows] == best]
        runs = runs[np.argsort(d.start_ns[runs], kind="stable")]
        if len(runs) < MIN_MODULE_RUNS:
            continue
        start = d.start_ns[runs]
        end = np.append(start[1:], d.end_ns[runs[-1]])
        module = _MODULE_ID.sub("", d.names[best])[:80]
        note = Note.of(STEPS_FROM_MODULE, count=len(runs), module=module, host=False)
        return (_frame(np.zeros(len(runs)), np.arange(len(runs)), [d.names[best]] * len(runs), start, end),
                STEP_SOURCE_MODULE + module, note)
    return _host_module_steps(d)


_GPU_MODULE = re.compile(r"^(.{1,200}):XLA GPU module$")


def _host_module_steps(d: M.Decoded) -> tuple[pd.DataFrame | None, str | None, Note | None]:
    """A GPU XSpace has no XLA Modules line: its host threads time each module run (``jit_f:XLA GPU
    module``, on one thread per device). Run k of the module is its k-th range on every such thread:
    from the earliest thread's start to the latest thread's end."""
    modules = {c: m.group(1) for c, nm in enumerate(d.names) if (m := _GPU_MODULE.match(nm))}
    if not modules:
        return None, None, None
    is_module = np.zeros(len(d.names), dtype=bool)
    is_module[list(modules)] = True
    rows = np.flatnonzero(is_module[d.name])
    best: tuple[int, np.ndarray, np.ndarray] | None = None
    for c in np.unique(d.name[rows]).tolist():
        mine = rows[d.name[rows] == c]
        per_line = [mine[d.line[mine] == li] for li in np.unique(d.line[mine]).tolist()]
        k = max(len(r) for r in per_line)
        full = [r[np.argsort(d.start_ns[r], kind="stable")] for r in per_line if len(r) == k]
        starts = np.min([d.start_ns[r] for r in full], axis=0)
        ends = np.max([d.end_ns[r] for r in full], axis=0)
        if best is None or k > len(best[1]):
            best = (c, starts, ends)
    if best is None or len(best[1]) < MIN_MODULE_RUNS:
        return None, None, None
    code, starts, ends = best
    module = modules[code][:80]
    end = np.append(starts[1:], ends[-1])
    note = Note.of(STEPS_FROM_MODULE, count=len(starts), module=module, host=True)
    return (_frame(np.zeros(len(starts)), np.arange(len(starts)), [d.names[code]] * len(starts), starts, end),
            STEP_SOURCE_MODULE + module, note)
