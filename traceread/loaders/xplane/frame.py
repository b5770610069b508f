"""A decoded XSpace (:class:`model.Decoded`) -> the events frame and side tables.

Where each line's events go (``schema.LANES``):

* a GPU plane's ``Stream #N(...)`` lines (and a line otherwise named whose events are activity
  records: launched, or with kernel or copy details): kernels on ``gpu_compute`` (communication
  kernels, by name, on ``gpu_comm``), copies (a ``memcpy_details`` stat; without ``kernel_details``,
  a copy name or a ``Memcpy`` line) on ``memcpy``, memsets on ``memset``; ``stream`` = N (else the
  line id);
* a TPU plane's ``XLA Ops`` line: the ops are the device's work, ``gpu_compute``; collectives (an
  ``hlo_category`` or name of all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
  send/recv) on ``gpu_comm``; ``copy-start``/``copy-done`` (a DMA started and waited for: host
  offloading) on ``memcpy``, HtoD or DtoH by the host memory space ``S(5)`` in their HLO text.
  ``Async XLA Ops``: async copies on ``memcpy``, async collectives on ``gpu_comm``, the rest as
  annotations;
* every other device line (``XLA Modules``, ``Steps``, a GPU plane's derived ``XLA Ops``/``TensorFlow
  Ops``, ``XLA TraceMe``...): ``gpu_annotation`` (they describe work the streams already hold);
* the host plane's lines (one per thread, ``tid`` = the line id; a thread's ``.../NVTX`` line as
  ``cpu_annotation``): CUDA/HIP calls as
  ``runtime``/``driver`` (their ``correlation_id`` links them to the GPU work they launched), events
  with a ``step_num`` stat (JAX ``StepTraceAnnotation``) as ``cpu_annotation``, Python frames
  (``$file:line fn``) as ``python_function``, zero-length events as ``instant``, the rest as
  ``cpu_op``.

One process wrote an XSpace: every row is rank 0 and has no pid (``-1``). ``raw_category`` is the
line's kind: its name without the stream or thread number (``Stream(Kernel)``, ``Host Threads``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.kernel_classes import is_communication
from traceread.limits import check_events
from traceread.loaders.xplane import model as M
from traceread.trace import shown_path

DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU|[A-Z_]+):(\d{1,9})\b")
HOST_PLANE = "/host:CPU"
_STREAM = re.compile(r"^Stream #(\d{1,18})")
_NUMBER_TAIL = re.compile(r"(\s*#-?\d+|/-?\d+)")
_COPY_NAME = re.compile(r"memcpy|^Copy(HostTo|DeviceTo|PeerTo|Device|Host)|copy-(start|done)|async-copy", re.I)
_MEMSET_NAME = re.compile(r"memset", re.I)
_API = re.compile(r"^(cuda|hip)[A-Z]\w*$|^hsa_\w+$")
_DRIVER = re.compile(r"^cu[A-Z]\w*$")
_COLLECTIVE = re.compile(r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast|"
                         r"ragged-all-to-all|\bsend\b|\brecv\b|psum|all_reduce|all_gather|reduce_scatter", re.I)
# TPU op lines: the ops run one at a time on the core; these lines are the device's work.
TPU_OPS_LINE = "XLA Ops"
ASYNC_OPS_LINE = "Async XLA Ops"

_LANE = {name: i for i, name in enumerate(S.LANES)}
_CAT = {name: i for i, name in enumerate(S.CATEGORIES)}


def line_kind(name: str) -> str:
    """A line's name without its stream or thread number: ``Stream #16(Kernel)`` -> ``Stream(Kernel)``."""
    return _NUMBER_TAIL.sub("", name).strip() or "line"


def device_of(plane_name: str) -> tuple[str, int] | None:
    """(kind, index) of a device plane (``/device:TPU:3`` -> ("TPU", 3)), else None."""
    m = DEVICE_PLANE.match(plane_name)
    return (m.group(1), int(m.group(2))) if m else None


class _Names:
    """Per distinct event name, what it is (computed once per name, not per event)."""

    def __init__(self, names: list[str], categories: list[str]) -> None:
        arr = np.array(names, dtype=object)
        self.comm_kernel = is_communication(arr) if len(arr) else np.zeros(0, dtype=bool)
        self.copy = np.array([bool(_COPY_NAME.search(n) or "copy" in c) for n, c in zip(names, categories, strict=True)],
                             dtype=bool)
        self.memset = np.array([bool(_MEMSET_NAME.search(n)) for n in names], dtype=bool)
        self.runtime = np.array([bool(_API.match(n)) for n in names], dtype=bool)
        self.driver = np.array([bool(_DRIVER.match(n)) for n in names], dtype=bool)
        self.python = np.array([n.startswith("$") for n in names], dtype=bool)
        self.collective = np.array([bool(_COLLECTIVE.search(c) or (not c and _COLLECTIVE.search(n)))
                                    for n, c in zip(names, categories, strict=True)], dtype=bool)


