"""Low-level reading of an Nsight Systems SQLite export: open read-only, find tables and columns,
fetch integer columns in bulk into numpy, decode strings, read version/time/device metadata.

Nothing here loops per row in Python: integer columns come out of SQLite in rowid chunks, several
small fields packed into one int64 in SQL, read by the compiled reader (:mod:`cread`: SQLite's C
API straight into numpy, the GIL released) or, without it, by ``np.fromiter(chain.from_iterable(
cursor))`` (measured against pandas.read_sql, fetchall into an array, and hex text built by SQLite,
which was no faster: scripts/bench_nsys.py ``--fetch``); text columns are decoded once per distinct
value.
"""

from __future__ import annotations

import collections
import itertools
import os
import re
import shutil
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceread.errors import TraceReadError
from traceread.loaders import sqlite_kind
from traceread.loaders.nsys import cread
from traceread.loaders.parallel import SERIAL, Parallel

# Parallel reader threads for big tables (more than ~4 gains little: the int conversion holds the GIL).
READERS = min(4, os.cpu_count() or 1)
# Rows per read chunk: the loader's working memory beside the frame is a few chunks of packed
# int64s (256k rows x 8 values = 16 MiB each), whatever the table's size. Tests set it small.
CHUNK_ROWS = 1 << 18
_SPARSE_CHECK = 1 << 24  # rowid spans wider than this are counted (16M: seconds of reading anyway)
PID_SHIFT = 24
ID_MASK = 0xFFFFFF  # pids and tids are 24-bit fields of globalTid/globalPid (B.3)
# Tables whose presence marks a file as an nsys export.
NSYS_MARKERS = sqlite_kind.NSYS_MARKERS


