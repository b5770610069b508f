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

from traceread import intervals, schema
from traceread.engine.lanes import event_view
from traceread.frame.sanity import has_kernels
from traceread.printable import printable
from traceread.trace import Trace

COLUMNS = ["rank", "device", "kind", "host_memory", "count", "bytes", "total_ns", "mean_ns", "gbps", "bytes_unknown", "share"]
KINDS = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
MEMSET = "memset"
UNKNOWN = "(unknown)"
_HOST_KINDS = ("Pinned", "Pageable", "Managed")
# How the refusal of a trace with copies and memsets but no kernel begins (``data_movement_only``).
MOVEMENT_ONLY = "no kernel ran: the GPU records are data movement only"


def _codes(column: pd.Series, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The words of ``column`` (copy kinds spelled as ``KINDS``; '' for a missing value, last) and, at rows
    ``src``, each one's index among them ('' where -1 or missing): made once per category, taken per row
    by code."""
    c = column.astype("category")
    words = np.array([KINDS.get(str(x), str(x)) for x in c.cat.categories] + [""], dtype=object)
    codes = np.append(c.cat.codes.to_numpy(np.int64), -1)  # the appended -1 answers for src -1
    return words, codes[src]


def _vocabulary(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``words`` sorted, and each word's position among them."""
    uniq, at = np.unique(words.astype(str), return_inverse=True)
    return uniq.astype(object), at.reshape(-1).astype(np.int64)


def copy_summary(trace: Trace) -> pd.DataFrame:
    """One row per (rank, device, kind, host memory) (``COLUMNS``), by total time; empty when the trace has no
    copies."""
    v = event_view(trace)
    # each lane's rows are sorted: a stable sort merges the two runs (in linear time)
    rows = np.sort(np.concatenate([v.lane_rows(schema.LANE_MEMCPY), v.lane_rows(schema.LANE_MEMSET)]).astype(np.int64),
                   kind="stable")
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(COLUMNS, [
            "int64", "int64", "object", "object", "int64", "int64", "int64", "float64", "float64", "int64", "float64"], strict=True)})
    args = trace.side_table("copy_args")
    a_row = args["row"].to_numpy(np.int64)
    if len(a_row) > 1 and not bool((a_row[1:] > a_row[:-1]).all()):  # rows in order hold no duplicate: as read
        args = args.drop_duplicates("row")
        a_row = args["row"].to_numpy(np.int64)
    src = np.full(len(rows), -1, dtype=np.int64)  # each copy's args row, -1: none recorded
    if len(a_row):
        order = None if intervals.is_sorted(a_row) else np.argsort(a_row, kind="stable")
        # the rows are unique and the copies sorted: one merge pass finds each copy's (-1: none)
        pos = intervals.sorted_positions(a_row if order is None else a_row[order], rows)
        hit = pos >= 0
        src[hit] = pos[hit] if order is None else order[pos[hit]]
    memset = v.lane[rows] == v.lane_codes.get(schema.LANE_MEMSET, -99)
    # Kinds and host memory as small codes over their words (a few per trace), not a string per copy: the
    # groups are made by one key per copy and summed by bincount.
    words, ck = _codes(args["copy_kind"], src)
    kinds, kind_at = _vocabulary(np.append(np.where(words == "", UNKNOWN, words), MEMSET))
    kind = np.where(memset, kind_at[-1], kind_at[:-1][ck])
    s_words, s_code = _codes(args["src_kind"], src)
    d_words, d_code = _codes(args["dst_kind"], src)
    hosts, host_at = _vocabulary(np.concatenate([s_words, d_words, [""]]))
    s_host = np.isin(s_words, _HOST_KINDS)[s_code]
    d_host = np.isin(d_words, _HOST_KINDS)[d_code]
    none = host_at[-1]
    host = np.where(s_host, host_at[:len(s_words)][s_code],
                    np.where(d_host, host_at[len(s_words):-1][d_code], none))
    host = np.where(memset, none, host)
    nbytes = np.where(src >= 0, args["bytes"].to_numpy(np.int64)[np.maximum(src, 0)], -1) if len(a_row) else src
    dur = (v.end[rows] - v.start[rows]).astype(np.int64, copy=False)
    rank, device = v.rank[rows].astype(np.int64), v.device[rows].astype(np.int64)
    known = nbytes >= 0
    # One key per copy, (rank, device, kind, host) in that order of precedence: the groups' sort.
    r0, d0 = int(np.min(rank)), int(np.min(device))
    levels = [(rank - r0, int(np.max(rank)) - r0 + 1), (device - d0, int(np.max(device)) - d0 + 1),
              (kind, len(kinds)), (host, len(hosts))]
    key = np.zeros(len(rows), dtype=np.int64)
    for at, size in levels:
        key = key * size + at
    space = int(np.prod([size for _at, size in levels], dtype=np.float64))
    if space <= 1 << 20:  # few (rank, device, kind, host) combinations: the groups by a count per key
        seen = np.bincount(key, minlength=space)
        groups = np.flatnonzero(seen)
        g = np.cumsum(seen > 0)[key] - 1
    else:
        groups, g = np.unique(key, return_inverse=True)
        g = g.reshape(-1)
    n = len(groups)
    count = np.bincount(g, minlength=n).astype(np.int64)
    nb, total_ns, known_ns = (_int_sums(g, x, n) for x in (np.where(known, nbytes, 0), dur, np.where(known, dur, 0)))
    known_n = np.bincount(g[known], minlength=n).astype(np.int64)
    parts = []
    rest = groups.copy()
    for _at, size in reversed(levels):
        parts.append(rest % size)
        rest //= size
    host_g, kind_g, dev_g, rank_g = parts
    rank_g, dev_g = rank_g + r0, dev_g + d0
    with np.errstate(invalid="ignore", divide="ignore"):
        gbps = np.where((known_n > 0) & (known_ns > 0), nb / np.maximum(known_ns, 1), np.nan)
    all_ns = int(total_ns.sum())
    # by total time, then rank, device, kind (the key's order breaks the remaining ties)
    order = np.lexsort((np.arange(n), kind_g, dev_g, rank_g, -total_ns))
    out = pd.DataFrame({"rank": rank_g, "device": dev_g, "kind": kinds[kind_g], "host_memory": hosts[host_g],
                        "count": count, "bytes": nb, "total_ns": total_ns, "mean_ns": total_ns / count, "gbps": gbps,
                        "bytes_unknown": count - known_n,
                        "share": total_ns / all_ns if all_ns > 0 else np.zeros(n)})
    return out.iloc[order].reset_index(drop=True)[COLUMNS]


