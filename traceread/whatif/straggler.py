"""The straggler lever: one rank runs faster, and the others stop waiting for it at collectives.

Ranks are replayed one by one (:mod:`traceread.whatif.model`), so a rank's collectives hold the time
it waited for the last rank to arrive. Here collectives are matched across ranks by step number and
order within the step (a synchronous job runs the same collectives in the same order), and each
collective's *transfer* time is its shortest duration over the ranks (the last arriver waits for
nobody). A rank's *own* step is its replay with every matched collective cut to its transfer time:
what the rank would take if it never waited. The job's step is then the slowest rank's own step, and
the prediction is the measured job step less the change of that figure when the straggler runs
``factor`` x faster (the difference cancels what the own-step model leaves out).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread.whatif import fixes as fx
from traceread.whatif import replay as rp

_I64 = np.int64


def _collectives(u: Any) -> pd.DataFrame:
    """The unit's collective op nodes with their step number and order within the step."""
    m = u.model
    code = u.ctx.view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    nodes = m.op_nodes[m.lane == code]
    if not len(nodes):
        return pd.DataFrame({"node": [], "step": [], "order": []}, dtype=np.int64)
    lp = m.launch_point[m.lane == code]
    launched = m.time[np.where(lp >= 0, lp, nodes)]
    st = u.steps.sort_values("cpu_start_ns", kind="stable")
    cs, ce = st["cpu_start_ns"].to_numpy(_I64), st["cpu_end_ns"].to_numpy(_I64)
    idx = np.searchsorted(cs, launched, side="right") - 1
    ok = (idx >= 0) & (launched < ce[np.maximum(idx, 0)])
    frame = pd.DataFrame({"node": nodes[ok], "step": st["step"].to_numpy()[idx[ok]], "t": m.time[nodes[ok]]})
    frame = frame.sort_values(["step", "t"], kind="stable")
    frame["order"] = frame.groupby("step").cumcount()
    return frame[["node", "step", "order"]]


def own_steps(units: list[Any], speed: dict[int, float]) -> list[np.ndarray]:
    """Each unit's step lengths with matched collectives cut to their transfer time; the units whose
    index is in ``speed`` run that many times faster."""
    tables = [_collectives(u).assign(unit=i) for i, u in enumerate(units)]
    both = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    lengths = []
    transfer = None
    if len(both):
        both["dur"] = np.concatenate([units[i].model.dur[t["node"].to_numpy(_I64)] for i, t in enumerate(tables)])
        g = both.groupby(["step", "order"])
        keys = g["dur"].min().rename("transfer").to_frame().join(g["unit"].nunique().rename("ranks"))
        transfer = both.join(keys, on=["step", "order"])
        transfer = transfer[transfer["ranks"] == len(units)]
    for i, u in enumerate(units):
        e = fx.Edges.of(u.model)
        f = speed.get(i)
        if f is not None:
            e.dur = (e.dur / f).astype(_I64)
            e.delay = (e.delay / f).astype(_I64)
        if transfer is not None:
            mine = transfer[transfer["unit"] == i]
            e.dur[mine["node"].to_numpy(_I64)] = mine["transfer"].to_numpy(_I64)
        r = rp.replay(u.model, e)
        lengths.append(rp.step_lengths(u.model, r, u.steps, u.base))
    return lengths
