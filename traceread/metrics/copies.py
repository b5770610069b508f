"""The copy summary by kind, as ``nsys stats --report cuda_gpu_mem_size_sum / cuda_gpu_mem_time_sum``
give it: GPU copies and memsets by direction and host memory kind.

One row per (``rank``, ``device``, ``kind``, ``host_memory``), so each GPU's traffic reads alone: ``kind`` is H2D, D2H, D2D, P2P, H2H (another recorded copy
kind as written; ``(unknown)`` where the trace records none) or ``memset``; ``host_memory`` the host side's
memory kind as recorded (Pinned, Pageable; '' for device-only copies, memsets, or when not recorded).
Columns ``count, bytes, total_ns, mean_ns, gbps, share``: ``bytes`` sums the recorded sizes, ``gbps``
is those bytes over the total time of the copies that recorded them (bytes per ns = GB/s), NaN when
none did; ``bytes_unknown`` counts the copies without a size. ``share`` is the row's time over all
copy and memset time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema
from traceread.engine.lanes import event_view
from traceread.trace import Trace

COLUMNS = ["rank", "device", "kind", "host_memory", "count", "bytes", "total_ns", "mean_ns", "gbps", "bytes_unknown", "share"]
KINDS = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
MEMSET = "memset"
UNKNOWN = "(unknown)"
_HOST_KINDS = ("Pinned", "Pageable", "Managed")


def _text(column: pd.Series, src: np.ndarray) -> np.ndarray:
    """The text of ``column`` at rows ``src`` ('' where -1 or missing), copy kinds spelled as ``KINDS``:
    made once per category, then taken per row by code."""
    c = column.astype("category")
    words = np.array([KINDS.get(str(x), str(x)) for x in c.cat.categories] + [""], dtype=object)
    codes = np.append(c.cat.codes.to_numpy(np.int64), -1)  # the appended -1 answers for src -1
    return words[codes[src]]


def copy_summary(trace: Trace) -> pd.DataFrame:
    """One row per (rank, device, kind, host memory) (``COLUMNS``), by total time; empty when the trace has no
    copies."""
    v = event_view(trace)
    rows = np.sort(np.concatenate([v.lane_rows(schema.LANE_MEMCPY), v.lane_rows(schema.LANE_MEMSET)])).astype(np.int64)
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(COLUMNS, [
            "int64", "int64", "object", "object", "int64", "int64", "int64", "float64", "float64", "int64", "float64"], strict=True)})
    args = trace.side_table("copy_args").drop_duplicates("row")
    a_row = args["row"].to_numpy(np.int64)
    src = np.full(len(rows), -1, dtype=np.int64)  # each copy's args row, -1: none recorded
    if len(a_row):
        order = np.argsort(a_row, kind="stable")
        pos = np.minimum(np.searchsorted(a_row[order], rows), len(a_row) - 1)
        hit = a_row[order][pos] == rows
        src[hit] = order[pos[hit]]
    memset = v.lane[rows] == v.lane_codes.get(schema.LANE_MEMSET, -99)
    ck = _text(args["copy_kind"], src)
    kind = np.where(memset, MEMSET, ck)
    kind = np.where(kind == "", UNKNOWN, kind)
    s_kind, d_kind = _text(args["src_kind"], src), _text(args["dst_kind"], src)
    host = np.where(np.isin(s_kind, _HOST_KINDS), s_kind, np.where(np.isin(d_kind, _HOST_KINDS), d_kind, ""))
    host = np.where(memset, "", host)
    nbytes = np.where(src >= 0, args["bytes"].to_numpy(np.int64)[np.maximum(src, 0)], -1) if len(a_row) else src
    dur = (v.end[rows] - v.start[rows]).astype(np.int64)
    f = pd.DataFrame({"rank": v.rank[rows].astype(np.int64), "device": v.device[rows].astype(np.int64), "kind": kind, "host_memory": host, "dur": dur, "known": nbytes >= 0,
                      "bytes": np.maximum(nbytes, 0), "known_ns": np.where(nbytes >= 0, dur, 0)})
    g = f.groupby(["rank", "device", "kind", "host_memory"], sort=True)
    out = pd.DataFrame({"count": g.size(), "bytes": g["bytes"].sum(), "total_ns": g["dur"].sum(),
                        "known": g["known"].sum(), "known_ns": g["known_ns"].sum()}).reset_index()
    out["mean_ns"] = out["total_ns"] / out["count"]
    out["gbps"] = np.where((out["known"] > 0) & (out["known_ns"] > 0), out["bytes"] / out["known_ns"].clip(lower=1),
                           np.nan)
    out["bytes_unknown"] = (out["count"] - out["known"]).astype(np.int64)
    total = int(out["total_ns"].sum())
    out["share"] = out["total_ns"] / total if total > 0 else 0.0
    out = out.sort_values(["total_ns", "rank", "device", "kind"], ascending=[False, True, True, True],
                          kind="stable").reset_index(drop=True)
    return out[COLUMNS].astype({"count": "int64", "bytes": "int64", "total_ns": "int64"})