def one_line(exc: BaseException) -> str:
    """SQLite's error text on one line: a malformed schema's message quotes its SQL, newlines and all."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


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
    source: str = ""  # the file SQLite reads: ``path``, or a private copy (see open_export)
    copy_dir: tempfile.TemporaryDirectory | None = None
    private: bool = False  # ``source`` is the private copy (a clone has no copy_dir of its own)
    _spans: dict[str, tuple[int, int, int | None] | None] = field(default_factory=dict)
    # The compiled reader's own connection (cread.connect), opened on first use; False: none to be had.
    _cconn: object | None = None
    parallel: Parallel = SERIAL  # the reader threads' (chunks): the caller's; the default reads serially

    def close(self) -> None:
        self._close_c()
        self.conn.close()
        if self.copy_dir is not None:
            self.copy_dir.cleanup()

    def rowid(self, table: str) -> str:
        """The name that means the table's rowid: a table may have a column called ``rowid``."""
        cols = {c.lower() for c in self.columns.get(table, [])}
        name = next((n for n in ("rowid", "_rowid_", "oid") if n not in cols), None)
        if name is None:
            raise TraceReadError(self.path, f"table {table} has columns named rowid, _rowid_ and oid: not an export")
        return name

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        return cols is not None and (column is None or column in cols)

    def first(self, table: str, *candidates: str) -> str | None:
        """The first of ``candidates`` that the table has (columns vary by version)."""
        return next((c for c in candidates if self.has(table, c)), None)

    def ints(self, table: str, exprs: dict[str, str], where: str = "") -> dict[str, np.ndarray]:
        """Integer columns of a whole table: :meth:`chunks` joined (for tables read whole)."""
        parts = list(self.chunks(table, exprs, where))
        if not parts:
            return {name: np.zeros(0, dtype=np.int64) for name in exprs}
        return {name: np.concatenate([p[name] for p in parts]) for name in exprs}

    def chunks(self, table: str, exprs: dict[str, str], where: str = "") -> Iterator[dict[str, np.ndarray]]:
        """Integer columns in row chunks of about :data:`CHUNK_ROWS`, in table order.

        ``exprs`` maps output name -> SQL expression (NULL becomes -1). Cost grows with each value
        handed to Python (an int object each), so callers pack several small fields into one
        int64 in SQL (:meth:`packed`) and split them with :func:`unpack`. Each chunk is a rowid
        slice; with several readers the slices are fetched ahead in parallel, one connection per
        thread (the compiled reader releases the GIL for a whole slice; Python's sqlite3 around each
        row's step, a GIL hand-over per row between the threads), at most ``2 * READERS`` chunks
        in memory at once. Columns are views of the chunk's buffer (strided where Python's sqlite3
        read it, contiguous where the compiled reader did: :mod:`cread`).
        """
        names = list(exprs)
        # COALESCE only where NULL can occur: every extra opcode per row shows at 10M rows.
        safe = self.notnull.get(table, set())
        sel = [e if isinstance(e, Sql) or e in safe else f"COALESCE({e}, -1)" for e in exprs.values()]
        glue = "AND" if where else "WHERE"
        rowid = self.rowid(table)
        sql = f"SELECT {', '.join(sel)} FROM {table} {where} {glue} {rowid} > ? AND {rowid} <= ?"

        def split(flat: np.ndarray) -> dict[str, np.ndarray]:
            arr = flat.reshape(-1, len(names))
            return {name: arr[:, i] for i, name in enumerate(names)}

        ranges = self._rowid_ranges(table)
        pool = self.parallel.executor(READERS) if len(ranges) >= 2 and READERS >= 2 else None
        if pool is None:
            for r in ranges:
                flat = self._fetch(sql, r, len(names))
                if len(flat):
                    yield split(flat)
            return
        local = self.parallel.local()
        clones: list[Export] = []
        _ = self.strings  # read here: a clone shares the string table, and this connection is this thread's

        def fetch(r: tuple[int, int], buf: np.ndarray | None) -> np.ndarray:
            if not hasattr(local, "ex"):
                local.ex = self.clone()
                clones.append(local.ex)
            return local.ex._fetch(sql, r, len(names), buf)

        # The compiled reader's buffers are allocated here, in the consuming thread, where the
        # memory of chunks the frame writer is done with is reused (in the reader threads' own
        # malloc arenas it was not, and each arena's freed chunks added to the peak).
        compiled = cread.enabled()

        def submit(r: tuple[int, int]) -> Any:
            buf = np.empty((len(names), _slice_rows(r)), dtype=np.int64) if compiled else None
            return pool.submit(fetch, r, buf)

        try:
            pending: collections.deque[Any] = collections.deque()
            todo = iter(ranges)
            for r in itertools.islice(todo, 2 * READERS):
                pending.append(submit(r))
            while pending:
                flat = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(submit(nxt))
                if len(flat):
                    yield split(flat)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for c in clones:
                c.close_clone()

    def _fetch(self, sql: str, r: tuple[int, int], ncols: int, buf: np.ndarray | None = None) -> np.ndarray:
        """One rowid slice's values (row-major, or (rows, columns)): by the compiled reader where it
        can (into ``buf`` when given: (ncols, :func:`_slice_rows`) int64), else :func:`_fetch`."""
        if self._cconn is None:
            self._cconn = (cread.enabled() and cread.connect(self.source or self.path, self.private)) \
                or False
        if self._cconn is not False:
            if buf is None:
                buf = np.empty((ncols, _slice_rows(r)), dtype=np.int64)
            flat = cread.fetch(self._cconn, sql, r, buf)
            if flat is not None:
                return flat
        return _fetch(self.conn, sql, r)

    def _close_c(self) -> None:
        if self._cconn:
            cread.close(self._cconn)
        self._cconn = None

    def close_clone(self) -> None:
        """Close a :meth:`clone`'s connections (the private copy stays: its owner removes it)."""
        self._close_c()
        self.conn.close()

    def row_bound(self, table: str) -> int:
        """An upper bound on the rows a read of ``table`` returns: its rowid span (no scan), or
        its row count where the rowids are sparse (a hostile rowid of 2^62 in a small table)."""
        if not self.has(table):
            return 0
        span = self._rowid_span(table)
        if span is None:
            return 0
        lo, hi, count = span
        return hi - lo + 1 if count is None else count

    def _rowid_span(self, table: str) -> tuple[int, int, int | None] | None:
        """The table's (MIN(rowid), MAX(rowid), COUNT(*) where the span is far larger than a few
        chunks, else None); None when it holds no rows. Cached per table."""
        if table in self._spans:
            return self._spans[table]
        # Two queries: SQLite answers MIN(rowid) or MAX(rowid) alone from the b-tree's edge, but
        # both in one SELECT scans the whole table.
        rowid = self.rowid(table)
        lo = self.conn.execute(f"SELECT MIN({rowid}) FROM {table}").fetchone()[0]
        hi = self.conn.execute(f"SELECT MAX({rowid}) FROM {table}").fetchone()[0]
        span: tuple[int, int, int | None] | None = None
        if lo is not None and hi is not None:
            count = None
            if hi - lo + 1 > _SPARSE_CHECK:  # a count costs a pass over the table: only for wide spans
                count = self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            span = (lo, hi, count)
        self._spans[table] = span
        return span

    def _rowid_ranges(self, table: str) -> list[tuple[int, int]]:
        """(lo, hi] rowid slices of at most CHUNK_ROWS rows each.

        Dense rowids (every export nsys writes) are sliced by arithmetic; sparse ones by walking
        the rowid b-tree ``CHUNK_ROWS`` rows at a time, so a table of 19 rows whose last rowid is
        2^62 is one slice, not 2^44.
        """
        span = self._rowid_span(table)
        if span is None:
            return []
        lo, hi, count = span
        step = max(1, CHUNK_ROWS)
        if count is None or hi - lo + 1 <= 2 * count:
            return [(a, min(a + step, hi)) for a in range(lo - 1, hi, step)]
        rowid = self.rowid(table)
        out, a = [], lo - 1
        while a < hi:
            row = self.conn.execute(f"SELECT {rowid} FROM {table} WHERE {rowid} > ? ORDER BY {rowid} "
                                    f"LIMIT 1 OFFSET {step - 1}", (a,)).fetchone()
            b = hi if row is None else row[0]
            out.append((a, b))
            a = b
        return out

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
        conn = _connect(self.source or self.path, self.copy_dir is not None, check_same_thread=False)
        conn.text_factory = bytes
        return Export(path=self.path, conn=conn, columns=self.columns, notnull=self.notnull,
                      _strings=self.strings, source=self.source, _spans=self._spans, private=self.copy_dir is not None,
                      parallel=self.parallel)

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


