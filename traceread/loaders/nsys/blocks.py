"""One function per nsys table: read it in bulk and return its event rows as a :class:`Table`.

A Table is a source table's rows as a sequence of :class:`Block` parts (numpy columns, rows in the
export's order) plus how its name keys become names. The two tables that grow with the run
(kernels, runtime calls) are read in row chunks, one part per chunk, so the loader never holds a
whole table beside the frame; the others are read whole, as one part. Names travel as integer
keys (string ids, packed kinds) and are turned into strings once per distinct key.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.kernel_classes import is_communication
from traceread.loaders.nsys.read import Export, decode, nvtx_table, split_global, unpack

K = "CUPTI_ACTIVITY_KIND_"
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND = 34, 59, 60
NO_STREAM = 4294967295
# Hard-coded fallbacks for exports without ENUM tables (values checked against 2022-2026 data, B.4).
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}
_COPY_BY_SYMBOL = {v.upper().replace(" ", "_"): v for v in COPY_KINDS.values()}
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
# Sync kind from the correlated API call (syncType numbering changed across versions, B.4).
SYNC_BY_API = {"cudaStreamSynchronize": "Stream Sync", "cuStreamSynchronize": "Stream Sync",
               "cudaEventSynchronize": "Event Sync", "cuEventSynchronize": "Event Sync",
               "cudaStreamWaitEvent": "Stream Wait Event", "cuStreamWaitEvent": "Stream Wait Event",
               "cudaDeviceSynchronize": "Context Sync", "cuCtxSynchronize": "Context Sync"}
SYNC_BY_ENUM = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_API_SUFFIX = re.compile(r"_v\d+$")
# emit_nvtx appends these to the op name; the first one present starts the suffix.
NVTX_SUFFIXES = (", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = ", ", stashed seq=", ", seq=")
# record_function / framework ranges: annotations even when emit_nvtx suffixed them.
_ANNOTATION = re.compile(r"^(ProfilerStep#\d+|enumerate\(DataLoader\)#|Optimizer\.(step|zero_grad)#|##.*##$|"
                         r"(nccl|gloo|mpi|ucc|xccl):|FSDP::|DistributedDataParallel\.|"
                         r"torch/|<built-in|PyTorch Profiler)")


@dataclass
class Block:
    raw: str  # source table
    lane: np.ndarray  # int8 codes into schema.LANES
    category: np.ndarray  # int8 codes into schema.CATEGORIES
    names: np.ndarray  # object array of distinct names
    name_code: np.ndarray
    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    side: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # side table -> columns (no row)

    def __len__(self) -> int:
        return len(self.start)


# Sorted distinct name keys of a table -> (the table's names, the index into them of each key).
NameMap = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class Table:
    """A source table's event rows: ``parts`` (Blocks whose ``name_code`` holds name keys, their
    ``names`` unused) and ``names``, which maps the keys seen to the table's names."""

    raw: str
    parts: Iterable[Block]
    names: NameMap


def whole(block: Block | None) -> Table | None:
    """A table read whole: one part whose name codes index its own names."""
    if block is None:
        return None
    return Table(block.raw, [block], lambda keys: (block.names, keys))


@dataclass
class RuntimeRows:
    """The runtime calls as the frame holds them (what :func:`syncs` links to)."""

    pid: np.ndarray
    correlation: np.ndarray
    name_code: np.ndarray
    names: np.ndarray


def _code(values: tuple[str, ...], v: str) -> int:
    return values.index(v)


def _full(n: int, v: int, dtype=np.int64) -> np.ndarray:
    return np.full(n, v, dtype=dtype)


