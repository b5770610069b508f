"""The straggler lever: ranks run faster, and the others stop waiting for them at collectives.

Ranks are replayed one by one (:mod:`traceread.whatif.model`), so a rank's collectives hold the time it
waited for the other ranks. A rank's *own* step is its replay with every communication kernel taking no
time: what the rank would take if it never waited (nor paid the transfer). The job's step is bound by
the slowest rank's own step, and the prediction is the measured job step less the change of that
figure when the straggler runs ``factor`` x faster: the difference cancels what the own-step model
leaves out (the transfers, a pipeline's fill and drain), which do not change with the straggler's
speed. Collectives need no matching across ranks, so a pipeline's ranks (unequal numbers of p2p
transfers) work as data-parallel ones do. Speeding a rank up scales every duration and delay of its
replay, so its own step is simply divided by ``factor``: :func:`free_comm_lengths` is all a job
analysis needs per rank (it travels in the rank summary; :mod:`traceread.ranks.predict`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread.config import Thresholds
from traceread.engine.lanes import EventView, event_view
from traceread.trace import Trace
from traceread.whatif import fixes as fx
from traceread.whatif import model as mdl
from traceread.whatif import replay as rp

_I64 = np.int64


def _comm_free(m: mdl.RankModel, view: EventView) -> fx.Edges:
    """The model's edges with every communication kernel taking no time, nor waiting for a peer to start:
    a communication kernel that started later than its launch and its streams allow (nothing local held it)
    waited for a peer, so each of its edges keeps no more than its nominal delay."""
    e = fx.Edges.of(m)
    code = view.lane_codes.get(schema.LANE_GPU_COMM, -99)
    comm = m.op_nodes[m.lane == code]
    e.writable("dur")[comm] = 0
    if len(comm):
        d = e.writable("delay")
        d[comm] = np.minimum(d[comm], _nominal(m)[None, :].astype(d.dtype))
    return e


def _nominal(m: mdl.RankModel) -> np.ndarray:
    """A communication kernel's nominal delays (launch, and each stream's turnaround), int64."""
    return np.array([m.nominal.get("launch_latency_ns", 0), m.nominal.get("stream_turnaround_ns", 0),
                     m.nominal.get("stream_turnaround_ns", 0)], dtype=np.int64)


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def free_comm_lengths(trace: Trace, steps: pd.DataFrame, cfg: Thresholds, rank: int,
                      between: Callable[[], None] = _nothing) -> np.ndarray:
    """Rank ``rank``'s own step lengths (its rows of ``steps``, in order): its replay with every
    communication kernel taking no time. ``between``: as :func:`traceread.whatif.model.build` calls it."""
    rs = steps[steps["rank"] == rank]
    if rs.empty:
        return np.zeros(0, dtype=_I64)
    v = event_view(trace)
    m = mdl.build(v, int(rank), mdl.steps_points(rs, int(rank)), cfg, between, trace.side.get("event_waits"))
    index = rp.StepIndex.of(m, rs)
    return index.lengths(rp.replay(m, _comm_free(m, v)), index.bounds(rp.recorded(m)))


def own_steps(units: list[Any], speed: dict[int, float]) -> list[np.ndarray]:
    """Each unit's own step lengths (communication free); the units whose index is in ``speed`` run
    that many times faster."""
    lengths = []
    for i, u in enumerate(units):
        e = _comm_free(u.model, u.ctx.view)
        f = speed.get(i)
        if f is not None:
            e.dur = (e.dur / f).astype(_I64)
            e.delay = (e.delay / f).astype(_I64)
        r = rp.replay(u.model, e)
        lengths.append(u.index.lengths(r, u.base))
    return lengths


def peer_free_lengths(unit: Any, min_wait_ns: int = 50_000) -> np.ndarray | None:
    """A unit's own step lengths (:func:`own_steps` of one unit, at full speed) when some communication kernel of
    it started more than ``min_wait_ns`` later than its launch and streams allow (a wait on a peer, which the
    communication-free replay, ``fixes.CommFree``, keeps); None when none did (that replay's lengths are then
    the own steps). Run before the unit's model is released."""
    m, view = unit.model, unit.ctx.view
    # (:func:`_comm_free` lowers only communication kernels' delays, to their nominal ones: a wait is a delay
    # more than ``min_wait_ns`` above that)
    comm = m.op_nodes[m.lane == view.lane_codes.get(schema.LANE_GPU_COMM, -99)]
    if not len(comm) or not (m.delay[comm].astype(_I64) - _nominal(m)[None, :] > min_wait_ns).any():
        return None
    e = _comm_free(m, view)
    lengths: np.ndarray = unit.index.lengths(rp.replay(m, e), unit.base)
    return lengths