def _slice_rows(r: tuple[int, int]) -> int:
    """The most rows a rowid slice (lo, hi] can hold: hi - lo, and CHUNK_ROWS (see _rowid_ranges)."""
    return max(0, min(r[1] - r[0], max(1, CHUNK_ROWS)))


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


SIDE_FILES = ("-wal", "-journal")  # beside an export: a writer was active (or crashed)


def read_only_uri(path: str, immutable: bool | None = None) -> str:
    """SQLite URI opening ``path`` read-only; also ``immutable`` (no locks, no -shm or journal file
    created beside the input) unless a -wal or -journal beside it says a writer may be active
    (:func:`open_export` then reads a private copy). ``immutable=True`` forces it (a look at the
    schema only: the tables may then miss what the -wal holds)."""
    uri = "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path))) + "?mode=ro"  # a name of any bytes
    if immutable or (immutable is None and not any(os.path.exists(path + sfx) for sfx in SIDE_FILES)):
        uri += "&immutable=1"
    return uri


def _private_copy(path: str) -> tuple[str, tempfile.TemporaryDirectory | None]:
    """The file to open for ``path``: itself, or a copy with its -wal/-journal in a temporary folder.

    Read in place, SQLite needs a ``-shm`` beside a -wal and would create one next to the input
    (or roll a hot journal back into it); the copy is read however SQLite likes.
    """
    sides = [sfx for sfx in SIDE_FILES if os.path.exists(path + sfx)]
    if not sides:
        return path, None
    tmp = tempfile.TemporaryDirectory(prefix="traceread-sqlite-")
    copy = os.path.join(tmp.name, "export.sqlite")
    try:
        for sfx in ("", *sides):
            shutil.copyfile(path + sfx, copy + sfx)
    except OSError as exc:
        tmp.cleanup()
        raise TraceReadError(path, f"has a {sides[0]} file beside it and could not be copied to read it without "
                                   f"writing beside it ({exc.strerror})") from None
    return copy, tmp


def _connect(source: str, private: bool, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection to ``source``: read-only, or as SQLite likes for a private copy (which may
    have a hot journal to roll back first)."""
    if private:
        return sqlite3.connect(source, check_same_thread=check_same_thread)
    return sqlite3.connect(read_only_uri(source), uri=True, check_same_thread=check_same_thread)


def open_export(path: str, parallel: Parallel = SERIAL) -> Export:
    """Open ``path`` read-only and check it is an nsys export; one-line TraceReadError otherwise.
    Its big tables are read by ``parallel``'s reader threads (the default: serially).

    Nothing is created beside ``path``: with a -wal or -journal beside it, a private copy is read.
    """
    source, copy_dir = _private_copy(path)
    try:
        conn = _connect(source, copy_dir is not None)
        conn.text_factory = bytes  # decode ourselves, with replacement, once per distinct string
        tables = [decode(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        views = {decode(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='view'")}
    except sqlite3.DatabaseError as exc:
        if copy_dir is not None:
            copy_dir.cleanup()
        raise TraceReadError(path, f"not a readable SQLite database ({one_line(exc)})") from None
    ex = Export(path=path, conn=conn, source=source, copy_dir=copy_dir, private=copy_dir is not None,
                parallel=parallel)
    if "StringIds" not in tables or not any(t in tables for t in NSYS_MARKERS):
        ex.close()
        kind = sqlite_kind.classify(set(tables), views)
        what = sqlite_kind.ROCPROF_V1_REFUSAL if kind == sqlite_kind.ROCPROF_V1 else sqlite_kind.NAMES[kind]
        raise TraceReadError(path, f"SQLite file is not an Nsight Systems export: {what}")
    for t in tables:
        if re.fullmatch(r"[A-Za-z0-9_]+", t):
            # table_xinfo lists the generated columns table_info leaves out (hidden 2: computed on
            # every read, 3: stored); an export has none, and a computed one runs the file's own
            # expression per row read (a huge blob per row would take minutes and gigabytes)
            info = conn.execute(f"PRAGMA table_xinfo({t})").fetchall()
            if computed := [decode(r[1]) for r in info if r[6]]:
                ex.close()
                raise TraceReadError(path, f"table {t} has generated or hidden columns ({', '.join(computed[:3])}): "
                                           "not an Nsight Systems export (nsys writes plain columns)")
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
        want: list[str] = [c for c in ("id", "name", "cuDevice", "smCount", "totalMemory", "computeMajor", "computeMinor")
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
