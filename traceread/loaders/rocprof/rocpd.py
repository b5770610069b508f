"""rocprofv3's rocpd SQLite database (rocprofiler-sdk, the ROCm 7 default output) -> the events frame.

rocprofiler-sdk writes each table with the session's UUID as a suffix (``rocpd_kernel_dispatch_<uuid>``)
and a view without it (``rocpd_kernel_dispatch``); the views are read, else the suffixed tables (all of
them, when several sessions were merged into one file). Schema 3 (``rocpd_tables.sql``):

* ``rocpd_kernel_dispatch``: ``pid``/``tid`` (ids into ``rocpd_info_process``/``rocpd_info_thread``),
  ``agent_id`` (``rocpd_info_agent``), ``kernel_id`` (``rocpd_info_kernel_symbol``), ``queue_id``,
  ``stream_id``, ``start``/``end`` ns, grid and workgroup sizes (work-items), ``event_id``;
* ``rocpd_memory_copy``: ``name_id`` (the operation, ``MEMORY_COPY_HOST_TO_DEVICE``), source and
  destination agents, ``size``;
* ``rocpd_region``: host API calls and roctx ranges (``name_id`` the function; a range's message is in
  its event's ``extdata``), ``rocpd_sample``: zero-length ones (marks);
* ``rocpd_event``: ``category_id`` (the record kind: ``HIP_RUNTIME_API``, ``MARKER_CORE_API``...) and
  ``stack_id``, the internal correlation id a call shares with the dispatch or copy it issued.

Rows: kernels ``gpu_compute``/``gpu_comm`` (RCCL by name), copies ``memcpy``; ``tid`` = ``stream`` = the
stream id; calls ``cpu_thread``/``runtime``; roctx ranges ``cpu_annotation``, marks ``instant``. Times are
the node's monotonic clock in ns (time base ``relative``).
"""

from __future__ import annotations

import os
import re
import sqlite3

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders import sqlite_kind as K
from traceread.loaders.rocprof import sql as Q
from traceread.loaders.rocprof.frame import COPY_KINDS, Parts, block, build, copy_block, intern, kernel_lanes
from traceread.trace import DeviceInfo, Trace

FORMAT = "rocpd"
WHAT = "rocprofv3 rocpd database"
_MARKER = re.compile(r"^MARKER_")


