"""Hand-built traces for the scoreboard tests (kernel table, collectives, roofline, MFU).

``ev(...)`` makes one event row (defaults for everything not given); ``make_trace(rows, ...)``
builds a schema-valid :class:`Trace` with devices, ranks and side tables. Rows keep the given order,
so side-table ``row`` values are positions in ``rows``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

_CAT_OF_LANE = {
    schema.LANE_GPU_COMPUTE: schema.CAT_KERNEL, schema.LANE_GPU_COMM: schema.CAT_KERNEL,
    schema.LANE_MEMCPY: schema.CAT_MEMCPY, schema.LANE_MEMSET: schema.CAT_MEMSET,
    schema.LANE_CPU_THREAD: schema.CAT_CPU_OP, schema.LANE_CPU_ANNOTATION: schema.CAT_USER_ANNOTATION,
}


def ev(lane: str, name: str, start: int, end: int, **kw: Any) -> dict[str, Any]:
    gpu = lane in schema.GPU_LANES
    row = {"trace": "t.json", "rank": 0, "lane": lane, "device": 0 if gpu else -1,
           "stream": 7 if gpu else -1, "pid": 100, "tid": 7 if gpu else 1, "name": name,
           "category": _CAT_OF_LANE.get(lane, schema.CAT_OTHER), "raw_category": "x",
           "start_ns": start, "end_ns": end, "correlation": -1, "external_id": -1}
    row.update(kw)
    return row


def kernel(name: str, start: int, end: int, **kw: Any) -> dict[str, Any]:
    return ev(schema.LANE_GPU_COMPUTE, name, start, end, **kw)


def launch(name: str, start: int, end: int, corr: int, **kw: Any) -> dict[str, Any]:
    return ev(schema.LANE_CPU_THREAD, name, start, end, category=schema.CAT_RUNTIME, correlation=corr, **kw)


def make_trace(rows: list[dict[str, Any]], *, device_name: str = "NVIDIA H100 80GB HBM3", sm_count: int = 132,
               world_size: int | None = None, ranks: tuple[int, ...] = (0,), devices: tuple[int, ...] = (0,),
               side: dict[str, list[dict[str, Any]]] | None = None, fmt: str = "kineto") -> Trace:
    df = pd.DataFrame(rows) if rows else schema.empty_events()
    for col, dtype in schema.EVENT_DTYPES.items():
        df[col] = df[col].astype(dtype)
    schema.validate(df)
    meta = TraceMeta(
        path="t.json", format=fmt, generation="test", time_base=schema.TIME_RELATIVE,
        devices=[DeviceInfo(rank=r, id=d, name=device_name, sm_count=sm_count, used=True)
                 for r in ranks for d in devices],
        ranks=[RankInfo(rank=r, rank_source="test", world_size=world_size,
                        world_size_source="distributedInfo" if world_size else "unknown") for r in ranks])
    tables: dict[str, pd.DataFrame] = {}
    for name, recs in (side or {}).items():
        cols = schema.SIDE_TABLES[name]
        t = pd.DataFrame(recs)
        for c, (dtype, _) in cols.items():
            if c not in t:
                t[c] = -1 if dtype == "int64" else ("" if dtype == "category" else None)
            t[c] = t[c].astype(dtype) if dtype != "object" else t[c]
        tables[name] = t[list(cols)]
    return Trace(events=df, meta=meta, side=tables)


def row_of(trace: Trace, name: str, nth: int = 0) -> int:
    """Row number (position in events) of the nth event called ``name`` (side tables key on it)."""
    return int(np.flatnonzero(trace.events["name"].astype(str).to_numpy() == name)[nth])


def steps_frame(durations_ms: list[float], *, warmup: tuple[int, ...] = (), outlier: tuple[int, ...] = (),
                rank: int = 0, start_ns: int = 0, gap_ns: int = 0) -> pd.DataFrame:
    """A steps frame (schema.STEP_COLUMNS) of back-to-back steps with the given durations."""
    recs = []
    t = start_ns
    for i, ms in enumerate(durations_ms):
        d = int(round(ms * 1e6))
        recs.append({"rank": rank, "device": 0, "step": i, "start_ns": t, "end_ns": t + d, "cpu_start_ns": t,
                     "cpu_end_ns": t + d, "busy_ns": d, "idle_ns": 0, "warmup": i in warmup,
                     "outlier": i in outlier})
        t += d + gap_ns
    df = pd.DataFrame(recs)
    return df.astype({c: d for c, (d, _) in schema.STEP_COLUMNS.items()})
