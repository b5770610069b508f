"""rocmProfileData (RPD) SQLite -> the normalized events frame.

Tables read: ``rocpd_op`` (GPU operations: ``gpuId``, ``queueId``, start/end ns, ``description_id`` the
kernel name, ``opType_id`` "KernelExecution", "CopyHostToDevice", "FillBuffer", ...), ``rocpd_api``
(host calls: pid, tid, ``apiName_id``, ``args_id``; roctx ranges are ``UserMarker`` rows whose args are the
message), ``rocpd_api_ops`` (the call that issued each op), ``rocpd_copyapi`` (copy sizes) and
``rocpd_string``. An op and its call share ``correlation`` (the call's id), and the op's process is its
call's.

Rows: kernels on ``gpu_compute``/``gpu_comm`` (RCCL by name), copies ``memcpy``, fills ``memset``, barriers
``gpu_sync``; ``tid`` = ``stream`` = the queue. Host calls ``cpu_thread``/``runtime``; UserMarker ranges
``cpu_annotation``, marks ``instant``. RPD holds no device descriptions. Times are the tracer's ns (a
monotonic clock; time base ``relative``).
"""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders import sqlite_kind as K
from traceread.loaders.rocprof import sql as Q
from traceread.loaders.rocprof.frame import (
    COPY_KINDS,
    LANE,
    Parts,
    block,
    build,
    copy_block,
    intern,
    kernel_lanes,
)
from traceread.note import RPD_NO_DEVICE, Note
from traceread.trace import Trace

FORMAT = "rpd"
WHAT = "rocmProfileData (RPD) database"