def load_rocpd(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """Load a rocpd database; TraceReadError naming the format on bad input (``progress``: accepted, unused)."""
    path = os.fspath(path)
    try:
        tables, views = K.schema_names(path)
        conn = Q.connect(path)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise Q.refuse(path, WHAT, exc) from None
    try:
        src = _Sources(conn, tables, views)
        for need in ("rocpd_kernel_dispatch", "rocpd_event", "rocpd_string", "rocpd_info_agent"):
            if src.get(need) is None:
                raise TraceReadError(path, f"not a readable {WHAT} (no {need} table or view)")
        if "start" not in src.columns("rocpd_kernel_dispatch"):
            raise TraceReadError(path, f"a {WHAT} whose dispatches have no start column (a pre-release schema "
                                       "with a timestamp table): not supported; re-export with ROCm 7")
        parts = _read(conn, src)
    except (sqlite3.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        raise Q.refuse(path, WHAT, exc) from None
    finally:
        conn.close()
    parts.warnings += Q.side_file_warning(path)
    return build(path, parts)


class _Sources:
    """Each rocpd table as an SQL source: its view, else its UUID-suffixed table(s)."""

    def __init__(self, conn: sqlite3.Connection, tables: set[str], views: set[str]) -> None:
        self.conn, self.tables, self.views = conn, tables, views
        self._cols: dict[str, list[str]] = {}

    def get(self, base: str) -> str | None:
        if base in self.views or base in self.tables:
            return f'"{base}"'
        pat = re.compile(rf"^{re.escape(base)}_[0-9A-Za-z_]+$")
        found = sorted(t for t in self.tables if pat.match(t) and re.fullmatch(r"[0-9A-Za-z_]+", t))
        if not found:
            return None
        return found[0] if len(found) == 1 else "(" + " UNION ALL ".join(f"SELECT * FROM {t}" for t in found) + ")"

    def columns(self, base: str) -> list[str]:
        if base not in self._cols:
            src = self.get(base)
            cur = self.conn.execute(f"SELECT * FROM {src} LIMIT 0") if src else None
            self._cols[base] = [d[0] for d in cur.description] if cur is not None and cur.description else []
        return self._cols[base]


def _read(conn: sqlite3.Connection, src: _Sources) -> Parts:
    meta = {Q.text(k): Q.text(v) for k, v in conn.execute(f"SELECT tag, value FROM {src.get('rocpd_metadata')}")} \
        if src.get("rocpd_metadata") else {}
    version = meta.get("schema_version", "")
    version = version if re.fullmatch(r"[0-9][0-9.]{0,15}", version) else "unknown"
    parts = Parts(fmt=FORMAT, generation=f"rocprofv3 rocpd (schema {version})", time_base=S.TIME_RELATIVE,
                  extra={"schema_version": version})
    sid, stext = Q.strings(conn, f"SELECT id, string FROM {src.get('rocpd_string')}")
    ev = src.get("rocpd_event")
    proc = src.get("rocpd_info_process")
    thr = src.get("rocpd_info_thread")
    pid_sql = (lambda c: f"COALESCE((SELECT P.pid FROM {proc} P WHERE P.id = {c}), {c}, -1)") if proc else \
        (lambda c: f"COALESCE({c}, -1)")
    tid_sql = (lambda c: f"COALESCE((SELECT T.tid FROM {thr} T WHERE T.id = {c}), {c}, -1)") if thr else \
        (lambda c: f"COALESCE({c}, -1)")
    gpu_of, devices = _agents(conn, src)
    parts.devices = devices
    parts.extra["agents"] = int(conn.execute(f"SELECT COUNT(*) FROM {src.get('rocpd_info_agent')}").fetchone()[0])
    # kernels
    kd = src.get("rocpd_kernel_dispatch")
    cols = ["COALESCE(K.start, 0)", "COALESCE(K.end, 0)", pid_sql("K.pid"), "COALESCE(K.agent_id, -1)",
            "COALESCE(K.kernel_id, -1)", "COALESCE(K.stream_id, -1)", "COALESCE(K.queue_id, -1)",
            "COALESCE(E.stack_id, -1)"] + [f"COALESCE(K.{c}, -1)" for c in (
             "grid_size_x", "grid_size_y", "grid_size_z", "workgroup_size_x", "workgroup_size_y", "workgroup_size_z",
             "group_segment_size")]
    k = Q.ints(conn, f"SELECT {', '.join(cols)} FROM {kd} K LEFT JOIN {ev} E ON E.id = K.event_id ORDER BY K.id",
               len(cols))
    start, end, pid, agent, kid, stream, queue, corr = k[:8]
    if len(start):
        ksym = src.get("rocpd_info_kernel_symbol")
        kids, knames = Q.strings(conn, f"SELECT id, COALESCE(display_name, kernel_name) FROM {ksym}") if ksym else \
            (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
        uniq, inv = np.unique(kid, return_inverse=True)
        uname = Q.lookup(kids, knames, uniq)
        uname = np.where(uname == "", pd.Series(uniq).map(lambda i: f"kernel {i}").to_numpy(dtype=object), uname)
        names, ucode = intern(uname.astype(object))
        code = ucode[inv.reshape(-1)]
        grid, wg = k[8:11], k[11:14]
        blocks_ = [np.where(w > 0, -(-g // np.maximum(w, 1)), -1) for g, w in zip(grid, wg, strict=True)]
        side = {"kernel_args": {"grid_x": blocks_[0], "grid_y": blocks_[1], "grid_z": blocks_[2], "block_x": wg[0],
                                "block_y": wg[1], "block_z": wg[2], "registers": np.full(len(start), -1, np.int64),
                                "shared_mem_bytes": k[14]}}
        parts.blocks.append(block("rocpd_kernel_dispatch", kernel_lanes(names, code), S.CAT_KERNEL, names, code,
                                  start, end, pid, stream, _gpu(agent, gpu_of), stream, corr, side))
        parts.extra["queues"] = len(pd.unique(queue))
    _copies(conn, src, parts, pid_sql, gpu_of, sid, stext)
    _regions(conn, src, parts, pid_sql, tid_sql, sid, stext)
    return parts


def _agents(conn: sqlite3.Connection, src: _Sources) -> tuple[dict[int, int], dict[int, DeviceInfo]]:
    """GPU agents: agent id -> GPU index (``type_index``), and each GPU's description."""
    ag = src.get("rocpd_info_agent")
    have = set(src.columns("rocpd_info_agent"))
    ext = "extdata" in have
    sel = ["id", "COALESCE(type, '')", "COALESCE(type_index, logical_index, -1)", "COALESCE(name, '')",
           "COALESCE(product_name, '')" if "product_name" in have else "''",
           "json_extract(extdata, '$.cu_count')" if ext else "NULL",
           "(SELECT SUM(json_extract(value, '$.size_in_bytes')) FROM json_each(extdata, '$.mem_banks'))"
           if ext else "NULL"]
    try:
        rows = conn.execute(f"SELECT {', '.join(sel)} FROM {ag}").fetchall()
    except sqlite3.OperationalError:  # extdata that is not JSON: the columns alone
        rows = [(*r, None, None) for r in conn.execute(f"SELECT {', '.join(sel[:5])} FROM {ag}").fetchall()]
    gpu_of: dict[int, int] = {}
    devices: dict[int, DeviceInfo] = {}
    for aid, typ, idx, name, product, cus, mem in rows:
        if Q.text(typ) != "GPU" or not isinstance(aid, int) or not isinstance(idx, int):
            continue
        gpu_of[aid] = idx
        arch = Q.text(name)
        devices[idx] = DeviceInfo(rank=0, id=idx, name=Q.text(product) or arch,
                                  sm_count=cus if isinstance(cus, int) and cus > 0 else None,
                                  memory_bytes=mem if isinstance(mem, int) and mem > 0 else None,
                                  compute_capability=arch or None)
    return gpu_of, devices


def _gpu(agent: np.ndarray, gpu_of: dict[int, int]) -> np.ndarray:
    keys = np.array(sorted(gpu_of), dtype=np.int64)
    vals = np.array([gpu_of[int(a)] for a in keys], dtype=np.int64)
    return Q.lookup(keys, vals, agent, default=S.NO_ID).astype(np.int64)


def _copies(conn: sqlite3.Connection, src: _Sources, parts: Parts, pid_sql, gpu_of: dict[int, int],
            sid: np.ndarray, stext: np.ndarray) -> None:
    mc = src.get("rocpd_memory_copy")
    if mc is None:
        return
    ev = src.get("rocpd_event")
    cols = ["COALESCE(M.start, 0)", "COALESCE(M.end, 0)", pid_sql("M.pid"), "COALESCE(M.name_id, -1)",
            "COALESCE(M.dst_agent_id, -1)", "COALESCE(M.src_agent_id, -1)", "COALESCE(M.size, -1)",
            "COALESCE(M.stream_id, -1)", "COALESCE(E.stack_id, -1)"]
    start, end, pid, name_id, dst, srca, size, stream, corr = Q.ints(
        conn, f"SELECT {', '.join(cols)} FROM {mc} M LEFT JOIN {ev} E ON E.id = M.event_id ORDER BY M.id", len(cols))
    if not len(start):
        return
    op = pd.Series(Q.lookup(sid, stext, name_id), dtype=object).str.replace("MEMORY_COPY_", "", regex=False)
    kinds = op.map(COPY_KINDS).fillna("").to_numpy(dtype=object)
    d_dst, d_src = _gpu(dst, gpu_of), _gpu(srca, gpu_of)
    parts.blocks.append(copy_block("rocpd_memory_copy", kinds, start, end, pid, stream,
                                   np.where(d_dst >= 0, d_dst, d_src), stream, corr, size))


def _labels(conn: sqlite3.Connection, sql: str, ids: np.ndarray) -> np.ndarray:
    """Each row's roctx message ('' none): ``sql`` yields (row id, message) for the rows that have one."""
    found = {k: Q.text(v) for k, v in conn.execute(sql).fetchall()} if len(ids) else {}
    if not found:
        return np.full(len(ids), "", dtype=object)
    return pd.Series(ids).map(found).fillna("").to_numpy(dtype=object)


def _regions(conn: sqlite3.Connection, src: _Sources, parts: Parts, pid_sql, tid_sql, sid: np.ndarray,
             stext: np.ndarray) -> None:
    """Host API calls and roctx ranges (rocpd_region), marks (rocpd_sample)."""
    ev = src.get("rocpd_event")
    msg = "json_extract(E.extdata, '$.message')"
    rows: list[list[np.ndarray]] = []
    labels: list[np.ndarray] = []
    reg = src.get("rocpd_region")
    if reg is not None:
        cols = Q.ints(conn, f"SELECT COALESCE(R.start, 0), COALESCE(R.end, 0), {pid_sql('R.pid')}, "
                            f"{tid_sql('R.tid')}, COALESCE(R.name_id, -1), COALESCE(E.category_id, -1), "
                            f"COALESCE(E.stack_id, -1), R.id FROM {reg} R LEFT JOIN {ev} E ON E.id = R.event_id "
                            "ORDER BY R.id", 8)
        rows.append(cols[:7])
        labels.append(_labels(conn, f"SELECT R.id, {msg} FROM {reg} R JOIN {ev} E ON E.id = R.event_id "
                                    f"WHERE {msg} IS NOT NULL", cols[7]))
    samples, track = src.get("rocpd_sample"), src.get("rocpd_track")
    if samples is not None and track is not None and {"track_id", "timestamp"} <= set(src.columns("rocpd_sample")):
        cols = Q.ints(conn, f"SELECT COALESCE(S.timestamp, 0), COALESCE(S.timestamp, 0), {pid_sql('T.pid')}, "
                            f"{tid_sql('T.tid')}, COALESCE(T.name_id, -1), COALESCE(E.category_id, -1), "
                            f"COALESCE(E.stack_id, -1), S.id FROM {samples} S LEFT JOIN {track} T ON "
                            f"T.id = S.track_id LEFT JOIN {ev} E ON E.id = S.event_id ORDER BY S.id", 8)
        rows.append(cols[:7])
        labels.append(_labels(conn, f"SELECT S.id, {msg} FROM {samples} S JOIN {ev} E ON E.id = S.event_id "
                                    f"WHERE {msg} IS NOT NULL", cols[7]))
    if not rows:
        return
    start, end, pid, tid, name_id, cat_id, corr = (np.concatenate([r[i] for r in rows]) for i in range(7))
    label = np.concatenate(labels)
    fn = Q.lookup(sid, stext, name_id)
    category = pd.Series(Q.lookup(sid, stext, cat_id), dtype=object)
    marker = category.str.match(_MARKER).to_numpy(dtype=bool)
    name = np.where(marker & (label != ""), label, fn)
    name = np.where(name == "", category.to_numpy(dtype=object), name).astype(object)
    instant = end <= start
    parts.options = {"host_api": bool((~marker).any()), "markers": bool(marker.any())}
    for m, lane, cat in ((~marker & ~instant, S.LANE_CPU_THREAD, S.CAT_RUNTIME),
                         (marker & ~instant, S.LANE_CPU_ANNOTATION, S.CAT_USER_ANNOTATION),
                         (instant, S.LANE_INSTANT, S.CAT_INSTANT)):
        if m.any():
            names, code = intern(name[m])
            parts.blocks.append(block("rocpd_region", lane, cat, names, code, start[m], end[m], pid[m], tid[m],
                                      correlation=corr[m] if lane == S.LANE_CPU_THREAD else S.NO_ID))
