"""Low-level reading of an Nsight Systems SQLite export: open read-only, find tables and columns,
fetch integer columns in bulk into numpy, decode strings, read version/time/device metadata.

Nothing here loops per row in Python: integer columns come out of SQLite through
``np.fromiter(chain.from_iterable(cursor))``, several small fields packed into one int64 in SQL
(measured against pandas.read_sql, fetchall into an array, and hex text built by SQLite, which
was no faster: scripts/bench_nsys.py ``--fetch``); text columns are decoded once per distinct value.
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from traceread.errors import TraceReadError

# Parallel reader threads for big tables (more than ~4 gains little: the int conversion holds the GIL).
READERS = min(4, os.cpu_count() or 1)
PARALLEL_MIN_ROWS = 200_000
PID_SHIFT = 24
ID_MASK = 0xFFFFFF  # pids and tids are 24-bit fields of globalTid/globalPid (B.3)
# Tables whose presence marks a file as an nsys export.
_NSYS_MARKERS = ("META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME",
                 "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API",
                 "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "PROCESSES", "ThreadNames")


def decode(b: bytes | str | None) -> str:
    """Text as stored; bytes that are not UTF-8 (Windows exports) decoded with replacement."""
    if b is None:
        return ""
    if isinstance(b, str):
        return b
    return b.decode("utf-8", "replace")


@dataclass
class Export:
    """An open export: connection, table -> column names, and the string table."""

    path: str
    conn: sqlite3.Connection
    columns: dict[str, list[str]] = field(default_factory=dict)
    notnull: dict[str, set[str]] = field(default_factory=dict)  # columns declared NOT NULL
    _strings: tuple[np.ndarray, np.ndarray] | None = None

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        return cols is not None and (column is None or column in cols)

    def first(self, table: str, *candidates: str) -> str | None:
        """The first of ``candidates`` that the table has (columns vary by version)."""
        return next((c for c in candidates if self.has(table, c)), None)

    def ints(self, table: str, exprs: dict[str, str], where: str = "") -> dict[str, np.ndarray]:
        """Integer columns in bulk: ``exprs`` maps output name -> SQL expression (NULL becomes -1).

        Cost grows with each value handed to Python (an int object each), so callers pack several
        small fields into one int64 in SQL (:meth:`packed`) and split them with :func:`unpack`.
        """
        names = list(exprs)
        # COALESCE only where NULL can occur: every extra opcode per row shows at 10M rows.
        safe = self.notnull.get(table, set())
        sel = [e if isinstance(e, Sql) or e in safe else f"COALESCE({e}, -1)" for e in exprs.values()]
        sql = f"SELECT {', '.join(sel)} FROM {table} {where}"
        ranges = self._rowid_ranges(table)
        if len(ranges) < 2:
            flat = _fetch(self.conn, sql, ())
        else:
            # Rowid slices in parallel, one connection each: SQLite releases the GIL while it
            # decodes records, so the slices overlap on other cores (rows stay in table order).
            glue = "AND" if where else "WHERE"
            part_sql = f"{sql} {glue} rowid > ? AND rowid <= ?"
            clones = [self.clone() for _ in ranges]
            try:
                with ThreadPoolExecutor(max_workers=len(ranges)) as pool:
                    parts = list(pool.map(lambda cr: _fetch(cr[0].conn, part_sql, cr[1]), zip(clones, ranges,
                                                                                             strict=True)))
            finally:
                for c in clones:
                    c.conn.close()
            flat = np.concatenate(parts)
        arr = flat.reshape(-1, len(names))
        return {name: np.ascontiguousarray(arr[:, i]) for i, name in enumerate(names)}

    def _rowid_ranges(self, table: str) -> list[tuple[int, int]]:
        """(lo, hi] rowid slices for a parallel scan; one slice for small tables."""
        lo, hi = self.conn.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {table}").fetchone()
        if lo is None or hi - lo < PARALLEL_MIN_ROWS or READERS < 2:
            return [(lo or 0, hi or 0)]
        edges = np.linspace(lo - 1, hi, READERS + 1).astype(np.int64)
        return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]

    def packed(self, table: str, *fields: tuple) -> Sql:
        """SQL packing fields ``(expr, bits[, mask])`` into one int64, first field in the low bits.

        A missing column (None) or NULL packs as 0. Fields are not masked unless asked: the widths
        callers give hold CUDA's limits (stream/correlation ids are uint32, grid y/z <= 65535,
        block dims <= 1024), and :func:`unpack` masks on the way out.
        """
        safe = self.notnull.get(table, set())
        parts, shift = [], 0
        for expr, bits, *mask in fields:
            if expr is not None:
                e = expr if expr in safe else f"COALESCE({expr}, 0)"
                if mask and mask[0]:
                    e = f"({e} & {(1 << bits) - 1})"
                parts.append(f"({e} << {shift})" if shift else e)
            shift += bits
        assert shift <= 63, "packed fields overflow int64"
        return Sql(" | ".join(parts) if parts else "0")

    def clone(self) -> Export:
        """Another read-only connection to the same file (one per reader thread), strings shared."""
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.text_factory = bytes
        return Export(path=self.path, conn=conn, columns=self.columns, notnull=self.notnull,
                      _strings=self.strings)

    @property
    def strings(self) -> tuple[np.ndarray, np.ndarray]:
        """StringIds as (sorted ids, values); trimmed exports leave the ids sparse."""
        if self._strings is None:
            rows = self.conn.execute("SELECT id, value FROM StringIds").fetchall() if self.has("StringIds") else []
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            vals = np.array([decode(r[1]) for r in rows] + [""], dtype=object)[:-1]  # once per string
            order = np.argsort(ids, kind="stable")
            self._strings = (ids[order], vals[order])
        return self._strings

    def string_of(self, ids: np.ndarray) -> np.ndarray:
        """The strings of ``ids`` ('' for ids StringIds does not have)."""
        keys, vals = self.strings
        out = np.full(len(ids), "", dtype=object)
        if len(keys):
            pos = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
            ok = keys[pos] == ids
            out[ok] = vals[pos[ok]]
        return out

    def meta_rows(self) -> dict[str, str]:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(table):
                return {decode(k): decode(v) for k, v in self.conn.execute(f"SELECT name, value FROM {table}")}
        return {}


def _fetch(conn: sqlite3.Connection, sql: str, args: tuple) -> np.ndarray:
    # No COUNT(*) first: it would scan the table once more; fromiter grows its buffer instead.
    return np.fromiter(itertools.chain.from_iterable(conn.execute(sql, args)), dtype=np.int64)


class Sql(str):
    """An SQL expression that never yields NULL (so :meth:`Export.ints` need not wrap it)."""


def unpack(v: np.ndarray, *bits: int) -> list[np.ndarray]:
    """Inverse of :meth:`Export.packed`: the fields, low bits first."""
    out, shift = [], 0
    for b in bits:
        out.append((v >> shift) & ((1 << b) - 1))
        shift += b
    return out


def open_export(path: str) -> Export:
    """Open ``path`` read-only and check it is an nsys export; one-line TraceReadError otherwise."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.text_factory = bytes  # decode ourselves, with replacement, once per distinct string
        tables = [decode(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except sqlite3.DatabaseError as exc:
        raise TraceReadError(path, f"not a readable SQLite database ({exc})") from None
    if "StringIds" not in tables or not any(t in tables for t in _NSYS_MARKERS):
        conn.close()
        raise TraceReadError(path, "SQLite file is not an Nsight Systems export (no StringIds or nsys tables)")
    ex = Export(path=path, conn=conn)
    for t in tables:
        if re.fullmatch(r"[A-Za-z0-9_]+", t):
            info = conn.execute(f"PRAGMA table_info({t})").fetchall()
            ex.columns[t] = [decode(r[1]) for r in info]
            ex.notnull[t] = {decode(r[1]) for r in info if r[3]}
    # Newer exports may suffix NVTX_EVENTS (unverified claim, B.6): accept the first such table.
    if "NVTX_EVENTS" not in ex.columns:
        alt = sorted(t for t in ex.columns if t.startswith("NVTX_EVENTS"))
        if alt:
            ex.columns["NVTX_EVENTS"] = ex.columns[alt[0]]
            ex.notnull["NVTX_EVENTS"] = ex.notnull[alt[0]]
            ex.columns["__nvtx_table"] = [alt[0]]
    return ex


def nvtx_table(ex: Export) -> str:
    return ex.columns.get("__nvtx_table", ["NVTX_EVENTS"])[0]


def split_global(gid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pid, tid) from serialized globalTid/globalPid: pid = bits 24-47, tid = bits 0-23."""
    return (gid >> PID_SHIFT) & ID_MASK, gid & ID_MASK


@dataclass
class GpuRow:
    gpu_id: int
    cuda_id: int
    name: str
    sm_count: int | None
    memory_bytes: int | None
    cc: str | None
    pid: int | None = None  # when the row is per process (2021 TARGET_INFO_CUDA_GPU)


def gpu_rows(ex: Export) -> tuple[list[GpuRow], dict[tuple[int, int], int]]:
    """GPU descriptions and the (pid, cuda device id) -> gpu id map (TARGET_INFO_CUDA_DEVICE)."""
    rows: list[GpuRow] = []
    if ex.has("TARGET_INFO_GPU"):
        cols = ex.columns["TARGET_INFO_GPU"]
        want = [c for c in ("id", "name", "cuDevice", "smCount", "totalMemory", "computeMajor", "computeMinor")
                if c in cols]
        for r in ex.conn.execute(f"SELECT {', '.join(want)} FROM TARGET_INFO_GPU"):
            d = dict(zip(want, r, strict=True))
            gid = int(d.get("id") or 0)
            cc = f"{d['computeMajor']}.{d['computeMinor']}" if d.get("computeMajor") is not None else None
            cu = d.get("cuDevice")
            rows.append(GpuRow(gid, int(cu) if cu is not None else gid, decode(d.get("name")),
                               d.get("smCount"), d.get("totalMemory"), cc))
    elif ex.has("TARGET_INFO_CUDA_GPU"):  # 2021 exports: one row per (process, device)
        cols = ex.columns["TARGET_INFO_CUDA_GPU"]
        want = [c for c in ("deviceId", "name", "numMultiprocessors", "globalMemorySize",
                            "computeCapabilityMajor", "computeCapabilityMinor", "pid") if c in cols]
        for r in ex.conn.execute(f"SELECT {', '.join(want)} FROM TARGET_INFO_CUDA_GPU"):
            d = dict(zip(want, r, strict=True))
            dev = int(d.get("deviceId") or 0)
            cc = (f"{d['computeCapabilityMajor']}.{d['computeCapabilityMinor']}"
                  if d.get("computeCapabilityMajor") is not None else None)
            rows.append(GpuRow(dev, dev, decode(d.get("name")), d.get("numMultiprocessors"),
                               d.get("globalMemorySize"), cc, d.get("pid")))
    mapping: dict[tuple[int, int], int] = {}
    if ex.has("TARGET_INFO_CUDA_DEVICE", "cudaId") and ex.has("TARGET_INFO_CUDA_DEVICE", "pid"):
        gcol = "gpuId" if ex.has("TARGET_INFO_CUDA_DEVICE", "gpuId") else "cudaId"
        for gpu, cuda, pid in ex.conn.execute(f"SELECT {gcol}, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE"):
            if cuda is not None and pid is not None:
                mapping[(int(pid), int(cuda))] = int(gpu) if gpu is not None else int(cuda)
    return rows, mapping
