"""The index facts of one analysed trace (computed in the worker from its Analysis).

Plain numbers only, so a row travels and caches cheaply. "GPU time lost" of a class is the idle
time of that class summed over the trace's GPUs over the analysed window (the attribution's
``<class>_ns``, the same figures as the report's "where the step time goes").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceread.analysis import Analysis
from traceread.scan.whatifcols import trace_whatif
from traceread.trace import Trace
from traceread.vocabulary import GAP_CLASSES, PARTS, part_col


def trace_row(a: Analysis, trace: Trace) -> dict[str, Any]:
    """One trace's row of index.json ``traces`` (without its id, job and links: the parent adds them)."""
    t = a.traces[0]
    attr = a.attribution
    total = int(attr["step_ns"].sum()) if len(attr) else 0
    lost = {c: int(attr[part_col(c)].sum()) if len(attr) else 0 for c in GAP_CLASSES}
    idle = sum(lost.values())
    steady = a.steady_steps()
    if len(steady):
        per_step = (steady["end_ns"] - steady["start_ns"]).groupby(steady["step"].to_numpy()).max()
        median_step = int(np.median(per_step.to_numpy()))
        steps = int(a.steps["step"].nunique())
    else:
        median_step, steps = None, 0
    mfu = a.mfu.mfu if a.mfu is not None else None
    return {
        "path": t.path,
        "format": t.format,
        "ranks": list(t.ranks),
        "world_size": t.world_size,
        "gpus": sorted({str(d.get("name") or "") for d in t.devices if d.get("name")}),
        "devices": len(attr),
        "steps": steps,
        "median_step_ns": median_step,
        "gpu_ns": total,
        "idle_share": (idle / total) if total else None,
        "dominant_cause": a.dominant_cause,
        "dominant_cost_share": float(a.dominant_cost_share),
        "mfu": float(mfu) if mfu is not None else None,
        "lost_ns": lost,
        "time_base": t.time_base,
        "epoch_offset_ns": trace.meta.epoch_offset_ns,
        "start_ns": t.start_ns,
        "end_ns": t.end_ns,
        "truncated": t.truncated,
        "whatif": trace_whatif(a.whatif, total, len(attr)),
        "units": [{"rank": int(r["rank"]), "device": int(r["device"]), "step_ns": int(r["step_ns"]),
                   **{part_col(p): int(r[part_col(p)]) for p in PARTS}}
                  for r in attr.to_dict("records")],
    }
