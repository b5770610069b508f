"""Hand-built event frames for the interval-engine tests (``make_events`` and row helpers).

Rows are dicts; helpers fill the lane's usual category, ids and defaults so a micro-trace reads
like its timeline. Times are int ns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import schema
from traceread.trace import Trace, TraceMeta

HOST_PID = 100


def kernel(start, end, name="sm90_gemm_kernel", stream=7, corr=-1, device=0, rank=0, category="kernel"):
    return dict(lane="gpu_compute", category=category, name=name, start_ns=start, end_ns=end,
                stream=stream, tid=stream, pid=device, device=device, correlation=corr, rank=rank)


def comm(start, end, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", stream=20, corr=-1, device=0, rank=0):
    return dict(kernel(start, end, name, stream, corr, device, rank), lane="gpu_comm")


def copy(start, end, name="Memcpy HtoD (Pageable -> Device)", stream=7, corr=-1, device=0, rank=0):
    return dict(kernel(start, end, name, stream, corr, device, rank), lane="memcpy", category="memcpy")


def memset(start, end, stream=7, corr=-1, device=0, rank=0):
    return dict(kernel(start, end, "Memset (Device)", stream, corr, device, rank), lane="memset",
                category="memset")


def api(name, start, end, corr=-1, tid=1, rank=0, category="runtime", pid=HOST_PID):
    return dict(lane="cpu_thread", category=category, name=name, start_ns=start, end_ns=end, stream=-1,
                tid=tid, pid=pid, device=-1, correlation=corr, rank=rank)


def op(name, start, end, tid=1, rank=0, category="cpu_op"):
    return dict(api(name, start, end, tid=tid, rank=rank), category=category)


def annotation(name, start, end, tid=1, rank=0):
    return dict(api(name, start, end, tid=tid, rank=rank), lane="cpu_annotation", category="user_annotation")


def make_events(rows: list[dict], *, side: dict | None = None, meta_steps: pd.DataFrame | None = None,
                fmt: str = "kineto") -> Trace:
    """A Trace whose events frame holds ``rows`` (schema columns and dtypes, validated)."""
    cols: dict[str, list] = {c: [] for c in schema.EVENT_COLUMNS}
    for r in rows:
        full = {"trace": "t.json", "raw_category": r["category"], "external_id": -1, **r}
        for c in schema.EVENT_COLUMNS:
            cols[c].append(full[c])
    df = pd.DataFrame({c: pd.Series(cols[c], dtype=d if d != "category" else object)
                       for c, d in schema.EVENT_DTYPES.items()})
    for c, d in schema.EVENT_DTYPES.items():
        if d == "category":
            df[c] = df[c].astype(str).astype("category")
        else:
            df[c] = df[c].astype(np.dtype(d))
    schema.validate(df)
    meta = TraceMeta(path="t.json", format=fmt, generation="test", time_base=schema.TIME_RELATIVE,
                     steps=meta_steps)
    return Trace(df, meta, side or {})


def table_rows(table: dict | list) -> list[dict]:
    """A JSON table of columns (report schema 2.0: ``{"start_ns": [...], ...}``) as one dict per row,
    as a reader rebuilds them (jq's ``map_values(.[i])``); an empty table, ``{}``, has no rows."""
    if not table:
        return []
    n = {len(v) for v in table.values()}
    assert len(n) == 1, f"columns of different lengths: {n}"
    return [{k: v[i] for k, v in table.items()} for i in range(n.pop())]
