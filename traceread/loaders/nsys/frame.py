"""The nsys events frame, written table by table into columns allocated once.

:class:`FrameWriter` takes the loader's tables in frame order and copies each part's rows into
the frame's own column arrays as the part arrives, so what the loader holds beside the frame is
one part (a read chunk), never a whole table. The columns are allocated for an upper bound on
the rows (each table's rowid span, read without a scan) and the frame takes the first ``n``
rows: the tail beyond them is never written, so the operating system never backs it with memory.

Names are integer keys per table while its rows are written; when a table ends its keys become
names (once per distinct key) and codes into one name list shared by all tables, in the order a
single pass over the tables' sorted names would meet them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.limits import check_events
from traceread.loaders.nsys.blocks import DEVICE_LABEL, Block, RuntimeRows, Table
from traceread.trace import shown_path

# Lanes whose rows say a process ran work on a device (sync records can name another device).
_WORK_LANES = (S.LANE_GPU_COMPUTE, S.LANE_GPU_COMM, S.LANE_MEMCPY, S.LANE_MEMSET)
_WORK_CODES = [S.LANES.index(lane) for lane in _WORK_LANES]
_DEV_SPAN = 1 << 16  # device ids below this pack with the pid into one hash key
_SLICE = 1 << 20  # rows per pass when rewriting a column in place (bounds the temporaries)
_COLUMNS = (("rank", np.int32), ("lane", np.int8), ("device", np.int32), ("stream", np.int64), ("pid", np.int64),
            ("tid", np.int64), ("name", np.int64), ("category", np.int8), ("raw", np.int16),
            ("start_ns", np.int64), ("end_ns", np.int64), ("correlation", np.int64))


class FrameWriter:
    """Columns of the events frame and side tables, filled table by table (see module doc)."""

    def __init__(self, capacity: int) -> None:
        check_events(capacity)  # before allocating: the tables' row spans bound the rows
        self.col = {c: np.empty(capacity, dtype=d) for c, d in _COLUMNS}
        self.n = 0
        self.names: dict[str, int] = {}  # name -> code, in first-seen order
        self.raws: list[str] = []
        self.pids: set[int] = set()
        self.odd_devices = 0  # rows whose device id was outside 0..2^31-2 (relabelled DEVICE_LABEL)
        self.used_keys: set[int] = set()  # pid * _DEV_SPAN + device of rows with GPU work
        self.side: dict[str, _Side] = {}

    def add(self, table: Table | None, rows_bound: int = 0) -> tuple[int, int]:
        """Append ``table``'s rows; return their (lo, hi) row range. ``rows_bound`` bounds the
        table's rows (side-table columns of a chunked table are allocated for it)."""
        lo = self.n
        if table is None:
            return lo, lo
        seen = np.zeros(0, dtype=np.int64)
        for part in table.parts:
            if len(part):
                self._write(part, rows_bound)
                seen = np.union1d(seen, pd.unique(part.name_code))
        hi = self.n
        if hi > lo:
            if table.raw not in self.raws:
                self.raws.append(table.raw)
            self.col["raw"][lo:hi] = self.raws.index(table.raw)
            tnames, tcode = table.names(seen)
            glob = np.array([self.names.setdefault(nm, len(self.names)) for nm in tnames], dtype=np.int64)
            code_of_key = glob[tcode] if len(tcode) else np.zeros(0, dtype=np.int64)
            name = self.col["name"]
            for a in range(lo, hi, _SLICE):
                b = min(a + _SLICE, hi)
                name[a:b] = code_of_key[np.searchsorted(seen, name[a:b])]
        return lo, hi

    def _write(self, b: Block, rows_bound: int) -> None:
        lo, hi = self.n, self.n + len(b)
        if hi > len(self.col["start_ns"]):
            raise AssertionError("nsys table returned more rows than its rowid span")  # rowids are unique
        c = self.col
        device = b.device
        odd = (device < S.NO_ID) | (device >= DEVICE_LABEL)
        if odd.any():  # not an int32 device id: one label for all of them, counted for the loader's note
            self.odd_devices += int(odd.sum())
            device = np.where(odd, DEVICE_LABEL, device)
        for col, src in (("lane", b.lane), ("device", device), ("stream", b.stream), ("pid", b.pid),
                         ("tid", b.tid), ("category", b.category), ("start_ns", b.start), ("end_ns", b.end),
                         ("correlation", b.correlation), ("name", b.name_code)):
            c[col][lo:hi] = src
        self.pids.update(pd.unique(b.pid[b.pid >= 0]).tolist())
        m = np.isin(b.lane, _WORK_CODES) & (b.pid >= 0) & (b.device >= 0) & (b.device < _DEV_SPAN)
        if m.any():
            self.used_keys.update(pd.unique(b.pid[m] * _DEV_SPAN + b.device[m]).tolist())
        for table, cols in b.side.items():
            self._write_side(table, cols, lo, hi, rows_bound)
        self.n = hi

    def _write_side(self, table: str, cols: dict[str, np.ndarray], lo: int, hi: int, rows_bound: int) -> None:
        side = self.side.get(table)
        if side is None:
            side = self.side[table] = _Side(S.SIDE_TABLES[table], cols, rows_bound)
        side.append(lo, hi, cols)

    def runtime_rows(self, lo: int, hi: int) -> RuntimeRows:
        """The frame's rows ``lo:hi`` (the runtime table) as :func:`blocks.syncs` reads them."""
        return RuntimeRows(pid=self.col["pid"][lo:hi], correlation=self.col["correlation"][lo:hi],
                           name_code=self.col["name"][lo:hi], names=np.array(list(self.names), dtype=object))

    def used_pairs(self) -> set[tuple[int, int]]:
        """(pid, device) pairs with GPU work."""
        return {(int(k // _DEV_SPAN), int(k % _DEV_SPAN)) for k in self.used_keys}

    def finish(self, path: str, pid_rank: dict[int, int]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """The events frame (``schema.EVENT_COLUMNS``) and side tables; ``pid_rank`` maps a pid to
        its rank (unknown pids are rank 0)."""
        n = self.n
        if n == 0:  # nothing captured: the canonical empty frame
            ev = S.empty_events()
            ev["trace"] = pd.Categorical([], categories=pd.Index([shown_path(path)]))
            self.col, self.side = {}, {}
            return ev, {}
        c = {k: v[:n] for k, v in self.col.items()}
        keys = np.array(sorted(pid_rank), dtype=np.int64)
        vals = np.array([pid_rank[int(k)] for k in keys] + [0], dtype=np.int32)
        for a in range(0, n, _SLICE):
            b = min(a + _SLICE, n)
            pid = c["pid"][a:b]
            pos = np.searchsorted(keys, pid)
            known = (pos < len(keys)) & (keys[np.minimum(pos, max(len(keys) - 1, 0))] == pid) if len(keys) else \
                np.zeros(b - a, dtype=bool)
            c["rank"][a:b] = vals[np.where(known, pos, len(keys))]
        ev = pd.DataFrame({
            "trace": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([shown_path(path)])),
            "rank": c["rank"],
            "lane": pd.Categorical.from_codes(c["lane"], categories=pd.Index(list(S.LANES))),
            "device": c["device"], "stream": c["stream"], "pid": c["pid"], "tid": c["tid"],
            "name": pd.Categorical.from_codes(c["name"], categories=pd.Index(list(self.names), dtype=object)),
            "category": pd.Categorical.from_codes(c["category"], categories=pd.Index(list(S.CATEGORIES))),
            "raw_category": pd.Categorical.from_codes(c["raw"], categories=pd.Index(self.raws)),
            "start_ns": c["start_ns"], "end_ns": c["end_ns"], "correlation": c["correlation"],
            # nsys has no External ids: one -1 read for every row (a read-only view with stride 0, 8 bytes
            # instead of 8 per event; nothing writes into a loaded frame)
            "external_id": np.broadcast_to(np.int64(S.NO_ID), (n,)),
        }, copy=False)  # columns are fresh arrays: skip pandas' consolidating copy
        self.col = {}
        side = {table: part.frame() for table, part in self.side.items()}
        self.side = {}
        return ev, side


class _Side:
    """One side table's columns. A chunked table's numeric columns go into arrays allocated for its
    row bound (like the frame's); other tables keep their parts and join them at the end."""

    def __init__(self, spec: dict[str, tuple[str, str]], cols: dict[str, np.ndarray], rows_bound: int) -> None:
        self.spec = spec
        self.used = 0
        numeric = all(spec[c][0] == "int64" for c in cols)
        self.cols: dict[str, np.ndarray] | None = (
            {c: np.empty(rows_bound, dtype=np.int64) for c in spec} if numeric and rows_bound else None)
        self.parts: dict[str, list[np.ndarray]] = {c: [] for c in spec}

    def append(self, lo: int, hi: int, cols: dict[str, np.ndarray]) -> None:
        if self.cols is not None:
            at, self.used = self.used, self.used + hi - lo
            self.cols["row"][at:self.used] = np.arange(lo, hi, dtype=np.int64)
            for c, v in cols.items():
                self.cols[c][at:self.used] = v
            return
        self.parts["row"].append(np.arange(lo, hi, dtype=np.int64))
        for c, v in cols.items():
            self.parts[c].append(v)

    def frame(self) -> pd.DataFrame:
        if self.cols is not None:
            cols = {c: v[:self.used] for c, v in self.cols.items()}
        else:
            cols = {c: np.concatenate(self.parts[c]) for c in self.spec}
        df = pd.DataFrame(cols, copy=False)
        cats = {c: d for c, (d, _) in self.spec.items() if d == "category"}
        return df.astype(cats) if cats else df
