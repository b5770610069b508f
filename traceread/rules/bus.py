"""Host-to-device transfer rate in each gap against the rate the link reached: is the bus the limit?

::

    copy     |==== H2D 114 MB ====|==== H2D 114 MB ====|==== H2D 114 MB ====|   back to back
    compute  ==k==|...................................gap....................|==k==
                   ^ 25.5 GB in 921 ms: 27.7 GB/s, the rate every large copy of the trace reaches

A gap held by pinned host-to-device copies is not the data loader's fault (adding loader workers does
not move bytes faster): when the copies in it run at ``bus_min_fraction`` or more of the link's rate,
the bus is the limit (``data_starved``: evidence kind ``bus-bound``). The link's rate is measured: the
fastest rate (bytes over duration) that copies of at least ``bus_min_copy_bytes`` reached on that
rank and device's host-to-device copies (small copies are latency-bound and say nothing of the link).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.rules._calls import distinct
from traceread.rules._columns import Frame, col
from traceread.trace import Trace


def h2d_copies(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every host-to-device copy with known bytes from memory not named pageable:
    ``(rank, device, start, end, bytes)``."""
    z = np.zeros(0, np.int64)
    side = trace.side_table("copy_args")
    if side is None or side.empty or "bytes" not in side:
        return z, z, z, z, z
    nbytes = side["bytes"].to_numpy(np.int64)
    keep = _texts_where(side["copy_kind"], lambda t: t == "HtoD") & (nbytes > 0)
    if "src_kind" in side and keep.any():
        keep &= _texts_where(side["src_kind"], lambda t: "Pageable" not in t)
    rows = side["row"].to_numpy(np.int64)[keep]
    nbytes = nbytes[keep]
    v = event_view(trace)
    ok = (rows >= 0) & (rows < len(v.start))
    rows, nbytes = rows[ok], nbytes[ok]
    on = v.lane[rows] == v.lane_codes.get(schema.LANE_MEMCPY, -99)
    rows, nbytes = rows[on], nbytes[on]
    return (v.rank[rows].astype(np.int64), v.device[rows].astype(np.int64), v.start[rows].astype(np.int64),
            v.end[rows].astype(np.int64), nbytes)


def _texts_where(column: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """Bool per row: ``test`` holds for the row's value as text (a categorical column is tested once per
    category: the side table's kinds are a few words over every copy)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype("category")
    hit = np.array([test(str(c)) for c in column.cat.categories] + [test("nan")], dtype=bool)  # -1: missing, 'nan'
    return hit[column.cat.codes.to_numpy()]


def _copied_by(t: np.ndarray, s: np.ndarray, e: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bytes the copies ``[s, e)`` of ``b`` bytes (each at its own even rate) had moved by each time ``t``:
    the sum over started copies of ``rate * (min(t, e) - s)``, by prefix sums over the starts and the
    ends (no loop over gaps or copies)."""
    rate = b / np.maximum(e - s, 1).astype(np.float64)
    os_, oe = np.argsort(s, kind="stable"), np.argsort(e, kind="stable")
    rs = np.concatenate(([0.0], np.cumsum(rate[os_])))
    rss = np.concatenate(([0.0], np.cumsum(rate[os_] * s[os_])))
    re_ = np.concatenate(([0.0], np.cumsum(rate[oe])))
    ree = np.concatenate(([0.0], np.cumsum(rate[oe] * e[oe])))
    i = np.searchsorted(s[os_], t, side="right")
    j = np.searchsorted(e[oe], t, side="right")
    tf = t.astype(np.float64)
    return (tf * rs[i] - rss[i]) - (tf * re_[j] - ree[j])


def bus_rate(gaps: Frame, trace: Trace | None, cfg: Thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(bytes, copy_ns, link_bps)``: host-to-device bytes (not pageable) copied in it (each
    copy's bytes prorated by its overlap), the union of those copies in it (ns), and the link's measured
    rate on its rank and device (bytes per second; 0 when no copy is large enough to tell)."""
    n = len(gaps)
    nb = np.zeros(n, dtype=np.float64)
    busy = np.zeros(n, dtype=np.int64)
    link = np.zeros(n, dtype=np.float64)
    if trace is None or n == 0:
        return nb, busy, link
    c_rank, c_dev, cs, ce, cb = h2d_copies(trace)
    if len(cs) == 0:
        return nb, busy, link
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    dur = np.maximum(ce - cs, 1)
    for rank in distinct(c_rank):  # ranks and devices are few
        for dev in distinct(c_dev[c_rank == rank]):
            m = (c_rank == rank) & (c_dev == dev)
            sel = np.flatnonzero((g_rank == rank) & (g_dev == dev))
            if len(sel) == 0:
                continue
            big = m & (cb >= cfg.bus_min_copy_bytes)
            if big.any():
                link[sel] = float(np.max(cb[big] / dur[big])) * 1e9
            s, e, b = cs[m], ce[m], cb[m].astype(np.float64)
            o = np.argsort(s, kind="stable")
            s, e, b = s[o], e[o], b[o]
            busy[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
            nb[sel] = _copied_by(ge[sel], s, e, b) - _copied_by(gs[sel], s, e, b)
    return nb, busy, link


def rate_bps(nbytes: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Bytes per second of ``nbytes`` moved in ``ns``."""
    return np.asarray(nbytes, dtype=np.float64) * 1e9 / np.maximum(np.asarray(ns, dtype=np.float64), 1.0)


def fmt_gb(nbytes: np.ndarray) -> np.ndarray:
    """Bytes (or bytes per second) as gigabytes with one decimal ('4.2')."""
    return np.array([f"{v / 1e9:.1f}" for v in np.asarray(nbytes, dtype=np.float64).tolist()] or [""],
                    dtype=object)[:len(nbytes)]