def _int_sums(g: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of ``x`` per group ``g``: bincount while every partial sum is an exact float, else
    one ``add.at``."""
    if int(np.abs(x).sum()) < 1 << 53:
        return np.bincount(g, weights=x, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, g, x)
    return out


def _size(n: int) -> str:
    """Bytes in decimal units (as bus rates are given)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def data_movement_only(trace: Trace) -> str:
    """The refusal for a trace whose only GPU records are copies and memsets (no kernel, no graph): what they
    hold, counts and bytes (and GB/s) per kind summed over its GPUs, commonest first. '' when it holds a
    kernel, or no copy or memset either (``frame.sanity.missing_gpu_activity`` says why then)."""
    if has_kernels(trace):
        return ""
    t = copy_summary(trace)
    if t.empty:
        return ""
    known_ns = t["total_ns"] * np.where(t["count"] > 0, (t["count"] - t["bytes_unknown"]) / t["count"], 0)
    t = t.assign(known_ns=known_ns)
    by = t.groupby("kind", sort=False).agg(count=("count", "sum"), bytes=("bytes", "sum"), total_ns=("total_ns", "sum"),
                                           unknown=("bytes_unknown", "sum"), known_ns=("known_ns", "sum"))
    by = by.sort_values(["count", "bytes"], ascending=False, kind="stable")
    parts = []
    for kind, r in by.iterrows():
        n, unknown = int(r["count"]), int(r["unknown"])
        what = "memset" if kind == MEMSET else f"{printable(str(kind))} cop"
        noun = (what + ("s" if n != 1 else "")) if kind == MEMSET else what + ("ies" if n != 1 else "y")
        if unknown == n:
            size = "size not recorded"
        else:
            rate = f", {r['bytes'] / r['known_ns']:.1f} GB/s" if r["known_ns"] > 0 else ""
            size = _size(int(r["bytes"])) + rate + (f"; {unknown:,} with no size" if unknown else "")
        parts.append(f"{n:,} {noun} ({size}, {int(r['total_ns']) / 1e6:.3f} ms)")
    return (MOVEMENT_ONLY + ": " + ", ".join(parts) + ", and not one kernel "
            "or graph record; with no kernel there is no compute to be idle between, so no idle to attribute (a "
            "capture of set-up or transfers only, or a window that missed the kernels): profile the steps that compute")