def load_rpd(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """Load an RPD database; TraceReadError naming the format on bad input (``progress``: accepted, unused)."""
    path = os.fspath(path)
    try:
        conn = Q.connect(path)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise Q.refuse(path, WHAT, exc) from None
    try:
        tables, _views = K.schema_names(path)
        missing = [t for t in ("rocpd_op", "rocpd_api", "rocpd_api_ops", "rocpd_string") if t not in tables]
        if missing:
            raise TraceReadError(path, f"not a readable {WHAT} (no {', '.join(missing)} table)")
        parts = _read(conn, tables)
    except (sqlite3.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        raise Q.refuse(path, WHAT, exc) from None
    finally:
        conn.close()
    parts.warnings += Q.side_file_warning(path)
    return build(path, parts)


def _read(conn: sqlite3.Connection, tables: set[str]) -> Parts:
    sid, stext = Q.strings(conn, "SELECT id, string FROM rocpd_string")
    meta = {Q.text(k): Q.text(v) for k, v in conn.execute("SELECT tag, value FROM rocpd_metadata")} \
        if "rocpd_metadata" in tables else {}
    version = meta.get("schema_version", "")
    version = version if version.isdigit() else "unknown"
    parts = Parts(fmt=FORMAT, generation=f"rocmProfileData (RPD schema {version})", time_base=S.TIME_RELATIVE,
                  extra={"schema_version": version})
    # host calls
    aid, apid, atid, astart, aend, aname, aargs = Q.ints(
        conn, "SELECT id, COALESCE(pid, -1), COALESCE(tid, -1), COALESCE(start, 0), COALESCE(end, 0), "
              "COALESCE(apiName_id, -1), COALESCE(args_id, -1) FROM rocpd_api ORDER BY id", 7)
    api_name = Q.lookup(sid, stext, aname)
    host_pids = pd.unique(apid[apid >= 0])
    marker = api_name == "UserMarker"
    calls = ~marker
    if calls.any():
        names, code = intern(api_name[calls])
        parts.blocks.append(block("rocpd_api", S.LANE_CPU_THREAD, S.CAT_RUNTIME, names, code, astart[calls],
                                  aend[calls], apid[calls], atid[calls], correlation=aid[calls]))
    if marker.any():
        label = Q.lookup(sid, stext, aargs[marker])
        inst = aend[marker] <= astart[marker]
        for m, lane, cat in ((~inst, S.LANE_CPU_ANNOTATION, S.CAT_USER_ANNOTATION), (inst, S.LANE_INSTANT,
                                                                                      S.CAT_INSTANT)):
            if m.any():
                names, code = intern(label[m])
                parts.blocks.append(block("rocpd_api", lane, cat, names, code, astart[marker][m], aend[marker][m],
                                          apid[marker][m], atid[marker][m]))
    # GPU ops, each with the call that issued it
    oid, gpu, queue, ostart, oend, desc, optype, link = Q.ints(
        conn, "SELECT o.id, COALESCE(o.gpuId, -1), COALESCE(o.queueId, -1), COALESCE(o.start, 0), "
              "COALESCE(o.end, 0), COALESCE(o.description_id, -1), COALESCE(o.opType_id, -1), "
              "COALESCE(l.api_id, -1) FROM rocpd_op o LEFT JOIN (SELECT op_id, MIN(api_id) AS api_id "
              "FROM rocpd_api_ops GROUP BY op_id) l ON l.op_id = o.id ORDER BY o.id", 8)
    order = np.argsort(aid, kind="stable")
    sole = int(host_pids[0]) if len(host_pids) == 1 else S.NO_ID
    pid = Q.lookup(aid[order], apid[order], link, default=sole).astype(np.int64)
    pid = np.where(pid < 0, sole, pid)
    kind = Q.lookup(sid, stext, optype)
    name = Q.lookup(sid, stext, desc)
    name = np.where(name == "", kind, name)
    kind_s = pd.Series(kind, dtype=object)
    is_copy = kind_s.str.startswith("Copy").to_numpy(dtype=bool)
    is_fill = kind_s.str.startswith("Fill").to_numpy(dtype=bool)
    is_barrier = kind_s.str.startswith("Barrier").to_numpy(dtype=bool)
    is_kernel = ~(is_copy | is_fill | is_barrier)
    corr = np.where(link >= 0, link, S.NO_ID)
    if is_kernel.any():
        names, code = intern(name[is_kernel])
        m = is_kernel
        parts.blocks.append(block("rocpd_op", kernel_lanes(names, code), S.CAT_KERNEL, names, code, ostart[m],
                                  oend[m], pid[m], queue[m], gpu[m], queue[m], corr[m]))
    if is_copy.any():
        m = is_copy
        nbytes = _copy_bytes(conn, link[m], tables)
        direction = kind_s[m].str.replace("Copy", "", n=1, regex=False).map(COPY_KINDS).fillna("")
        parts.blocks.append(copy_block("rocpd_op", direction.to_numpy(dtype=object), ostart[m], oend[m], pid[m],
                                       queue[m], gpu[m], queue[m], corr[m], nbytes))
    for m, lane, cat in ((is_fill, S.LANE_MEMSET, S.CAT_MEMSET), (is_barrier, S.LANE_GPU_SYNC, S.CAT_SYNC)):
        if m.any():
            names, code = intern(np.where(is_fill[m], "Memset", name[m]).astype(object))
            side = {"copy_args": {"bytes": np.full(int(m.sum()), -1, dtype=np.int64),
                                  "copy_kind": np.full(int(m.sum()), "", dtype=object),
                                  "src_kind": np.full(int(m.sum()), "", dtype=object),
                                  "dst_kind": np.full(int(m.sum()), "", dtype=object)}} if lane == S.LANE_MEMSET else None
            parts.blocks.append(block("rocpd_op", np.full(int(m.sum()), LANE[lane], dtype=np.int8), cat, names, code,
                                      ostart[m], oend[m], pid[m], queue[m], gpu[m], queue[m], corr[m], side))
    parts.device_pid = sole if sole >= 0 else None
    parts.options = {"host_api": bool(calls.any()), "markers": bool(marker.any())}
    parts.extra["linked_ops"] = int((link >= 0).sum())
    parts.warnings.append(Note.of(RPD_NO_DEVICE))
    return parts


def _copy_bytes(conn: sqlite3.Connection, link: np.ndarray, tables: set[str]) -> np.ndarray:
    """Bytes of each copy op, from its call's rocpd_copyapi row (-1 unknown)."""
    if "rocpd_copyapi" not in tables:
        return np.full(len(link), -1, dtype=np.int64)
    api, size = Q.ints(conn, "SELECT api_ptr_id, COALESCE(size, -1) FROM rocpd_copyapi ORDER BY api_ptr_id", 2)
    return Q.lookup(api, size, link, default=-1).astype(np.int64)
