"""The job's critical path through its matched collectives, replayed with some ranks faster.

A rank's own step (:mod:`traceread.ranks.predict`) cannot see where in the step a rank's time lies: in a pipeline
the stages before and after it fill and drain around it, so a slow worker is on the job's critical path only part
of the step (with as many stages as micro-batches, much of it not), and speeding it up gains less than its own step
shrinks. Here the whole job is replayed on its aligned times, every rank at once:

* each rank reaches its next call (its arrival: :func:`traceread.ranks.job._arrival`, a peer wait not counted)
  after its own work since its *anchor*: the later of its previous arrival and the end of the last call it
  waited for (a collective or a receive, not a send: a send does not hold the rank's compute back);
* a call ends when the last member of its instance arrived, plus what it took after that (measured per member);
* a faster rank does its own work ``factor`` x faster; the others' times follow through the instances.

Where communication kernels start only once the peer is there (peer waits on many calls), a rank's arrival is
when it was ready (``ready_ns``: :func:`traceread.ranks.summary.ready_times`), no sooner than the previous kernel
on the call's own stream ended: a pipeline's send waiting for its receiver beside a receive waiting for its sender
(two streams) does not make the other's wait the rank's own work, so the replay holds for those jobs too.

Replayed unchanged it gives the measured times back exactly; the prediction is each step's measured job step less
how much sooner the step's last collective ends from one step to the next. The loop is over the calls in time
order (each a few float operations), not over events.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NOT_HOLDING = ("send",)  # calls a rank does not wait for before its next work


def step_gains(t: dict[str, Any], speed: np.ndarray) -> dict[int, float]:
    """Per step number (of the instances' steps), how much shorter the job's step gets when rank ``i`` (index into
    ``t["ranks"]``) does its own work ``speed[i]`` x faster: the change of the time from the previous step's last
    collective end to this step's. Empty without two steps."""
    arr, end, present, types = t["arr"], t["end"], t["present"], t["types"]
    n, k = arr.shape
    if k == 0:
        return {}
    last = np.where(present, arr, -np.inf).max(axis=0)
    after = np.where(present, end - last[None, :], 0.0)  # what each member's call took after the last arrival
    end_key = np.maximum(np.where(present, end, np.nan), last[None, :])
    # every node (rank, instance, arrival or end) in measured time order; ends before arrivals at one time
    ri, ci = np.nonzero(present)
    keys = np.concatenate([arr[ri, ci], end_key[ri, ci]])
    kind = np.concatenate([np.ones(len(ri), dtype=np.int8), np.zeros(len(ri), dtype=np.int8)])
    order = np.lexsort((kind, keys))
    rr, cc = np.concatenate([ri, ri])[order].tolist(), np.concatenate([ci, ci])[order].tolist()
    kk = kind[order].tolist()
    holds = ~np.isin(types, NOT_HOLDING)
    a_meas, e_meas = arr.tolist(), end.tolist()
    after_l, holds_l = after.tolist(), holds.tolist()
    inv = (1.0 / np.asarray(speed, dtype=np.float64)).tolist()
    members = present.sum(axis=0).tolist()
    new_arr = np.full((n, k), np.nan)
    new_end = np.full((n, k), np.nan)
    prev_a: list[float | None] = [None] * n
    prev_a2: list[float | None] = [None] * n
    held = [-np.inf] * n  # per rank: the latest end (measured) of a call it waited for, so far
    held2 = [-np.inf] * n  # ... replayed
    seen = [0] * k
    top = [-np.inf] * k  # per instance: the latest replayed arrival so far
    for r, c, kd in zip(rr, cc, kk, strict=True):
        if kd == 1:  # an arrival
            a = a_meas[r][c]
            anchor = max(prev_a[r] if prev_a[r] is not None else a, held[r])
            anchor2 = max(prev_a2[r] if prev_a2[r] is not None else a, held2[r])
            a2 = anchor2 + max(a - anchor, 0.0) * inv[r]
            prev_a[r], prev_a2[r] = a, a2
            new_arr[r, c] = a2
            top[c] = max(top[c], a2)
            seen[c] += 1
        else:  # an end: once every member arrived (ends sort after their instance's last arrival)
            e2 = (top[c] if seen[c] == members[c] else a_meas[r][c]) + after_l[r][c]
            new_end[r, c] = e2
            if holds_l[r][c]:
                held[r] = max(held[r], e_meas[r][c])
                held2[r] = max(held2[r], e2)
    step = t["step"]
    gains: dict[int, float] = {}
    prev: tuple[float, float] | None = None
    for s in np.unique(step[step >= 0]).tolist():
        m = step == s
        with np.errstate(all="ignore"):
            e1, e2 = float(np.nanmax(np.where(present[:, m], end[:, m], np.nan))), float(np.nanmax(new_end[:, m]))
        if prev is not None and np.isfinite(e1) and np.isfinite(e2):
            gains[int(s)] = (e1 - prev[0]) - (e2 - prev[1])
        prev = (e1, e2)
    return gains