def _names_from_ids(ex: Export, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(ids, return_inverse=True)
    return ex.string_of(uniq), inv.astype(np.int64)


def _pid(gid: np.ndarray) -> np.ndarray:
    pid, _ = split_global(gid)
    return np.where(gid < 0, S.NO_ID, pid)


def _gpu_block(ex: Export, table: str, c: dict[str, np.ndarray], names: np.ndarray, code: np.ndarray,
               lane: np.ndarray | int, cat: int, side: dict | None = None) -> Block:
    n = len(c["start"])
    stream = np.where(c["streamId"] == NO_STREAM, S.NO_ID, c["streamId"])
    return Block(raw=table, lane=np.broadcast_to(np.asarray(lane, dtype=np.int8), (n,)).copy(),
                 category=_full(n, cat, np.int8), names=names, name_code=code, start=c["start"],
                 end=np.maximum(c["end"], c["start"]), pid=_pid(c["globalPid"]), tid=stream,
                 device=c["deviceId"], stream=stream, correlation=c["correlationId"], side=side or {})


# A kernel's deviceId packs into 31 bits: one outside 0..DEVICE_LABEL-1 (a damaged or hostile export)
# becomes DEVICE_LABEL, never a wrapped id that names another device; the frame writer labels the other
# tables' out-of-range ids the same way and the loader notes it (limits.py's integer policy).
DEVICE_LABEL = (1 << 31) - 1
DEVICE_IN_RANGE = (f"(CASE WHEN deviceId IS NULL THEN 0 WHEN deviceId BETWEEN 0 AND {DEVICE_LABEL - 1} "
                   f"THEN deviceId ELSE {DEVICE_LABEL} END)")

_GPU_COLS = {"start": "start", "end": "end", "deviceId": "deviceId", "streamId": "streamId",
             "correlationId": "correlationId", "globalPid": "globalPid"}


def _kernel_arg_exprs(ex: Export, t: str) -> dict[str, str]:
    f, pk = ex.first, ex.packed
    return {"grid": pk(t, (f(t, "gridX"), 31), (f(t, "gridY"), 16), (f(t, "gridZ"), 16)),
            "block": pk(t, (f(t, "blockX"), 11), (f(t, "blockY"), 11), (f(t, "blockZ"), 11)),
            "regs_shm": pk(t, (f(t, "registersPerThread"), 16), (f(t, "staticSharedMemory"), 23),
                           (f(t, "dynamicSharedMemory"), 23))}


def _kernel_args(ex: Export, t: str, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Side-table columns of a chunk of kernel rows (all -1 where the export has no launch config)."""
    if not ex.has(t, "gridX"):
        return {k: np.full(len(c["grid"]), S.NO_ID) for k in S.SIDE_TABLES["kernel_args"] if k != "row"}
    gx, gy, gz = unpack(c["grid"], 31, 16, 16)
    bx, by, bz = unpack(c["block"], 11, 11, 11)
    regs, ssm, dsm = unpack(c["regs_shm"], 16, 23, 23)
    return {"grid_x": gx, "grid_y": gy, "grid_z": gz, "block_x": bx, "block_y": by, "block_z": bz,
            "registers": regs, "shared_mem_bytes": ssm + dsm}


def kernels(ex: Export, with_args: bool = True) -> Table | None:
    """Kernel rows; their launch configuration (side table ``kernel_args``) too when ``with_args``
    (else :func:`kernel_args` reads it later, on its own)."""
    t = K + "KERNEL"
    if not ex.has(t):
        return None
    f = ex.first
    # Packed in SQL (5 values per row instead of 9, 8 instead of 17 with the launch configuration);
    # widths cover CUDA's limits.
    pk = ex.packed
    exprs = {
        "start": "start", "end": "end",
        "dev_stream": pk(t, ("streamId", 32), (DEVICE_IN_RANGE, 31)),
        "pid_corr": pk(t, ("correlationId", 32), ("(globalPid >> 24)", 24, True)),
        "names": pk(t, (f(t, "demangledName"), 31), (f(t, "shortName"), 31)),
        **(_kernel_arg_exprs(ex, t) if with_args else {}),
    }
    lanes = np.array([_code(S.LANES, S.LANE_GPU_COMPUTE), _code(S.LANES, S.LANE_GPU_COMM)], dtype=np.int8)

    def part(c: dict[str, np.ndarray]) -> Block:
        stream, device = unpack(c["dev_stream"], 32, 31)
        corr, pid = unpack(c["pid_corr"], 32, 24)
        demangled, short = unpack(c["names"], 31, 31)
        # Prefer the demangled name (what Kineto shows); fall back to shortName where it is empty.
        # Distinct ids by hashing (pd.factorize), not sorting: only the row -> distinct map is used.
        dinv, ud = pd.factorize(demangled)
        named = ex.string_of(ud) != ""
        if named.all():  # the usual case: the demangled ids are the keys, already factorized
            key, kinv, uk = demangled, dinv, ud
        else:
            key = np.where(named[dinv], demangled, short)
            kinv, uk = pd.factorize(key)
        comm = is_communication(ex.string_of(uk)) if len(uk) else np.zeros(0, dtype=bool)
        cols = {"start": c["start"], "end": c["end"], "deviceId": device, "streamId": stream, "correlationId": corr,
                "globalPid": pid << 24}
        side = {"kernel_args": _kernel_args(ex, t, c)} if with_args else {}
        return _gpu_block(ex, t, cols, _NO_NAMES, key, lanes[comm.astype(np.int8)][kinv],
                          _code(S.CATEGORIES, S.CAT_KERNEL), side)

    return Table(t, (part(c) for c in ex.chunks(t, exprs)), lambda keys: (ex.string_of(keys), np.arange(len(keys))))


def kernel_args(ex: Export, rows: int) -> pd.DataFrame:
    """The ``kernel_args`` side table of the kernel rows, read on its own: the kernels are the
    frame's first ``rows`` rows, in table order (as :func:`kernels` reads them)."""
    t = K + "KERNEL"
    spec = S.SIDE_TABLES["kernel_args"]
    out = {c: np.empty(rows, dtype=np.int64) for c in spec}
    out["row"][:] = np.arange(rows, dtype=np.int64)
    at = 0
    for c in ex.chunks(t, _kernel_arg_exprs(ex, t)):
        n = len(c["grid"])
        if at + n > rows:
            raise TraceReadError(ex.path, "kernel table has more rows than when it was loaded")
        for name, v in _kernel_args(ex, t, c).items():
            out[name][at:at + n] = v
        at += n
    if at != rows:
        raise TraceReadError(ex.path, "kernel table has fewer rows than when it was loaded")
    return pd.DataFrame(out, copy=False)


_NO_NAMES = np.zeros(0, dtype=object)


def _enum(ex: Export, table: str, column: str) -> dict[int, str]:
    if not ex.has(table, column):
        return {}
    return {int(i): decode(v) for i, v in ex.conn.execute(f"SELECT id, {column} FROM {table}") if i is not None}


def copies(ex: Export) -> list[Block]:
    out = []
    mem = _enum(ex, "ENUM_CUDA_MEM_KIND", "label") or MEM_KINDS
    sym = _enum(ex, "ENUM_CUDA_MEMCPY_OPER", "name")
    kinds = {i: _COPY_BY_SYMBOL.get(s.removeprefix("CUDA_MEMCPY_KIND_"), COPY_KINDS.get(i, "Unknown"))
             for i, s in sym.items()} or COPY_KINDS
    t = K + "MEMCPY"
    if ex.has(t):
        c = ex.ints(t, {**_GPU_COLS, "bytes": "bytes", "kind": ex.first(t, "copyKind") or "NULL",
                        "src": ex.first(t, "srcKind") or "NULL", "dst": ex.first(t, "dstKind") or "NULL"})
        key = (c["kind"] + 1) * 1_000_000 + (c["src"] + 1) * 1000 + (c["dst"] + 1)
        uk, code = np.unique(key, return_inverse=True)
        kk, ks, kd = uk // 1_000_000 - 1, uk // 1000 % 1000 - 1, uk % 1000 - 1
        ck = np.array([kinds.get(int(k), "Unknown") for k in kk], dtype=object)
        sk = np.array([mem.get(int(k), "Unknown") for k in ks], dtype=object)
        dk = np.array([mem.get(int(k), "Unknown") for k in kd], dtype=object)
        names = np.array([f"Memcpy {a} ({b} -> {d})" for a, b, d in zip(ck, sk, dk, strict=True)], dtype=object)
        side = {"copy_args": {"bytes": c["bytes"], "copy_kind": ck[code], "src_kind": sk[code],
                              "dst_kind": dk[code]}}
        out.append(_gpu_block(ex, t, c, names, code.astype(np.int64), _code(S.LANES, S.LANE_MEMCPY),
                              _code(S.CATEGORIES, S.CAT_MEMCPY), side))
    t = K + "MEMSET"
    if ex.has(t):
        c = ex.ints(t, {**_GPU_COLS, "bytes": "bytes", "mem": ex.first(t, "memKind") or "NULL"})
        um, code = np.unique(c["mem"], return_inverse=True)
        dk = np.array([mem.get(int(k), "Unknown") for k in um], dtype=object)
        names = np.array([f"Memset ({d})" for d in dk], dtype=object)
        n = len(code)
        side = {"copy_args": {"bytes": c["bytes"], "copy_kind": np.full(n, "", dtype=object),
                              "src_kind": np.full(n, "", dtype=object), "dst_kind": dk[code]}}
        out.append(_gpu_block(ex, t, c, names, code.astype(np.int64), _code(S.LANES, S.LANE_MEMSET),
                              _code(S.CATEGORIES, S.CAT_MEMSET), side))
    return out


def runtime(ex: Export) -> Table | None:
    t = K + "RUNTIME"
    if not ex.has(t):
        return None
    # eventClass 67 rows duplicate calls that carry a CUDA backtrace (2021 exports): skip them.
    exprs = {"start": "start", "end": "end",
             "cls_pid_name": ex.packed(t, ("nameId", 32), ("(globalTid >> 24)", 24, True), ("eventClass", 1)),
             "tid_corr": ex.packed(t, ("correlationId", 32), ("globalTid", 24, True))}
    cats = np.array([_code(S.CATEGORIES, S.CAT_RUNTIME), _code(S.CATEGORIES, S.CAT_DRIVER)], dtype=np.int8)

    def part(c: dict[str, np.ndarray]) -> Block:
        name_id, pid, cls = unpack(c["cls_pid_name"], 32, 24, 1)
        corr, tid = unpack(c["tid_corr"], 32, 24)
        n = len(name_id)
        return Block(raw=t, lane=_full(n, _code(S.LANES, S.LANE_CPU_THREAD), np.int8), category=cats[cls],
                     names=_NO_NAMES, name_code=name_id, start=c["start"], end=np.maximum(c["end"], c["start"]),
                     pid=pid, tid=tid, device=_full(n, S.NO_ID), stream=_full(n, S.NO_ID), correlation=corr)

    def names(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stripped = np.array([_API_SUFFIX.sub("", s) for s in ex.string_of(keys)], dtype=object)
        uniq, remap = np.unique(stripped, return_inverse=True)
        return uniq, remap

    return Table(t, (part(c) for c in ex.chunks(t, exprs, where="WHERE eventClass IN (0, 1)")), names)


def syncs(ex: Export, rt: RuntimeRows | None) -> Block | None:
    t = K + "SYNCHRONIZATION"
    if not ex.has(t):
        return None
    c = ex.ints(t, {**_GPU_COLS, "type": ex.first(t, "syncType") or "NULL"})
    label = np.array([SYNC_BY_ENUM.get(int(v), "Sync") for v in range(5)] + ["Sync"], dtype=object)
    names_row = label[np.clip(c["type"], 0, 5)]
    if rt is not None and len(rt.pid) and len(names_row):
        key = (_pid(c["globalPid"]) << 32) | (c["correlationId"] & 0xFFFFFFFF)
        key_rt = (rt.pid << 32) | (rt.correlation & 0xFFFFFFFF)
        # Only the runtime rows sharing a sync record's key can match: sort those, not all calls.
        cand = np.flatnonzero(np.isin(key_rt, key))
        if len(cand):
            sync_api = np.array([SYNC_BY_API.get(s, "") for s in rt.names], dtype=object)
            order = cand[np.argsort(key_rt[cand], kind="stable")]
            key_sorted = key_rt[order]
            pos = np.clip(np.searchsorted(key_sorted, key), 0, len(key_sorted) - 1)
            hit = key_sorted[pos] == key
            api = np.where(hit, sync_api[rt.name_code[order[pos]]], "")
            names_row = np.where(api != "", api, names_row)
    names, code = np.unique(names_row.astype(str), return_inverse=True)
    return _gpu_block(ex, t, c, names.astype(object), code.astype(np.int64), _code(S.LANES, S.LANE_GPU_SYNC),
                      _code(S.CATEGORIES, S.CAT_SYNC))


def graphs(ex: Export) -> Block | None:
    t = K + "GRAPH_TRACE"
    if not ex.has(t):
        return None
    c = ex.ints(t, {**_GPU_COLS, "graph": ex.first(t, "graphId") or "NULL"},
                where="WHERE NOT (start = 0 AND end = 0)")  # 0/0: CUPTI could not time the graph
    ug, code = np.unique(c["graph"], return_inverse=True)
    names = np.array([f"CUDA graph {int(g)}" for g in ug], dtype=object)
    return _gpu_block(ex, t, c, names, code.astype(np.int64), _code(S.LANES, S.LANE_GPU_COMPUTE),
                      _code(S.CATEGORIES, S.CAT_GRAPH))


def osrt(ex: Export) -> Block | None:
    if not ex.has("OSRT_API"):
        return None
    c = ex.ints("OSRT_API", {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId"})
    names, code = _names_from_ids(ex, c["name"])
    n = len(code)
    pid, tid = split_global(c["gtid"])
    return Block(raw="OSRT_API", lane=_full(n, _code(S.LANES, S.LANE_CPU_THREAD), np.int8),
                 category=_full(n, _code(S.CATEGORIES, S.CAT_OS_RUNTIME), np.int8), names=names, name_code=code,
                 start=c["start"], end=np.maximum(c["end"], c["start"]), pid=pid, tid=tid,
                 device=_full(n, S.NO_ID), stream=_full(n, S.NO_ID), correlation=_full(n, S.NO_ID))


def _strip_sql(col: str) -> str:
    """SQL expression: ``col`` cut at the first emit_nvtx suffix (done in SQLite's C, not per row here)."""
    expr = col
    for suf in reversed(NVTX_SUFFIXES):
        expr = f"CASE WHEN instr({col}, '{suf}') > 0 THEN substr({col}, 1, instr({col}, '{suf}') - 1) ELSE {expr} END"
    return expr


def nvtx(ex: Export) -> Block | None:
    """NVTX marks (34) and ranges (59 push/pop, 60 start/end). Unclosed ranges (NULL end) are skipped."""
    table = nvtx_table(ex)
    if not ex.has("NVTX_EVENTS"):
        return None
    where = (f"WHERE eventType IN ({NVTX_MARK}, {NVTX_PUSHPOP}, {NVTX_STARTEND}) "
             f"AND (end IS NOT NULL OR eventType = {NVTX_MARK})")
    has_text = ex.has("NVTX_EVENTS", "text")
    suffixed = " OR ".join(f"instr(text, '{s}') > 0" for s in NVTX_SUFFIXES) if has_text else "0"
    c = ex.ints(table, {"start": "start", "end": "end", "type": "eventType", "gtid": "globalTid",
                        "text_id": "textId" if ex.has("NVTX_EVENTS", "textId") else "NULL",
                        "domain": "domainId" if ex.has("NVTX_EVENTS", "domainId") else "NULL",
                        "suffixed": f"({suffixed})"}, where=where)
    n = len(c["start"])
    if has_text:
        cur = ex.conn.execute(f"SELECT {_strip_sql('text')} FROM {table} {where}")
        raw = np.fromiter(itertools.chain.from_iterable(cur), dtype=object, count=n)  # same rows as c
        tcode, tuniq = pd.factorize(raw, use_na_sentinel=True)
        tnames = np.array([decode(b) for b in tuniq], dtype=object)
    else:
        tcode, tnames = np.full(n, -1, dtype=np.int64), np.zeros(0, dtype=object)
    # Registered strings (textId: NCCL's domain, MPI wrappers) where there is no explicit text.
    id_names, id_code = _names_from_ids(ex, np.where(tcode < 0, c["text_id"], -1))
    id_names = np.array([_strip(s) for s in id_names], dtype=object)
    all_names = np.concatenate([tnames, id_names])
    code = np.where(tcode >= 0, tcode, len(tnames) + id_code)
    names, remap = np.unique(all_names.astype(str), return_inverse=True) if len(all_names) else (all_names, code)
    code = remap[code].astype(np.int64) if len(all_names) else code
    annot = np.array([bool(_ANNOTATION.match(s)) for s in names], dtype=bool)
    is_op = (c["suffixed"] == 1) & (c["domain"] <= 0) & ~(annot[code] if len(names) else False)
    is_mark = c["type"] == NVTX_MARK
    lane = np.where(is_mark, _code(S.LANES, S.LANE_INSTANT),
                    np.where(is_op, _code(S.LANES, S.LANE_CPU_THREAD), _code(S.LANES, S.LANE_CPU_ANNOTATION)))
    cat = np.where(is_mark, _code(S.CATEGORIES, S.CAT_INSTANT),
                   np.where(is_op, _code(S.CATEGORIES, S.CAT_CPU_OP), _code(S.CATEGORIES, S.CAT_USER_ANNOTATION)))
    end = np.where(is_mark | (c["end"] < c["start"]), c["start"], c["end"])
    pid, tid = split_global(c["gtid"])
    return Block(raw=table, lane=lane.astype(np.int8), category=cat.astype(np.int8), names=names.astype(object),
                 name_code=code, start=c["start"], end=end, pid=pid, tid=tid, device=_full(n, S.NO_ID),
                 stream=_full(n, S.NO_ID), correlation=_full(n, S.NO_ID))


def _strip(name: str) -> str:
    cut = [i for i in (name.find(s) for s in NVTX_SUFFIXES) if i >= 0]
    return name[: min(cut)] if cut else name