def build(d: M.Decoded, path: str) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The events frame and its side tables."""
    n = d.n
    check_events(n)
    names = _Names(d.names, d.categories)
    lane = np.full(n, _LANE[S.LANE_CPU_THREAD], dtype=np.int8)
    cat = np.full(n, _CAT[S.CAT_CPU_OP], dtype=np.int8)
    device = np.full(n, S.NO_ID, dtype=np.int32)
    stream = np.full(n, S.NO_ID, dtype=np.int64)
    tid = np.full(n, S.NO_ID, dtype=np.int64)
    kinds: dict[str, int] = {}
    raw = np.zeros(n, dtype=np.int32)
    has_copy_details = _flag(d, M.MEMCPY_DETAILS)
    has_kernel_details = _flag(d, M.KERNEL_DETAILS)
    # a GPU activity record: launched (a correlation id) or described as a kernel or a copy
    activity = has_copy_details | has_kernel_details | (d.ints[M.CORRELATION] >= 0)
    starts = np.searchsorted(d.line, np.arange(len(d.lines) + 1)) if _sorted(d.line) else None
    for li, ln in enumerate(d.lines):
        rows = np.arange(starts[li], starts[li + 1]) if starts is not None else np.flatnonzero(d.line == li)
        if not len(rows):
            continue
        plane = d.planes[ln.plane]
        raw[rows] = kinds.setdefault(line_kind(ln.name), len(kinds))
        code = d.name[rows]
        dev = device_of(plane.name)
        if dev is not None:
            device[rows] = dev[1]
            m = _STREAM.match(ln.name)
            stream[rows] = int(m.group(1)) if m else ln.id
            tid[rows] = stream[rows]
            # streams are "Stream #N(...)" lines; a line otherwise named whose events are activity
            # records (not derived annotations) holds device work too
            work = m is not None or bool(activity[rows].mean() >= 0.5)
            _device_line(lane, cat, rows, code, names, dev[0], ln.name, (has_copy_details, has_kernel_details), work)
        elif plane.name == HOST_PLANE:
            tid[rows] = ln.id
            _host_line(lane, cat, rows, code, names, d)
            if ln.name.endswith("/NVTX"):  # CUPTI's NVTX ranges of a thread: user annotations
                lane[rows], cat[rows] = _LANE[S.LANE_CPU_ANNOTATION], _CAT[S.CAT_USER_ANNOTATION]
        else:  # /host:metadata, Task Environment, a custom plane: kept as host rows of no thread
            tid[rows] = ln.id
    corr = d.ints[M.CORRELATION]
    # one category per distinct name (the decoder keeps a name twice when two XLA categories share it)
    uniq, inverse = np.unique(np.array(d.names, dtype=object), return_inverse=True)
    name_code = inverse.reshape(-1).astype(np.int64)[d.name] if n else np.zeros(0, np.int64)
    events = pd.DataFrame({
        "trace": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([shown_path(path)])),
        "rank": np.zeros(n, dtype=np.int32),
        "lane": pd.Categorical.from_codes(lane, categories=pd.Index(list(S.LANES))),
        "device": device, "stream": stream,
        "pid": np.full(n, S.NO_ID, dtype=np.int64), "tid": tid,
        "name": pd.Categorical.from_codes(name_code, categories=pd.Index(uniq, dtype=object)),
        "category": pd.Categorical.from_codes(cat, categories=pd.Index(list(S.CATEGORIES))),
        "raw_category": pd.Categorical.from_codes(raw, categories=pd.Index(list(kinds) or ["line"])),
        "start_ns": d.start_ns.astype(np.int64), "end_ns": d.end_ns.astype(np.int64),
        "correlation": corr.astype(np.int64),
        "external_id": np.full(n, S.NO_ID, dtype=np.int64),
    })
    side = _side(d, lane, names)
    return events, side


def _sorted(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def _flag(d: M.Decoded, stat: str) -> np.ndarray:
    """Per event: whether it carries the text stat ``stat``."""
    out = np.zeros(d.n, dtype=bool)
    if stat in d.texts:
        out[d.texts[stat].rows] = True
        out[d.texts[stat].ref_rows] = True
    return out


def _device_line(lane: np.ndarray, cat: np.ndarray, rows: np.ndarray, code: np.ndarray, names: _Names,
                 kind: str, line_name: str, details: tuple[np.ndarray, np.ndarray], work: bool) -> None:
    if work and not (kind == "TPU" and line_name in (TPU_OPS_LINE, ASYNC_OPS_LINE)):
        # the stats decide; a name or the line's kind only where neither stat is there
        copy_details, kernel_details = details[0][rows], details[1][rows]
        is_copy = copy_details | (~kernel_details & (names.copy[code] | ("memcpy" in line_name.lower())))
        is_memset = names.memset[code] & ~is_copy & ~kernel_details
        comm = names.comm_kernel[code] & ~is_copy & ~is_memset
        lane[rows] = np.where(is_copy, _LANE[S.LANE_MEMCPY], np.where(
            is_memset, _LANE[S.LANE_MEMSET], np.where(comm, _LANE[S.LANE_GPU_COMM], _LANE[S.LANE_GPU_COMPUTE])))
        cat[rows] = np.where(is_copy, _CAT[S.CAT_MEMCPY], np.where(is_memset, _CAT[S.CAT_MEMSET], _CAT[S.CAT_KERNEL]))
        return
    if kind == "TPU" and line_name == TPU_OPS_LINE:
        # copy-start/copy-done ops start a DMA and wait for it: the core is moving data, not computing
        coll = names.collective[code]
        copy = names.copy[code] & ~coll
        lane[rows] = np.where(coll, _LANE[S.LANE_GPU_COMM], np.where(copy, _LANE[S.LANE_MEMCPY],
                                                                     _LANE[S.LANE_GPU_COMPUTE]))
        cat[rows] = np.where(copy, _CAT[S.CAT_MEMCPY], _CAT[S.CAT_KERNEL])
        return
    if kind == "TPU" and line_name == ASYNC_OPS_LINE:
        coll = names.collective[code]
        copy = names.copy[code] & ~coll
        lane[rows] = np.where(coll, _LANE[S.LANE_GPU_COMM], np.where(copy, _LANE[S.LANE_MEMCPY],
                                                                     _LANE[S.LANE_GPU_ANNOTATION]))
        cat[rows] = np.where(coll, _CAT[S.CAT_KERNEL], np.where(copy, _CAT[S.CAT_MEMCPY], _CAT[S.CAT_GPU_ANNOTATION]))
        return
    lane[rows] = _LANE[S.LANE_GPU_ANNOTATION]
    cat[rows] = _CAT[S.CAT_GPU_ANNOTATION]


def _host_line(lane: np.ndarray, cat: np.ndarray, rows: np.ndarray, code: np.ndarray, names: _Names,
               d: M.Decoded) -> None:
    runtime, driver = names.runtime[code], names.driver[code]
    step = d.ints[M.STEP_NUM][rows] >= 0
    zero = d.end_ns[rows] == d.start_ns[rows]
    py = names.python[code]
    c = np.full(len(rows), _CAT[S.CAT_CPU_OP], dtype=np.int8)
    c[py] = _CAT[S.CAT_PYTHON]
    c[zero & ~runtime & ~driver] = _CAT[S.CAT_INSTANT]
    c[step] = _CAT[S.CAT_USER_ANNOTATION]
    c[driver] = _CAT[S.CAT_DRIVER]
    c[runtime] = _CAT[S.CAT_RUNTIME]
    lane_rows = np.full(len(rows), _LANE[S.LANE_CPU_THREAD], dtype=np.int8)
    lane_rows[c == _CAT[S.CAT_INSTANT]] = _LANE[S.LANE_INSTANT]
    lane_rows[c == _CAT[S.CAT_USER_ANNOTATION]] = _LANE[S.LANE_CPU_ANNOTATION]
    lane[rows], cat[rows] = lane_rows, c


_SIZE = re.compile(r"\bsize:(\d{1,18})\b")
_KIND = re.compile(r"\bkind:(\w+)")
_KIND_NAMES = {"hosttodevice": "HtoD", "devicetohost": "DtoH", "devicetodevice": "DtoD", "peertopeer": "PtoP",
               "hosttohost": "HtoH", "h2d": "HtoD", "d2h": "DtoH", "d2d": "DtoD", "p2p": "PtoP"}
_NAME_KIND = re.compile(r"(HostToDevice|DeviceToHost|DeviceToDevice|PeerToPeer|H2D|D2H|D2D|P2P|HtoD|DtoH|DtoD)", re.I)


def _copy_kind(detail: str, name: str) -> str:
    m = _KIND.search(detail)
    k = _KIND_NAMES.get(m.group(1).lower(), "") if m else ""
    if not k:
        n = _NAME_KIND.search(name)
        k = _KIND_NAMES.get(n.group(1).lower(), n.group(1)) if n else ""
    return k


def _side(d: M.Decoded, lane: np.ndarray, names: _Names) -> dict[str, pd.DataFrame]:
    """copy_args for the copy rows (bytes and kind from ``memcpy_details`` or the name)."""
    copy_rows = np.flatnonzero(lane == _LANE[S.LANE_MEMCPY])
    if not len(copy_rows):
        return {}
    detail = [""] * len(copy_rows)
    if M.MEMCPY_DETAILS in d.texts:
        rows, vals = d.texts[M.MEMCPY_DETAILS].values()
        pos = np.searchsorted(copy_rows, rows)
        ok = (pos < len(copy_rows)) & (copy_rows[np.minimum(pos, len(copy_rows) - 1)] == rows)
        for p, v in zip(pos[ok].tolist(), [v for v, o in zip(vals, ok.tolist(), strict=True) if o], strict=True):
            detail[p] = v
    # one parse per distinct (detail, name code): copies repeat the same few descriptions. A dict, not
    # pd.factorize: older pandas hashes object strings as C strings, so text after a NUL would not count.
    index: dict[tuple[str, int], int] = {}
    codes = np.array([index.setdefault((a, c), len(index)) for a, c in zip(detail, d.name[copy_rows].tolist(),
                                                                           strict=True)], dtype=np.int64)
    size, kind, src, dst = [], [], [], []
    for det, c in index:
        direction, name = d.directions[c], d.names[c]
        m = _SIZE.search(det)
        size.append(int(m.group(1)) if m and int(m.group(1)) > 0 else -1)
        kind.append(direction or _copy_kind(det, name))
        src.append(_memory_kind(_SRC.search(det)))
        dst.append(_memory_kind(_DST.search(det)))
    return {"copy_args": pd.DataFrame({
        "row": copy_rows.astype(np.int64), "bytes": np.array(size, dtype=np.int64)[codes],
        "copy_kind": pd.Categorical(np.array(kind, dtype=object)[codes]),
        "src_kind": pd.Categorical(np.array(src, dtype=object)[codes]),
        "dst_kind": pd.Categorical(np.array(dst, dtype=object)[codes])})}


# CUPTI's memory kinds as XLA's memcpy_details writes them (kind_src:pageable kind_dst:device), named as
# the other loaders name them.
_SRC = re.compile(r"\bkind_src:(\w+)")
_DST = re.compile(r"\bkind_dst:(\w+)")
_MEMORY_KINDS = {"pageable": "Pageable", "pinned": "Pinned", "device": "Device", "array": "Array",
                 "managed": "Managed", "device_static": "Device Static", "managed_static": "Managed Static"}


def _memory_kind(m: re.Match[str] | None) -> str:
    return _MEMORY_KINDS.get(m.group(1).lower(), "") if m else ""


_KV = re.compile(r"\b(regs|static_shared|dynamic_shared|group_mem|grid|block):([0-9,]{1,40})")
_MAX_REGS = 1 << 16  # registers per thread above this are no count (an uninitialised field: ROCm writes 2^31)


def _dims(text: str | None) -> tuple[int, int, int]:
    parts = (text or "").split(",")
    if len(parts) != 3 or not all(p.isdigit() and len(p) < 12 for p in parts):
        return -1, -1, -1
    return int(parts[0]), int(parts[1]), int(parts[2])


def kernel_args(texts: M.Texts | None, kernel_rows: np.ndarray) -> pd.DataFrame:
    """The ``kernel_args`` side table of ``kernel_rows`` from their ``kernel_details`` stat
    (``regs:32 static_shared:0 dynamic_shared:0 grid:8,1,1 block:128,1,1``); -1 where it says nothing."""
    cols = list(S.SIDE_TABLES["kernel_args"])
    rows, vals = texts.values() if texts is not None else (np.zeros(0, np.int64), [])
    keep = np.isin(rows, kernel_rows)
    rows = rows[keep]
    vals = [v for v, k in zip(vals, keep.tolist(), strict=True) if k]
    seen: dict[str, int] = {}  # a dict, not pd.factorize: see _side
    codes = np.array([seen.setdefault(v, len(seen)) for v in vals], dtype=np.int64)
    uniq = list(seen)
    table = np.full((len(uniq), len(cols) - 1), -1, dtype=np.int64)
    for i, text in enumerate(uniq):  # one parse per distinct launch configuration
        kv = dict(_KV.findall(text))
        table[i, 0:3] = _dims(kv.get("grid"))
        table[i, 3:6] = _dims(kv.get("block"))
        regs = kv.get("regs", "")
        table[i, 6] = int(regs) if regs.isdigit() and int(regs) <= _MAX_REGS else -1
        shared = [int(kv[k]) for k in ("static_shared", "dynamic_shared", "group_mem") if kv.get(k, "").isdigit()]
        table[i, 7] = sum(shared) if shared else -1
    out = {"row": rows.astype(np.int64)}
    for j, c in enumerate(cols[1:]):
        out[c] = table[codes, j] if len(codes) else np.zeros(0, np.int64)
    return pd.DataFrame(out)
